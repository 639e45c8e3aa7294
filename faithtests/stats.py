"""Resampling statistics shared by every suite: percentile bootstrap CIs, paired and clustered.

Pure numpy. Seeds are explicit; every draw goes through a ``numpy.random.Generator``.

Too few resampling units give no interval: with k units a percentile bootstrap has only C(2k-1, k)
distinct resamples (1 at k=1, 3 at k=2), so one image yields a zero-width "95% CI" that claims certainty.
Below :data:`MIN_BOOTSTRAP_UNITS` units every function here returns an :class:`UndefinedCI` (NaN, NaN)
that says why; the recorder stores it as an undefined CI (``ci=None`` with ``ci_note``), shown as
``undefined (n clusters 1 < 2)``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

#: Fewest resampling units (rows, or clusters) for a bootstrap CI. 2 is the floor where resamples differ
#: at all; the coverage rule's ``min_n`` (thresholds ``[coverage]``) guards verdicts on small n.
MIN_BOOTSTRAP_UNITS = 2

#: Resamples when a caller names none. Generic: a protocol's own count (its paper's) is declared in its
#: manifest and passed explicitly.
DEFAULT_RESAMPLES = 1000


class UndefinedCI(tuple[float, float]):
    """The CI of a bootstrap that could not give an interval: (nan, nan) plus ``reason``, which the
    recorder keeps as the result's ``ci_note`` (a plain tuple of NaNs is recorded as undefined too)."""

    reason: str

    def __new__(cls, reason: str) -> UndefinedCI:
        self = super().__new__(cls, (float("nan"), float("nan")))
        self.reason = reason
        return self


#: Memoised resample plans hold at most this many cells (resamples × units) in all, least recently used
#: dropped first: 12M float64 counts are 96 MB; the default suites' 41 plans are 8.3M cells.
MEMO_CELLS = 12_000_000
_PLANS: OrderedDict[tuple[int, int, int], FloatArray] = OrderedDict()
_PLANS_LOCK = threading.Lock()


def resample_counts(k: int, n_resamples: int, seed: int) -> FloatArray:
    """[n_resamples, k]: how often each of ``k`` units is drawn in each percentile-bootstrap resample.

    The draws are ``default_rng(seed).integers(0, k, (n_resamples, k))``, so ``counts @ per_unit`` is
    each resample's total of ``per_unit[draws[r]]`` (one matrix product, not a gather per column).
    Memoised and read-only: a run bootstraps dozens of metrics over the same units with the same seed,
    and drawing and gathering were most of a warm run's metric time. A plan larger than
    :data:`MEMO_CELLS`, or a seed that is not an integer, is drawn afresh (writable) and not kept.
    """
    if k * n_resamples > MEMO_CELLS or not isinstance(seed, int | np.integer):
        return _draw_counts(k, n_resamples, seed)
    key = (int(k), int(n_resamples), int(seed))
    with _PLANS_LOCK:
        counts = _PLANS.pop(key, None)
        if counts is None:
            counts = _draw_counts(*key)
            counts.flags.writeable = False
        _PLANS[key] = counts  # the most recently used last
        while sum(c.size for c in _PLANS.values()) > MEMO_CELLS:
            _PLANS.popitem(last=False)
    return counts


def _draw_counts(k: int, n_resamples: int, seed: int) -> FloatArray:
    draws = np.random.default_rng(seed).integers(0, k, size=(n_resamples, k))
    draws += k * np.arange(n_resamples)[:, None]  # in place: resample r's units are r*k .. r*k + k - 1
    counts = np.bincount(draws.ravel(), minlength=n_resamples * k)
    del draws  # no more than two [R, k] arrays at once, as the gather this replaces
    return counts.reshape(n_resamples, k).astype(np.float64)


def _too_few(k: int, unit: str) -> UndefinedCI | None:
    if k >= MIN_BOOTSTRAP_UNITS:
        return None
    return UndefinedCI(f"undefined (n {unit} {k} < {MIN_BOOTSTRAP_UNITS})")


def _check_finite(x: FloatArray, name: str) -> None:
    if x.size == 0:
        raise ValueError(f"{name}: empty input")
    if not np.all(np.isfinite(x)):
        bad = int(np.sum(~np.isfinite(x)))
        raise ValueError(f"{name}: {bad} non-finite value(s); count them as invalid before aggregating")


