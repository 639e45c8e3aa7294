"""SPD-Faith metrics against hand-computed values: DQR (Eq. 8), DS (Eq. 9), the public code's n/m, TF1 / CF1
(Eqs. 10–11), the symmetric-question verdicts and CR (Eqs. 12–13), DRF (Eq. 15), layer cosines (App. D.3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from faithtests.protocols.spdfaith.metrics import (
    DrfResult,
    category_f1,
    consistency_ratio,
    consistency_ratio_eq12,
    contradiction_rate,
    count_ratio,
    dqr,
    drf,
    ds,
    f1_terms,
    layer_cosine_band,
    layer_cosines,
    mean_ci,
    type_f1,
    verdict_labels,
    yes_rate,
)
from faithtests.stats import bootstrap_ci, cluster_bootstrap_ci, cluster_bootstrap_ratio_ci

# App. B.3's worked examples: (predicted, ground truth) types and categories per figure
FIG41_TYPES = (["remove", "remove", "remove"], ["remove", "color", "color"])
FIG42_TYPES = (["remove", "color", "color"], ["remove", "color", "remove"])
FIG41_CATS = (["person", "car", "car"], ["person", "car", "car"])
FIG42_CATS = (["microwave", "bowl", "tv"], ["microwave", "bowl", "tv"])


# ---------------------------------------------------------------------------------- counts
def test_dqr_eq8_is_exact_count_agreement() -> None:
    """Eq. 8: 1 iff n = m; m = 0 (an identical pair) is defined: 1 iff the model claims none."""
    assert dqr([3, 2, 0, 4], [3, 3, 0, 2]).tolist() == [1.0, 0.0, 1.0, 0.0]


def test_ds_eq9_hand_values() -> None:
    """Eq. 9: max(0, 1 − |n − m|/m). App. B.2.1's example m = 3, n = 2 gives 0.67; n = 5 gives 1/3;
    n = 7 gives max(0, 1 − 4/3) = 0; n = 0 of m = 2 gives 0."""
    got = ds([2, 3, 5, 0, 7], [3, 3, 3, 2, 3])
    assert got == pytest.approx([2 / 3, 1.0, 1 / 3, 0.0, 0.0])
    assert got[0] == pytest.approx(0.67, abs=5e-3)


def test_ds_and_count_ratio_refuse_identical_pairs() -> None:
    """Eq. 9 divides by m: an identical pair (m = 0) has no DS, and no n/m."""
    with pytest.raises(ValueError, match="identical pairs"):
        ds([1, 0], [1, 0])
    with pytest.raises(ValueError, match="m = 0 at index 1"):
        count_ratio([1, 0], [1, 0])


def test_count_ratio_is_the_public_codes_uncapped_dqr() -> None:
    """The public SPD-Faith-Bench code's "DQR": mean of n/m, uncapped (over-counting exceeds 1)."""
    assert count_ratio([2, 6, 3], [3, 3, 3]) == pytest.approx([2 / 3, 2.0, 1.0])
    assert float(np.mean(count_ratio([2, 6, 3], [3, 3, 3]))) == pytest.approx(11 / 9)


@pytest.mark.parametrize(
    ("n", "m", "message"),
    [
        ([], [], "non-empty 1-D"),
        ([1.0, float("nan")], [1, 1], "non-finite count at index 1"),
        ([1.5], [2], "non-negative integers"),
        ([-1], [2], "non-negative integers"),
        ([1, 2], [1], "differ in length"),
        ([[1]], [[1]], "non-empty 1-D"),
    ],
)
def test_count_metrics_reject_bad_input(n: list[float], m: list[float], message: str) -> None:
    for fn in (dqr, ds, count_ratio):
        with pytest.raises(ValueError, match=message):
            fn(n, m)


