"""A throwaway copy of this repository, and ``python -m ...`` run inside it (the walkthrough tests' tools;
the ``repo_copy`` fixture in ``conftest.py`` builds a copy with :func:`copy_tracked` and :func:`git`).

- :func:`copy_tracked`: the files git tracks or would track (untracked, not ignored), as they are in
  the working tree (uncommitted edits included), copied to a folder;
- :func:`changed_paths`: what differs in a copy from its baseline commit (``git status``);
- :func:`run_in_copy`: ``python -m ARGS`` inside a copy, importing ``faithtests`` (and the root
  conftest, the suites' thresholds, the bundled models in ``fixtures/``) from the copy, not from the
  editable install of this checkout; :func:`imported_from` checks that this holds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: git's identity for the baseline commit of a copy (no user config is read or needed)
_GIT = ("git", "-c", "user.name=walkthrough", "-c", "user.email=walkthrough@localhost",
        "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false")


def git(copy: Path, *args: str) -> str:
    """``git ARGS`` in ``copy`` (its stdout); a failure raises with git's message."""
    proc = subprocess.run([*_GIT, *args], cwd=copy, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def copy_tracked(root: Path, dest: Path) -> Path:
    """The checkout's files, as its working tree holds them, copied to ``dest``: those git tracks and
    those it would (untracked and not ignored: a tracked module may already import a new one not yet
    added), ``git ls-files --cached --others --exclude-standard``. A tracked file deleted in the working
    tree is left out, as it is for whoever runs the checkout; ignored files (``.venv``, caches,
    reports) never come."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=root, capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = root / name
        if not src.is_file() and not src.is_symlink():
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)
    return dest


def changed_paths(copy: Path) -> set[str]:
    """Every path that differs from the copy's baseline commit: modified, added or deleted tracked files
    and untracked files (each file, not its folder; ignored files such as ``__pycache__`` not), relative
    to the copy."""
    out = git(copy, "status", "--porcelain", "--untracked-files=all", "-z")
    return {entry[3:] for entry in out.split("\0") if entry}


def copy_env(copy: Path) -> dict[str, str]:
    """This process's environment with ``copy`` first on ``PYTHONPATH`` (``faithtests`` resolves there,
    before the editable install's finder), no ``$FAITHTESTS_FIXTURES`` (the copy's ``fixtures/``), no hub."""
    env = {k: v for k, v in os.environ.items() if k != "FAITHTESTS_FIXTURES"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(copy), os.environ.get("PYTHONPATH", "")) if p)
    env["HF_HUB_OFFLINE"] = "1"
    return env


def run_in_copy(copy: Path, *args: str, timeout: float,
                env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ARGS`` with cwd ``copy`` and :func:`copy_env` (plus ``env``), output captured as text;
    it returns whatever the command exits with (the caller asserts)."""
    return subprocess.run([sys.executable, "-m", *args], cwd=copy, env={**copy_env(copy), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def imported_from(copy: Path, module: str = "faithtests") -> Path:
    """The file ``module`` is imported from under :func:`copy_env` (a walkthrough asserts it lies in the
    copy: otherwise it would test this checkout, not the copy's edits)."""
    proc = subprocess.run([sys.executable, "-c", f"import {module}; print({module}.__file__)"], cwd=copy,
                          env=copy_env(copy), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip()).resolve()


def tail(proc: subprocess.CompletedProcess[str]) -> str:
    """Exit status and the end of a command's output, for an assertion message."""
    return f"exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-3000:]}"


def run_suite(copy: Path, report: Path, *args: str, suite: str,
              metric: str) -> tuple[int, dict[str, Any], str]:
    """``pytest ARGS --faith-report REPORT`` in the copy, which must end with its checks judged (exit 0 or
    1): its exit status, the one result of ``suite``/``metric`` in the scorecard, the terminal output."""
    proc = run_in_copy(copy, "pytest", *args, "-p", "no:cacheprovider", "-q", "--faith-report", str(report),
                       timeout=300)
    assert proc.returncode in (0, 1), tail(proc)
    card = json.loads((report / "scorecard.json").read_text(encoding="utf-8"))
    rows = [r for r in card["results"] if (r["suite"], r["metric"]) == (suite, metric)]
    assert len(rows) == 1, [(r["suite"], r["metric"], r["slice"]) for r in card["results"]]
    return proc.returncode, rows[0], proc.stdout
