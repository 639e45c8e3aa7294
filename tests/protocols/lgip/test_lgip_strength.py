"""Flip strength (LGIP §4.3, no equation number) and the weak/medium/strong bins (Table 5).

Quantiles are numpy's linear interpolation: q at position (n − 1)·q of the sorted values.
"""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols.lgip.strength import (
    BIN_SCHEMES,
    LGIP_ALL_PRIOR,
    LGIP_ALPHA,
    LGIP_TYPE_PRIOR,
    bin_flips,
    flip_strength,
    flip_strength_from_texts,
    paper_bins,
    pooled_bins,
    strength_bins,
    strength_thresholds,
    text_cosine,
    text_cosines_from_texts,
    within_type_bins,
)


def test_type_prior_is_ordered_colour_number_object() -> None:
    assert LGIP_TYPE_PRIOR["color"] < LGIP_TYPE_PRIOR["number"] < LGIP_TYPE_PRIOR["object"]
    assert LGIP_ALPHA == 0.5


def test_flip_strength_hand_computed() -> None:
    """LGIP §4.3: s = a·prior + (1 − a)·clip01(1 − cos), a = 0.5, priors 0.25 / 0.55 / 1.0."""
    s = flip_strength(["color", "number", "object", "color"], [0.9, 0.5, -0.5, 1.2])
    # color: 0.5*0.25 + 0.5*0.1 = 0.175; number: 0.275 + 0.25 = 0.525
    # object: 0.5 + 0.5*clip(1.5) = 1.0; color with cos > 1: distance clipped to 0 -> 0.125
    assert s == pytest.approx([0.175, 0.525, 1.0, 0.125])


def test_flip_strength_rejects_unknown_type_and_bad_alpha() -> None:
    with pytest.raises(KeyError, match="spatial"):
        flip_strength(["spatial"], [0.5])
    with pytest.raises(ValueError, match="alpha"):
        flip_strength(["color"], [0.5], alpha=1.5)
    with pytest.raises(ValueError, match="non-finite"):
        flip_strength(["color"], [np.nan])


def test_text_cosine_normalises_rows() -> None:
    a = np.array([[3.0, 0.0], [1.0, 1.0]])
    b = np.array([[1.0, 0.0], [-2.0, -2.0]])
    assert text_cosine(a, b) == pytest.approx([1.0, -1.0])
    with pytest.raises(ValueError, match="zero-norm"):
        text_cosine(np.zeros((1, 2)), np.ones((1, 2)))


def test_strength_from_texts_embeds_each_unique_text_once() -> None:
    table = {"a red car": [1.0, 0.0], "a blue car": [0.6, 0.8], "a red bus": [0.0, 1.0]}
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return np.array([table[t] for t in texts])

    s = flip_strength_from_texts(["a red car", "a red car"], ["a blue car", "a red bus"], ["color", "object"],
                                 embed)
    assert len(calls) == 1 and sorted(calls[0]) == sorted(table)
    # cos = 0.6 -> 0.5*0.25 + 0.5*0.4 = 0.325 ; cos = 0 -> 0.5*1 + 0.5*1 = 1.0
    assert s == pytest.approx([0.325, 1.0])


def test_bins_at_quartiles_with_public_code_boundaries() -> None:
    s = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    assert strength_thresholds(s) == pytest.approx((0.2, 0.4))  # linear interpolation
    labels, thr = strength_bins(s)
    assert thr == pytest.approx((0.2, 0.4))
    # weak <= q25, medium <= q75, strong above
    assert labels == ["weak", "weak", "medium", "medium", "strong"]
    labels2, _ = strength_bins(s, thresholds=(0.0, 0.45))
    assert labels2 == ["medium", "medium", "medium", "medium", "strong"]


def test_text_cosines_from_texts_embed_once() -> None:
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return np.array([[1.0, 0.0] if "red" in t else [0.0, 2.0] for t in texts])

    cos = text_cosines_from_texts(["a red car", "a red car"], ["a blue car", "a red bus"], embed)
    assert len(calls) == 1 and cos == pytest.approx([0.0, 1.0])


# Four flips for the three schemes: cos (0.9, 0.9, 0.5, 0.1) -> distance d = (0.1, 0.1, 0.5, 0.9).
TYPES = ["color", "object", "number", "object"]
COS = [0.9, 0.9, 0.5, 0.1]


