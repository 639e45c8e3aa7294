"""Compare two scorecards: per-metric deltas, direction-aware regressions, and item-level flips.

Used by the pytest plugin's baseline gate (``--faith-baseline``) and by ``faithtests compare A B``.

Rules (documented in the README, "Baseline gate"):

* Results are matched by :attr:`MetricResult.key` (test key ``file.py::name[params]``, model, variant,
  metric, slice); older node-id keys are normalised to test keys (``model.test_key``).
* A *regression* is a move in the bad direction (down for ``higher_is_better``, up otherwise) by
  strictly more than the tolerance; an *improvement* is the mirror image; anything within the tolerance
  is *unchanged* (up to 1e-9 relative float round-off). A metric that became undefined (value
  ``None``) is a regression; one that became defined is an improvement.
* The tolerance is absolute (``0.01``) or relative to ``|baseline value|`` (``5%``).
* Keys only in the current run are *new*, keys only in the baseline are *missing*. The pytest gate
  fails on missing keys unless ``--faith-allow-missing`` (a gate that compares nothing must not pass),
  except an unchecked result of a test that ran and recorded results (``gated`` False): a slice that
  exists only when its data has the case (a model's contradictory answers, on another seed none) is
  listed, never failed (issue 49). A checked result, or any result of a test that did not run, fails.
* ``checked_only``: only metrics with a threshold check (in either run) are gated (the default of the
  pytest gate and of ``faithtests compare``); the others are still compared and a move the gate's rule
  would call a regression or an improvement is ``moved`` (listed, never gated). Missing and new keys
  are counted over every metric either way: a result the run did not produce is missing whether it
  carried a check or not.
* Item flips: for tests and item sets present in both runs, items present in both whose outcome
  changed; a boolean outcome flips when it differs, a numeric one when it moved by more than the
  tolerance.
* Noise (:mod:`faithtests.scorecard.paired`): a metric recorded with ``per_item`` values in both runs
  whose shared items are at least half of each run's gets the paired delta on the items both share,
  with a cluster bootstrap CI (and, for 0/1 outcomes, the good->bad / bad->good counts and the exact
  McNemar p); any other metric with a CI in both runs gets an unpaired CI (normal approximation from the
  two CIs). Gate ``point`` classifies by the point estimates (above); gate ``ci`` calls a regression
  only when the whole delta CI lies beyond the tolerance in the bad direction (improvement: mirror
  image), ``within noise`` when the point estimate moved beyond the tolerance but the CI does not
  exclude it, ``unchanged`` otherwise. A metric without a CI in either run is judged by its point
  estimates under both gates (``basis`` says ``point``).
* False alarms over the family (:mod:`faithtests.scorecard.family`, issue 49): every gated metric judged
  on a CI gets the p-value of "no move beyond the tolerance in the bad direction", and the family's
  p-values are adjusted (``control``: Holm by default, Benjamini–Hochberg, or none); a CI regression
  whose adjusted p is not below 0.05 is ``within noise``. With one gated metric the rule is gate ``ci``'s
  own. Point-basis decisions (no CI) have no noise model and are not adjusted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from faithtests.scorecard.family import ALPHA, Control, adjust, regression_p
from faithtests.scorecard.model import GATE_RESAMPLES, GateMode, MetricResult, test_key
from faithtests.scorecard.scorecard import Scorecard

if TYPE_CHECKING:
    from faithtests.scorecard.paired import PairedDelta

_EPS = 1e-9
MAX_MOVED = 20  # moved items kept per key (good->bad first)
Status = Literal["regression", "improvement", "within noise", "unchanged", "new", "missing", "moved"]
Basis = Literal["paired", "unpaired", "point"]


@dataclass(frozen=True)
class Tolerance:
    """How far a metric may move in the bad direction before it counts as a regression."""

    value: float = 0.0
    relative: bool = False  # True: ``value`` is a fraction of |baseline value|

    @classmethod
    def parse(cls, text: str | float | Tolerance) -> Tolerance:
        """``"0.01"`` -> absolute 0.01; ``"5%"`` -> relative 0.05. Negative or non-finite is an error."""
        if isinstance(text, Tolerance):
            return text
        raw = str(text).strip()
        relative = raw.endswith("%")
        number = raw[:-1].strip() if relative else raw
        try:
            value = float(number)
        except ValueError:
            raise ValueError(
                f"tolerance {raw!r} is not a number or a percentage (examples: 0.01, 5%)"
            ) from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"tolerance {raw!r} must be a finite number >= 0")
        return cls(value / 100.0 if relative else value, relative)

    def allowed(self, baseline: float) -> float:
        """The absolute slack around ``baseline``."""
        return self.value * abs(baseline) if self.relative else self.value

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


@dataclass(frozen=True)
class ItemFlip:
    """An item whose outcome changed between the two runs."""

    test: str
    name: str  # the item set (see ``faithtests.scorecard.recording.items_key``)
    item: str
    baseline: float | bool
    current: float | bool

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "name": self.name,
            "item": self.item,
            "baseline": self.baseline,
            "current": self.current,
        }


@dataclass(frozen=True)
class MetricDelta:
    """One matched (or unmatched) metric between a baseline and a current run."""

    suite: str
    test: str
    metric: str
    model: str
    variant: str
    slice: str | None
    baseline: float | None
    current: float | None
    higher_is_better: bool
    status: Status
    delta_ci: tuple[float, float] | None = None  # CI of the paired delta (basis paired) or of delta
    basis: Basis = "point"
    paired: PairedDelta | None = None
    ci_status: Status | None = None  # what gate ci says (== status under gate ci)
    moved: list[ItemFlip] = field(default_factory=list)  # items behind a paired delta, good->bad first
    n_moved: int = 0  # items that changed (``moved`` keeps the first MAX_MOVED)
    gated: bool = True  # False: a metric without a threshold check under ``checked_only`` (listed only)
    p_value: float | None = None  # of "no move beyond the tolerance in the bad direction" (CI bases)
    p_adjusted: float | None = None  # over the family of gated metrics (``Comparison.control``)

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (test_key(self.test), self.model, self.variant, self.metric, self.slice or "")

    @property
    def delta(self) -> float | None:
        """current - baseline, when both are defined."""
        if self.baseline is None or self.current is None:
            return None
        return self.current - self.baseline

    @property
    def label(self) -> str:
        """``suite/metric[slice]``, the name used in messages."""
        sl = f"[{self.slice}]" if self.slice else ""
        return f"{self.suite}/{self.metric}{sl}"

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "test": self.test,
            "metric": self.metric,
            "model": self.model,
            "variant": self.variant,
            "slice": self.slice,
            "baseline": self.baseline,
            "current": self.current,
            "delta": self.delta,
            "higher_is_better": self.higher_is_better,
            "status": self.status,
            "ci_status": self.ci_status,
            "basis": self.basis,
            "delta_ci": list(self.delta_ci) if self.delta_ci is not None else None,
            "paired": None if self.paired is None else {
                "n": self.paired.n, "delta": self.paired.delta, "good_to_bad": self.paired.good_to_bad,
                "bad_to_good": self.paired.bad_to_good, "mcnemar_p": self.paired.mcnemar_p,
            },
            "moved": [f.to_json() for f in self.moved],
            "n_moved": self.n_moved,
            "gated": self.gated,
            "p_value": self.p_value,
            "p_adjusted": self.p_adjusted,
        }


@dataclass
class Comparison:
    tolerance: Tolerance
    gate: GateMode = "point"
    deltas: list[MetricDelta] = field(default_factory=list)  # every key of either run, sorted by key
    flips: list[ItemFlip] = field(default_factory=list)
    control: Control = "holm"  # false-alarm control over the gated metrics' p-values (module doc)

    @property
    def family(self) -> list[MetricDelta]:
        """The gated metrics judged on a CI: the family whose p-values are adjusted together."""
        return [d for d in self.deltas if d.p_adjusted is not None]

    def _with(self, status: Status) -> list[MetricDelta]:
        return [d for d in self.deltas if d.status == status]

    @property
    def regressions(self) -> list[MetricDelta]:
        return self._with("regression")

    @property
    def improvements(self) -> list[MetricDelta]:
        return self._with("improvement")

    @property
    def moved(self) -> list[MetricDelta]:
        """Metrics without a threshold check that moved (not gated under ``checked_only``)."""
        return self._with("moved")

    @property
    def new(self) -> list[MetricDelta]:
        return self._with("new")

    @property
    def missing(self) -> list[MetricDelta]:
        return self._with("missing")

    @property
    def missing_gated(self) -> list[MetricDelta]:
        """The missing results that fail the gate (module doc): not an unchecked slice of a test that ran."""
        return [d for d in self.missing if d.gated]

    def by_key(self) -> dict[tuple[str, str, str, str, str], MetricDelta]:
        return {d.key: d for d in self.deltas}

    def to_json(self) -> dict[str, Any]:
        return {
            "tolerance": str(self.tolerance),
            "gate": self.gate,
            "control": self.control,
            "family_size": len(self.family),
            "deltas": [d.to_json() for d in self.deltas],
            "flips": [f.to_json() for f in self.flips],
        }


def classify(
    baseline: float | None, current: float | None, higher_is_better: bool, tolerance: Tolerance
) -> Status:
    """Direction-aware status of one metric that exists in both runs."""
    if baseline is None or current is None:
        if baseline is None and current is None:
            return "unchanged"
        return "regression" if current is None else "improvement"
    # float round-off must not turn "exactly at the tolerance" (0.75 vs 0.80 +- 0.05) into a regression
    slack = _slack(tolerance, baseline)
    gain = (current - baseline) if higher_is_better else (baseline - current)
    if gain < -slack:
        return "regression"
    if gain > slack:
        return "improvement"
    return "unchanged"


def _slack(tolerance: Tolerance, baseline: float) -> float:
    """The tolerance around ``baseline``, plus float round-off (see :func:`classify`)."""
    return tolerance.allowed(baseline) + _EPS * max(1.0, abs(baseline))


def ci_classify(
    baseline: float, delta: float, ci: tuple[float, float], higher_is_better: bool, tolerance: Tolerance
) -> Status:
    """Gate ``ci``: regression when the whole delta CI lies beyond the tolerance in the bad direction,
    improvement in the good one; within noise when only the point ``delta`` is beyond it; else unchanged."""
    slack = _slack(tolerance, baseline)
    lo, hi = ci if higher_is_better else (-ci[1], -ci[0])  # the gain's CI
    if hi < -slack:
        return "regression"
    if lo > slack:
        return "improvement"
    return "within noise" if abs(delta) > slack else "unchanged"


def _moved(b: MetricResult, c: MetricResult, tol: Tolerance) -> tuple[list[ItemFlip], int]:
    """Items whose value moved beyond the tolerance (float noise on a continuous item is not a move),
    good->bad (largest bad move) first (at most :data:`MAX_MOVED`), and how many moved."""
    assert b.per_item is not None and c.per_item is not None
    before, now = b.per_item.values, c.per_item.values
    sign = 1.0 if c.higher_is_better else -1.0
    moved = [(sign * (now[i] - before[i]), i) for i in before.keys() & now.keys()
             if _flipped(before[i], now[i], tol)]
    moved.sort()
    return [ItemFlip(c.test, c.metric, i, before[i], now[i]) for _, i in moved[:MAX_MOVED]], len(moved)


def _mostly_shared(b: MetricResult, c: MetricResult, n_shared: int) -> bool:
    """Pair only when the shared items are at least half of each run's (a delta on a small overlap, e.g.
    two data seeds, would describe other items than the metric's)."""
    assert b.per_item is not None and c.per_item is not None
    return 2 * n_shared >= max(len(b.per_item.values), len(c.per_item.values))


