"""Every threshold in ``suites/thresholds.toml`` is checked by a suite (issue 15): a key that no
``faith.check`` reads is a gate that never fires, yet reads as one.

Static: the suite files are parsed, not run. A check's metric is a string literal, or a local name bound
to ``TABLE[...]`` with ``TABLE`` a mapping in the suite module's namespace (any of its values); its
slice is a literal, absent (overall), or computed (then any slice of that metric counts).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from faithtests.scorecard.thresholds import split_key

ROOT = Path(__file__).resolve().parents[2]
SUITES = ROOT / "suites"
ANY = "*"  # a computed slice


def _import(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_suite_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _suite_of(tree: ast.Module) -> str | None:
    """The name in ``pytestmark = pytest.mark.suite("NAME")``."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                 for t in node.targets)
                and isinstance(node.value, ast.Call) and node.value.args
                and isinstance(node.value.args[0], ast.Constant)):
            return str(node.value.args[0].value)
    return None


def _metrics(arg: ast.expr, func: ast.FunctionDef, module: ModuleType) -> list[str]:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.Name):
        for node in ast.walk(func):
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == arg.id
                                                     for t in node.targets)
                    and isinstance(node.value, ast.Subscript) and isinstance(node.value.value, ast.Name)):
                table = getattr(module, node.value.value.id)
                return [str(v) for v in table.values()]
    raise AssertionError(f"{module.__name__}.{func.name}: cannot tell which metric check({ast.unparse(arg)}) "
                         "reads; use a literal or a module-level table")


def _checks(path: Path) -> Iterator[tuple[str, str | None]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = _import(path)
    for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for call in (n for n in ast.walk(func) if isinstance(n, ast.Call)):
            if not (isinstance(call.func, ast.Attribute) and call.func.attr == "check" and call.args):
                continue
            kw = {k.arg: k.value for k in call.keywords}
            sl = kw.get("slice")
            slice_: str | None = None if sl is None else (
                str(sl.value) if isinstance(sl, ast.Constant) and sl.value is not None else
                None if isinstance(sl, ast.Constant) else ANY)
            for metric in _metrics(call.args[0], func, module):
                yield metric, slice_


def checked() -> dict[str, set[tuple[str, str | None]]]:
    """(metric, slice) pairs each suite checks, by suite name."""
    out: dict[str, set[tuple[str, str | None]]] = {}
    for path in sorted(SUITES.glob("test_*.py")):
        name = _suite_of(ast.parse(path.read_text(encoding="utf-8")))
        if name is not None:
            out.setdefault(name, set()).update(_checks(path))
    return out


def test_every_threshold_key_is_checked_by_a_suite() -> None:
    table = tomllib.loads((SUITES / "thresholds.toml").read_text(encoding="utf-8"))
    checks = checked()
    unchecked = []
    for suite, entries in table.items():
        if suite == "coverage":  # the coverage rule applies to every check, it names no metric
            continue
        for key in entries:
            metric, sl = split_key(key)
            seen = checks.get(suite, set())
            ok = any(m == metric and (sl is None or s in (sl, ANY)) for m, s in seen)
            if not ok:
                unchecked.append(f"[{suite}] {key}")
    assert not unchecked, f"thresholds no suite checks (check them or remove them): {unchecked}"


def test_the_scan_sees_literal_table_and_computed_checks() -> None:
    """The scanner itself: a literal metric, a slice literal, a computed slice and a table lookup."""
    checks = checked()
    assert ("E_inv_rel", ANY) in checks["invariance"]
    assert ("DS_count", ANY) in checks["difference_consistency"]
    assert {("std_v", None), ("mis_v", None)} <= checks["premise_rejection"]
    assert not any(m in ("E_sens", "E_inv_rel_increase_pct") for m, _ in
                   checks["invariance"] | checks["flip_sensitivity"])
