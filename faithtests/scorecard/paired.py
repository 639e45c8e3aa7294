"""Statistics of the regression gate: is a metric's move between two runs beyond noise?

Pure functions (numpy only), used by :mod:`faithtests.scorecard.baseline`:

* :func:`paired_delta`: for a metric that is a mean of per-item values, the delta on the items both runs
  share, ``mean_i(cur_i - base_i)``, with a percentile bootstrap CI that resamples items (or whole
  clusters, e.g. images, when the suite clusters) with replacement, ``B`` times, seeded.
* :func:`mcnemar_exact`: the exact McNemar test for binary outcomes (two-sided binomial on the discordant
  pairs).
* :func:`unpaired_ci`: for a metric that is not an item mean, a normal approximation from the two runs'
  recorded 95% CIs.

The delta's CI is :func:`faithtests.stats.cluster_bootstrap_ci`, the bootstrap every metric uses (this
module had its own copy until issue 32). What that changed for the gate: no verdict, no printed digit.
Both draw ``default_rng(seed).integers(0, G, (B, G))`` over the clusters sorted by name and take the
ratio estimator's percentile interval; the small-sample rule is now stats' ``MIN_BOOTSTRAP_UNITS`` (2
clusters, the same floor as the copy's ``G < 2``), an undefined CI still being ``None`` here. Resample
totals are now a count-matrix product instead of a gather-and-sum, so an endpoint over non-integer
deltas may move in its last bits (on the 155 paired CIs of six real scorecard pairs: 141
bit-identical, the largest move 3.5e-18); 0/1 outcomes give integer totals, unchanged. A non-finite
delta now raises (stats' rule) instead of giving a NaN CI; :meth:`ItemValues.make` already rejects one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from faithtests.scorecard.model import GATE_RESAMPLES
from faithtests.stats import UndefinedCI, cluster_bootstrap_ci

Z95 = 1.959963984540054  # the 97.5% standard-normal quantile


@dataclass(frozen=True)
class PairedDelta:
    """A paired comparison on ``n`` shared items; ``ci`` is None when undefined (fewer than 2 clusters)."""

    n: int
    delta: float
    ci: tuple[float, float] | None
    binary: bool  # every shared value is 0 or 1 in both runs
    good_to_bad: int  # binary only (0 otherwise): items that went from the good to the bad outcome
    bad_to_good: int
    mcnemar_p: float | None  # binary only


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for ``b`` and ``c`` discordant pairs (good->bad, bad->good).

    Under H0 each discordant pair goes either way with probability 1/2, so with ``n = b + c``:
    ``p = min(1, 2 * sum_{k=0}^{min(b, c)} C(n, k) / 2**n)``; ``p = 1`` when ``n = 0``."""
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact: counts must be >= 0, got {b}, {c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2.0 * tail / 2.0**n)


def paired_delta(
    base: Mapping[str, float], cur: Mapping[str, float], clusters: Mapping[str, str] | None = None, *,
    higher_is_better: bool = True, b: int = GATE_RESAMPLES, seed: int = 0,
) -> PairedDelta | None:
    """The paired delta ``mean_i(cur_i - base_i)`` over the items in both ``base`` and ``cur`` (None when
    they share none), its cluster bootstrap CI (:func:`faithtests.stats.cluster_bootstrap_ci` with ``b``
    resamples; None when undefined: fewer than ``stats.MIN_BOOTSTRAP_UNITS`` clusters; clusters from
    ``clusters``, items without one are their own cluster), and, for 0/1 outcomes, the discordant
    counts and :func:`mcnemar_exact`. Good is 1 when ``higher_is_better``, else 0."""
    shared = sorted(base.keys() & cur.keys())
    if not shared:
        return None
    x = np.array([base[i] for i in shared], dtype=np.float64)
    y = np.array([cur[i] for i in shared], dtype=np.float64)
    d = y - x
    names = [clusters.get(i, f"item:{i}") if clusters else i for i in shared]
    interval = cluster_bootstrap_ci(d, names, n_resamples=b, seed=seed)
    ci = None if isinstance(interval, UndefinedCI) else interval
    binary = bool(np.isin(x, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all())
    down, up = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
    g2b, b2g = (down, up) if higher_is_better else (up, down)
    if not binary:
        g2b = b2g = 0
    return PairedDelta(
        n=len(shared), delta=float(d.mean()), ci=ci, binary=binary, good_to_bad=g2b, bad_to_good=b2g,
        mcnemar_p=mcnemar_exact(g2b, b2g) if binary else None,
    )


def unpaired_ci(
    base: float, base_ci: tuple[float, float], cur: float, cur_ci: tuple[float, float]
) -> tuple[float, float]:
    """95% CI of ``cur - base`` for two independent estimates, by the normal approximation from their
    recorded 95% CIs: ``se = (hi - lo) / (2 * 1.96)`` per run, ``delta +- 1.96 * sqrt(se_b^2 + se_c^2)``
    (equivalently ``delta +- sqrt(h_b^2 + h_c^2)`` with ``h`` the CI half-widths)."""
    half = math.hypot((base_ci[1] - base_ci[0]) / 2.0, (cur_ci[1] - cur_ci[0]) / 2.0)
    delta = cur - base
    return delta - half, delta + half
