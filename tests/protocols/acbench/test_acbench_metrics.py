"""AC-Bench metrics against hand-computed values: DAR (Eqs. 1–3), TBR (Eq. 4), accuracy, LSS (Eq. 22)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from faithtests.models.interfaces import TokenSpans
from faithtests.protocols.acbench.metrics import (
    OTHER,
    accuracy,
    aligned_accuracy,
    answer_category,
    answer_shares,
    by_subset,
    length_normalised,
    lss,
    lss_items,
    masks_from_spans,
    tbr,
)

# (y_img, y_txt, prediction, subset): six conflict items, one aligned, one image-only
ROWS: list[tuple[str, str | None, str | None, str]] = [
    ("awe", "fear", "awe", "S-Adj"),  # image-aligned
    ("awe", "fear", "fear", "S-Adj"),  # text-aligned
    ("anger", "excitement", "excitement", "S-Opp"),  # text-aligned
    ("sadness", "contentment", None, "S-Opp"),  # unparseable: other
    ("amusement", "disgust", OTHER, "O-Obj"),  # the sentinel: other
    ("fear", "awe", "amusement", "O-Obj"),  # a third label: other
    ("contentment", "contentment", "contentment", "aligned"),  # not in Q_conf
    ("anger", None, "anger", "image-only"),  # not in Q_conf
]
Y_IMG = [r[0] for r in ROWS]
Y_TXT = [r[1] for r in ROWS]
PRED = [r[2] for r in ROWS]
SUBSETS = [r[3] for r in ROWS]


def test_shares_eqs_1_to_3_hand_computed() -> None:
    """|Q_conf| = 6 (the aligned and image-only rows have y_img = y_txt or no y_txt): one prediction
    equals y_img, two equal y_txt, so P_img = 1/6, P_txt = 2/6 (Eqs. 1–2), P_oth = 1 − 1/6 − 2/6 = 1/2
    (Eq. 3), and TBR = (2/6) / (2/6 + 1/6) = 2/3 (Eq. 4)."""
    sh = answer_shares(PRED, Y_IMG, Y_TXT)
    assert sh.n == 6
    assert (sh.p_img, sh.p_txt, sh.p_oth) == pytest.approx((1 / 6, 2 / 6, 1 / 2))
    assert sh.tbr == pytest.approx(2 / 3)


def test_tbr_eq4_matches_the_papers_tables() -> None:
    """Eq. 4 on Table 5's rows reproduces Table 7: Qwen3-VL-8B S-Opp 50.40 / (50.40 + 21.34) = 0.703,
    Qwen2.5-VL-7B S-Adj 64.62 / (64.62 + 29.97) = 0.683, CECS S-Opp 4.68 / (4.68 + 76.88) = 0.057."""
    assert tbr(0.5040, 0.2134) == pytest.approx(0.703, abs=5e-4)
    assert tbr(0.6462, 0.2997) == pytest.approx(0.683, abs=5e-4)
    assert tbr(0.0468, 0.7688) == pytest.approx(0.057, abs=5e-4)


def test_tbr_with_zero_denominator_is_nan_not_a_number_guessed() -> None:
    assert math.isnan(tbr(0.0, 0.0))
    sh = answer_shares([None, "amusement"], ["awe", "awe"], ["fear", "fear"])
    assert (sh.p_img, sh.p_txt, sh.p_oth) == (0.0, 0.0, 1.0)
    assert math.isnan(sh.tbr)


def test_no_conflict_items_gives_nan_shares() -> None:
    sh = answer_shares(["awe"], ["awe"], ["awe"])
    assert sh.n == 0 and math.isnan(sh.p_img) and math.isnan(sh.p_oth)


def test_answer_category() -> None:
    assert answer_category("awe", "awe", "fear") == "image"
    assert answer_category("fear", "awe", "fear") == "text"
    assert answer_category(None, "awe", "fear") == "other"
    assert answer_category("Awe", "awe", "fear") == "other"  # predictions are parsed labels, not raw text


def test_by_subset_breakdown_in_paper_order() -> None:
    """S-Adj: 1 image, 1 text → (1/2, 1/2, 0), TBR 1/2; S-Opp: 1 text, 1 other → (0, 1/2, 1/2), TBR 1;
    O-Obj: 2 other → (0, 0, 1), TBR undefined. Subsets with no rows are absent."""
    out = by_subset(PRED, Y_IMG, Y_TXT, SUBSETS)
    assert list(out) == ["S-Adj", "S-Opp", "O-Obj"]
    assert (out["S-Adj"].p_img, out["S-Adj"].p_txt, out["S-Adj"].p_oth) == pytest.approx((0.5, 0.5, 0.0))
    assert out["S-Adj"].tbr == pytest.approx(0.5)
    assert (out["S-Opp"].p_img, out["S-Opp"].p_txt, out["S-Opp"].p_oth) == pytest.approx((0.0, 0.5, 0.5))
    assert out["S-Opp"].tbr == pytest.approx(1.0)
    assert out["O-Obj"].p_oth == pytest.approx(1.0) and math.isnan(out["O-Obj"].tbr)
    assert all(s.n == 2 for s in out.values())


def test_accuracies() -> None:
    assert aligned_accuracy(PRED, Y_IMG, SUBSETS) == 1.0
    assert aligned_accuracy(["awe", None], ["fear", "awe"], ["aligned", "aligned"]) == 0.0
    # image-only baseline against y_img; text-only against y_txt; unparseable answers are wrong
    assert accuracy(["awe", None, "fear", "fear"], ["awe", "awe", "fear", "sadness"]) == pytest.approx(0.5)
    assert math.isnan(accuracy([], []))
    with pytest.raises(ValueError, match="different lengths"):
        accuracy(["awe"], ["awe", "fear"])


# ------------------------------------------------------------------------------------------ LSS
# keys: 0 other, 1–3 image, 4–5 description
IMG = np.array([[False, True, True, True, False, False]] * 2)
DESC = np.array([[False, False, False, False, True, True]] * 2)
LAYER = np.array(
    [
        [[0.4, 0.1, 0.1, 0.1, 0.2, 0.1], [0.1, 0.05, 0.05, 0.1, 0.3, 0.4]],
        [[0.5, 0.2, 0.2, 0.0, 0.05, 0.05], [0.2, 0.2, 0.2, 0.2, 0.1, 0.1]],
    ]
)


def test_lss_eq22_hand_computed() -> None:
    """Item 0: Σ_h desc = 0.3 + 0.7 = 1.0, Σ_h image = 0.3 + 0.2 = 0.5 → 2.0 (a mean of per-head ratios
    would give (1 + 3.5)/2 = 2.25: Eq. 22 sums over heads first). Item 1: 0.3 / 1.0 = 0.3.
    LSS_l = (2.0 + 0.3)/2 = 1.15."""
    assert lss_items(LAYER, IMG, DESC) == pytest.approx([2.0, 0.3])
    curve = lss([LAYER, LAYER[:, ::-1]], IMG, DESC)
    assert curve.per_item.shape == (2, 2)
    assert curve.mean[0] == pytest.approx(1.15)
    assert curve.undefined.tolist() == [0, 0]


def test_lss_zero_image_mass_is_undefined_and_counted() -> None:
    """Item 1 of layer 1 puts no mass on image keys: its ratio is undefined (NaN), left out of that
    layer's mean (item 0 alone: 2.0) and counted."""
    second = LAYER.copy()
    second[1] = [[0.9, 0, 0, 0, 0.05, 0.05], [0.8, 0, 0, 0, 0.1, 0.1]]
    curve = lss(np.stack([LAYER, second]), IMG, DESC)
    assert math.isnan(curve.per_item[1, 1])
    assert curve.mean.tolist() == pytest.approx([1.15, 2.0])
    assert curve.undefined.tolist() == [0, 1]


