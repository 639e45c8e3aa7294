"""Pass/fail thresholds: ``suites/thresholds.toml`` plus an optional user file merged over it.

Format (one table per suite; a key is a metric, or ``metric[slice]`` for one slice)::

    [flip_sensitivity]
    PR = { value = 0.70, family = { siglip = 0.55 } }
    "PR[number]" = { value = 0.63 }
    E_inv = { value = 0.05, slices = ["simple", "advanced"] }

* In the default file every entry needs a numeric ``value``; ``family`` maps a model family to its own
  value (same ``op``). Its ``op`` is the metric's declared direction (its glossary term: ``>=`` when
  higher is better, ``<=`` when lower), so a direction is written once; ``op`` (one of ``>= > <= <``)
  is written only for a metric whose term declares no better side, or for a strict comparison, and
  may not contradict the term.
* Slices a threshold can apply to are *declared* by the default file: the slices that have an entry of
  their own, plus the metric entry's ``slices`` list (the slices its suite checks that use the metric's
  value). A pattern with ``*`` (``"judge=*"``) declares a family of slices whose names are not fixed.
  A metric that declares none is checked only overall.
* The user file (``--faith-thresholds``) may only *override* what the defaults define: an unknown suite
  or metric key, or a slice its metric does not declare, is an error naming the key and the file (a typo
  must not silently keep the default, and a threshold for a slice no suite checks would never be used).
  A user entry may give any subset of ``op``/``value``/``family`` (family entries merge key-wise), or a
  bare number meaning ``value``. A user entry for a declared slice without an entry of its own starts as
  a copy of the metric's entry (what the slice used before) and overrides it for that slice only.
* Lookup of ``(suite, metric, slice)`` tries ``metric[slice]`` and then ``metric``, so a metric-level
  threshold also applies to its slices unless a slice overrides it. A default slice entry is complete on
  its own: the metric's ``family`` values do not apply to it.
* ``op`` says the metric's direction (``>=``/``>``: higher is better). A user file may move a value but
  not flip the default's direction (a ``>=`` on a lower-is-better metric passes worse models); a check
  also refuses an op that contradicts how the metric was recorded (``higher_is_better``).
* Kinds (default file): ``kind = "paper"`` is a *paper gate*: ``anchor`` names the table (and answer
  mode, subset, shuffling, judge) whose rows measure the same quantity, and ``pass`` / ``fail`` quote
  those rows (model = value; ``"MODEL @FAMILY"`` is checked at that family's value): a test applies the
  gate to each and asserts the verdict. ``kind = "floor"`` is a *sanity floor*: no paper row measures
  the quantity; it is calibrated so that random and one-answer models fail, and ``means`` says what a
  failure means. ``family_kind`` gives a family its own kind (a VLM scorer's calibrated value of a paper
  gate is a floor). Results carry the kind and its note (``gate_kind``, ``gate_note``); an entry a user
  file changed is of kind ``user`` (its value is no longer the default's anchor).
* ``[coverage]`` (a reserved table, not a suite) sets when a run has enough data for a verdict:
  ``min_valid_fraction`` (share of a test's inputs that must be valid) and ``min_n`` (least ``n`` of a
  checked metric), with per-suite tables (``[coverage.invariance]``) overriding them.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from faithtests.scorecard.gate_kinds import (
    KIND_FIELDS,
    USER_KIND,
    PaperRow,
    ThresholdError,
    kind_fields,
    number,
)
from faithtests.scorecard.glossary import DirectionError, MetricTerm, gated_higher, recorded_higher
from faithtests.scorecard.model import OPS, Op

_KEY = re.compile(r"^(?P<metric>[^\[\]]+)(?:\[(?P<slice>[^\[\]]+)\])?$")
_FIELDS = ("op", "value", "family")
#: The default file also says what kind of gate each entry is (module docstring, "Kinds").
_DEFAULT_FIELDS = (*_FIELDS, "slices", *KIND_FIELDS)
COVERAGE = "coverage"  # the reserved table of coverage rules
_COVERAGE_FIELDS = ("min_valid_fraction", "min_n")


@dataclass(frozen=True)
class Threshold:
    """One configured threshold (``family`` keys are lower-case)."""

    op: Op
    value: float
    family: Mapping[str, float] = field(default_factory=dict)
    source: str = ""  # the file that set it last
    slices: tuple[str, ...] = ()  # declared slices (metric entries of the default file only)
    kind: str = ""  # "paper", "floor", "user" (a user file moved it); "" when the file does not say
    family_kind: Mapping[str, str] = field(default_factory=dict)  # a family's own kind
    anchor: str = ""  # paper gates: the table (and mode) whose rows measure the same quantity
    means: str = ""  # floors: what a failure means
    rows: tuple[PaperRow, ...] = ()  # paper gates: the quoted rows and their verdicts

    def value_for(self, families: Iterable[str] = ()) -> tuple[float, str | None]:
        """The value for the first candidate family that has its own entry, else the default value."""
        for fam in families:
            v = self.family.get(fam.lower())
            if v is not None:
                return v, fam.lower()
        return self.value, None

    def kind_for(self, family: str | None) -> tuple[str, str]:
        """(kind, note) of the gate at ``family``'s value: the note is the anchor of a paper gate, what a
        failure means for a floor, the file of a user's value."""
        kind = self.family_kind.get(family, self.kind) if family else self.kind
        note = {"paper": self.anchor, "floor": self.means, USER_KIND: f"set in {self.source}"}.get(kind, "")
        return kind, note


