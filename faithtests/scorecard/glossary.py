"""The metric glossary: a plain-language definition declared with each metric.

A protocol declares one :class:`MetricTerm` per metric name its suites record (``TERMS`` in its
``glossary`` module, named by its manifest); shared code declares the terms of what it records itself.
The plugin writes the terms of every recorded metric into the scorecard (``glossary``: base name ->
:meth:`MetricTerm.to_json`), and the terminal legend, the HTML and ``faithtests explain`` read them back
with :func:`term_for`. A protocol's glossary may also hold :class:`MetricAlias` entries: the names the
README, the docs and the papers use for a metric or a family of them (``DS``, ``LSS``, ``CECS``), which
``faithtests explain`` accepts, as it accepts any metric name in any case. Pure data: no protocol is named
here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields

#: "higher" (higher is better), "lower" (lower is better) or "none" (a diagnostic with no better side)
DIRECTIONS = ("higher", "lower", "none")
#: What the JSON glossary holds for a recorded metric whose definition no protocol declared.
UNDEFINED = "undefined"

# "suite/" prefix, "[slice]" suffix and " (variant)" suffix of a displayed metric name
_DECORATED = re.compile(r"^(?:[^/\[\]\s]+/)?(?P<name>[^\[\]\s/(]+)(?:\[.*\])?(?:\s+\(.*\))?$")


class GlossaryError(ValueError):
    """A malformed term, or one metric name declared twice with two definitions."""


@dataclass(frozen=True)
class MetricTerm:
    """What a metric means: ``sentence`` (one plain-language sentence), ``direction`` (one of
    :data:`DIRECTIONS`), ``unit`` ("share of items", "cosine", "layer index", ...), ``paper`` (short
    name) and ``equation`` (its equation, table or section there)."""

    name: str
    sentence: str
    direction: str
    unit: str
    paper: str
    equation: str

    def __post_init__(self) -> None:
        if not self.name or "[" in self.name or "/" in self.name:
            raise GlossaryError(f"metric term name {self.name!r}: a base name, without suite or [slice]")
        if self.direction not in DIRECTIONS:
            raise GlossaryError(f"metric term {self.name!r}: direction {self.direction!r} is not one of "
                                f"{', '.join(DIRECTIONS)}")
        if not self.sentence.strip():
            raise GlossaryError(f"metric term {self.name!r}: empty sentence")

    def to_json(self) -> dict[str, str]:
        """The JSON entry (the name is the glossary's key)."""
        d = asdict(self)
        d.pop("name")
        return d

    @classmethod
    def from_json(cls, name: str, d: Mapping[str, str]) -> MetricTerm:
        return cls(name=name, **{f.name: str(d.get(f.name, "")) for f in fields(cls) if f.name != "name"})

    @property
    def better(self) -> str:
        """``higher is better`` / ``lower is better`` / ``no better side``."""
        better = {"higher": "higher is better", "lower": "lower is better"}
        return better.get(self.direction, "no better side")

    def source(self) -> str:
        """``AC-Bench Eq. 3`` (paper and equation, either may be empty)."""
        return " ".join(p for p in (self.paper, self.equation) if p)

    def legend(self) -> str:
        """One line: ``TBR: <sentence> (lower is better; AC-Bench Eq. 3)``."""
        tail = "; ".join(p for p in (self.better, self.source()) if p)
        return f"{self.name}: {self.sentence.rstrip('.')} ({tail})"

    def describe(self) -> str:
        """The ``faithtests explain`` text: name, sentence, then direction, unit and source lines."""
        return "\n".join([f"{self.name}: {self.sentence}", f"  direction: {self.better}",
                          f"  unit:      {self.unit or '-'}", f"  source:    {self.source() or '-'}"])


@dataclass(frozen=True)
class MetricAlias:
    """Another name for the metrics ``metrics`` (base names declared as terms): the name the README, the
    docs or a paper use (``DS``, ``LSS``, ``CECS``); ``note`` says how it maps to them."""

    name: str
    metrics: tuple[str, ...]
    note: str

    def __post_init__(self) -> None:
        if not self.name or "[" in self.name or "/" in self.name or not self.metrics:
            raise GlossaryError(f"metric alias {self.name!r}: a base name naming at least one metric")

    def describe(self) -> str:
        """The first line of ``faithtests explain ALIAS``: what the name stands for."""
        return f"{self.name}: {self.note.rstrip('.')}; recorded as {', '.join(self.metrics)}."


#: What a protocol's glossary tuple holds (the manifest's ``glossary``).
GlossaryEntry = MetricTerm | MetricAlias


def base_name(metric: str) -> str:
    """The glossary key of a metric as recorded or displayed: ``E_sens``, ``E_sens[color]``,
    ``flip_sensitivity/E_sens[color]`` and ``suite/E_sens[color] (shuffled)`` all give ``E_sens``."""
    text = metric.strip()
    m = _DECORATED.match(text)
    if m is not None:
        return m.group("name")
    return text.partition("[")[0].rpartition("/")[2].strip()


def collect(terms: Iterable[MetricTerm], where: str = "") -> dict[str, MetricTerm]:
    """Terms by name; the same name declared twice is an error unless both definitions are equal."""
    out: dict[str, MetricTerm] = {}
    for t in terms:
        if not isinstance(t, MetricTerm):
            raise GlossaryError(f"{where or 'glossary'}: {t!r} is not a MetricTerm")
        if out.setdefault(t.name, t) != t:
            raise GlossaryError(f"metric {t.name!r} is defined twice with different terms"
                                + (f" ({where})" if where else ""))
    return out


def collect_aliases(aliases: Iterable[MetricAlias], terms: Mapping[str, MetricTerm],
                    where: str = "") -> dict[str, MetricAlias]:
    """Aliases by name; an alias that names an undeclared metric, shares a name with a term (in any case)
    or is declared twice differently is an error."""
    out: dict[str, MetricAlias] = {}
    folded = {n.casefold() for n in terms}
    suffix = f" ({where})" if where else ""
    for a in aliases:
        unknown = [m for m in a.metrics if m not in terms]
        if unknown:
            raise GlossaryError(f"metric alias {a.name!r} names undeclared metric(s) "
                                f"{', '.join(unknown)}{suffix}")
        if a.name.casefold() in folded:
            raise GlossaryError(f"metric alias {a.name!r} is also a metric's name{suffix}")
        if out.setdefault(a.name, a) != a:
            raise GlossaryError(f"metric alias {a.name!r} is defined twice with different metrics{suffix}")
    return out


def to_json(terms: Mapping[str, MetricTerm]) -> dict[str, dict[str, str]]:
    return {name: terms[name].to_json() for name in sorted(terms)}


def term_for(metric: str, glossary: Mapping[str, Mapping[str, str]]) -> MetricTerm | None:
    """The term of ``metric`` (any decoration, see :func:`base_name`) in a JSON glossary
    (``Scorecard.glossary``), or None when it has none or is marked :data:`UNDEFINED`."""
    name = base_name(metric)
    entry = glossary.get(name)
    if not isinstance(entry, Mapping) or entry.get("sentence", UNDEFINED) == UNDEFINED:
        return None
    return MetricTerm.from_json(name, entry)


def undefined_entry() -> dict[str, str]:
    """The JSON entry of a recorded metric nobody defined: every field says ``undefined``."""
    return {f.name: UNDEFINED for f in fields(MetricTerm) if f.name != "name"}


def for_recorded(names: Iterable[str], terms: Mapping[str, MetricTerm]) -> tuple[dict[str, dict[str, str]],
                                                                               list[str]]:
    """The JSON glossary of the recorded metric ``names`` (each base name once) and the base names with
    no declared term (in the glossary as :func:`undefined_entry`, never left out)."""
    out: dict[str, dict[str, str]] = {}
    missing: list[str] = []
    for name in sorted({base_name(n) for n in names}):
        if name in terms:
            out[name] = terms[name].to_json()
        else:
            out[name] = undefined_entry()
            missing.append(name)
    return out, missing


class DirectionError(GlossaryError):
    """A metric recorded or gated against the direction its term declares, or gated with none."""


def recorded_higher(name: str, given: bool | None, terms: Mapping[str, MetricTerm], where: str) -> bool:
    """Whether metric ``name`` is recorded higher-is-better. A metric's direction is declared once, by its
    term; ``given`` (a suite's ``higher_is_better=``) decides only for a metric whose term has no better
    side (a rejection rate wanted on misleading questions and not on standard ones: the suite knows the
    split) or that has no term (then the run warns it is undefined); it may repeat a declared direction,
    never contradict it. Neither: higher (the recorder's historical default)."""
    term = terms.get(base_name(name))
    if term is None or term.direction == "none":
        return True if given is None else bool(given)
    if given is not None and bool(given) != (term.direction == "higher"):
        side = "higher" if given else "lower"
        raise DirectionError(
            f"{where}: recorded as {side}-is-better, but its glossary term declares {term.better} "
            f"({term.source() or term.name}); a direction is declared once, in the protocol's glossary"
        )
    return term.direction == "higher"


def gated_higher(name: str, terms: Mapping[str, MetricTerm], where: str) -> bool:
    """The direction a threshold without an ``op`` gates: its metric's declared term's."""
    term = terms.get(base_name(name))
    if term is None or term.direction == "none":
        why = "no glossary term" if term is None else "a glossary term with no better side"
        raise DirectionError(f"{where}: no op, and {base_name(name)} has {why}: write op = \">=\" or "
                             "\"<=\", or declare the metric's direction in its protocol's glossary")
    return term.direction == "higher"


def did_you_mean(metric: str, names: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` known names close to ``metric`` (case-insensitive), closest first."""
    known = sorted(set(names))
    lower = {k.lower(): k for k in known}
    want = base_name(metric).lower()
    close = difflib.get_close_matches(want, list(lower), n=n, cutoff=0.5)
    prefixed = [lower[k] for k in lower if k.startswith(want) and lower[k] not in close] if want else []
    return list(dict.fromkeys([lower[c] for c in close] + prefixed))[:n]


def undefined_note(missing: Iterable[str]) -> str:
    """The terminal note naming recorded metrics that no glossary defines."""
    names = sorted(set(missing))
    return (f"warning: {len(names)} recorded metric(s) without a definition: {', '.join(names)} "
            "(\"undefined\" in the scorecard's glossary; declare a MetricTerm in the protocol's glossary, "
            "see docs/reports.md \"Glossary\")")


def merge_glossaries(parts: Iterable[Mapping[str, Mapping[str, str]]]) -> dict[str, dict[str, str]]:
    """The glossary of merged shards: every shard's entries; a definition wins over ``undefined``."""
    out: dict[str, dict[str, str]] = {}
    for glossary in parts:
        for name, entry in glossary.items():
            if name not in out or out[name].get("sentence") == UNDEFINED:
                out[name] = dict(entry)
    return dict(sorted(out.items()))


def lookup(metric: str, terms: Mapping[str, MetricTerm],
           aliases: Mapping[str, MetricAlias] | None = None) -> MetricTerm | MetricAlias | None:
    """What ``metric`` (any decoration, see :func:`base_name`) names: the term of that name, else the one
    term whose name differs only in case, else the alias of that name in any case; None when nothing."""
    name = base_name(metric)
    if name in terms:
        return terms[name]
    folded = name.casefold()
    same = [t for n, t in terms.items() if n.casefold() == folded]
    if len(same) == 1:
        return same[0]
    return next((a for n, a in (aliases or {}).items() if n.casefold() == folded), None)


def explain(metric: str, terms: Mapping[str, MetricTerm],
            aliases: Mapping[str, MetricAlias] | None = None) -> str:
    """The ``faithtests explain METRIC`` text (an alias: what it stands for, then each metric it names);
    :class:`GlossaryError` with a did-you-mean for an unknown name."""
    found = lookup(metric, terms, aliases)
    if isinstance(found, MetricTerm):
        return found.describe()
    if found is not None:
        return "\n\n".join([found.describe(), *(terms[m].describe() for m in found.metrics if m in terms)])
    close = did_you_mean(metric, [*terms, *(aliases or {})])
    hint = f"; did you mean {' or '.join(close)}?" if close else "; 'faithtests explain --all' lists them"
    raise GlossaryError(f"no metric {base_name(metric)!r} in the glossary{hint}")


def explain_all(terms: Mapping[str, MetricTerm]) -> str:
    """Every term, one legend line each, sorted by name (case-insensitive)."""
    return "\n".join(terms[name].legend() for name in sorted(terms, key=lambda n: (n.lower(), n)))