def _judged(b: MetricResult, c: MetricResult, tol: Tolerance, gate: GateMode, resamples: int) -> MetricDelta:
    """The delta of a key in both runs, with its noise evidence and the gate's status."""
    point = classify(b.value, c.value, c.higher_is_better, tol)
    out = _delta(c, b.value, c.value, point)
    if b.value is None or c.value is None:
        return out
    # lazy: numpy, only when a metric is in both runs (``faithtests render`` of one run needs none)
    from faithtests.scorecard.paired import paired_delta, unpaired_ci

    paired = None
    if b.per_item is not None and c.per_item is not None:
        clusters = {**(b.per_item.clusters or {}), **(c.per_item.clusters or {})}
        paired = paired_delta(b.per_item.values, c.per_item.values, clusters or None,
                              higher_is_better=c.higher_is_better, b=resamples)
    ci: tuple[float, float] | None = None
    basis: Basis = "point"
    delta = c.value - b.value
    if paired is not None and paired.ci is not None and _mostly_shared(b, c, paired.n):
        ci, basis, delta = paired.ci, "paired", paired.delta
    elif b.ci is not None and c.ci is not None:
        ci, basis = unpaired_ci(b.value, b.ci, c.value, c.ci), "unpaired"
    ci_status = point if ci is None else ci_classify(b.value, delta, ci, c.higher_is_better, tol)
    if basis == "paired" and ci_status in ("regression", "improvement") and point != ci_status:
        # on a partial overlap the shared items can move against the whole metric: no verdict either way
        ci_status = "within noise"
    if basis != "paired":  # paired counts and moved items only where the pairing is what was judged
        paired = None
    moved, n_moved = _moved(b, c, tol) if paired is not None else ([], 0)
    return replace(out, status=ci_status if gate == "ci" else point, delta_ci=ci, basis=basis,
                   paired=paired, ci_status=ci_status, moved=moved, n_moved=n_moved,
                   p_value=_p_value(b.value, delta, ci, c.higher_is_better, tol))