@dataclass(frozen=True)
class ResolvedThreshold:
    """What a check compares against: op, value, the family that chose it (if any), and the source."""

    op: Op
    value: float
    family: str | None
    source: str
    key: str  # the key that matched: "PR[color]" or "PR"
    kind: str = ""  # Threshold.kind_for
    note: str = ""


def higher_is_better(op: Op) -> bool:
    """The direction an op declares: ``>=`` / ``>`` gate a higher-is-better metric."""
    return op in (">=", ">")


@dataclass(frozen=True)
class CoverageRule:
    """When a check has enough data for a verdict (see the ``[coverage]`` table).

    ``min_valid_fraction``: the least share of a test's inputs that must be usable (1 - invalid/total
    for every invalid count with a total); ``min_n``: the least ``n`` of a checked metric."""

    min_valid_fraction: float = 0.5
    min_n: int = 1  # suites/thresholds.toml sets 10
    source: str = "built-in default"


def metric_key(metric: str, slice: str | None = None) -> str:
    return f"{metric}[{slice}]" if slice else metric


def split_key(key: str) -> tuple[str, str | None]:
    m = _KEY.match(key)
    if m is None:
        raise ValueError(f"{key!r} is not 'metric' or 'metric[slice]'")
    return m["metric"].strip(), (m["slice"].strip() if m["slice"] else None)


class Thresholds:
    """The merged thresholds of a run."""

    def __init__(self, table: Mapping[str, Mapping[str, Threshold]] | None = None,
                 files: Iterable[str] = (), coverage: Mapping[str, CoverageRule] | None = None) -> None:
        self._table: dict[str, dict[str, Threshold]] = {s: dict(t) for s, t in (table or {}).items()}
        self.files: tuple[str, ...] = tuple(files)  # every file consulted, in merge order
        # "" -> the run-wide rule, suite -> that suite's override (complete: merged at parse time)
        self._coverage: dict[str, CoverageRule] = {"": CoverageRule(), **(coverage or {})}

    def coverage(self, suite: str | None = None) -> CoverageRule:
        """The coverage rule of ``suite`` (its own table, else the run-wide one)."""
        return self._coverage.get(suite or "", self._coverage[""])

    def coverage_rules(self) -> dict[str, CoverageRule]:
        return dict(self._coverage)

    def __contains__(self, suite: str) -> bool:
        return suite in self._table

    def suites(self) -> list[str]:
        return list(self._table)

    def entries(self, suite: str) -> dict[str, Threshold]:
        return dict(self._table.get(suite, {}))

    def declared_slices(self, suite: str, metric: str) -> tuple[str, ...]:
        """The slices of ``metric`` a threshold may be set for: the metric entry's ``slices`` (patterns
        with ``*`` allowed), then every slice that has an entry of its own."""
        entries = self._table.get(suite, {})
        own = entries.get(metric)
        out = list(own.slices) if own is not None else []
        for key in entries:
            m, sl = split_key(key)
            if m == metric and sl is not None:
                out.append(sl)
        return tuple(dict.fromkeys(out))

    def lookup(self, suite: str, metric: str, slice: str | None = None,
               families: Iterable[str] = ()) -> ResolvedThreshold | None:
        entries = self._table.get(suite, {})
        keys = [metric_key(metric, slice), metric] if slice else [metric]
        fams = list(families)
        for key in keys:
            t = entries.get(key)
            if t is not None:
                value, fam = t.value_for(fams)
                kind, note = t.kind_for(fam)
                return ResolvedThreshold(op=t.op, value=value, family=fam, source=t.source, key=key,
                                         kind=kind, note=note)
        return None

    def describe_files(self) -> str:
        return ", ".join(self.files) if self.files else "no thresholds file"


