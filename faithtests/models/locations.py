"""Where reference checkpoints live; torch-free so the pytest plugin can ask at collection time.

One rule everywhere (the registry's ``reference:NAME``, the plugin's default models, training and
evaluation): ``$FAITHTESTS_FIXTURES`` if set, else the ``fixtures/`` folder of the source checkout the
package runs from. An installed wheel has no checkout: set ``$FAITHTESTS_FIXTURES`` (or pass ``--out``
to training).
"""

from __future__ import annotations

import os
from pathlib import Path

import faithtests

ENV = "FAITHTESTS_FIXTURES"
#: What counts as a weights file in a checkpoint directory (fingerprints, xdist's model sizes).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt", ".ckpt")


def checkout_root() -> Path | None:
    """The source checkout this package runs from (an editable install or ``PYTHONPATH``), else None."""
    root = Path(faithtests.__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "faithtests").is_dir() else None


def fixtures_root() -> Path:
    """``$FAITHTESTS_FIXTURES`` if set, else the checkout's ``fixtures/`` (a path that does not exist
    when the package is installed from a wheel; loading from it then names this rule)."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    root = checkout_root()
    if root is not None:
        return root / "fixtures"
    return Path(faithtests.__file__).resolve().parent.parent / "fixtures"


def writable_fixtures_root() -> Path:
    """Where training writes by default: ``$FAITHTESTS_FIXTURES`` or the checkout's ``fixtures/``; never
    into site-packages (a clear error instead)."""
    if os.environ.get(ENV) or checkout_root() is not None:
        return fixtures_root()
    raise FileNotFoundError(
        "not running from a faithtests checkout, so there is no fixtures/ folder to train into: "
        f"pass --out DIR, or set {ENV}=DIR"
    )


def spec_path(spec: str) -> Path | None:
    """The local file or directory a model spec loads from, without loading it (None: not local)."""
    if spec.startswith("vlm-scorer:"):
        return spec_path(spec.removeprefix("vlm-scorer:"))
    if spec.startswith("reference:"):
        return fixtures_root() / spec.removeprefix("reference:")
    if spec.startswith("open_clip:local-dir:"):
        return Path(spec.removeprefix("open_clip:local-dir:")).expanduser()
    if spec.startswith("open_clip:") and "@" in spec:
        return Path(spec.split("@", 1)[1]).expanduser()
    if spec.startswith("hf:"):
        return Path(spec.removeprefix("hf:")).expanduser()
    return None


def weight_bytes(spec: str) -> int | None:
    """Bytes of the weight files a spec loads (a directory is searched one level), None if unknown."""
    path = spec_path(spec)
    if path is None:
        return None
    if path.is_file():
        return path.stat().st_size
    if not path.is_dir():
        return None
    files = [f for f in path.iterdir() if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES)]
    return sum(f.stat().st_size for f in files) if files else None