def test_lss_rejects_missing_spans_and_bad_shapes() -> None:
    with pytest.raises(ValueError, match="image tokens and description"):
        lss_items(LAYER, IMG, np.zeros_like(DESC))
    with pytest.raises(ValueError, match=r"\[N, heads, keys\]"):
        lss_items(LAYER[0], IMG, DESC)
    with pytest.raises(ValueError, match="both image and description"):
        lss_items(LAYER, IMG, IMG)


def test_masks_from_spans_use_exact_image_runs() -> None:
    """Two image runs with a separator token at 3 between them: the separator is not an image key."""
    spans = TokenSpans(
        image=[(1, 5), (0, 0)],
        description=[(6, 8), (2, 4)],
        length=[9, 5],
        image_runs=[[(1, 3), (4, 5)], [(0, 1)]],
    )
    img, desc = masks_from_spans(spans, 9)
    assert np.flatnonzero(img[0]).tolist() == [1, 2, 4]
    assert np.flatnonzero(desc[0]).tolist() == [6, 7]
    assert np.flatnonzero(img[1]).tolist() == [0] and np.flatnonzero(desc[1]).tolist() == [2, 3]
    # without image_runs, the image range is used; spans past the width are clipped
    img2, _ = masks_from_spans(TokenSpans(image=[(1, 5)], description=[(6, 8)], length=[9]), 4)
    assert np.flatnonzero(img2[0]).tolist() == [1, 2, 3]


def test_p_oth_is_counted_not_the_remainder() -> None:
    """Eq. 3 counts the other answers: 13 image + 2 text of 15 leaves P_oth exactly 0, where
    1 − P_img − P_txt rounds to −5.6e-17 (a scorecard showed "-0.000")."""
    assert 1.0 - 13 / 15 - 2 / 15 < 0  # the rounding this guards against
    s = answer_shares(["a"] * 13 + ["b"] * 2, ["a"] * 15, ["b"] * 15)
    assert (s.p_img, s.p_txt, s.p_oth) == (13 / 15, 2 / 15, 0.0)


def test_length_normalised_scoring_by_hand() -> None:
    """The labelled scoring option (not the paper's, recorded not gated): log p(label) / |label tokens|.
    Whole-label scores [-1.0, -1.5, -4.0] pick the one-token label; divided by [1, 3, 2] tokens they are
    [-1.0, -0.5, -2.0] and the three-token label wins."""
    lp = np.array([[-1.0, -1.5, -4.0]])
    out = length_normalised(lp, np.array([1, 3, 2]))
    assert np.allclose(out, [[-1.0, -0.5, -2.0]])
    assert int(lp.argmax()) == 0 and int(out.argmax()) == 1
    assert np.allclose(length_normalised(lp, np.ones((1, 3))), lp)  # one token each: unchanged
    with pytest.raises(ValueError, match="at least one token"):
        length_normalised(lp, np.array([1, 0, 2]))
