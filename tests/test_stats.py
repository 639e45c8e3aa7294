"""The bootstrap's resample plan (faithtests.stats.resample_counts): counts of the same draws as a
direct gather, memoised read-only, and the CIs built on it equal the direct percentile bootstrap."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from faithtests import stats
from faithtests.stats import (
    Boot,
    bootstrap_ci,
    cluster_bootstrap_ci,
    cluster_bootstrap_ratio_ci,
    cluster_bootstrap_sums_ci,
    resample_counts,
)


def _direct_draws(k: int, n_resamples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, k, size=(n_resamples, k))


def test_counts_are_the_draws_counted() -> None:
    draws = _direct_draws(3, 4, 7)
    counts = resample_counts(3, 4, 7)
    for r in range(4):  # row r: how often unit j is among the 3 draws of resample r
        assert counts[r].tolist() == [float((draws[r] == j).sum()) for j in range(3)]
    assert counts.sum(axis=1).tolist() == [3.0] * 4


def test_plans_are_memoised_read_only_within_a_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stats, "_PLANS", type(stats._PLANS)())
    a, b = resample_counts(5, 100, 1), resample_counts(5, 100, 1)
    assert a is b and not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0] = 9.0
    monkeypatch.setattr(stats, "MEMO_CELLS", 1000)
    resample_counts(5, 100, 2)  # 500 more cells: the budget holds both
    assert list(stats._PLANS) == [(5, 100, 1), (5, 100, 2)]
    resample_counts(5, 100, 1)  # used again: now the most recent
    resample_counts(4, 100, 3)  # 400 more: the least recently used plan (seed 2) goes
    assert list(stats._PLANS) == [(5, 100, 1), (4, 100, 3)]
    big = resample_counts(11, 100, 1)  # over the whole budget: drawn, never kept
    assert big.flags.writeable and (11, 100, 1) not in stats._PLANS
    assert np.array_equal(big, _counts_of(_direct_draws(11, 100, 1), 11))


def _counts_of(draws: np.ndarray, k: int) -> np.ndarray:
    return np.stack([np.bincount(row, minlength=k) for row in draws]).astype(float)


def test_cluster_ci_equals_the_gathered_percentile_bootstrap() -> None:
    """Pooled mean per resample = Σ sums[drawn] / Σ counts[drawn] (LGIP's image-clustered CI)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=60)
    clusters = [f"img{i % 17}" for i in range(60)]
    _, inv = np.unique(np.asarray(clusters), return_inverse=True)
    sums, counts = np.bincount(inv, weights=x), np.bincount(inv).astype(float)
    draws = _direct_draws(17, 2000, 3)
    direct = np.quantile(sums[draws].sum(axis=1) / counts[draws].sum(axis=1), [0.025, 0.975])
    assert cluster_bootstrap_ci(x, clusters, n_resamples=2000, seed=3) == pytest.approx(direct, abs=1e-12)
    ratio = cluster_bootstrap_sums_ci(np.stack([x, np.ones(60)], axis=1), clusters,
                                      lambda t: t[:, 0] / t[:, 1], n_resamples=2000, seed=3)
    assert ratio == pytest.approx(direct, abs=1e-12)


def test_row_ci_equals_the_gathered_mean_and_the_statistic_path() -> None:
    x = np.random.default_rng(1).normal(size=25)
    draws = _direct_draws(25, 1000, 4)
    direct = np.quantile(x[draws].mean(axis=1), [0.025, 0.975])
    assert bootstrap_ci(x, n_resamples=1000, seed=4) == pytest.approx(direct, abs=1e-12)
    # a statistic of its own still resamples the same rows
    assert bootstrap_ci(x, statistic=np.mean, n_resamples=1000, seed=4) == pytest.approx(direct, abs=1e-12)


def test_one_generic_resample_default() -> None:
    """Every CI function defaults to the one generic count; a protocol passes its paper's explicitly."""
    fns = (stats.bootstrap_ci, stats.paired_bootstrap_ci, stats.cluster_bootstrap_ci,
           stats.cluster_bootstrap_sums_ci, stats.cluster_bootstrap_ratio_ci)
    defaults = {f.__name__: inspect.signature(f).parameters["n_resamples"].default for f in fns}
    assert defaults == dict.fromkeys(defaults, stats.DEFAULT_RESAMPLES)
    # paired_bootstrap_ci used to default to 3,000 resamples (one protocol's count): now the generic one
    x = np.random.default_rng(2).random(20)
    ci = stats.paired_bootstrap_ci(x, np.zeros(20))
    assert ci == bootstrap_ci(x, n_resamples=stats.DEFAULT_RESAMPLES) != bootstrap_ci(x, n_resamples=3000)


def test_boot_is_the_cluster_bootstrap_with_its_settings() -> None:
    """``Boot`` (shared by the suites) draws exactly as the functions it wraps, and says None where
    there is nothing to resample or the rate is undefined (0 / 0)."""
    boot = Boot(400, 7)
    values = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    clusters = ["a", "a", "b", "c", "c", "d"]
    assert boot.ci(values, clusters) == cluster_bootstrap_ci(values, clusters, n_resamples=400, seed=7)
    den = np.array([1.0, 2.0, 1.0, 1.0, 3.0, 1.0])
    assert boot.ratio_ci(values, den, clusters) == cluster_bootstrap_ratio_ci(
        values, den, clusters, n_resamples=400, seed=7)
    assert boot.ci(np.array([]), []) is None
    assert boot.ratio_ci(np.array([]), np.array([]), []) is None
    assert boot.ratio_ci(values, np.zeros(6), clusters) is None
