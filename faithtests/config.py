"""What a protocol's fixtures may know about the run: dataset locations, the item limit and the seed.

The plugin parses its options and stores a :class:`RunConfig` in the pytest config's stash; protocol
packages read it with :func:`run_config` (they sit below the plugin and never import it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class RunConfig:
    data: Mapping[str, Path] = field(default_factory=dict)  # --faith-data NAME=PATH, resolved
    limit: int | None = None  # --faith-limit: at most N items per dataset
    seed: int = 0  # --faith-seed: item sampling and bootstrap
    cache: Path | None = None  # --faith-cache: persistent outputs (and generated data) of this run

    def capped(self, n: int) -> int:
        """``n`` items, or fewer under ``--faith-limit``."""
        return min(n, self.limit) if self.limit else n


RUN_CONFIG = pytest.StashKey[RunConfig]()


def run_config(config: pytest.Config) -> RunConfig:
    return config.stash[RUN_CONFIG]


#: Protocol settings that change what a run measures (e.g. IMAVB's frames per clip): name -> value,
#: written by protocol fixtures at configure time, copied into the fingerprint's ``settings``.
SETTINGS = pytest.StashKey[dict[str, Any]]()


def record_setting(config: pytest.Config, name: str, value: Any) -> None:
    """Record a protocol setting (JSON-safe value) for the scorecard's fingerprint."""
    config.stash.setdefault(SETTINGS, {})[name] = value


def settings(config: pytest.Config) -> dict[str, Any]:
    """The recorded protocol settings, sorted by name."""
    return dict(sorted(config.stash.get(SETTINGS, {}).items()))
