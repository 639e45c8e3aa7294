"""S3E effects: d_p (Eq. 8), paired bootstrap CIs, HSR (Eqs. 6, 16; App. J), breakdowns, curves, rates."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from faithtests.protocols.s3e.metrics import (
    STRESS,
    MarginMatch,
    breakdown,
    excess_curve,
    hidden_stress_rate,
    hsr_threshold,
    item_rate,
    margin_matched_excess,
    most_excess,
    paired_effect_size,
    paired_excess,
    rate_by_label,
    summarize_excess,
)
from faithtests.stats import bootstrap_ci, paired_bootstrap_ci


def test_paired_effect_size_eq8_hand_values() -> None:
    # x = [1, 2, 3]: mean 2, sample sd sqrt((1 + 0 + 1) / 2) = 1 -> d_p = 2
    assert paired_effect_size([1.0, 2.0, 3.0]) == pytest.approx(2.0)
    # x = [0.01, 0.03]: mean 0.02, sample sd sqrt(2 * 0.01**2 / 1) = 0.0141421 -> d_p = sqrt(2)
    assert paired_effect_size([0.01, 0.03]) == pytest.approx(math.sqrt(2.0))
    # population sd (ddof=0) of [1, 2, 3] is sqrt(2/3) -> 2 / 0.8165 = 2.4495
    assert paired_effect_size([1.0, 2.0, 3.0], ddof=0) == pytest.approx(2.0 / math.sqrt(2.0 / 3.0))


def test_paired_effect_size_undefined_raises() -> None:
    with pytest.raises(ValueError, match="zero standard deviation"):
        paired_effect_size([0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="need more than 1"):
        paired_effect_size([0.5])
    with pytest.raises(ValueError, match="non-finite"):
        paired_effect_size([0.5, float("nan")])


def test_summarize_excess_is_the_paired_bootstrap() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(0.3, 0.1, size=50)
    b = rng.normal(0.2, 0.1, size=50)
    s = summarize_excess(a - b, seed=7)
    # resampling rows of (a - b) == resampling (a, b) pairs jointly with the same 3,000 index draws
    assert s.ci == pytest.approx(paired_bootstrap_ci(a, b, n_resamples=3000, seed=7))
    assert s.n == 50 and s.mean == pytest.approx(float(np.mean(a - b)))
    assert s.ci[0] < s.mean < s.ci[1]


def test_summarize_excess_hand_values() -> None:
    # [1, 2, 3]: mean 2, d_p 2 (above), all > 0; every bootstrap mean lies in [1, 3]
    s = summarize_excess([1.0, 2.0, 3.0])
    assert s.mean == pytest.approx(2.0) and s.d_p == pytest.approx(2.0) and s.frac_positive == 1.0
    assert 1.0 <= s.ci[0] <= 2.0 <= s.ci[1] <= 3.0
    # constant contrast: d_p undefined -> None, not inf
    assert summarize_excess([-0.1, -0.1]).d_p is None
    assert summarize_excess([-0.1, -0.1]).frac_positive == 0.0


def test_hsr_threshold_hand_value_and_table18_anchor() -> None:
    # [1, 2, 3]: mean 2 + sample sd 1 = 3
    assert hsr_threshold([1.0, 2.0, 3.0]) == pytest.approx(3.0)
    # Table 18 check of the rule on Table 6 numbers (Qwen3VL-2B Δlex): sd = mean / d_p = 0.0190/2.12,
    # tau = 0.0190 + 0.00896 = 0.0280 as printed. A normal sample with that mean/sd reproduces it.
    x = np.random.default_rng(1).normal(0.0190, 0.0190 / 2.12, size=20000)
    assert hsr_threshold(x) == pytest.approx(0.0280, abs=2e-4)


def test_hidden_stress_rate_hand_values() -> None:
    # strict scores [1, 2, 3, 10]: mean 4, sample sd sqrt((9 + 4 + 1 + 36) / 3) = sqrt(50/3) = 4.0825
    # tau = 8.0825 -> only 10 is high: HSR_correct = 1/4; with 8 stress items in all, HSR = 1/8.
    r = hidden_stress_rate([1.0, 2.0, 3.0, 10.0], n_total=8)
    assert r.tau == pytest.approx(4.0 + math.sqrt(50.0 / 3.0))
    assert (r.n_high, r.n_strict, r.n_total) == (1, 4, 8)
    assert r.hsr_correct == pytest.approx(0.25) and r.hsr == pytest.approx(0.125)
    assert r.mean_high == pytest.approx(10.0)
    # a frozen tau (e.g. the base model's) is used as given: > 1.5 -> 2, 3, 10
    r2 = hidden_stress_rate([1.0, 2.0, 3.0, 10.0], n_total=4, tau=1.5)
    assert r2.n_high == 3 and r2.hsr == pytest.approx(0.75) and r2.mean_high == pytest.approx(5.0)
    assert hidden_stress_rate([1.0, 2.0], n_total=2, tau=5.0).mean_high is None
    with pytest.raises(ValueError, match="n_total"):
        hidden_stress_rate([1.0, 2.0, 3.0], n_total=2)


def test_breakdown_hand_values() -> None:
    # labels o, o, a, a -> attribute: [3, 10] mean 6.5; object: [1, 2] mean 1.5 (sorted by label)
    out = breakdown([1.0, 2.0, 3.0, 10.0], ["object", "object", "attribute", "attribute"], min_n=3)
    assert [s.label for s in out] == ["attribute", "object"]
    assert out[0].summary.mean == pytest.approx(6.5) and out[1].summary.mean == pytest.approx(1.5)
    assert all(s.sparse for s in out) and out[0].summary.n == 2
    with pytest.raises(ValueError, match="labels"):
        breakdown([1.0, 2.0], ["a"])


def test_margin_matched_excess_hand_value() -> None:
    mm = MarginMatch(mask=np.array([True, True, False, False]), threshold=1.5, gap=np.array([0.0, 1, 2, 3]))
    # kept items 0, 1 -> mean of [1, 2] = 1.5
    assert margin_matched_excess([1.0, 2.0, 3.0, 4.0], mm).mean == pytest.approx(1.5)


def test_excess_curve_matches_per_layer_means() -> None:
    # [layers=2, items=3]; S_stress - S_lex per item: layer 0 [0.1, 0.2, 0.3], layer 1 [0.3, 0.3, 0.6]
    S = np.zeros((2, 3, 2, 5))
    S[0, :, :, STRESS] = [[0.1], [0.2], [0.3]]
    S[1, :, :, STRESS] = [[0.3], [0.3], [0.6]]
    c = excess_curve(S, "lex", None)
    assert c.mean == pytest.approx((0.2, 0.4)) and c.n == 3
    assert all(lo <= m <= hi for lo, m, hi in zip(c.lo, c.mean, c.hi, strict=True))
    assert np.allclose(paired_excess(S, "lex").mean(axis=1), c.mean)


item_scores = arrays(np.float64, st.integers(2, 40), elements=st.floats(-1, 1, allow_nan=False))


@given(item_scores)
def test_d_p_sign_follows_mean(x: np.ndarray) -> None:
    if np.std(x, ddof=1) < 1e-9:
        return  # undefined d_p is covered by test_paired_effect_size_undefined_raises
    d = paired_effect_size(x)
    assert np.sign(d) == np.sign(np.mean(x))
    assert paired_effect_size(-x) == pytest.approx(-d)


@given(item_scores, st.integers(0, 20))
def test_hsr_rates_are_consistent(x: np.ndarray, extra: int) -> None:
    if np.std(x, ddof=1) < 1e-9:
        return
    r = hidden_stress_rate(x, n_total=x.size + extra)
    assert 0.0 <= r.hsr <= r.hsr_correct <= 1.0
    assert r.hsr == pytest.approx(r.hsr_correct * x.size / (x.size + extra))
    assert r.n_high < x.size  # mean + sd is never exceeded by every item


def test_item_rate_is_the_share_with_an_item_bootstrap_ci() -> None:
    """Strict-correct rate (S3E §3.2, Table 6) of [T, F, T, T] = 3/4, CI over the 4 items."""
    r = item_rate(np.array([True, False, True, True]))
    assert r.value == 0.75 and r.n == 4
    assert r.ci == bootstrap_ci([1.0, 0.0, 1.0, 1.0])
    assert r.ci[0] < 0.75 < r.ci[1]
    with pytest.raises(ValueError, match="non-empty 1-d"):
        item_rate(np.zeros(0, dtype=bool))


def test_rate_by_label_hand_values() -> None:
    """a: [T, F] -> 1/2 of 2; b: [T, F, T] -> 2/3 of 3; sorted by label."""
    flags = [True, False, True, False, True]
    assert rate_by_label(flags, ["a", "a", "b", "b", "b"]) == [("a", 0.5, 2), ("b", pytest.approx(2 / 3), 3)]
    assert rate_by_label(flags, ["z", "z", "a", "a", "a"])[0][0] == "a"
    with pytest.raises(ValueError, match="5 flags but 2 labels"):
        rate_by_label(flags, ["a", "b"])


def test_most_excess_maps_contrasts_back_to_records() -> None:
    """Δlex of strict-correct records 10..13 = 0.1, 0.5, -0.2, 0.3: the top two are records 11 and 13."""
    assert most_excess([0.1, 0.5, -0.2, 0.3], [10, 11, 12, 13], k=2) == [(11, 0.5), (13, 0.3)]
    assert [i for i, _ in most_excess([0.1, 0.5, -0.2, 0.3], [10, 11, 12, 13])] == [11, 13, 10, 12]
    with pytest.raises(ValueError, match="3 contrasts but 2"):
        most_excess([0.1, 0.2, 0.3], [1, 2])
