"""IMAVB behavioural metrics against hand-computed values (Eq. 1, §3, Table 1)."""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols.imavb.metrics import (
    TIE,
    answers,
    balanced_accuracy,
    correct,
    per_order_accuracy,
    rejection_rates,
    shuffle_spread,
    slice_accuracy,
    split_scores,
    tie_count,
)


def test_bal_eq1_hand_computed() -> None:
    """Eq. 1 on OLA's fixed-order row of Table 1: ½((71.0 + 71.6)/2 + (6.8 + 0.0)/2) = 37.35 ≈ 37.4."""
    assert balanced_accuracy(0.710, 0.068, 0.716, 0.000) == pytest.approx(0.3735)
    # vision only: ½(std_v + mis_v)
    assert balanced_accuracy(0.4, 0.8) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        balanced_accuracy(0.4, 0.8, 0.5, None)


def test_answers_argmax_and_ties_are_never_guessed() -> None:
    lg = np.array([[0, 1, 2, 3, 4, 5], [9, 9, 0, 0, 0, 0], [0, 0, 0, 0, 7, 1]], dtype=float)
    assert answers(lg).tolist() == [5, TIE, 4]
    assert correct(answers(lg), [5, 0, 4]).tolist() == [True, False, True]


def test_shuffle_spread_hand_computed() -> None:
    """Table 1's ±: 1.96·sd/√K. Shuffle accuracies 0.5, 0.6, 0.7: sd = 0.1, 1.96·0.1/√3 = 0.11316."""
    assert shuffle_spread([0.5, 0.6, 0.7]) == pytest.approx(0.196 / np.sqrt(3))
    assert np.isnan(shuffle_spread([0.5]))  # undefined with one shuffle, not a spread of 0
    assert np.isnan(shuffle_spread([]))


def test_split_scores_and_bal_ci() -> None:
    """Stimulus s0: std right, mis right; s1: std wrong, mis right; s2: both wrong.
    std_v = 1/3, mis_v = 2/3, Bal = ½(1/3 + 2/3) = 0.5; the CI brackets it."""
    c = [1, 1, 0, 1, 0, 0]
    splits = ["standard_vision", "misleading_vision"] * 3
    stim = ["s0", "s0", "s1", "s1", "s2", "s2"]
    ss = split_scores(c, splits, stim, n_resamples=2000, seed=1)
    assert ss.acc == pytest.approx({"standard_vision": 1 / 3, "misleading_vision": 2 / 3})
    assert ss.bal == pytest.approx(0.5) and ss.vision_only
    assert ss.bal_ci[0] <= 0.5 <= ss.bal_ci[1]
    assert ss.n == {"standard_vision": 3, "misleading_vision": 3}


def test_split_scores_with_audio_uses_eq1() -> None:
    c = [1, 0, 1, 1]
    splits = ["standard_vision", "misleading_vision", "standard_audio", "misleading_audio"]
    ss = split_scores(c, splits, ["s"] * 4, n_resamples=10)
    assert not ss.vision_only
    assert ss.bal == pytest.approx(0.5 * ((1 + 1) / 2 + (0 + 1) / 2))


def test_resamples_drawing_no_row_of_a_split_are_counted() -> None:
    """Stimulus s0 has only a standard item, s1 only a misleading one: a resample of the two stimuli
    misses a split with probability ½ (both s0 or both s1); those resamples are counted, not hidden."""
    ss = split_scores([1, 0], ["standard_vision", "misleading_vision"], ["s0", "s1"], n_resamples=1000)
    assert ss.n_resamples == 1000 and 400 < ss.empty_resamples < 600
    pairs = ["standard_vision", "misleading_vision"] * 2
    paired = split_scores([1, 0, 1, 1], pairs, ["s0", "s0", "s1", "s1"])
    assert paired.empty_resamples == 0


def test_tied_top_logits_are_counted() -> None:
    lg = np.zeros((2, 3, 6))
    lg[0, :, 1] = 1.0  # three clear answers
    lg[1, 0, :2] = 2.0  # one tie
    lg[1, 1:, 4] = 1.0
    assert tie_count(lg) == (1, 6)


def test_slices_rejections_and_orders() -> None:
    assert slice_accuracy([1, 0, 1], ["a", "a", None]) == {"a": (0.5, 2)}
    assert rejection_rates([4, 5, 0, 4]) == {"E": 0.5, "F": 0.25, "E_or_F": 0.75}
    c = np.array([[1, 0], [1, 1], [0, 0]], dtype=bool)
    assert per_order_accuracy(c, [True, True, False]).tolist() == [1.0, 0.5]
