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
import importlib.util
from collections.abc import Collection, Sequence
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, NoReturn

from faithtests.data.names import SHARED
from faithtests.manifest import Manifest, ManifestError, data_table, glossary_terms, unique_options
from faithtests.scorecard.glossary import MetricTerm
from faithtests.scorecard.thresholds import Thresholds, load_thresholds

ENTRY_POINT_GROUP = "faithtests.protocols"


def _on_disk() -> list[Manifest]:
    """``MANIFEST`` of every package here with a ``manifest.py``, sorted by folder name."""
    root = Path(__file__).resolve().parent
    names = [p.name for p in sorted(root.iterdir())
             if (p / "__init__.py").is_file() and (p / "manifest.py").is_file()]
    return [importlib.import_module(f"{__name__}.{name}.manifest").MANIFEST for name in names]


def _registered(accepted: list[Manifest]) -> tuple[list[Manifest], list[str]]:
    """Manifests of other distributions (entry-point group ``faithtests.protocols``), sorted by name,
    each checked against those accepted before it; an entry may name the ``Manifest`` or a module
    defining ``MANIFEST``. A broken one (it does not import, is no Manifest, reuses a protocol, data or
    option name, reads an unknown shared name, has a glossary that does not load or redefines a term,
    or names a fixtures module that is not there) is left
    out with its own message: it disables itself, never faithtests nor another project's pytest in the
    same environment (issue 46)."""
    out: list[Manifest] = []
    disabled: list[str] = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            obj = ep.load()
            manifest = getattr(obj, "MANIFEST", obj)
            if not isinstance(manifest, Manifest):
                raise ManifestError(f"it is a {type(manifest).__name__}, not a Manifest")
            check_manifests([*accepted, *out, manifest])
            glossary_terms([*accepted, *out, manifest])  # it loads, and redefines no term of another
            if importlib.util.find_spec(manifest.fixtures) is None:
                raise ManifestError(f"its fixtures module {manifest.fixtures!r} is not installed")
        except Exception as exc:  # a third party's bug of any kind: reported, never raised
            disabled.append(f"faithtests: protocol plug-in {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}) is "
                            f"disabled: {type(exc).__name__}: {exc}")
            continue
        out.append(manifest)
    return out, disabled


def check_manifests(found: list[Manifest]) -> None:
    """A protocol name, data name or option declared twice, or a ``reads`` of an unknown shared data
    name, is a :class:`ManifestError`."""
    names = [m.name for m in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ManifestError(f"protocol(s) declared twice: {', '.join(twice)}")
    data_table(found, SHARED)
    unique_options(o for m in found for o in m.options)


@cache
def _discovered() -> tuple[tuple[Manifest, ...], tuple[str, ...]]:
    bundled = _on_disk()
    check_manifests(bundled)  # a bundled protocol's mistake is faithtests' own: it raises
    registered, disabled = _registered(bundled)
    return (*bundled, *registered), tuple(disabled)


def manifests() -> tuple[Manifest, ...]:
    """Every protocol of this installation: the bundled ones, then the registered ones that are sound
    (:func:`disabled_protocols` says why the others are left out). Cheap: manifests import no torch,
    numpy or PIL."""
    return _discovered()[0]


def disabled_protocols() -> tuple[str, ...]:
    """One message per registered protocol left out as broken (the plugin and the CLI print them)."""
    return _discovered()[1]


def declared_terms() -> dict[str, MetricTerm]:
    """Every protocol's glossary terms by metric name: the one declaration of each metric's direction."""
    return glossary_terms(manifests())


def load_suite_thresholds(default: Path | None, user: Path | None = None, *,
                          default_required: bool = False) -> Thresholds:
    """:func:`~faithtests.scorecard.thresholds.load_thresholds` with :func:`declared_terms`: what the
    plugin loads (a default entry without ``op`` gates its metric's declared direction)."""
    return load_thresholds(default, user, default_required=default_required, terms=declared_terms())


def fixture_plugins() -> tuple[str, ...]:
    """The fixtures module of every protocol, in :func:`manifests` order (registered by the plugin)."""
    return tuple(m.fixtures for m in manifests())


def fail_unscored(faith: Any, name: str, *, slice: str | None = None,
                  higher_is_better: bool | None = None) -> NoReturn:
    """No item has finite model outputs (all counted by ``Faith.nonfinite``), so nothing can be
    aggregated: record ``name`` undefined (n=0) and check it, which fails with the recorder's message
    naming the model and its non-finite count, not with a bootstrap's error for suite authors. Nothing
    after it can be computed, so the test stops here: with every check made so far (``settle``)."""
    faith.metric(name, float("nan"), n=0, higher_is_better=higher_is_better, slice=slice)
    faith.check(name, slice=slice)
    faith.settle()  # a suite's recorder keeps failed checks until the test ends: this one ends it now
    raise AssertionError(f"{name}: an undefined value passed its check")  # check() fails undefined values


#: The marker of a suite test (or parameter) that records and gates nothing: ``--faith-profile quick``
#: does not run it, and the plugin fails it if it checks a metric after all (the mark would then hide a
#: gate from quick runs).
DIAGNOSTIC = "faith_diagnostic"


def diagnostic_params(values: Sequence[str], *, gated: Collection[str]) -> list[Any]:
    """``values`` as ``pytest.mark.parametrize`` values, each one not in ``gated`` marked
    :data:`DIAGNOSTIC` (a variant or answer mode whose results the suite records beside the gated one)."""
    import pytest  # lazy: the CLI lists protocols without pytest's import

    mark = getattr(pytest.mark, DIAGNOSTIC)
    return [v if v in gated else pytest.param(v, marks=mark) for v in values]
