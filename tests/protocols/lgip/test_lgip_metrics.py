"""LGIP metrics: hand-computed values for Eqs. 2–5, §4.3 weighting, Table 4, plus properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithtests.protocols.lgip import metrics
from faithtests.protocols.lgip.metrics import (
    Aggregate,
    flip_summary,
    invariance_error,
    invariance_summary,
    positive_rate,
    relative_increase,
    sensitivity,
    sensitivity_gaps,
    strength_weights,
    weighted_positive_rate,
    weighted_sensitivity,
)
from faithtests.stats import (
    cluster_bootstrap_ci,
    cluster_bootstrap_ratio_ci,
    cluster_bootstrap_sums_ci,
)

BASE = [0.30, 0.30, 0.20]
PARA = [0.28, 0.35, 0.20]


def test_invariance_error_eq2_pooled_and_nested() -> None:
    """LGIP Eq. 2: |0.30-0.28|, |0.30-0.35|, |0.20-0.20| = 0.02, 0.05, 0."""
    assert invariance_error(BASE, PARA) == pytest.approx(0.07 / 3)  # pooled, public code
    # nested E_(I,c) E_c': caption "a" has pairs 0 and 1 (mean 0.035), caption "b" pair 2 (0)
    assert invariance_error(BASE, PARA, groups=["a", "a", "b"]) == pytest.approx(0.0175)


def test_the_summaries_run_the_equations(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the suites record (the summaries) is computed by Eq. 2's and Eq. 5's own terms: their pooled
    values equal the equations' (hand values above and below), and a change to a term moves them."""
    imgs = ["i0", "i1", "i2"]
    inv = invariance_summary(BASE, PARA, imgs, n_resamples=0)
    assert inv.overall.value == invariance_error(BASE, PARA) == pytest.approx(0.07 / 3)
    flips = flip_summary(BASE, PARA, imgs, n_resamples=0)
    assert flips.overall.pr.value == positive_rate(BASE, PARA) == pytest.approx(1 / 3)  # only 0.30 > 0.28
    monkeypatch.setattr(metrics, "invariance_gaps", lambda b, p: 2 * np.abs(np.subtract(b, p)))
    monkeypatch.setattr(metrics, "flip_detected", lambda g: (g >= 0).astype(np.float64))  # ties count
    assert invariance_summary(BASE, PARA, imgs, n_resamples=0).overall.value == pytest.approx(0.14 / 3)
    assert flip_summary(BASE, PARA, imgs, n_resamples=0).overall.pr.value == pytest.approx(2 / 3)


FB = [0.30, 0.30, 0.20, 0.25]
FF = [0.20, 0.35, 0.20, 0.10]


def test_sensitivity_eq3_eq4() -> None:
    """LGIP Eq. 3 gaps 0.1, -0.05, 0, 0.15; Eq. 4 mean = 0.2 / 4 = 0.05."""
    assert sensitivity_gaps(FB, FF) == pytest.approx([0.1, -0.05, 0.0, 0.15])
    assert sensitivity(FB, FF) == pytest.approx(0.05)
    # per group: g1 = pairs 0,1 -> 0.025 ; g2 = pairs 2,3 -> 0.075 ; mean 0.05 (equal sizes)
    assert sensitivity(FB, FF, groups=[1, 1, 2, 2]) == pytest.approx(0.05)


def test_positive_rate_eq5_is_strict() -> None:
    """LGIP Eq. 5: 1{s(I,c) > s(I,c†)} = 1, 0, 0 (tie), 1 -> PR = 0.5."""
    assert positive_rate(FB, FF) == pytest.approx(0.5)
    # groups of unequal size: {0}: 1.0 ; {1, 2, 3}: 1/3 -> 2/3
    assert positive_rate(FB, FF, groups=["x", "y", "y", "y"]) == pytest.approx((1.0 + 1 / 3) / 2)


