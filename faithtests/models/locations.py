"""Where reference checkpoints live; torch-free so the pytest plugin can ask at collection time."""

from __future__ import annotations

import os
from pathlib import Path


def fixtures_root() -> Path:
    """``$FAITHTESTS_FIXTURES`` if set, else ``fixtures/`` next to the installed package's source tree."""
    env = os.environ.get("FAITHTESTS_FIXTURES")
    if env:
        return Path(env).expanduser()
    import faithtests

    return Path(faithtests.__file__).resolve().parent.parent / "fixtures"