def _op(x: object, where: str) -> Op:
    if x not in OPS:
        raise ThresholdError(f"{where}: op {x!r} is not one of {', '.join(OPS)}")
    return x


def _slices(x: object, key: str, where: str) -> tuple[str, ...]:
    if split_key(key)[1] is not None:
        raise ThresholdError(f"{where}: slices belongs on the metric's own entry, not on a slice entry")
    if not isinstance(x, list) or not all(isinstance(v, str) and v.strip() for v in x):
        raise ThresholdError(f"{where}: slices must be a list of slice names, got {x!r}")
    bad = [v for v in x if "[" in v or "]" in v]
    if bad:
        raise ThresholdError(f"{where}: slice {bad[0]!r} must not contain brackets")
    return tuple(dict.fromkeys(v.strip() for v in x))


def _family(x: object, where: str) -> dict[str, float]:
    if not isinstance(x, dict):
        raise ThresholdError(f"{where}: family must be a table of family = value, got {x!r}")
    return {str(k).lower(): number(v, f"{where}: family.{k}") for k, v in x.items()}


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ThresholdError(f"{path}: cannot read thresholds file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:  # TOML is UTF-8 by definition
        raise ThresholdError(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            "TOML files must be UTF-8: re-save the thresholds file as UTF-8"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThresholdError(f"{path}: not valid TOML ({exc})") from None


def _coverage_fields(spec: object, where: str, base: CoverageRule) -> CoverageRule:
    if not isinstance(spec, dict):
        raise ThresholdError(f"{where}: must be a table of {', '.join(_COVERAGE_FIELDS)}, got {spec!r}")
    unknown = sorted(set(spec) - set(_COVERAGE_FIELDS))
    if unknown:
        raise ThresholdError(f"{where}: unknown field(s) {', '.join(unknown)} (allowed: "
                             f"{', '.join(_COVERAGE_FIELDS)})" + _did_you_mean(unknown[0], _COVERAGE_FIELDS))
    rule = base
    if "min_valid_fraction" in spec:
        f = number(spec["min_valid_fraction"], f"{where}.min_valid_fraction")
        if not 0.0 <= f <= 1.0:
            raise ThresholdError(f"{where}: min_valid_fraction {f!r} is not in [0, 1]")
        rule = replace(rule, min_valid_fraction=f)
    if "min_n" in spec:
        n = spec["min_n"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ThresholdError(f"{where}: min_n {n!r} is not a non-negative integer")
        rule = replace(rule, min_n=n)
    return rule


def _parse_coverage(spec: object, source: str, suites: Iterable[str],
                    rules: Mapping[str, CoverageRule]) -> dict[str, CoverageRule]:
    """``[coverage]`` merged over ``rules``: run-wide fields, then ``[coverage.SUITE]`` tables (a suite
    table starts from the run-wide rule as merged so far)."""
    where = f"{source}: [{COVERAGE}]"
    if not isinstance(spec, dict):
        raise ThresholdError(f"{where} must be a table, got {spec!r}")
    known = list(suites)
    out = dict(rules)
    top = {k: v for k, v in spec.items() if not isinstance(v, dict)}
    out[""] = replace(_coverage_fields(top, where, out[""]), source=source)
    for suite, body in spec.items():
        if not isinstance(body, dict):
            continue
        if suite not in known:
            raise ThresholdError(f"{where}: unknown suite {suite!r} (suites: {', '.join(known) or 'none'})"
                                 + _did_you_mean(suite, known))
        start = out.get(suite, out[""])
        out[suite] = replace(_coverage_fields(body, f"{source}: [{COVERAGE}.{suite}]", start), source=source)
    return out


def _entries(data: dict[str, Any], source: str) -> Iterable[tuple[str, str, Any]]:
    for suite, body in data.items():
        if suite == COVERAGE:
            continue
        if not isinstance(body, dict):
            raise ThresholdError(f"{source}: [{suite}] must be a table of metric thresholds, got {body!r}")
        for key, spec in body.items():
            where = f"{source}: [{suite}] {key}"
            try:
                _, sl = split_key(key)
            except ValueError as exc:
                raise ThresholdError(f"{where}: {exc}") from None
            if sl is not None and "*" in sl:
                raise ThresholdError(f"{where}: a key names one slice; a pattern belongs in the default "
                                     "file's 'slices' list of the metric")
            yield suite, key, spec


def _check_fields(spec: dict[str, Any], where: str, allowed: tuple[str, ...] = _FIELDS) -> None:
    if "slices" in spec and "slices" not in allowed:
        raise ThresholdError(f"{where}: slices are declared by the default thresholds file only (they say "
                             "which slices a suite checks); set a slice with a 'metric[slice]' key")
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise ThresholdError(
            f"{where}: unknown field(s) {', '.join(unknown)} (allowed: {', '.join(allowed)})"
        )


def _default_op(spec: dict[str, Any], key: str, terms: Mapping[str, MetricTerm], where: str) -> Op:
    """A default entry's op: its metric's declared direction (``>=`` higher, ``<=`` lower is better);
    an ``op`` written in the file is needed only for a metric that declares none, or for a strict
    comparison, and may not contradict the declaration."""
    metric = split_key(key)[0]
    try:
        if "op" not in spec:
            return ">=" if gated_higher(metric, terms, where) else "<="
        op = _op(spec["op"], where)
        recorded_higher(metric, higher_is_better(op), terms, f"{where}: op {op!r}")
    except DirectionError as exc:
        raise ThresholdError(str(exc)) from None
    return op


def parse_defaults(data: dict[str, Any], source: str, terms: Mapping[str, MetricTerm] | None = None
                   ) -> Thresholds:
    """Parse the default (complete) thresholds table; ``terms``: the glossary declaring each metric's
    direction, which an entry without ``op`` gates."""
    table: dict[str, dict[str, Threshold]] = {}
    for suite, key, spec in _entries(data, source):
        where = f"{source}: [{suite}] {key}"
        if not isinstance(spec, dict) or "value" not in spec:
            raise ThresholdError(f"{where}: needs {{ value = ... }}, got {spec!r}")
        _check_fields(spec, where, _DEFAULT_FIELDS)
        family = _family(spec.get("family", {}), where)
        table.setdefault(suite, {})[key] = Threshold(
            op=_default_op(spec, key, terms or {}, where),
            value=number(spec["value"], where),
            family=family,
            source=source,
            slices=_slices(spec["slices"], key, where) if "slices" in spec else (),
            **kind_fields(spec, family, where),
        )
    coverage = Thresholds().coverage_rules()
    if COVERAGE in data:
        coverage = _parse_coverage(data[COVERAGE], source, table, coverage)
    return Thresholds(table, [source], coverage)


def _did_you_mean(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _known_in(base: Thresholds) -> str:
    return f"not in {base.describe_files()}" if base.files else "no default thresholds file was loaded"


def _declared(slice: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(slice, p) if "*" in p else slice == p for p in patterns)


def _slice_entry(base: Thresholds, merged: Mapping[str, Threshold], suite: str, key: str,
                 source: str) -> Threshold:
    """The entry a user key ``metric[slice]`` without a default entry of its own starts from: a copy of
    the metric's entry as merged so far (the user's own metric-level changes included), when the
    defaults declare the slice; otherwise a clear error."""
    metric, sl = split_key(key)
    entries = base.entries(suite)
    metric_entry = merged.get(metric) if metric in entries else None
    if sl is None or metric_entry is None:
        metrics = sorted({split_key(k)[0] for k in entries})
        raise ThresholdError(
            f"{source}: unknown metric key {key!r} in suite [{suite}] ({_known_in(base)})"
            + _did_you_mean(metric if sl is not None else key, metrics if sl is not None else entries)
        )
    declared = base.declared_slices(suite, metric)
    if not _declared(sl, declared):
        if not declared:
            raise ThresholdError(
                f"{source}: [{suite}] {key}: {metric} is checked only overall (no slice of it is declared in "
                f"{base.describe_files()}), so a threshold for slice {sl!r} would never be used"
            )
        keys = [metric_key(metric, d) for d in declared]
        raise ThresholdError(
            f"{source}: [{suite}] {key}: unknown slice {sl!r} of {metric}; the slices a threshold can be "
            f"set for (declared in {base.describe_files()}) are {', '.join(repr(k) for k in keys)}"
            + _did_you_mean(key, keys)
        )
    return replace(metric_entry, slices=())


def merge_user(base: Thresholds, data: dict[str, Any], source: str) -> Thresholds:
    """Merge a user table over ``base``; keys unknown to ``base`` (and undeclared slices) are errors."""
    table = {s: base.entries(s) for s in base.suites()}
    # metric-level keys first, so a new slice entry starts from the user's own metric-level changes
    for suite, key, spec in sorted(_entries(data, source), key=lambda e: split_key(e[1])[1] is not None):
        where = f"{source}: [{suite}] {key}"
        if suite not in table:
            raise ThresholdError(
                f"{source}: unknown suite {suite!r} ({_known_in(base)})"
                + _did_you_mean(suite, table)
            )
        old = table[suite].get(key)
        if old is None:
            old = _slice_entry(base, table[suite], suite, key, source)
        if not isinstance(spec, dict):
            spec = {"value": spec}
        _check_fields(spec, where)
        new = old
        if "op" in spec:
            new = replace(new, op=_op(spec["op"], where))
            if higher_is_better(new.op) != higher_is_better(old.op):
                raise ThresholdError(
                    f"{where}: op {new.op!r} contradicts the metric's direction: {key} is "
                    f"{'higher' if higher_is_better(old.op) else 'lower'}-is-better ({old.op!r} in "
                    f"{old.source or base.describe_files()}); a threshold may change its value, not "
                    "which way is better"
                )
        if "value" in spec:
            new = replace(new, value=number(spec["value"], where))
        if "family" in spec:
            new = replace(new, family={**old.family, **_family(spec["family"], where)})
        # the user's value is not the default's anchor any more: its kind says so
        table[suite][key] = replace(new, source=source, kind=USER_KIND, family_kind={})
    coverage = base.coverage_rules()
    if COVERAGE in data:
        coverage = _parse_coverage(data[COVERAGE], source, table, coverage)
    return Thresholds(table, [*base.files, source], coverage)


def load_thresholds(default: Path | None, user: Path | None = None, *, default_required: bool = False,
                    terms: Mapping[str, MetricTerm] | None = None) -> Thresholds:
    """Load the defaults (an absent file is allowed unless ``default_required``) and merge ``user``;
    ``terms`` declare the directions of the default entries without an ``op``."""
    if default is not None and default.is_file():
        merged = parse_defaults(_read_toml(default), str(default), terms)
    elif default is not None and default_required:
        raise ThresholdError(f"{default}: default thresholds file not found")
    else:
        merged = Thresholds()
    if user is not None:
        if not user.is_file():
            raise ThresholdError(f"{user}: thresholds file not found")
        merged = merge_user(merged, _read_toml(user), str(user))
    return merged
