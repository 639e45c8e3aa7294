"""A run's identity for history across checkpoints: its name, its step and when it started.

Recorded in the scorecard as ``"run": {"name", "step", "started"}`` (:func:`run_record`). The name
defaults to the run's model labels (:func:`default_run_name`), and the default report folder is chosen
from it so that two different runs never share one (:func:`default_report_dir`):

* ``faith-report/`` when it holds no scorecard, a scorecard of this very run identity (same name and
  step: a rerun replaces it, as before), or one from before run identities were recorded;
* else ``faith-report/<name>[-step-N]/``, then ``-2``, ``-3``, ... until a folder that is free or holds
  this run identity.

An explicit ``--faith-report`` (command line or ini) is used exactly as given.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_ROOT = "faith-report"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+\-]+")
MAX_SLUG = 80


def default_run_name(labels: Sequence[str], seed: int = 0) -> str:
    """The run's model labels joined by ``+`` (in the order named), ``-seedN`` when the seed is not 0."""
    name = "+".join(labels) or "run"
    return f"{name}-seed{seed}" if seed else name


def run_record(name: str, step: int | None, started: str) -> dict[str, Any]:
    """The scorecard's ``run`` object."""
    return {"name": name, "step": step, "started": started}


def run_identity(run: Mapping[str, Any]) -> tuple[str, int | None] | None:
    """(name, step) of a recorded ``run``, None when the scorecard records none."""
    name = run.get("name")
    if not isinstance(name, str) or not name:
        return None
    step = run.get("step")
    return name, step if isinstance(step, int) and not isinstance(step, bool) else None


def folder_name(name: str, step: int | None) -> str:
    """A folder name for a run: unsafe characters (``:``, ``/``, spaces) become ``-``."""
    slug = _UNSAFE.sub("-", name).strip("-.") or "run"
    slug = slug[:MAX_SLUG]
    return slug if step is None else f"{slug}-step-{step}"


def _recorded_identity(folder: Path) -> tuple[str, int | None] | bool | None:
    """The run identity recorded in ``folder/scorecard.json``: False when the folder holds none (free),
    None when it holds a scorecard without one (from before run identities, or unreadable)."""
    path = folder / "scorecard.json"
    if not path.is_file():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    run = data.get("run") if isinstance(data, dict) else None
    return run_identity(run) if isinstance(run, dict) else None


def _candidates(root: Path, name: str, step: int | None) -> Iterator[Path]:
    yield root
    sub = folder_name(name, step)
    yield root / sub
    k = 2
    while True:
        yield root / f"{sub}-{k}"
        k += 1


class RunPathError(ValueError):
    """A RUN argument that names no scorecard (a missing path, a glob that matches nothing)."""


def _scorecards_in(folder: Path) -> list[Path]:
    """A report folder's ``scorecard.json`` and those of its direct subfolders (default report folders
    of other runs live in ``faith-report/<run-name>/``)."""
    own = [folder / "scorecard.json"] if (folder / "scorecard.json").is_file() else []
    return own + sorted(p for p in folder.glob("*/scorecard.json") if p.is_file())


def expand_runs(patterns: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The scorecard files named by ``patterns``: a ``scorecard.json`` (or any file: it is read as one), a
    report folder (its scorecard and its direct subfolders'), or a glob of either; each file once, in the
    order given. A pattern that names nothing raises :class:`RunPathError`."""
    out: dict[Path, None] = {}
    for pattern in patterns:
        text = os.fspath(pattern)
        matches = sorted(Path(p) for p in glob.glob(text, recursive=True)) if glob.has_magic(text) else [
            Path(text)]
        found: list[Path] = []
        for m in matches:
            if m.is_dir():
                found += _scorecards_in(m)
            elif m.exists() or m.is_symlink():
                found.append(m)
        if not found:
            what = "matches no file" if glob.has_magic(text) else (
                "holds no scorecard.json" if Path(text).is_dir() else "does not exist")
            raise RunPathError(f"{text}: {what}")
        out.update(dict.fromkeys(found))
    return list(out)


def run_label(run: Mapping[str, Any], source: Path) -> str:
    """A run's name as recorded, else its report folder's name (a scorecard from before run names)."""
    ident = run_identity(run)
    return ident[0] if ident is not None else source.resolve().parent.name


def order_key(run: Mapping[str, Any], fingerprint: Mapping[str, Any], source: Path) -> tuple[Any, ...]:
    """Runs with a step first, by step; then by start time (``run.started``, else the fingerprint's
    ``start``); then by path, so one set of runs always gets one order."""
    ident = run_identity(run)
    step = ident[1] if ident is not None else None
    started = run.get("started") or fingerprint.get("start") or ""
    return (step is None, step if step is not None else 0, str(started), str(source))


def unique_labels(labels: Sequence[str]) -> list[str]:
    """Labels made unique for tables: a repeated one gets ``#2``, ``#3`` in order."""
    taken = set(labels)
    out: list[str] = []
    for label in labels:
        k, name = 1, label
        while name in out or (k > 1 and name in taken):
            k += 1
            name = f"{label}#{k}"
        out.append(name)
    return out


def default_report_dir(root: Path, name: str, step: int | None) -> Path:
    """The first folder of ``root``, ``root/<name>[-step-N]``, ``root/<name>[-step-N]-2``, ... that is
    free or holds this run identity (see the module docstring)."""
    me = (name, step)
    for folder in _candidates(root, name, step):
        found = _recorded_identity(folder)
        if found is False or found == me or (found is None and folder == root):
            return folder
    raise AssertionError("unreachable: the candidates are endless")  # pragma: no cover