def test_paper_bins_hand_computed() -> None:
    """The public script's Table 5 bins: typed strengths 0.5·prior + 0.5·d = (0.175, 0.55, 0.525, 0.95) and
    "all" strengths 0.5·0.6 + 0.5·d = (0.35, 0.35, 0.55, 0.75). Doubled set sorted: 0.175 0.35 0.35 0.525
    0.55 0.55 0.75 0.95; q25 at position 1.75 = 0.35, q75 at 5.25 = 0.55 + 0.25·0.2 = 0.60. Each flip is
    binned by its "all" strength: 0.35 <= 0.35 weak (twice), 0.55 medium, 0.75 strong."""
    assert LGIP_ALL_PRIOR == 0.6
    bins = paper_bins(TYPES, COS)
    assert bins.scheme == "paper"
    assert bins.labels == ("weak", "weak", "medium", "strong")
    assert dict(bins.thresholds) == {"all": pytest.approx((0.35, 0.60))}
    assert bin_flips(TYPES, COS, "paper") == bins


def test_pooled_bins_hand_computed() -> None:
    """Typed strengths sorted 0.175 0.525 0.55 0.95: q25 at 0.75 = 0.175 + 0.75·0.35 = 0.4375, q75 at 2.25 =
    0.55 + 0.25·0.4 = 0.65; so weak, medium (0.55), medium (0.525), strong."""
    bins = bin_flips(TYPES, COS, "pooled")
    assert bins.labels == ("weak", "medium", "medium", "strong")
    assert dict(bins.thresholds) == {"all": pytest.approx((0.4375, 0.65))}


def test_within_type_bins_hand_computed() -> None:
    """Per type: colour (0.175) and number (0.525) alone, q25 = q75 = the value: weak; object (0.55, 0.95):
    q25 = 0.55 + 0.25·0.4 = 0.65, q75 = 0.85: 0.55 weak, 0.95 strong."""
    bins = bin_flips(TYPES, COS)
    assert bins.scheme == "within-type" and BIN_SCHEMES[0] == "within-type"
    assert bins.labels == ("weak", "weak", "weak", "strong")
    assert dict(bins.thresholds) == {"color": pytest.approx((0.175, 0.175)),
                                     "object": pytest.approx((0.65, 0.85)),
                                     "number": pytest.approx((0.525, 0.525))}


def test_pooled_bins_sort_by_type_within_type_bins_do_not() -> None:
    """Issue 15 item 5: colour and object flips with the same text distances 0.05–0.2. Pooled strengths
    (colour 0.15–0.225, object 0.525–0.6; q25 0.19375, q75 0.55625) put only colour in the weak bin and
    only objects in the strong one; within-type bins cut each type at its own quartiles."""
    d = np.array([0.05, 0.1, 0.15, 0.2])
    types = ["color"] * 4 + ["object"] * 4
    cos = np.concatenate([1 - d, 1 - d])
    pooled = bin_flips(types, cos, "pooled")
    assert pooled.labels == ("weak", "weak", "medium", "medium", "medium", "medium", "strong", "strong")
    assert dict(pooled.thresholds) == {"all": pytest.approx((0.19375, 0.55625))}
    within = bin_flips(types, cos, "within-type")
    assert within.labels == ("weak", "medium", "medium", "strong") * 2


def test_within_type_bins_interleaved_types() -> None:
    """Type a: 0.1..0.5 (q25 0.2, q75 0.4: w w m m s); type b: (0.9, 0.6) (q25 0.675, q75 0.825)."""
    s = [0.1, 0.9, 0.2, 0.3, 0.6, 0.4, 0.5]
    types = ["a", "b", "a", "a", "b", "a", "a"]
    bins = within_type_bins(s, types)
    assert bins.labels == ("weak", "strong", "weak", "medium", "weak", "medium", "strong")
    assert dict(bins.thresholds) == {"a": pytest.approx((0.2, 0.4)), "b": pytest.approx((0.675, 0.825))}
    assert pooled_bins(s).labels == tuple(strength_bins(s)[0])
    with pytest.raises(ValueError, match="types"):
        within_type_bins(s, types[:-1])
    with pytest.raises(ValueError, match="scheme"):
        bin_flips(TYPES, COS, "global")  # type: ignore[arg-type]