# ---------------------------------------------------------------------------------- F1
def test_tf1_eq10_on_the_papers_examples_gives_eq10_not_the_printed_values() -> None:
    """Eq. 10 with multiset intersections. Fig. 41: P = remove×3, G = remove + color×2 → |P∩G| = 1,
    TF1 = 2·1/(3+3) = 1/3 (the figure prints 1/4). Fig. 42: P = remove + color×2, G = remove×2 + color
    → |P∩G| = 1 + 1, TF1 = 2·2/6 = 2/3 (the figure prints 3/5). We pin Eq. 10, not the printed values."""
    assert type_f1([FIG41_TYPES[0]], [FIG41_TYPES[1]]) == pytest.approx(1 / 3)
    assert type_f1([FIG42_TYPES[0]], [FIG42_TYPES[1]]) == pytest.approx(2 / 3)
    assert type_f1([FIG41_TYPES[0]], [FIG41_TYPES[1]]) != pytest.approx(1 / 4)
    assert type_f1([FIG42_TYPES[0]], [FIG42_TYPES[1]]) != pytest.approx(3 / 5)


def test_cf1_eq11_on_the_papers_examples() -> None:
    """Eq. 11: Figs. 41 and 42 name the right categories (CF1 1 in both, as printed)."""
    assert category_f1([FIG41_CATS[0]], [FIG41_CATS[1]]) == 1.0
    assert category_f1([FIG42_CATS[0]], [FIG42_CATS[1]]) == 1.0


def test_tf1_eq10_is_micro_over_items() -> None:
    """Eq. 10 summed over items: item 1 P = color×2, G = color (∩ 1); item 2 P = ∅, G = remove (∩ 0);
    item 3 P = position, G = position + color (∩ 1): TF1 = 2·2 / (3 + 1 + 3) = 4/7 (a mean of per-item
    F1s would be (2/3 + 0 + 2/3)/3 = 4/9)."""
    pred = [["color", "color"], [], ["position"]]
    gold = [["color"], ["remove"], ["position", "color"]]
    assert type_f1(pred, gold) == pytest.approx(4 / 7)
    num, den = f1_terms(pred, gold)
    assert num.tolist() == [2, 0, 2] and den.tolist() == [3, 1, 3]


def test_cf1_eq11_hand_value() -> None:
    """Eq. 11: item 1 P = {chair, person}, G = {chair, chair} (∩ 1); item 2 P = {car}, G = {bus} (∩ 0):
    CF1 = 2·1 / (4 + 2) = 1/3."""
    assert category_f1([["chair", "person"], ["car"]], [["chair", "chair"], ["bus"]]) == pytest.approx(1 / 3)


def test_f1_terms_feed_the_clustered_ratio_bootstrap() -> None:
    """sum(num)/sum(den) is TF1; stats.cluster_bootstrap_ratio_ci gives its CI (no re-implementation)."""
    pred = [["color"], ["remove"], ["color", "remove"], ["position"]]
    gold = [["color"], ["color"], ["remove"], ["position"]]
    num, den = f1_terms(pred, gold)
    assert num.sum() / den.sum() == pytest.approx(type_f1(pred, gold))
    lo, hi = cluster_bootstrap_ratio_ci(num, den, ["a", "a", "b", "c"], n_resamples=200, seed=1)
    assert lo <= type_f1(pred, gold) <= hi


def test_f1_errors_are_explicit() -> None:
    with pytest.raises(ValueError, match="nothing to score"):
        type_f1([[], []], [[], []])
    with pytest.raises(ValueError, match="no items"):
        category_f1([], [])
    with pytest.raises(ValueError, match="2 predicted items but 1 gold"):
        type_f1([["color"], []], [["color"]])
    with pytest.raises(ValueError, match="'recolour', not one of"):
        type_f1([["recolour"]], [["color"]])
    with pytest.raises(ValueError, match="unparseable"):
        category_f1([[None]], [["car"]])  # type: ignore[list-item]


# ---------------------------------------------------------------------------------- verdicts, CR
P_SAME = [0.9, 0.9, 0.2, 0.2, 0.55, 0.5]
P_DIFF = [0.1, 0.8, 0.7, 0.3, 0.1, 0.5]


