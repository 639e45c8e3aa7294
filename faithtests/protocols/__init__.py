"""One package per paper protocol (DESIGN.md): everything only that protocol needs, over the shared
layers below (world, models, data, stats, scorecard). Each package's README.md is the protocol on one page.

A new protocol is a new folder here: its ``fixtures.py`` is found and registered by the plugin
(:func:`fixture_plugins`), and the import contracts in ``pyproject.toml`` cover it by wildcard.
"""

from __future__ import annotations

from pathlib import Path


def fixture_plugins() -> tuple[str, ...]:
    """``faithtests.protocols.<name>.fixtures`` of every protocol package that has one, sorted by name.
    Found on disk, not imported here: the fixtures modules are torch-free at import anyway."""
    root = Path(__file__).resolve().parent
    return tuple(f"{__name__}.{p.name}.fixtures" for p in sorted(root.iterdir())
                 if (p / "__init__.py").is_file() and (p / "fixtures.py").is_file())


#: Fixture modules registered by the plugin.
FIXTURE_PLUGINS: tuple[str, ...] = fixture_plugins()
