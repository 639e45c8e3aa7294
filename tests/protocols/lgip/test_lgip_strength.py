"""Flip strength (LGIP §4.3) and the weak/medium/strong bins (Table 5)."""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols.lgip.strength import (
    LGIP_ALPHA,
    LGIP_TYPE_PRIOR,
    flip_strength,
    flip_strength_from_texts,
    strength_bins,
    strength_thresholds,
    text_cosine,
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
