"""Issue 32 item 3: each option is declared once and read through one rule (``faithtests.config.setting``:
command line > ini > default). A ``getoption`` / ``getini`` call anywhere else in the package is another
fallback rule and fails here; the one exception, an option another plugin owns (xdist's
``numprocesses``), goes through ``config.foreign_option`` and may not name a faithtests option."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from faithtests.config import Option, Source, setting, setting_source
from faithtests.plugin import option_table
from faithtests.plugin.option_table import all_options, register
from faithtests.protocols import manifests

ROOT = Path(__file__).resolve().parents[1]
#: (file, function) pairs allowed to call getoption / getini.
ALLOWED = {("faithtests/config.py", "_raw"), ("faithtests/config.py", "foreign_option")}


def option_reads(path: Path, root: Path = ROOT) -> list[tuple[str, str, int]]:
    """(file, enclosing function, line) of every ``.getoption(`` / ``.getini(`` call in ``path``."""
    tree = ast.parse(path.read_text())
    out: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else func
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and child.func.attr in ("getoption", "getini")):
                out.append((path.relative_to(root).as_posix(), func, child.lineno))
            visit(child, name)

    visit(tree, "<module>")
    return out


def test_options_are_read_only_through_setting() -> None:
    reads = [r for p in sorted((ROOT / "faithtests").rglob("*.py")) for r in option_reads(p)]
    stray = [f"{f}:{line} in {fn}" for f, fn, line in reads if (f, fn) not in ALLOWED]
    assert not stray, "options read outside faithtests.config.setting:\n" + "\n".join(stray)
    assert {(f, fn) for f, fn, _ in reads} == ALLOWED  # the rule's own reads are where it says


def test_a_stray_read_is_found(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(config):\n    return config.getoption('faith_x') or config.getini('faith_x')\n")
    assert option_reads(bad, tmp_path) == [("bad.py", "f", 2), ("bad.py", "f", 2)]


def test_foreign_option_names_no_faithtests_option() -> None:
    nodes = [n for p in (ROOT / "faithtests").rglob("*.py") for n in ast.walk(ast.parse(p.read_text()))]
    calls = [n for n in nodes if isinstance(n, ast.Call)
             and getattr(n.func, "id", getattr(n.func, "attr", "")) == "foreign_option"]
    names = {a.value for c in calls for a in c.args
             if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    assert calls and names == {"numprocesses"}


def _declared() -> list[Option]:
    """Every Option object at module level of the option table and of each manifest's module."""
    import importlib

    modules = [option_table, *(importlib.import_module(m.fixtures.rpartition(".")[0] + ".manifest")
                               for m in manifests() if m.fixtures.startswith("faithtests."))]
    return [v for mod in modules for v in vars(mod).values() if isinstance(v, Option)]


def test_each_option_is_registered_once() -> None:
    options = all_options()
    names = [o.name for o in options]
    assert len(names) == len(set(names))
    assert {o.name for o in _declared()} == set(names)  # no declared option left unregistered
    added: list[str] = []
    inis: list[str] = []

    class Group:
        def addoption(self, flag: str, **kw: Any) -> None:
            added.append(kw["dest"])
            assert flag == "--" + kw["dest"].replace("_", "-")

    class Parser:
        def getgroup(self, name: str, description: str = "") -> Group:
            return Group()

        def addini(self, name: str, help: str, type: str, default: Any) -> None:
            inis.append(name)

    register(Parser())  # type: ignore[arg-type]
    assert len(added) == len(set(added)) and len(inis) == len(set(inis))
    assert set(added) | set(inis) == set(names)
    assert set(added) == {o.name for o in options if o.cli}
    assert set(inis) == {o.name for o in options if o.ini}
    for name in ("faith_device", "faith_threads", "faith_cache", "faith_shard", "faith_ray",
                 "faith_no_progress", "faith_no_vlm_scorer", "faith_batch_size", "faith_dtype"):
        assert name in names, name


def _config(tmp_path: Path, cli: dict[str, Any], ini: dict[str, Any], inifile: bool = True) -> Any:
    (tmp_path / "cwd").mkdir(exist_ok=True)
    return SimpleNamespace(getoption=lambda name: cli.get(name), getini=lambda name: ini[name],
                           invocation_params=SimpleNamespace(dir=tmp_path / "cwd"),
                           inipath=tmp_path / "tox.ini" if inifile else None)


def test_setting_is_command_line_then_ini_then_default(tmp_path: Path) -> None:
    opt = Option("faith_x", "x", "7", parse=lambda raw, s: (raw, s.label, s.base))
    cwd, ini_dir = tmp_path / "cwd", tmp_path
    assert setting(_config(tmp_path, {"faith_x": "1"}, {"faith_x": "2"}), opt) == ("1", "--faith-x", cwd)
    assert setting(_config(tmp_path, {}, {"faith_x": "2"}), opt) == ("2", "ini faith_x", ini_dir)
    # no ini file: ini values and defaults are relative to where pytest started
    assert setting(_config(tmp_path, {}, {"faith_x": "7"}, inifile=False), opt)[2] == cwd
    flag = Option("faith_f", "f", False, kind="flag", ini=False)
    assert setting_source(_config(tmp_path, {"faith_f": False}, {}), flag) == (
        False, Source(True, cwd, "--faith-f"))  # a command-line-only flag: its default, never the ini


def test_path_options_resolve_against_their_source(tmp_path: Path) -> None:
    cwd, ini_dir = tmp_path / "cwd", tmp_path
    report = option_table.REPORT
    assert setting(_config(tmp_path, {"faith_report": "out"}, {}), report) == (cwd / "out").resolve()
    assert setting(_config(tmp_path, {}, {"faith_report": "out"}), report) == (ini_dir / "out").resolve()
    assert setting(_config(tmp_path, {"faith_cache": "c"}, {}), option_table.CACHE) == cwd / "c"
    assert setting(_config(tmp_path, {}, {"faith_cache": " c "}), option_table.CACHE) == ini_dir / "c"
    assert setting(_config(tmp_path, {}, {"faith_cache": ""}), option_table.CACHE) is None


def test_threads_one_declaration_two_uses(tmp_path: Path) -> None:
    """Unset means automatic (None: the thread policy decides); a Ray actor then uses 1."""
    from faithtests.plugin.scaleout import ray_threads

    unset = _config(tmp_path, {}, {"faith_threads": ""})
    assert setting(unset, option_table.THREADS) is None
    assert ray_threads(setting(unset, option_table.THREADS)) == 1
    three = _config(tmp_path, {"faith_threads": 3}, {"faith_threads": ""})
    assert ray_threads(setting(three, option_table.THREADS)) == 3
    assert setting(_config(tmp_path, {}, {"faith_threads": "4"}), option_table.THREADS) == 4
    with pytest.raises(pytest.UsageError, match=r"^ini faith_threads: 'x' is not a whole number$"):
        setting(_config(tmp_path, {}, {"faith_threads": "x"}), option_table.THREADS)
    with pytest.raises(pytest.UsageError, match=r"^--faith-threads must be >= 1, got 0$"):
        setting(_config(tmp_path, {"faith_threads": 0}, {"faith_threads": ""}), option_table.THREADS)


def test_answer_mode_from_the_command_line_or_the_ini_file(tmp_path: Path) -> None:
    mode = option_table.ANSWER_MODE
    assert setting(_config(tmp_path, {}, {"faith_answer_mode": ""}), mode) == "auto"
    assert setting(_config(tmp_path, {}, {"faith_answer_mode": " generated "}), mode) == "generated"
    assert setting(_config(tmp_path, {"faith_answer_mode": "generated"}, {}), mode) == "generated"
    # argparse checks the flag's choices; the ini value is checked here, naming the key
    with pytest.raises(pytest.UsageError, match=r"^ini faith_answer_mode: 'sampled' is not one of auto, "
                                                r"generated$"):
        setting(_config(tmp_path, {}, {"faith_answer_mode": "sampled"}), mode)


def setting_calls(path: Path, root: Path = ROOT) -> list[tuple[str, int]]:
    """(file, line) of every call of ``setting(`` / ``setting_source(`` in ``path``."""
    tree = ast.parse(path.read_text())
    return [(path.relative_to(root).as_posix(), n.lineno) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("setting", "setting_source")]


def test_every_option_is_read_once_into_faith_options() -> None:
    """Issue 48: ``FaithOptions`` is the one typed read of every option, the plugin's and each
    manifest's. Other plugin modules read it (``get_options``); a protocol's fixtures read their own
    options from the ``RunConfig`` built from it (``run_config(config).option``), never again."""
    calls = [c for p in sorted((ROOT / "faithtests").rglob("*.py")) for c in setting_calls(p)]
    stray = [f"{f}:{line}" for f, line in calls
             if f not in ("faithtests/plugin/options.py", "faithtests/config.py")]
    assert not stray, "plugin options read outside plugin.options.parse_options:\n" + "\n".join(stray)
    assert calls  # the one read is where it says


def test_every_plugin_option_lands_in_faith_options() -> None:
    """Each option of the plugin's table is read by ``parse_options`` (a new one cannot be forgotten)."""
    source = (ROOT / "faithtests" / "plugin" / "options.py").read_text()
    read = {n.attr for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "o"}
    declared = {name for name, value in vars(option_table).items() if isinstance(value, Option)}
    assert declared - read == set(), f"options no FaithOptions field reads: {sorted(declared - read)}"
