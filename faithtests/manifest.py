"""What a protocol declares about itself, as data: the one place a protocol names its suites, its data,
its options, its resample count, its world generator and its reference-VLM training tasks.

Each ``faithtests/protocols/<name>/manifest.py`` defines ``MANIFEST``; :func:`faithtests.protocols.manifests`
discovers them (and third-party protocols registered under the ``faithtests.protocols`` entry-point
group). The plugin registers options, data names and fixture modules from the manifests; the reference
trainer collects training tasks from them; the docs' suite, data and option tables are generated from
them. Importing a manifest is cheap: no torch, no numpy, no PIL (the plugin imports every manifest at
load time).

Generators and training tasks are named as ``"module:attribute"`` strings and imported only when used.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from faithtests.config import Option
from faithtests.data.names import DataName
from faithtests.scorecard.glossary import GlossaryError, MetricAlias, MetricTerm, collect, collect_aliases


@dataclass(frozen=True)
class Manifest:
    """One protocol, declared once.

    ``suites``: the suite names this protocol's tests record under (``suites/test_<suite>.py``).
    ``data``: ``--faith-data`` names this protocol owns (name -> what the path must be).
    ``reads``: shared data names (declared in :mod:`faithtests.data.names`) its suites also read.
    ``options``: its own command-line/ini options. ``bootstrap``: resamples of its CIs (the paper's).
    ``world``: ``"module:function"`` of its procedural item generator, or ``None``.
    ``training``: ``"module:attribute"`` of its reference-VLM training tasks (task name -> maker), or
    ``None``. ``fixtures``: the module holding its pytest fixtures (registered by the plugin).
    ``glossary``: ``"module:attribute"`` of the :class:`~faithtests.scorecard.glossary.MetricTerm` tuple
    defining every metric its suites record, with :class:`~faithtests.scorecard.glossary.MetricAlias`
    entries for the names the docs and papers use (``""``: none declared; its metrics show as undefined).
    """

    name: str
    title: str
    paper: str
    suites: tuple[str, ...]
    fixtures: str
    data: dict[str, DataName] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()
    bootstrap: int = 10_000
    world: str | None = None
    training: str | None = None
    glossary: str = ""  # "module:attribute" of its MetricTerm tuple (faithtests.scorecard.glossary)
    #: Its suites put audio in prompts: a run naming no model adds the bundled omni reference to them.
    audio: bool = False
    #: Its own ``--faith-limit`` under a ``--faith-profile`` (profile -> {key: limit}, ``None``: full size)
    #: where the profile's limit would leave one of its checks without a verdict on the good references;
    #: a key is what its fixtures pass to ``RunConfig.capped`` (its name, or a part of it: ``imavb-clips``).
    profile_limits: Mapping[str, Mapping[str, int | None]] = field(default_factory=dict)
    #: The requests to a served model that only its answers decide, in words (``--faith-api-estimate``
    #: counts none it has no answer for: its count for these suites is then a lower bound, by at most this).
    answer_dependent: str = ""
    #: suite -> (its number in the product's order, "1", "2a", ...; the question this protocol asks in it):
    #: the suites tables of the README and the docs are generated from these (``faithtests.catalog``).
    questions: Mapping[str, tuple[str, str]] = field(default_factory=dict)


def number_order(number: str) -> tuple[int, str]:
    """Sort key of a suite number (``Manifest.questions``): "2a" before "10" (its digits as a number,
    then the rest; no number sorts last)."""
    digits = number[:len(number) - len(number.lstrip("0123456789"))]
    return (int(digits) if digits else 10**9, number[len(digits):])


def suite_order(found: Iterable[Manifest]) -> tuple[str, ...]:
    """Every suite the manifests run, once, in the order of their first numbers (the product's order)."""
    numbered = [(number_order(m.questions.get(s, ("", ""))[0]), s) for m in found for s in m.suites]
    return tuple(dict.fromkeys(s for _, s in sorted(numbered)))


def load_attr(ref: str) -> Any:
    """The object a ``"module:attribute"`` reference names (imported now, not at manifest load)."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"{ref!r} is not 'module:attribute'")
    return getattr(importlib.import_module(module), attr)


class ManifestError(ValueError):
    """Two manifests that cannot both be registered (one data name or option declared twice)."""


def data_table(manifests: Iterable[Manifest], shared: Mapping[str, DataName]) -> dict[str, DataName]:
    """Every accepted ``--faith-data`` name -> its spec, with ``suites`` filled in: the shared names
    first (read by the suites of each manifest that lists them in ``reads``), then each manifest's own
    names (read by its suites). A name owned twice, or a ``reads`` of an unknown shared name, is an error."""
    manifests = list(manifests)
    readers: dict[str, list[str]] = {name: [] for name in shared}
    owned: dict[str, DataName] = {}
    for m in manifests:
        for name in m.reads:
            if name not in shared:
                raise ManifestError(f"protocol {m.name!r} reads {name!r}, which is no shared data name")
            readers[name] += [s for s in m.suites if s not in readers[name]]
        for name, spec in m.data.items():
            if name in owned or name in shared:
                raise ManifestError(f"data name {name!r} is declared twice (protocol {m.name!r})")
            owned[name] = replace(spec, suites=m.suites)
    return {**{n: replace(s, suites=tuple(readers[n])) for n, s in shared.items()}, **owned}


def unique_options(options: Iterable[Option]) -> tuple[Option, ...]:
    """``options`` as a tuple; one name declared twice is an error naming it."""
    out = tuple(options)
    seen: set[str] = set()
    for o in out:
        if o.name in seen:
            raise ManifestError(f"option {o.flag} (ini {o.name}) is declared twice")
        seen.add(o.name)
    return out


def _glossary_entries(manifests: Iterable[Manifest]) -> list[Any]:
    """Every entry of the manifests' ``glossary`` tuples; one that cannot be loaded, or is no tuple, is an
    error."""
    entries: list[Any] = []
    for m in manifests:
        if not m.glossary:
            continue
        try:
            declared = load_attr(m.glossary)
        except (ImportError, AttributeError, ValueError) as exc:
            raise GlossaryError(f"protocol {m.name!r}: glossary {m.glossary!r} cannot be loaded: "
                                f"{exc}") from exc
        if not isinstance(declared, (tuple, list)):
            raise GlossaryError(f"protocol {m.name!r}: glossary {m.glossary!r} is not a tuple of "
                                "MetricTerm")
        entries += declared
    return entries


def glossary_terms(manifests: Iterable[Manifest]) -> dict[str, MetricTerm]:
    """Every metric term the manifests declare (their ``glossary``), by name. A name two protocols define
    differently, or a ``glossary`` that does not name a tuple of :class:`MetricTerm` (and
    :class:`MetricAlias`), is an error."""
    entries = _glossary_entries(manifests)
    return collect([e for e in entries if not isinstance(e, MetricAlias)], "protocol glossaries")


def glossary_aliases(manifests: Iterable[Manifest]) -> dict[str, MetricAlias]:
    """Every :class:`MetricAlias` the manifests' glossaries declare, by name (each checked against the
    declared terms: see :func:`~faithtests.scorecard.glossary.collect_aliases`)."""
    manifests = list(manifests)
    aliases = [e for e in _glossary_entries(manifests) if isinstance(e, MetricAlias)]
    return collect_aliases(aliases, glossary_terms(manifests), "protocol glossaries")
