"""S3E forced-choice behaviour: decisions, per-order accuracy, strict-correct, margins (§3.2, App. A/F/H)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from faithtests.protocols.s3e.metrics import (
    TIE,
    ab_decisions,
    margin_matched_half,
    positive_chosen,
    positive_margin,
    stress_behaviour,
    strict_correct,
)

# [items, orders (orig, swap), letters (A, B)]; c+ is A in orig and B in swap (S3E Eqs. 9-10).
LOGITS = np.array(
    [
        [[2.0, 1.0], [0.5, 1.5]],  # item 0: A (c+), B (c+)        -> strict-correct
        [[2.0, 1.0], [1.5, 0.5]],  # item 1: A (c+), A (stress)    -> always-A position bias, not strict
        [[0.0, 1.0], [0.0, 1.0]],  # item 2: B (stress), B (c+)    -> always-B, not strict
        [[1.0, 1.0], [0.0, 2.0]],  # item 3: tie (no choice), B (c+) -> not strict, one tie
    ]
)


def test_decisions_and_ties() -> None:
    # argmax of (A, B); an exact tie decides nothing (TIE = -1) rather than defaulting to A.
    assert ab_decisions(LOGITS).tolist() == [[0, 1], [0, 0], [1, 1], [TIE, 1]]


def test_positive_chosen_and_strict() -> None:
    # c+ chosen: orig needs A, swap needs B (App. A "expected answer is A in original, B in swapped").
    assert positive_chosen(LOGITS).tolist() == [[True, True], [True, False], [False, True], [False, True]]
    assert strict_correct(LOGITS).tolist() == [True, False, False, False]


def test_stress_behaviour_hand_values() -> None:
    b = stress_behaviour(LOGITS)
    # Orig acc: items 0, 1 -> 2/4; swap acc: items 0, 2, 3 -> 3/4 (Table 6 Orig./Swap).
    assert b.acc_orig == pytest.approx(0.5)
    assert b.acc_swap == pytest.approx(0.75)
    # Pair acc (Table 13): 5 of 8 trials; strict: 1 of 4 items.
    assert b.pair_acc == pytest.approx(5 / 8)
    assert b.strict_rate == pytest.approx(0.25) and b.n_strict == 1
    # A-rates (Table 14): orig A for items 0, 1 (the tie is not A) -> 0.5; swap A for item 1 -> 0.25.
    assert b.a_rate_orig == pytest.approx(0.5)
    assert b.a_rate_swap == pytest.approx(0.25)
    assert b.order_gap == pytest.approx(-0.25)  # 0.5 - 0.75
    assert b.n_ties == 1 and b.n == 4


def test_positive_margin_hand_values() -> None:
    # margin = logit(letter of c+) - logit(other letter); c+ is A in orig, B in swap:
    # item 0: orig 2-1 = 1, swap 1.5-0.5 = 1;  item 1: orig 2-1 = 1, swap 0.5-1.5 = -1;
    # item 2: orig 0-1 = -1, swap 1-0 = 1;       item 3: orig 1-1 = 0, swap 2-0 = 2.
    m = positive_margin(LOGITS)
    assert m.tolist() == [[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [0.0, 2.0]]


def _with_margin(margins: list[float]) -> np.ndarray:
    # Each item shows margin m in both orders: orig (m, 0) -> A-B = m; swap (0, m) -> B-A = m.
    return np.array([[[m, 0.0], [0.0, m]] for m in margins])


def test_margin_matched_half_hand_values() -> None:
    # stress margins [1, 2, 3, 4], lexical margins [1, 1, 1, 1] -> gaps [0, 1, 2, 3]; median 1.5;
    # keep gap <= 1.5 -> items 0, 1 (Table 12: the half with the smallest |Δm|).
    mm = margin_matched_half(_with_margin([1, 2, 3, 4]), _with_margin([1, 1, 1, 1]))
    assert mm.gap.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert mm.threshold == pytest.approx(1.5)
    assert mm.mask.tolist() == [True, True, False, False] and mm.n_kept == 2


def test_margin_matched_half_keeps_ties_at_threshold() -> None:
    # gaps [1, 1, 1, 5] -> median 1 -> three items kept (ties at the threshold stay, as in
    # Table 12's 4,849 of 9,661).
    mm = margin_matched_half(_with_margin([2, 2, 2, 6]), _with_margin([1, 1, 1, 1]))
    assert mm.threshold == pytest.approx(1.0) and mm.n_kept == 3


def test_bad_inputs_raise() -> None:
    bad = LOGITS.copy()
    bad[2, 1, 0] = np.nan
    with pytest.raises(ValueError, match=r"non-finite logit at index \[2, 1, 0\]"):
        stress_behaviour(bad)
    with pytest.raises(ValueError, match="orders=2"):
        strict_correct(np.zeros((4, 3, 2)))
    with pytest.raises(ValueError, match="non-empty"):
        stress_behaviour(np.zeros((0, 2, 2)))


finite = st.floats(-50, 50, allow_nan=False, width=32)


@given(arrays(np.float64, st.tuples(st.integers(1, 6), st.just(2), st.just(2)), elements=finite))
def test_relabelling_symmetry(lg: np.ndarray) -> None:
    # Swapping the two orders AND the two letters shows c+ at the same letter as before in the other
    # order, so "c+ chosen" must swap orders exactly; strict-correct is unchanged.
    relabelled = lg[:, ::-1, ::-1]
    assert np.array_equal(positive_chosen(relabelled), positive_chosen(lg)[:, ::-1])
    assert np.array_equal(strict_correct(relabelled), strict_correct(lg))
    assert np.allclose(positive_margin(relabelled), positive_margin(lg)[:, ::-1])


@given(
    arrays(np.float64, st.tuples(st.integers(1, 9), st.just(2), st.just(2)), elements=finite),
    arrays(np.float64, st.tuples(st.just(9), st.just(2), st.just(2)), elements=finite),
)
def test_margin_matched_keeps_at_least_half(stress: np.ndarray, control: np.ndarray) -> None:
    control = control[: stress.shape[0]]
    mm = margin_matched_half(stress, control)
    assert 2 * mm.n_kept >= stress.shape[0]
    assert np.all(mm.gap[mm.mask] <= mm.gap[~mm.mask].min(initial=np.inf))
