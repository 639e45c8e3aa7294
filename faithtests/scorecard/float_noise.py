"""The float-noise rule: is the change between two runs of the same models and data only float noise?

A speed-up may change the order of float32 arithmetic: an image encoded alone instead of in a batch, a
shared prefix, another kernel, a GPU. Results then move in their last bits, and a value near a decision
boundary may flip one item. Run B agrees with run A within noise when all of these hold:

1. **Verdicts.** Every check has the same verdict (pass / fail / insufficient; ``MetricResult.verdict``).
2. **Results.** Every result of A is in B and none is new, matched by ``MetricResult.key``.
3. **Values.** Each value is the same, or undefined in both, or within :data:`REL` relative:
   ``|a - b| <= REL * max(|a|, |b|)``.
4. **Ratios of counts.** A result recorded with ``n`` whose values are both ratios k/n of that ``n``
   (within 1e-9) is a ratio of small counts. It may move by one item, plus rule 3's slack:
   ``|a - b| <= 1 / n + REL * max(|a|, |b|)``.

The rule is stated once, here. ``faithtests compare A B --noise-rule`` applies it, and so do the
benchmarks that claim "float noise only" (``benchmarks/bench_suite_runs.py``). Its test is
``tests/scorecard/test_float_noise.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from faithtests.scorecard.model import MetricResult
from faithtests.scorecard.scorecard import Scorecard

#: relative tolerance of a value (float32 has ~7 significant digits; reordered sums lose a few)
REL = 1e-4
#: how close k/n must be to a whole k for a value to count as a ratio of n items
WHOLE = 1e-9

Key = tuple[str, str, str, str, str]


@dataclass(frozen=True)
class Moved:
    """A result whose value moved beyond what the rule allows."""

    key: Key
    before: float | None
    after: float | None
    allowed: float  # the largest |a - b| the rule allows here (0 where one of them is undefined)


@dataclass
class NoiseReport:
    """What :func:`within_noise` found; ``ok`` when B agrees with A within noise (module doc)."""

    compared: int = 0
    verdicts: list[tuple[Key, str | None, str | None]] = field(default_factory=list)
    moved: list[Moved] = field(default_factory=list)
    missing: list[Key] = field(default_factory=list)
    new: list[Key] = field(default_factory=list)
    identical: int = 0  # values equal bit for bit

    @property
    def ok(self) -> bool:
        return not (self.verdicts or self.moved or self.missing or self.new)

    def lines(self, most: int) -> list[str]:
        """Every changed verdict, moved value, missing and new result (at most ``most`` of each), then
        :meth:`summary`."""
        out = [f"verdict  {' | '.join(k)}: {a} -> {b}" for k, a, b in self.verdicts[:most]]
        out += [f"moved    {' | '.join(m.key)}: {m.before} -> {m.after} (allowed {m.allowed:.3g})"
                for m in self.moved[:most]]
        for label, keys in (("missing", self.missing), ("new", self.new)):
            out += [f"{label:<8} {' | '.join(k)}" for k in keys[:most]]
        return [*out, self.summary()]

    def summary(self) -> str:
        return (f"noise rule: {self.compared} result(s) compared, {self.identical} identical; "
                f"{len(self.verdicts)} verdict(s) changed, {len(self.moved)} value(s) beyond noise "
                f"({REL:g} relative; one item for ratios of counts), {len(self.missing)} missing, "
                f"{len(self.new)} new: {'WITHIN NOISE' if self.ok else 'CHANGED'}")


def allowed(before: MetricResult, after: MetricResult) -> float:
    """The largest move the rule allows between two defined values (rules 3 and 4)."""
    a, b = before.value, after.value
    assert a is not None and b is not None
    slack = REL * max(abs(a), abs(b))
    n = after.n if after.n == before.n else None
    if n and all(abs(v * n - round(v * n)) <= WHOLE * n for v in (a, b)):
        slack += 1.0 / n
    return slack


def within_noise(a: Scorecard, b: Scorecard) -> NoiseReport:
    """Apply the rule (module doc) from run ``a`` to run ``b``."""
    before = {r.key: r for r in a.results}
    after = {r.key: r for r in b.results}
    report = NoiseReport(missing=sorted(before.keys() - after.keys()),
                         new=sorted(after.keys() - before.keys()))
    for key in sorted(before.keys() & after.keys()):
        x, y = before[key], after[key]
        report.compared += 1
        if x.verdict != y.verdict:
            report.verdicts.append((key, x.verdict, y.verdict))
        if x.value == y.value or (_undefined(x.value) and _undefined(y.value)):
            report.identical += 1
            continue
        if _undefined(x.value) or _undefined(y.value):
            report.moved.append(Moved(key, x.value, y.value, 0.0))
            continue
        assert x.value is not None and y.value is not None
        slack = allowed(x, y)
        if abs(x.value - y.value) > slack:
            report.moved.append(Moved(key, x.value, y.value, slack))
    return report


def _undefined(v: float | None) -> bool:
    return v is None or math.isnan(v)
