"""The architecture of docs/architecture.md, enforced: imports only go down (the import-linter contracts in
pyproject.toml, also run by .ci/run), protocols stay independent, modules stay small."""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import grimp
import pytest
from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 450


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.fail(f"lint-imports not installed beside {sys.executable} (pip install -e '.[dev]')")
    return subprocess.run([str(exe), "--config", str(tree / "pyproject.toml"), "--no-cache"], cwd=tree,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package and its contracts, to break on purpose."""
    shutil.copytree(ROOT / "faithtests", tmp_path / "faithtests",
                    ignore=shutil.ignore_patterns("__pycache__", "templates"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_contracts_hold_and_catch_a_back_edge(tree: Path) -> None:
    ok = _lint(tree)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Contracts: 2 kept, 0 broken." in ok.stdout
    # a data loader importing the plugin: an import going up
    (tree / "faithtests/data/backedge.py").write_text("from faithtests.plugin import options  # noqa\n")
    bad = _lint(tree)
    assert bad.returncode != 0
    assert "faithtests.data is not allowed to import faithtests.plugin" in bad.stdout
    assert "faithtests.data.backedge -> faithtests.plugin" in bad.stdout


def test_protocols_may_not_import_each_other(tree: Path) -> None:
    (tree / "faithtests/protocols/lgip/backedge.py").write_text(
        "from faithtests.protocols.s3e import metrics  # noqa\n")
    bad = _lint(tree)
    assert bad.returncode != 0
    assert "faithtests.protocols.lgip is not allowed to import faithtests.protocols.s3e" in bad.stdout


def test_no_module_over_the_size_limit() -> None:
    modules = (ROOT / "faithtests").rglob("*.py")
    sizes = {p.relative_to(ROOT): len(p.read_text().splitlines()) for p in modules}
    assert not {p: n for p, n in sizes.items() if n > MAX_LINES}


# --- issue 32: the protocol is the unit; shared layers name no paper ---------------------------------

SHARED = ("world", "data", "models", "scorecard", "reports", "plugin", "stats.py", "config.py", "manifest.py")
#: Each protocol's folder name, plus words only one paper uses; a protocol bundled later is covered too.
PROTOCOL_WORDS = re.compile("|".join(["premise", "mood", *sorted(
    p.parent.name for p in (ROOT / "faithtests" / "protocols").glob("*/manifest.py"))]))
MAX_RANK_SCORE = 20  # radon rank C: cyclomatic complexity 11-20


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every token that is not a comment: strings and docstrings count."""
    toks = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [(t.start[0], t.string) for t in toks if t.type != tokenize.COMMENT]


def _shared_files() -> list[Path]:
    pkg = ROOT / "faithtests"
    return sorted(p for s in SHARED for p in ([pkg / s] if s.endswith(".py") else (pkg / s).rglob("*.py")))


def test_shared_layers_name_no_protocol() -> None:
    hits = [f"{p.relative_to(ROOT)}:{line}: {text[:60]!r}" for p in _shared_files()
            for line, text in _code_lines(p) if PROTOCOL_WORDS.search(text)]
    assert not hits, "shared layers must name no protocol:\n" + "\n".join(hits)


def test_protocol_names_are_found_where_they_are() -> None:
    """The check above can fail: a shared module that names a protocol is caught."""
    assert PROTOCOL_WORDS.search("'premise_items'") and PROTOCOL_WORDS.search("imavb")
    assert not PROTOCOL_WORDS.search("scene caption render")


def _functions(paths: list[Path]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for p in paths:
        where = p.relative_to(ROOT) if p.is_relative_to(ROOT) else p
        for block in cc_visit(p.read_text()):
            out.append((f"{where}:{block.lineno} {block.fullname}", block.complexity))
            out += [(f"{where}:{c.lineno} {block.name}.{c.name}", c.complexity)
                    for c in getattr(block, "closures", [])]
    return out


def test_no_function_above_rank_c() -> None:
    paths = [*(ROOT / "faithtests").rglob("*.py"), *(ROOT / "suites").glob("*.py")]
    over = sorted(f"{name}: {score}" for name, score in _functions(paths) if score > MAX_RANK_SCORE)
    assert not over, "functions above radon rank C (split them):\n" + "\n".join(over)


def test_complexity_check_catches_a_complex_function(tmp_path: Path) -> None:
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(MAX_RANK_SCORE + 1))
    f = tmp_path / "complex.py"
    f.write_text(f"def f(x):\n{branches}\n    return -1\n")
    assert [s for _, s in _functions([f])] == [MAX_RANK_SCORE + 2]


def _layer(module: Path) -> str:
    parts = module.relative_to(ROOT / "faithtests").parts
    return parts[0].removesuffix(".py")


def test_no_two_modules_share_a_name_across_layers() -> None:
    """``plugin/hooks.py`` beside ``models/hooks.py`` made every traceback ambiguous; a protocol's own
    vocabulary (``metrics``, ``run``, ``fixtures`` in every protocol) is one layer and may repeat."""
    names: dict[str, set[str]] = {}
    for p in (ROOT / "faithtests").rglob("*"):
        if "__pycache__" in p.parts or p.name == "__init__.py" or "templates" in p.parts:
            continue
        if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()):
            names.setdefault(p.stem, set()).add(_layer(p))
    # each protocol's ``manifest`` module is an instance of ``faithtests.manifest``'s type, by design
    clashes = {n: sorted(layers) for n, layers in names.items() if len(layers) > 1 and n != "manifest"}
    assert not clashes, f"module names used in more than one layer: {clashes}"


def test_no_import_cycle() -> None:
    """No module imports itself back through others, local imports included (grimp sees those too)."""
    graph = grimp.build_graph("faithtests", exclude_type_checking_imports=True)
    # the root package is a facade (``faithtests.load_model``): Python imports it before any submodule
    # whatever the edges say, so an edge into it is no cycle
    modules = sorted(m for m in graph.modules if m != "faithtests")
    index = {m: i for i, m in enumerate(modules)}
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) - {"faithtests"}) for m in modules}
    cycles = [c for c in _strongly_connected(modules, edges, index) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def _strongly_connected(nodes: list[str], edges: dict[str, list[str]],
                        index: dict[str, int]) -> list[list[str]]:
    """Tarjan's strongly connected components, iterative."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in nodes:
        if root in order:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                order[v] = low[v] = len(order)
                stack.append(v)
                on.add(v)
            succ = edges.get(v, [])
            if i < len(succ):
                work.append((v, i + 1))
                w = succ[i]
                if w not in order:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], order[w])
                continue
            if low[v] == order[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def _local_imports(path: Path) -> list[tuple[int, bool]]:
    """(line, has a why-comment) of every import inside a function (TYPE_CHECKING blocks excluded)."""
    text = path.read_text()
    lines = text.splitlines()
    out: list[tuple[int, bool]] = []
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import | ast.ImportFrom):
                span = lines[node.lineno - 2:node.end_lineno or node.lineno]  # the line above counts
                out.append((node.lineno, any("#" in s for s in span)))
    return out


def test_every_local_import_says_why() -> None:
    """Imports sit at the top; one inside a function is there for load time (torch, an optional extra)
    and carries a comment saying so, on its line or the line above."""
    bare = [f"{p.relative_to(ROOT)}:{line}" for p in sorted((ROOT / "faithtests").rglob("*.py"))
            for line, why in _local_imports(p) if not why]
    assert not bare, "in-function imports without a why-comment:\n" + "\n".join(bare)