def _p_value(baseline: float, delta: float, ci: tuple[float, float] | None, higher_is_better: bool,
             tol: Tolerance) -> float | None:
    """The p-value of "no move beyond the tolerance in the bad direction" (None without a CI)."""
    if ci is None:
        return None
    gain, gain_hi = (delta, ci[1]) if higher_is_better else (-delta, -ci[0])  # good direction positive
    return regression_p(gain, gain_hi, _slack(tol, baseline))


def _controlled(deltas: list[MetricDelta], control: Control, gate: GateMode) -> list[MetricDelta]:
    """The family's p-values adjusted together (module doc): a CI regression whose adjusted p is not
    below :data:`~faithtests.scorecard.family.ALPHA` is within noise."""
    family = [i for i, d in enumerate(deltas) if d.gated and d.p_value is not None]
    adjusted = adjust([deltas[i].p_value or 0.0 for i in family], control)
    out = list(deltas)
    for i, p in zip(family, adjusted, strict=True):
        d = replace(out[i], p_adjusted=p)
        if d.ci_status == "regression" and p >= ALPHA:
            d = replace(d, ci_status="within noise", status="within noise" if gate == "ci" else d.status)
        out[i] = d
    return out


def _delta(r: MetricResult, baseline: float | None, current: float | None, status: Status) -> MetricDelta:
    return MetricDelta(
        suite=r.suite,
        test=r.test,
        metric=r.metric,
        model=r.model,
        variant=r.variant,
        slice=r.slice,
        baseline=baseline,
        current=current,
        higher_is_better=r.higher_is_better,
        status=status,
    )