def test_verdicts_without_an_ambiguity_band() -> None:
    """Yes = P(Yes) > 0.5 (0.5 reads No). Pairs: (Y,N) consistent, (Y,Y) contradictory, (N,Y) consistent,
    (N,N) contradictory, (Y,N) consistent, (N,N) contradictory."""
    labels = verdict_labels(P_SAME, P_DIFF)
    assert labels == ["consistent", "contradictory", "consistent", "contradictory", "consistent",
                      "contradictory"]
    assert contradiction_rate(labels) == pytest.approx(3 / 6)
    # Eqs. 12–13 per judged pair: (1 − 1 + 1 − 1 + 1 − 1) / 6 = 0
    assert consistency_ratio(labels) == pytest.approx(0.0)


def test_verdicts_with_an_ambiguity_band() -> None:
    """ambiguity 0.1: pairs 5 (|0.55 − 0.5| < 0.1) and 6 (0.5) are ambiguous, whatever their Yes/No.
    CR (Eq. 13 weights) = (1 − 1 + 1 − 1 + 0.5 + 0.5) / 6 = 1/6; contradiction rate 2/6."""
    labels = verdict_labels(P_SAME, P_DIFF, ambiguity=0.1)
    assert labels[4:] == ["ambiguous", "ambiguous"] and labels[:4] == verdict_labels(P_SAME, P_DIFF)[:4]
    assert consistency_ratio(labels) == pytest.approx(1 / 6)
    assert contradiction_rate(labels) == pytest.approx(2 / 6)


def test_yes_rates_fig11() -> None:
    """Fig. 11's Yes Ratios: P(Yes) > 0.5 for 3 of 6 Q_same answers (0.9, 0.9, 0.55) and 2 of 6 Q_diff
    answers (0.8, 0.7); 0.5 is No."""
    assert yes_rate(P_SAME) == pytest.approx(3 / 6)
    assert yes_rate(P_DIFF) == pytest.approx(2 / 6)


def test_cr_fig39_per_pair_and_eq12_literal() -> None:
    """Fig. 39: three claims per answer, three consistent pairs. Per judged pair (Fig. 33's
    Σ scores / total_claims) CR = 3/3 = 1, as printed; Eq. 12 literally: 3 / (3 + 3) = 0.5."""
    labels = ["consistent"] * 3
    assert consistency_ratio(labels) == 1.0
    assert consistency_ratio_eq12(labels, n_s=3, n_d=3) == pytest.approx(0.5)


def test_cr_eq12_hand_value_and_contradictions_go_negative() -> None:
    """Eq. 12: (1 + 0.5 − 1) / (2 + 3) = 0.1. Three contradictory pairs (Fig. 40) give −1 per pair; the
    figure prints 0, which neither formula gives; we do not clip."""
    assert consistency_ratio_eq12(["consistent", "ambiguous", "contradictory"], 2, 3) == pytest.approx(0.1)
    assert consistency_ratio_eq12([], 1, 1) == 0.0
    assert consistency_ratio(["contradictory"] * 3) == -1.0


def test_verdict_errors_are_explicit() -> None:
    with pytest.raises(ValueError, match="6 Q_same answers but 2"):
        verdict_labels(P_SAME, [0.1, 0.2])
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        verdict_labels([float("nan")], [0.1])
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        verdict_labels([1.2], [0.1])
    with pytest.raises(ValueError, match="non-empty"):
        verdict_labels([], [])
    with pytest.raises(ValueError, match="ambiguity"):
        verdict_labels([0.1], [0.9], ambiguity=0.6)
    with pytest.raises(ValueError, match="no verdicts"):
        consistency_ratio([])
    with pytest.raises(ValueError, match="no verdicts"):
        contradiction_rate([])
    with pytest.raises(ValueError, match="unknown verdict 'maybe'"):
        consistency_ratio(["consistent", "maybe"])
    with pytest.raises(ValueError, match="no claims to score"):
        consistency_ratio_eq12([], 0, 0)
    with pytest.raises(ValueError, match=">= 0"):
        consistency_ratio_eq12([], -1, 2)


# ---------------------------------------------------------------------------------- DRF
def test_drf_eq15_on_the_papers_examples() -> None:
    """Eq. 15: Fig. 41 matches 1 of 3 claims (DRF 1/3), Fig. 42 2 of 3 (2/3), both as printed."""
    assert drf([np.array([True, False, False])]).value == pytest.approx(1 / 3)
    assert drf([np.array([True, True, False])]).value == pytest.approx(2 / 3)


