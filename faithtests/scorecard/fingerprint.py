"""The environment fingerprint stored in every scorecard: what produced these numbers.

Read without importing the heavy packages (versions come from ``importlib.metadata``), so building a
fingerprint never imports torch.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("faithtests", "torch", "torchvision", "transformers", "open_clip_torch", "numpy", "pytest",
            "pytest-xdist", "pillow")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit(root: Path) -> tuple[str | None, bool | None]:
    """(``git rev-parse HEAD`` in ``root``, whether tracked files differ from it); (None, None)
    outside a repository or without git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None, None
    return (head or None), bool(dirty)


def build_fingerprint(
    *,
    root: Path,
    start: str,
    end: str,
    argv: Sequence[str],
    seed: int,
    device: str | None = None,
    dtype: str | None = None,
    model_specs: Mapping[str, str] | None = None,
    models: Mapping[str, Mapping[str, Any]] | None = None,
    gate: str | None = None,
    tolerance: str | None = None,
    thresholds_files: Sequence[str] = (),
    workers: int | None = None,
) -> dict[str, Any]:
    """Everything needed to reproduce (or distrust) a run. ``models``: label -> info recorded by the
    model fixtures (spec, checkpoint hash, family, ...); ``model_specs``: label -> spec from the options."""
    commit, dirty = git_commit(root)
    return {
        "packages": package_versions(),
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "device": device,
        "dtype": dtype,
        "seed": seed,
        "gate": gate,
        "tolerance": tolerance,
        "thresholds_files": list(thresholds_files),
        "model_specs": dict(sorted((model_specs or {}).items())),
        "models": {k: dict(v) for k, v in sorted((models or {}).items())},
        "git_commit": commit,
        "git_dirty": dirty,
        "start": start,
        "end": end,
        "argv": list(argv),
        "workers": workers,
    }