def test_strength_weighted_metrics_section_4_3() -> None:
    """Σw·g/Σw = (0.1 − 0.025 + 0 + 0.0375)/2 = 0.05625 ; Σw·1{g>0}/Σw = (1 + 0.25)/2 = 0.625."""
    w = [1.0, 0.5, 0.25, 0.25]
    assert weighted_sensitivity(FB, FF, w) == pytest.approx(0.05625)
    assert weighted_positive_rate(FB, FF, w) == pytest.approx(0.625)
    assert strength_weights([0.0, 0.5]) == pytest.approx([1e-4, 0.5])


def test_relative_increase_table4() -> None:
    """Table 4, EVA02-CLIP L/14: 0.004 -> 0.009 is +125 %."""
    assert relative_increase(0.004, 0.009) == pytest.approx(125.0)
    assert relative_increase(0.041, 0.035) == pytest.approx(-14.634, abs=1e-3)
    with pytest.raises(ValueError, match="undefined"):
        relative_increase(0.0, 0.01)


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        invariance_error([0.1, np.nan], [0.1, 0.2])
    with pytest.raises(ValueError, match="differ in length"):
        positive_rate([0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="empty"):
        sensitivity([], [])
    with pytest.raises(ValueError, match="image ids"):
        flip_summary(FB, FF, ["a"])
    with pytest.raises(ValueError, match="caption id"):
        invariance_summary(BASE, PARA, ["i", "i", "j"], aggregate="per_caption")


def test_invariance_summary_hand_computed() -> None:
    base = [0.30, 0.30, 0.20, 0.40]
    para = [0.28, 0.35, 0.20, 0.30]  # |d| = 0.02, 0.05, 0, 0.10
    kinds = ["simple", "advanced", "simple", "advanced"]
    images = ["i1", "i1", "i2", "i2"]
    s = invariance_summary(base, para, images, kinds=kinds, n_resamples=0)
    assert s.overall.value == pytest.approx(0.17 / 4) and s.overall.ci is None
    assert s.simple is not None and s.simple.value == pytest.approx(0.01) and s.simple.n_pairs == 2
    assert s.advanced is not None and s.advanced.value == pytest.approx(0.075)
    assert s.relative_increase_pct is not None
    assert s.relative_increase_pct.value == pytest.approx(650.0)  # (0.075 - 0.01) / 0.01
    # per image: i1 -> 0.035, i2 -> 0.05
    per_image = invariance_summary(base, para, images, aggregate="per_image", n_resamples=0)
    assert per_image.overall.value == pytest.approx(0.0425) and per_image.overall.n_images == 2


def test_invariance_ci_resamples_images() -> None:
    rng = np.random.default_rng(1)
    base = rng.random(40)
    para = base + rng.normal(0, 0.05, 40)
    images = [f"img{i // 4}" for i in range(40)]
    s = invariance_summary(base, para, images, n_resamples=500, seed=3)
    assert s.overall.ci is not None
    assert s.overall.ci == pytest.approx(cluster_bootstrap_ci(np.abs(base - para), images, n_resamples=500,
                                                              seed=3))
    lo, hi = s.overall.ci
    assert lo < s.overall.value < hi
    assert s.overall.n_images == 10


def test_ratio_bootstrap_additions_to_stats() -> None:
    # one cluster: every resample would be the full data, a zero-width "CI": undefined instead (stats.py)
    ci = cluster_bootstrap_ratio_ci([0.1, 0.2, 0.3], [1.0, 1.0, 1.0], ["a"] * 3)
    assert all(np.isnan(ci)) and getattr(ci, "reason", "") == "undefined (n clusters 1 < 2)"
    # rows (w·v, w) = (1·0.1, 1), (3·0.3, 3) in cluster a, the same in b: (0.1 + 0.9) / 4 = 0.25 always
    ci = cluster_bootstrap_ratio_ci([0.1, 0.9, 0.1, 0.9], [1.0, 3.0, 1.0, 3.0], ["a", "a", "b", "b"])
    assert ci == pytest.approx((0.25, 0.25))
    nan_ci = cluster_bootstrap_sums_ci([[1.0, 0.0]], ["a"], lambda t: t[:, 0] / t[:, 1])
    assert all(np.isnan(nan_ci))


def test_flip_summary_types_bins_weights() -> None:
    base = [0.3, 0.3, 0.2, 0.25, 0.4]
    flip = [0.2, 0.35, 0.2, 0.10, 0.1]  # gaps 0.1, -0.05, 0, 0.15, 0.3
    types = ["color", "object", "color", "number", "object"]
    strengths = [0.1, 0.2, 0.3, 0.4, 0.5]  # q25 = 0.2, q75 = 0.4 -> weak weak medium medium strong
    out = flip_summary(base, flip, ["a", "a", "b", "b", "c"], flip_types=types, strengths=strengths,
                       bin_scheme="pooled", n_resamples=0)
    assert out.overall.gap.value == pytest.approx(0.5 / 5)
    assert out.overall.pr.value == pytest.approx(3 / 5)
    assert out.overall.weighted_gap is not None
    assert out.overall.weighted_gap.value == pytest.approx(
        (0.1 * 0.1 - 0.05 * 0.2 + 0 + 0.15 * 0.4 + 0.3 * 0.5) / 1.5)
    assert out.overall.weighted_pr is not None
    assert out.overall.weighted_pr.value == pytest.approx((0.1 + 0.4 + 0.5) / 1.5)
    assert list(out.by_type) == ["color", "object", "number"]
    assert out.by_type["color"].pr.value == pytest.approx(0.5)
    assert out.by_type["object"].gap.value == pytest.approx(0.125)
    assert out.bin_thresholds is not None and dict(out.bin_thresholds) == {"all": pytest.approx((0.2, 0.4))}
    assert list(out.by_bin) == ["weak", "medium", "strong"]
    assert out.by_bin["weak"].pr.value == pytest.approx(0.5)
    assert out.by_bin["medium"].gap.value == pytest.approx(0.075)
    assert out.by_bin["strong"].pr.n_pairs == 1
    assert out.by_type_bin[("object", "weak")].pr.value == 0.0
    assert ("number", "weak") not in out.by_type_bin


def test_flip_summary_bins_within_each_type_by_default() -> None:
    """Same pairs, default bins: colour (0.1, 0.3) cut at (0.15, 0.25), object (0.2, 0.5) at (0.275, 0.425),
    number (0.4) alone -> weak, weak, strong, weak, strong. Weak: gaps 0.1, −0.05, 0.15 (PR 2/3, Eq. 5;
    E_sens 0.2/3, Eq. 4); strong: gaps 0, 0.3 (PR 1/2: a tie is a failure); no medium flip."""
    out = flip_summary([0.3, 0.3, 0.2, 0.25, 0.4], [0.2, 0.35, 0.2, 0.10, 0.1], ["a", "a", "b", "b", "c"],
                       flip_types=["color", "object", "color", "number", "object"],
                       strengths=[0.1, 0.2, 0.3, 0.4, 0.5], n_resamples=0)
    assert out.bin_thresholds is not None
    assert dict(out.bin_thresholds) == {"color": pytest.approx((0.15, 0.25)),
                                        "object": pytest.approx((0.275, 0.425)),
                                        "number": pytest.approx((0.4, 0.4))}
    assert list(out.by_bin) == ["weak", "strong"]
    assert out.by_bin["weak"].pr.value == pytest.approx(2 / 3)
    assert out.by_bin["weak"].gap.value == pytest.approx(0.2 / 3)
    assert out.by_bin["strong"].pr.value == pytest.approx(0.5)
    assert out.by_type_bin[("object", "strong")].gap.value == pytest.approx(0.3)
    with pytest.raises(ValueError, match="cosines"):
        flip_summary([0.3], [0.2], ["a"], strengths=[0.1], bin_scheme="paper", n_resamples=0)


def test_sugarcrepe_pr_equals_text_accuracy() -> None:
    """Correctness check: PR (LGIP Eq. 5) over (positive, negative) pairs is SugarCrepe's text accuracy.

    The accuracy is computed the way ARO/SugarCrepe evaluate: argmax over [negative, positive]
    (first index wins a tie, so a tie is wrong, like the strict > of Eq. 5).
    """
    pos = np.array([0.31, 0.25, 0.28, 0.22, 0.30, 0.27])
    neg = np.array([0.29, 0.26, 0.28, 0.20, 0.35, 0.10])
    accuracy = float(np.mean(np.argmax(np.stack([neg, pos], axis=1), axis=1) == 1))
    assert accuracy == pytest.approx(3 / 6)
    assert positive_rate(pos, neg) == pytest.approx(accuracy)


# ----------------------------------------------------------------------------- properties
scores = st.floats(-1.0, 1.0, allow_nan=False, width=32)


@st.composite
def paired(draw: st.DrawFn) -> tuple[list[float], list[float], list[int], list[int]]:
    n = draw(st.integers(1, 30))
    base = draw(st.lists(scores, min_size=n, max_size=n))
    other = draw(st.lists(scores, min_size=n, max_size=n))
    images = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    caps = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    return base, other, images, caps


@settings(max_examples=150, deadline=None)
@given(paired())
def test_ranges(data: tuple[list[float], list[float], list[int], list[int]]) -> None:
    base, other, images, _ = data
    assert invariance_error(base, other) >= 0
    assert invariance_error(base, other, groups=images) >= 0
    assert 0.0 <= positive_rate(base, other) <= 1.0
    assert 0.0 <= positive_rate(base, other, groups=images) <= 1.0


@settings(max_examples=100, deadline=None)
@given(paired())
def test_invariant_to_item_order(data: tuple[list[float], list[float], list[int], list[int]]) -> None:
    base, other, images, caps = data
    perm = np.random.default_rng(len(base)).permutation(len(base))
    pb, po = [base[i] for i in perm], [other[i] for i in perm]
    pi, pc = [images[i] for i in perm], [caps[i] for i in perm]
    aggregates: tuple[Aggregate, ...] = ("pooled", "per_caption", "per_image")
    for agg in aggregates:
        a = invariance_summary(base, other, images, caption_ids=caps, aggregate=agg, n_resamples=50)
        b = invariance_summary(pb, po, pi, caption_ids=pc, aggregate=agg, n_resamples=50)
        assert a.overall.value == pytest.approx(b.overall.value, abs=1e-12)
        assert a.overall.ci == pytest.approx(b.overall.ci, abs=1e-9, nan_ok=True)  # NaN: one image
        fa = flip_summary(base, other, images, caption_ids=caps, aggregate=agg, n_resamples=0)
        fb = flip_summary(pb, po, pi, caption_ids=pc, aggregate=agg, n_resamples=0)
        assert fa.overall.pr.value == pytest.approx(fb.overall.pr.value, abs=1e-12)
        assert fa.overall.gap.value == pytest.approx(fb.overall.gap.value, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 7), min_size=1, max_size=40), st.lists(scores, min_size=8, max_size=8))
def test_scorer_that_ignores_text_has_zero_invariance_error_and_zero_pr(images: list[int],
                                                                        per_image: list[float]) -> None:
    """s(I, c) = g(I) for every caption: paraphrases move nothing, flips are never ranked below."""
    base = [per_image[i] for i in images]
    variant = [per_image[i] for i in images]
    assert invariance_error(base, variant) == 0.0
    assert positive_rate(base, variant) == 0.0
    assert sensitivity(base, variant) == 0.0
    summary = flip_summary(base, variant, images, n_resamples=20)
    ci = summary.overall.pr.ci
    assert summary.overall.pr.value == 0.0
    one_image = getattr(ci, "reason", "") == "undefined (n clusters 1 < 2)"  # stats: no 1-cluster CI
    assert ci == (0.0, 0.0) if len(set(images)) > 1 else one_image
