"""The architecture of DESIGN.md, enforced: imports only go down (the import-linter contracts in
pyproject.toml, also run by .ci/run), protocols stay independent, modules stay small."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