def test_drf_eq15_leaves_out_items_without_claims_and_counts_them() -> None:
    """Eq. 15 per item, then the mean over items with ≥ 1 claim: (1/3 + 2/3 + 1)/3 = 2/3; the item with
    no claim is counted, not scored."""
    got = drf([[True, False, False], [True, True, False], [], np.array([True])])
    assert got.value == pytest.approx(2 / 3) and (got.n_items, got.n_no_claims) == (3, 1)
    assert got.per_item[2] is None and got.per_item[3] == 1.0
    assert [got.per_item[0], got.per_item[1]] == pytest.approx([1 / 3, 2 / 3])
    assert isinstance(got, DrfResult)
    none = drf([[], []])
    assert math.isnan(none.value) and (none.n_items, none.n_no_claims) == (0, 2)


def test_drf_errors_are_explicit() -> None:
    with pytest.raises(ValueError, match="no items"):
        drf([])
    with pytest.raises(ValueError, match="item 1 must be a 1-D bool"):
        drf([[True], [0.5, 1.0]])


# ---------------------------------------------------------------------------------- layer cosines
def test_layer_cosines_hand_values() -> None:
    """App. D.3: cos per [layer, item]: (1,0)·(0,1) = 0; (1,1)·(1,1) → 1; (0,2)·(0,−1) → −1;
    (3,4)·(4,3) = 24/25."""
    h_same = np.array([[[1.0, 0.0], [1.0, 1.0]], [[0.0, 2.0], [3.0, 4.0]]])
    h_diff = np.array([[[0.0, 1.0], [1.0, 1.0]], [[0.0, -1.0], [4.0, 3.0]]])
    assert layer_cosines(h_same, h_diff) == pytest.approx(np.array([[0.0, 1.0], [-1.0, 24 / 25]]))


def test_layer_cosines_reject_bad_states() -> None:
    ok = np.ones((2, 3, 4))
    with pytest.raises(ValueError, match=r"zero-norm state at \[layer, item\] \[1, 2\]"):
        bad = ok.copy()
        bad[1, 2] = 0.0
        layer_cosines(ok, bad)
    with pytest.raises(ValueError, match="non-finite"):
        bad = ok.copy()
        bad[0, 0, 0] = np.nan
        layer_cosines(bad, ok)
    with pytest.raises(ValueError, match=r"\[L, N, D\]"):
        layer_cosines(ok, ok[:, :2])
    with pytest.raises(ValueError, match=r"\[L, N, D\]"):
        layer_cosines(np.ones((2, 0, 4)), np.ones((2, 0, 4)))


def test_layer_cosine_band_uses_the_stats_bootstrap_per_layer() -> None:
    """Per-layer mean with stats.bootstrap_ci at one seed (same resampled items at every layer); with
    clusters, stats.cluster_bootstrap_ci."""
    cos = np.array([[0.9, 0.95, 0.99, 0.97], [0.8, 0.85, 0.83, 0.9]])
    band = layer_cosine_band(cos, n_boot=300, seed=4)
    assert band.mean == pytest.approx((0.9525, 0.845)) and band.n == 4
    assert (band.lo[0], band.hi[0]) == bootstrap_ci(cos[0], n_resamples=300, seed=4)
    groups = ["a", "a", "b", "c"]
    clustered = layer_cosine_band(cos, n_boot=300, seed=4, clusters=groups)
    assert (clustered.lo[1], clustered.hi[1]) == cluster_bootstrap_ci(cos[1], groups, n_resamples=300, seed=4)
    with pytest.raises(ValueError, match=r"\[L, N\]"):
        layer_cosine_band(cos[0])


def test_mean_ci_passes_bad_input_to_stats_errors() -> None:
    got = mean_ci([1.0, 0.0, 1.0, 1.0], n_boot=200)
    assert got.mean == 0.75 and got.n == 4 and got.lo <= 0.75 <= got.hi
    with pytest.raises(ValueError, match="empty input"):
        mean_ci([])
    with pytest.raises(ValueError, match="non-finite"):
        mean_ci([1.0, float("nan")])