def _flipped(a: float | bool, b: float | bool, tolerance: Tolerance) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) != bool(b)
    return abs(float(b) - float(a)) > tolerance.allowed(float(a)) + _EPS * max(1.0, abs(float(a)))


def compare(
    current: Scorecard, baseline: Scorecard, tolerance: Tolerance | str | float = 0.0, *,
    checked_only: bool = False, gate: GateMode = "point", resamples: int = GATE_RESAMPLES,
    control: Control = "holm",
) -> Comparison:
    """Compare ``current`` against ``baseline`` (see the module docstring for the rules); ``resamples``
    is the paired bootstrap's B (seed 0, so one pair of scorecards always gets one verdict); ``control``
    the false-alarm control over the gated metrics (:mod:`faithtests.scorecard.family`)."""
    if gate not in ("point", "ci"):
        raise ValueError(f"gate {gate!r} is not 'point' or 'ci'")
    tol = Tolerance.parse(tolerance)
    cur = {r.key: r for r in current.results}
    base = {r.key: r for r in baseline.results}
    checked = {k for k, r in (*cur.items(), *base.items()) if r.passed is not None}
    ran = {test_key(t.test) for t in current.tests if t.results}
    deltas: list[MetricDelta] = []
    for key in sorted(cur.keys() | base.keys()):
        c, b = cur.get(key), base.get(key)
        if c is not None and b is not None:
            d = _judged(b, c, tol, gate, resamples)
            if checked_only and key not in checked:  # no threshold check: listed as moved, never gated
                d = replace(d, gated=False,
                            status="moved" if d.status in ("regression", "improvement") else d.status)
            deltas.append(d)
        elif c is not None:
            deltas.append(_delta(c, None, c.value, "new"))
        elif b is not None:  # gated unless an unchecked result of a test that ran (module doc)
            gated = key in checked or test_key(b.test) not in ran
            deltas.append(replace(_delta(b, b.value, None, "missing"), gated=gated))

    return Comparison(tolerance=tol, gate=gate, deltas=_controlled(deltas, control, gate),
                      flips=_flips(current, baseline, tol), control=control)


def _flips(current: Scorecard, baseline: Scorecard, tol: Tolerance) -> list[ItemFlip]:
    """Items of the tests and item sets both runs hold whose outcome changed (module doc)."""
    flips: list[ItemFlip] = []
    base_tests = {test_key(t.test): t for t in baseline.tests}
    for t in sorted(current.tests, key=lambda t: t.test):
        bt = base_tests.get(test_key(t.test))
        if bt is None:
            continue
        for name in sorted(t.items.keys() & bt.items.keys()):
            now, before = t.items[name], bt.items[name]
            for item in sorted(now.keys() & before.keys()):
                if _flipped(before[item], now[item], tol):
                    flips.append(ItemFlip(t.test, name, item, before[item], now[item]))
    return flips


def test_label(test: str) -> str:
    """The test part of a row: ``name[params]`` of its key (the file name left out)."""
    return test_key(test).partition("::")[2] or test
