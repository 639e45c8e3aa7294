"""SPD-Faith metrics against hand-computed values: DQR (Eq. 8), DS_count (Eq. 9), DS_exist (§3), the public
code's n/m, TF1 / CF1 (Eqs. 10–11) and the public code's CF1, the symmetric-question verdicts and CR (Eqs.
12–13, normalised as Fig. 34), DRF (Eq. 15), layer cosines (App. D.3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from faithtests.protocols.spdfaith.metrics import (
    DrfResult,
    category_f1,
    category_f1_code,
    consistency_ratio,
    consistency_ratio_eq12,
    contradiction_rate,
    count_ratio,
    dqr,
    drf,
    ds,
    ds_exist,
    f1_terms,
    layer_cosine_band,
    layer_cosines,
    mean_ci,
    normalised_cr,
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


def test_ds_count_of_a_random_count_on_the_worlds_multi_pairs() -> None:
    """Chance level of the DS_count[subset=multi] floor (thresholds.toml): n uniform on 1..6 against
    m uniform on 2..5 (the world's multi pairs). Eq. 9 by hand: m = 2: (1/2 + 1 + 1/2)/6 = 1/3;
    m = 3: (1/3 + 2/3 + 1 + 2/3 + 1/3)/6 = 1/2; m = 4: (1/4 + 1/2 + 3/4 + 1 + 3/4 + 1/2)/6 = 5/8;
    m = 5: (1/5 + 2/5 + 3/5 + 4/5 + 1 + 4/5)/6 = 19/30; mean 251/480 ≈ 0.523. On single pairs: 1/6."""
    n, m = np.meshgrid(np.arange(1, 7), np.arange(2, 6))
    assert float(ds(n.ravel(), m.ravel()).mean()) == pytest.approx(251 / 480)
    assert float(ds(np.arange(1, 7), np.ones(6)).mean()) == pytest.approx(1 / 6)


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


def test_cf1_code_counts_membership_where_eq11_intersects() -> None:
    """The public code's category matches: every predicted category found in the item's gold. Item 1
    P = {car, car, person}, G = {car, bus, person}: Eq. 11's multiset ∩ = 2, membership 3; item 2
    P = {car, car}, G = {car}: ∩ 1, membership 2. CF1 = 2·3 / (6 + 3) = 2/3; CF1_code = 2·5 / 9 = 10/9,
    above 1. Where no item repeats a category (Figs. 41, 42 ... item 3) they agree."""
    pred, gold = [["car", "car", "person"], ["car", "car"]], [["car", "bus", "person"], ["car"]]
    assert category_f1(pred, gold) == pytest.approx(2 / 3)
    assert category_f1_code(pred, gold) == pytest.approx(10 / 9)
    num, den = f1_terms(pred, gold, matching="membership")
    assert num.tolist() == [6, 4] and den.tolist() == [6, 3]
    for p, g in (FIG41_CATS, FIG42_CATS, (["bowl", "tv"], ["bowl", "tv", "tv"])):
        assert category_f1_code([p], [g]) == pytest.approx(category_f1([p], [g]))
    with pytest.raises(ValueError, match="matching"):
        f1_terms(pred, gold, matching="set")  # type: ignore[arg-type]


def _public_pooled_f1(pred: list[list[str]], gold: list[list[str]], matched_per_item: list[int]) -> float:
    """The public code's aggregation, written out: pooled precision M/|P| and recall M/|G| over items,
    F1 = 2PR/(P + R), 0 where undefined."""
    m, npred, ngold = sum(matched_per_item), sum(map(len, pred)), sum(map(len, gold))
    prec = m / npred if npred else None
    rec = m / ngold if ngold else None
    return 2 * prec * rec / (prec + rec) if prec is not None and rec is not None and prec + rec > 0 else 0.0


def test_tf1_cf1_code_and_dqr_code_equal_the_public_codes_counting() -> None:
    """On 200 random items (seeded): TF1 equals the public code's per-type min(pred, gt) matches pooled
    into 2PR/(P + R), CF1_code its ``pred_cat in gt_categories`` matches pooled the same way, and
    mean(DQR_code) its mean n/m, each to 1e-9."""
    rng = np.random.default_rng(7)
    cats, types = ["car", "bus", "person", "dog"], ["color", "remove", "position"]
    def draw(vocab: list[str]) -> list[str]:
        return [str(x) for x in rng.choice(vocab, size=int(rng.integers(0, 5)))]
    pt, gt = [draw(types) for _ in range(200)], [draw(types) or ["color"] for _ in range(200)]
    pc, gc = [draw(cats) for _ in range(200)], [draw(cats) or ["car"] for _ in range(200)]
    type_matches = [sum(min(p.count(t), g.count(t)) for t in types) for p, g in zip(pt, gt, strict=True)]
    cat_matches = [sum(c in g for c in p) for p, g in zip(pc, gc, strict=True)]
    assert type_f1(pt, gt) == pytest.approx(_public_pooled_f1(pt, gt, type_matches), abs=1e-9)
    assert category_f1_code(pc, gc) == pytest.approx(_public_pooled_f1(pc, gc, cat_matches), abs=1e-9)
    n, m = [len(p) for p in pc], [len(g) for g in gc]
    assert float(np.mean(count_ratio(n, m))) == pytest.approx(sum(a / b for a, b in zip(n, m, strict=True))
                                                              / len(m), abs=1e-9)


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
    """Eq. 12: (1 + 0.5 − 1) / (2 + 3) = 0.1. Three contradictory pairs (Fig. 40) give a raw −1; the
    figure prints 0, which Fig. 34's normalisation gives (``test_cr_normalised_fig34``)."""
    assert consistency_ratio_eq12(["consistent", "ambiguous", "contradictory"], 2, 3) == pytest.approx(0.1)
    assert consistency_ratio_eq12([], 1, 1) == 0.0
    assert consistency_ratio(["contradictory"] * 3) == -1.0


def test_cr_normalised_fig34() -> None:
    """Fig. 34 ("Normalize final score to [0, 1] range") on raw CRs (Eqs. 12–13 per pair, Fig. 33's
    Σ scores / total_claims). Fig. 39 (3 consistent): raw 1 → 1 both ways; Fig. 40 (3 contradictory):
    raw −1 → 0 both ways, as printed. Fig. 34's example (5 consistent, 1 contradictory; printed 0.85):
    raw 4/6, affine (4/6 + 1)/2 = 5/6, clip 4/6. One ambiguous claim: raw 0.5, affine 0.75, clip 0.5."""
    raw = [consistency_ratio(["consistent"] * 3), consistency_ratio(["contradictory"] * 3),
           consistency_ratio(["consistent"] * 5 + ["contradictory"]), consistency_ratio(["ambiguous"])]
    assert raw == pytest.approx([1.0, -1.0, 4 / 6, 0.5])
    assert normalised_cr(raw).tolist() == pytest.approx([1.0, 0.0, 5 / 6, 0.75])
    assert normalised_cr(raw, "clip").tolist() == pytest.approx([1.0, 0.0, 4 / 6, 0.5])
    # one verdict per pair (the suite): the mean over pairs is 1 − contradiction − ambiguous / 4
    labels = ["consistent", "contradictory", "ambiguous", "consistent"]
    per_pair = normalised_cr([consistency_ratio([lab]) for lab in labels])
    assert float(per_pair.mean()) == pytest.approx(1 - 1 / 4 - (1 / 4) / 4)
    with pytest.raises(ValueError, match=r"in \[-1, 1\]"):
        normalised_cr([1.5])
    with pytest.raises(ValueError, match="affine"):
        normalised_cr([0.0], "minmax")  # type: ignore[arg-type]


def test_ds_exist_section3_figs39_40() -> None:
    """§3's DS per edited pair: 1 iff No to "same?" and Yes to "different?". Fig. 39 (both answers
    describe the truck's change: No / Yes) → 1; Fig. 40 (Yes / Yes) → 0, as printed; Yes / No → 0;
    No / No → 0 (says neither); P(Yes | same?) = 0.5 reads No, so (0.5, 0.6) → 1: mean 2/5."""
    got = ds_exist([0.1, 0.9, 0.9, 0.2, 0.5], [0.8, 0.7, 0.2, 0.3, 0.6])
    assert got.tolist() == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert float(got.mean()) == pytest.approx(2 / 5)
    with pytest.raises(ValueError, match="3 Q_same answers but 1"):
        ds_exist([0.1, 0.2, 0.3], [0.4])


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


def test_dqr_code_listed_counts_the_replys_claims_by_hand() -> None:
    """``DQR_code_listed`` (the public code's DQR: n = the claims a reply lists, over m; App. B.2.1 Eq. 8
    as the code computes it): a reply listing 3 claims for m = 2 scores 1.5, one listing 1 claim 0.5, one
    listing 4 for m = 4 scores 1.0; mean 1.0. The count question's n (``DQR_code``) would not see them."""
    listed, m = np.array([3, 1, 4]), np.array([2, 2, 4])
    x = count_ratio(listed, m)
    assert x.tolist() == [1.5, 0.5, 1.0] and math.isclose(float(x.mean()), 1.0)
