"""False-alarm control over the family of gated metrics (issue 49, item 1). Pure functions.

The regression gate asks one question per gated metric: did it move in the bad direction by more than
the tolerance, beyond noise? Asked at 5% each over ~50 metrics, an unchanged checkpoint run on another
seed fails about one gate in two runs by chance alone. So the per-metric answers are combined:

* :func:`regression_p`: the one-sided question as a p-value, ``H0: gain >= -slack`` (no move beyond the
  tolerance in the bad direction), by the normal approximation whose standard error is read from the
  upper half of the 95% delta CI the comparison shows: ``se = (hi - gain) / z95`` and
  ``p = 2 * Phi((gain + slack) / se)`` (two-sided convention: the CI is two-sided, so ``p < 0.05``
  exactly when the CI's good end lies below ``-slack``, the per-metric rule of gate ``ci``). With one
  metric in the family the gate decides as before.
* :func:`holm` (the default, ``--faith-regression-control holm``): Holm's step-down adjusted p-values
  (Holm 1979): sorted ascending, ``p~_(k) = max_{j <= k} min(1, (m - j + 1) p_(j))``. A regression is
  called when its adjusted p is below 0.05: the probability that an unchanged checkpoint fails the gate
  on any metric is at most 5% (family-wise error, any dependence between the metrics).
* :func:`benjamini_hochberg` (``bh``): step-up adjusted p-values (Benjamini & Hochberg 1995),
  ``p~_(k) = min_{j >= k} min(1, m p_(j) / j)``: controls the expected share of false regressions among
  those called (FDR, for independent or positively dependent metrics); more regressions are called when
  several are real, and a lone false alarm is as likely as under Holm.
* ``none``: each metric at 5% on its own (the rule before issue 49).

Holm is the default because a release gate's cost is a blocked release: the question a release engineer
asks is "can an unchanged checkpoint fail?", which is the family-wise error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

Control = Literal["holm", "bh", "none"]
CONTROLS: tuple[Control, ...] = ("holm", "bh", "none")
ALPHA = 0.05
Z95 = 1.959963984540054  # the 97.5% standard-normal quantile: the comparison's CIs are 95% two-sided


def run_control(fingerprint: Mapping[str, object], default: Control = "none") -> Control:
    """The control a run was gated with (its fingerprint's ``regression_control``), so a later compare or
    page repeats the pytest gate's verdict; ``default`` for a run from before the field (issue 49: those
    were gated metric by metric, ``none``)."""
    recorded = fingerprint.get("regression_control")
    return recorded if recorded in CONTROLS else default


def regression_p(gain: float, gain_hi: float, slack: float) -> float:
    """p-value of ``H0: gain >= -slack`` from the point ``gain`` (good direction positive) and the good
    end ``gain_hi`` of its 95% CI (module doc). A CI with no width above the point (every resample
    equal) is no noise: p is 0 when the gain is beyond the slack, else 1."""
    se = (gain_hi - gain) / Z95
    if not se > 0.0:
        return 0.0 if gain < -slack else 1.0
    return min(1.0, 2.0 * _phi((gain + slack) / se))


def _phi(z: float) -> float:
    """The standard-normal CDF."""
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def holm(p: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values, in the order given (module doc)."""
    m = len(p)
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda i: p[i])):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def benjamini_hochberg(p: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values, in the order given (module doc)."""
    m = len(p)
    out = [1.0] * m
    running = 1.0
    order = sorted(range(m), key=lambda i: p[i])
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, min(1.0, m * p[i] / (rank + 1)))
        out[i] = running
    return out


def adjust(p: Sequence[float], control: Control) -> list[float]:
    """The family's adjusted p-values under ``control`` (``none``: unchanged)."""
    if control == "holm":
        return holm(p)
    if control == "bh":
        return benjamini_hochberg(p)
    if control == "none":
        return list(p)
    raise ValueError(f"regression control {control!r} is not one of {', '.join(CONTROLS)}")