def bootstrap_ci(
    values: ArrayLike,
    *,
    statistic: Callable[[FloatArray], float] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic`` (default: mean) over the rows of ``values``.

    Rows are the resampling unit: pass one row per image (or per item) so the CI is over images,
    as the papers report. Fewer than :data:`MIN_BOOTSTRAP_UNITS` rows give an :class:`UndefinedCI`.
    """
    x = np.asarray(values, dtype=np.float64)
    _check_finite(x, "bootstrap_ci")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    n = x.shape[0]
    if (few := _too_few(n, "items")) is not None:
        return few
    if statistic is None:
        flat = x if x.ndim == 1 else x.mean(axis=tuple(range(1, x.ndim)))
        stats = resample_counts(n, n_resamples, seed) @ flat / n
    else:
        idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
        stats = np.array([statistic(x[i]) for i in idx], dtype=np.float64)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def paired_bootstrap_ci(
    a: ArrayLike,
    b: ArrayLike,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """CI of mean(a - b) resampling items jointly (a paired bootstrap over items)."""
    xa = np.asarray(a, dtype=np.float64)
    xb = np.asarray(b, dtype=np.float64)
    if xa.shape != xb.shape:
        raise ValueError(f"paired_bootstrap_ci: shapes differ {xa.shape} vs {xb.shape}")
    return bootstrap_ci(xa - xb, n_resamples=n_resamples, level=level, seed=seed)


def cluster_bootstrap_ci(
    values: ArrayLike,
    clusters: Sequence[object],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """CI of the pooled mean of ``values`` resampling whole clusters (e.g. all pairs of one image).

    A metric pooled over (caption, variant) pairs resamples images, so pairs of one image
    are never treated as independent. Fewer than :data:`MIN_BOOTSTRAP_UNITS` clusters give an
    :class:`UndefinedCI`.
    """
    x = np.asarray(values, dtype=np.float64)
    _check_finite(x, "cluster_bootstrap_ci")
    if len(clusters) != x.shape[0]:
        raise ValueError(f"cluster_bootstrap_ci: {x.shape[0]} values but {len(clusters)} cluster labels")
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    k = int(inverse.max()) + 1
    if (few := _too_few(k, "clusters")) is not None:
        return few
    sums = np.bincount(inverse, weights=x, minlength=k)
    counts = np.bincount(inverse, minlength=k).astype(np.float64)
    totals = resample_counts(k, n_resamples, seed) @ np.stack([sums, counts], axis=1)
    stats = totals[:, 0] / totals[:, 1]
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def cluster_bootstrap_sums_ci(
    columns: ArrayLike,
    clusters: Sequence[object],
    statistic: Callable[[FloatArray], FloatArray],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """CI of ``statistic`` of column totals, resampling whole clusters.

    ``columns`` is [N, k]: one row per unit (pair, caption, image), each column an additive quantity
    (e.g. weighted numerator and weight). Rows are summed per cluster, clusters are drawn with
    replacement, and ``statistic`` maps the resampled totals [n_resamples, k] to [n_resamples]
    (vectorised). Resamples where the statistic is undefined (NaN, e.g. a subset drawn empty) are
    left out of the quantiles; if all are, the CI is (nan, nan).
    Ratios of sums cover pooled means, strength-weighted means and relative increases between two subsets.
    """
    x = np.asarray(columns, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"cluster_bootstrap_sums_ci: columns must be [N, k], got shape {x.shape}")
    _check_finite(x, "cluster_bootstrap_sums_ci")
    if len(clusters) != x.shape[0]:
        raise ValueError(f"cluster_bootstrap_sums_ci: {x.shape[0]} rows but {len(clusters)} cluster labels")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    k = int(inverse.max()) + 1
    if (few := _too_few(k, "clusters")) is not None:
        return few
    sums = np.zeros((k, x.shape[1]), dtype=np.float64)
    np.add.at(sums, inverse, x)
    totals = resample_counts(k, n_resamples, seed) @ sums
    with np.errstate(divide="ignore", invalid="ignore"):
        stats = np.asarray(statistic(totals), dtype=np.float64)
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def cluster_bootstrap_ratio_ci(
    numerator: ArrayLike,
    denominator: ArrayLike,
    clusters: Sequence[object],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """CI of sum(numerator) / sum(denominator), resampling clusters (weighted pooled means).

    With ``denominator`` all ones this is :func:`cluster_bootstrap_ci` (same draws for the same seed).
    """
    num = np.asarray(numerator, dtype=np.float64).reshape(-1)
    den = np.asarray(denominator, dtype=np.float64).reshape(-1)
    if num.shape != den.shape:
        raise ValueError(f"cluster_bootstrap_ratio_ci: shapes differ {num.shape} vs {den.shape}")
    return cluster_bootstrap_sums_ci(
        np.stack([num, den], axis=1), clusters, lambda t: t[:, 0] / t[:, 1],
        n_resamples=n_resamples, level=level, seed=seed,
    )


@dataclass(frozen=True)
class Boot:
    """A suite's percentile cluster bootstrap: ``n_resamples`` draws from ``seed``, resampling the
    clusters its callers name (e.g. the source image of each item)."""

    n_resamples: int
    seed: int

    def ci(self, values: FloatArray, clusters: Sequence[str]) -> tuple[float, float] | None:
        """CI of the mean of ``values``; None when there is nothing to resample."""
        if not len(values):
            return None
        return cluster_bootstrap_ci(values, clusters, n_resamples=self.n_resamples, seed=self.seed)

    def ratio_ci(self, num: FloatArray, den: FloatArray,
                 clusters: Sequence[str]) -> tuple[float, float] | None:
        """CI of sum(num) / sum(den) (a pooled rate, e.g. a micro-F1); None when empty or undefined."""
        if not len(num) or den.sum() == 0:
            return None
        lo, hi = cluster_bootstrap_ratio_ci(num, den, clusters, n_resamples=self.n_resamples, seed=self.seed)
        return (lo, hi) if np.isfinite(lo) and np.isfinite(hi) else None
