"""One package per paper protocol (DESIGN.md): everything only that protocol needs, over the shared
layers below (world, models, data, stats, scorecard). Each package's README.md is the protocol on one page.

A new protocol is a new folder here: its ``fixtures.py`` is found and registered by the plugin
(:func:`fixture_plugins`), and the import contracts in ``pyproject.toml`` cover it by wildcard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn


def fixture_plugins() -> tuple[str, ...]:
    """``faithtests.protocols.<name>.fixtures`` of every protocol package that has one, sorted by name.
    Found on disk, not imported here: the fixtures modules are torch-free at import anyway."""
    root = Path(__file__).resolve().parent
    return tuple(f"{__name__}.{p.name}.fixtures" for p in sorted(root.iterdir())
                 if (p / "__init__.py").is_file() and (p / "fixtures.py").is_file())


#: Fixture modules registered by the plugin.
FIXTURE_PLUGINS: tuple[str, ...] = fixture_plugins()


def fail_unscored(faith: Any, name: str, *, slice: str | None = None,
                  higher_is_better: bool = True) -> NoReturn:
    """No item has finite model outputs (all counted by ``Faith.nonfinite``), so nothing can be
    aggregated: record ``name`` undefined (n=0) and check it, which fails with the recorder's message
    naming the model and its non-finite count, not with a bootstrap's error for suite authors."""
    faith.metric(name, float("nan"), n=0, higher_is_better=higher_is_better, slice=slice)
    faith.check(name, slice=slice)
    raise AssertionError(f"{name}: an undefined value passed its check")  # check() fails undefined values
