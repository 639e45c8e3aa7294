"""S3E decision-state scores: Eq. 2, Eqs. 3-5, Eq. 7 and the frozen layer selection (§5.2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from faithtests.protocols.s3e.metrics import (
    CONTROLS,
    LEX,
    POS,
    PRES,
    RAND,
    STRESS,
    LayerSelection,
    cosine_distance,
    order_averaged_scores,
    paired_excess,
    pc1_gap_profile,
    s_scores,
    select_layer,
    selection_split,
    stress_pres_distance,
    top_half_band,
    top_half_layers,
)

R2 = 1.0 - 1.0 / math.sqrt(2.0)  # 1 - cos 45° = 0.2928932...


def test_cosine_distance_hand_values() -> None:
    # orthogonal -> 1; 45° -> 1 - 1/sqrt2; opposite -> 2; parallel with different norms -> 0.
    a = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [3.0, 4.0]])
    b = np.array([[0.0, 1.0], [1.0, 1.0], [-1.0, 0.0], [6.0, 8.0]])
    assert cosine_distance(a, b) == pytest.approx([1.0, R2, 2.0, 0.0], abs=1e-12)


def test_cosine_distance_zero_vector_raises() -> None:
    with pytest.raises(ValueError, match="zero-norm state at index"):
        cosine_distance(np.zeros(3), np.ones(3))


def _one_item_states() -> np.ndarray:
    # [layers=1, items=1, orders=2, roles=5, D=2]; roles = (pos, pres, lex, stress, rand).
    h = np.zeros((1, 1, 2, 5, 2))
    h[0, 0, 0] = [[1, 0], [1, 1], [1, 0], [0, 1], [-1, 0]]  # orig
    h[0, 0, 1] = [[1, 0], [1, 0], [2, 0], [1, 1], [0, 1]]  # swap
    return h


def test_s_scores_eq2_hand_values() -> None:
    # Eq. 2 against the pos-vs-pos state (1, 0):
    # orig: pos 0, pres (1,1) -> R2, lex (1,0) -> 0, stress (0,1) -> 1, rand (-1,0) -> 2
    # swap: pos 0, pres (1,0) -> 0, lex (2,0) -> 0, stress (1,1) -> R2, rand (0,1) -> 1
    S = s_scores(_one_item_states())
    assert S.shape == (1, 1, 2, 5)
    assert S[0, 0, 0] == pytest.approx([0, R2, 0, 1, 2], abs=1e-12)
    assert S[0, 0, 1] == pytest.approx([0, 0, 0, R2, 1], abs=1e-12)


def test_s_scores_preserve_anchor_variant() -> None:
    # reference="pres" (the paper's "preserve-anchored" reading): orig anchor (1,1):
    # pos (1,0) -> R2, pres 0, lex (1,0) -> R2, stress (0,1) -> R2, rand (-1,0) -> 1 + 1/sqrt2.
    S = s_scores(_one_item_states(), reference="pres")
    assert S[0, 0, 0] == pytest.approx([R2, 0, R2, R2, 1 + 1 / math.sqrt(2)], abs=1e-12)
    assert np.all(S[..., PRES] == 0)
    with pytest.raises(ValueError, match="reference must be"):
        s_scores(_one_item_states(), reference="lex")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown role"):
        order_averaged_scores(S, "positive")


def test_paired_excess_eqs_3_to_5_hand_values() -> None:
    S = s_scores(_one_item_states())
    # Eq. 3: ½[(1 - R2) + (R2 - 0)] = 0.5
    assert paired_excess(S, "pres")[0] == pytest.approx([0.5], abs=1e-12)
    # Eq. 4: ½[(1 - 0) + (R2 - 0)] = 0.5 + R2/2 = 0.6464466
    assert paired_excess(S, "lex")[0] == pytest.approx([0.5 + R2 / 2], abs=1e-12)
    # Eq. 5: ½[(1 - 2) + (R2 - 1)] = -1 + R2/2 = -0.8535534
    assert paired_excess(S, "rand")[0] == pytest.approx([-1 + R2 / 2], abs=1e-12)
    # Table 6 S_stress column: order-averaged S_stress = (1 + R2)/2
    assert order_averaged_scores(S, "stress")[0] == pytest.approx([(1 + R2) / 2], abs=1e-12)


def test_paired_excess_strict_filter_and_bad_control() -> None:
    S = np.zeros((2, 3, 2, 5))
    S[:, :, :, STRESS] = [[1.0], [2.0], [3.0]]  # item i has S_stress = i + 1 in both orders and layers
    out = paired_excess(S, "lex", np.array([True, False, True]))
    assert out.tolist() == [[1.0, 3.0], [1.0, 3.0]]
    with pytest.raises(ValueError, match="control must be"):
        paired_excess(S, "pos")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bool mask"):
        paired_excess(S, "lex", np.array([1, 0, 1]))


def test_stress_pres_distance_eq7_summand() -> None:
    # orig: stress (0,1) vs pres (1,1) -> R2; swap: stress (1,1) vs pres (1,0) -> R2.
    assert stress_pres_distance(_one_item_states())[0, 0] == pytest.approx([R2, R2], abs=1e-12)


def test_top_half_layers_match_table7() -> None:
    # Table 7: Qwen3VL-2B (28 layers) 14-27, Qwen3VL-4B/8B (36) 18-35, Gemma3-4B (34) 17-33.
    assert top_half_layers(28) == range(14, 28)
    assert top_half_layers(36) == range(18, 36)
    assert top_half_layers(34) == range(17, 34)
    assert top_half_layers(5) == range(2, 5)  # odd: the middle layer is kept (documented choice)


def test_top_half_band_eq7_hand_values() -> None:
    # [layers=4, items=2, orders=2]; top half = layers 2, 3.
    d = np.zeros((4, 2, 2))
    d[:, 0, 0] = [0.1, 0.2, 0.3, 0.5]
    d[:, 0, 1] = [0.1, 0.2, 0.5, 0.7]
    d[:, 1] = 9.0  # item 1 is not strict-correct and must be dropped
    # item 0: (0.3 + 0.5 + 0.5 + 0.7) / 4 = 0.5
    assert top_half_band(d, np.array([True, False])) == pytest.approx([0.5])


def _selection_scores() -> np.ndarray:
    # [layers=3, items=2, orders=2, roles=5]; item 0 strict-correct, item 1 not.
    S = np.zeros((3, 2, 2, 5))
    S[:, 0, :, STRESS] = [[0.2], [0.5], [0.6]]
    S[:, 0, :, PRES] = [[0.1], [0.1], [0.4]]  # Δpres per layer: 0.1, 0.4, 0.2 -> peak layer 1
    S[:, 0, :, LEX] = [[0.2], [0.2], [0.0]]  # Δlex per layer: 0.0, 0.3, 0.6 -> peak layer 2 (must NOT decide)
    S[2, 1, :, STRESS] = 5.0  # a huge Δpres on the non-strict item at layer 2 (must be filtered out)
    return S


def test_select_layer_peak_stress_specificity() -> None:
    strict = np.array([True, False])
    sel = select_layer(_selection_scores(), strict)
    assert sel.layer == 1 and sel.criterion == "delta_pres" and sel.n_items == 1
    assert sel.profile == pytest.approx((0.1, 0.4, 0.2))
    # s_stress criterion: mean S_stress per layer 0.2, 0.5, 0.6 -> layer 2
    assert select_layer(_selection_scores(), strict, criterion="s_stress").layer == 2
    assert LayerSelection.from_json(sel.to_json()) == sel


def test_select_layer_without_strict_items_raises() -> None:
    with pytest.raises(ValueError, match="no strict-correct items"):
        select_layer(_selection_scores(), np.array([False, False]))


def test_pc1_gap_profile_hand_values() -> None:
    # [layers=2, n=2, orders=2, D=2]. Layer 0: stress points all on the x axis -> PC1 share 1;
    # pres points (±1, 0), (0, ±1) are isotropic -> PC1 share 0.5. Gap = 1 - 0.5 = 0.5. Layer 1 swaps them.
    line = np.array([[[1.0, 0.0], [2.0, 0.0]], [[3.0, 0.0], [4.0, 0.0]]])
    iso = np.array([[[1.0, 0.0], [-1.0, 0.0]], [[0.0, 1.0], [0.0, -1.0]]])
    gap = pc1_gap_profile(np.stack([line, iso]), np.stack([iso, line]))
    assert gap == pytest.approx([0.5, -0.5])


def test_selection_split_is_a_seeded_partition() -> None:
    a, b = selection_split(10, seed=3)
    assert sorted(np.concatenate([a, b]).tolist()) == list(range(10)) and len(a) == 5
    a2, _ = selection_split(10, seed=3)
    assert np.array_equal(a, a2)


def test_non_finite_states_raise() -> None:
    h = _one_item_states()
    h[0, 0, 1, 3, 0] = np.inf
    with pytest.raises(ValueError, match=r"non-finite value at index \[0, 0, 1, 3, 0\]"):
        s_scores(h)


state_arrays = arrays(
    np.float64,
    st.tuples(st.integers(1, 3), st.integers(1, 3), st.just(2), st.just(5), st.integers(1, 4)),
    elements=st.floats(1e-3, 10) | st.floats(-10, -1e-3),  # no zero vectors (cosine undefined)
)


@given(state_arrays)
def test_scores_range_and_reference_zero(h: np.ndarray) -> None:
    S = s_scores(h)
    assert np.all((S >= 0) & (S <= 2))
    assert np.all(S[..., POS] == 0)  # the reference's distance to itself


@given(state_arrays, st.floats(0.01, 100))
def test_identical_and_scaled_states_give_zero(h: np.ndarray, scale: float) -> None:
    # every role equal to (a positive multiple of) the reference -> S = 0 (cosine is scale-free)
    same = np.repeat(h[:, :, :, POS : POS + 1], 5, axis=3)
    same[:, :, :, RAND] *= scale
    assert np.allclose(s_scores(same), 0.0, atol=1e-12)


@given(arrays(np.float64, st.tuples(st.integers(1, 3), st.integers(1, 4), st.just(2), st.just(5)),
              elements=st.floats(0, 2)))  # fmt: skip
def test_order_averaging_is_swap_symmetric(S: np.ndarray) -> None:
    for c in CONTROLS:
        assert np.allclose(paired_excess(S[:, :, ::-1], c), paired_excess(S, c))
    band = top_half_band(S[..., STRESS])
    assert np.allclose(top_half_band(S[:, :, ::-1, STRESS]), band)
    assert np.all((band >= 0) & (band <= 2))
