"""One package per paper protocol (docs/architecture.md): everything only that protocol needs, over the
shared layers below (world, models, data, stats, scorecard). Each package's README.md is the protocol on
one page, and its ``manifest.py`` declares it as data (:class:`faithtests.manifest.Manifest`).

A new protocol is a new folder here with a ``manifest.py`` defining ``MANIFEST``: :func:`manifests`
finds it on disk, and the plugin registers its fixtures module, options and data names from it (the
import contracts in ``pyproject.toml`` cover it by wildcard). A protocol in another distribution
registers its manifest under the ``faithtests.protocols`` entry-point group
(``name = "pkg.manifest:MANIFEST"``).
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, NoReturn

from faithtests.manifest import Manifest, ManifestError

ENTRY_POINT_GROUP = "faithtests.protocols"


def _on_disk() -> list[Manifest]:
    """``MANIFEST`` of every package here with a ``manifest.py``, sorted by folder name."""
    root = Path(__file__).resolve().parent
    names = [p.name for p in sorted(root.iterdir())
             if (p / "__init__.py").is_file() and (p / "manifest.py").is_file()]
    return [importlib.import_module(f"{__name__}.{name}.manifest").MANIFEST for name in names]


def _registered() -> list[Manifest]:
    """Manifests of other distributions (entry-point group ``faithtests.protocols``), sorted by name;
    an entry may name the ``Manifest`` or a module defining ``MANIFEST``."""
    out = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        obj = ep.load()
        manifest = getattr(obj, "MANIFEST", obj)
        if not isinstance(manifest, Manifest):
            raise ManifestError(f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}) is not a Manifest")
        out.append(manifest)
    return out


@cache
def manifests() -> tuple[Manifest, ...]:
    """Every protocol of this installation: the bundled ones, then the registered ones; a name used
    twice is an error. Cheap: manifests import no torch, numpy or PIL."""
    found = [*_on_disk(), *_registered()]
    names = [m.name for m in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ManifestError(f"protocol(s) declared twice: {', '.join(twice)}")
    return tuple(found)


def fixture_plugins() -> tuple[str, ...]:
    """The fixtures module of every protocol, in :func:`manifests` order (registered by the plugin)."""
    return tuple(m.fixtures for m in manifests())


def fail_unscored(faith: Any, name: str, *, slice: str | None = None,
                  higher_is_better: bool = True) -> NoReturn:
    """No item has finite model outputs (all counted by ``Faith.nonfinite``), so nothing can be
    aggregated: record ``name`` undefined (n=0) and check it, which fails with the recorder's message
    naming the model and its non-finite count, not with a bootstrap's error for suite authors. Nothing
    after it can be computed, so the test stops here: with every check made so far (``settle``)."""
    faith.metric(name, float("nan"), n=0, higher_is_better=higher_is_better, slice=slice)
    faith.check(name, slice=slice)
    faith.settle()  # a suite's recorder keeps failed checks until the test ends: this one ends it now
    raise AssertionError(f"{name}: an undefined value passed its check")  # check() fails undefined values
