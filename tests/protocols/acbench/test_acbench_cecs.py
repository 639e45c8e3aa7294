"""CECS (AC-Bench §5.1, App. D): Eq. 5, the mass-preserving update (Eqs. 6–10, 17, 21) as properties and
hand-computed values, the gate, the zero-mass and negative-weight guards, the window rule, the modifier."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from faithtests.models.interfaces import TokenSpans
from faithtests.protocols.acbench.cecs import (
    PAPER_WINDOWS,
    Gate,
    cecs_hooks,
    conflict_score,
    make_modifier,
    reallocate,
    window_from_lss,
)

# keys: 0–1 other, 2–4 image, 5–6 description
IMG = np.array([False, False, True, True, True, False, False])
TXT = np.array([False, False, False, False, False, True, True])
# S_V = 0.2, S_T = 0.6, other = 0.2: r_now = 0.25
ROW = np.array([0.15, 0.05, 0.1, 0.05, 0.05, 0.4, 0.2])


def share(w: np.ndarray) -> float:
    return float(w[..., IMG].sum() / (w[..., IMG].sum() + w[..., TXT].sum()))


def test_conflict_score_eq5() -> None:
    """s = e^{z_no} / (e^{z_yes} + e^{z_no}): equal logits 0.5; z_yes − z_no = 2 → 1/(1 + e²) = 0.1192."""
    assert conflict_score(1.0, 1.0) == pytest.approx(0.5)
    assert conflict_score(2.0, 0.0) == pytest.approx(1 / (1 + math.e**2))
    assert conflict_score(0.0, 2.0) == pytest.approx(math.e**2 / (1 + math.e**2))
    s = conflict_score(np.array([1000.0, -1000.0]), np.array([-1000.0, 1000.0]))  # no overflow
    assert s.tolist() == [0.0, 1.0]
    with pytest.raises(ValueError):
        conflict_score(float("nan"), 0.0)


def test_soft_gate_hand_computed_alpha_beta() -> None:
    """s = τ = 0.6 → w = σ(0) = ½ (Eq. 8); r_target = 0.5 + 0.6·0.4 = 0.74 (Eq. 7); r_now = 0.25 (Eq. 6);
    r_eff = ½·0.25 + ½·0.74 = 0.495. Eq. 17: 1 + α = 0.495·(1 + 0.6/0.2) = 1.98; Eq. 21:
    β = 0.98·0.2/0.6 = 0.32667. Image keys × 1.98, description keys × 0.67333, others unchanged."""
    out = reallocate(ROW, IMG, TXT, 0.6, gate="soft")
    expected = ROW.copy()
    expected[IMG] *= 1.98
    expected[TXT] *= 1 - 0.98 * 0.2 / 0.6
    assert out == pytest.approx(expected, abs=1e-12)
    assert share(out) == pytest.approx(0.495, abs=1e-12)
    assert out.sum() == pytest.approx(1.0, abs=1e-12)


def test_r_eff_reached_exactly_when_w_is_one() -> None:
    """T → 0 makes w = σ((s − τ)/T) = 1 in floating point: the new visual share is r_target exactly
    (Eq. 12 with r_eff = r_target): s = 1 → r_max = 0.9; s = 0.8 → 0.5 + 0.8·0.4 = 0.82."""
    assert share(reallocate(ROW, IMG, TXT, 1.0, temp=1e-3)) == pytest.approx(0.9, abs=1e-12)
    assert share(reallocate(ROW, IMG, TXT, 0.8, temp=1e-3)) == pytest.approx(0.82, abs=1e-12)


def test_hard_gate_leaves_rows_below_tau_unchanged() -> None:
    """s < τ: Default Mode, bit-identical rows (the soft gate would still move them: w(0.5) = σ(−1))."""
    for s in (0.0, 0.3, 0.5999):
        assert np.array_equal(reallocate(ROW, IMG, TXT, s), ROW)
    soft = reallocate(ROW, IMG, TXT, 0.5, gate="soft")
    assert share(soft) > 0.25 and not np.array_equal(soft, ROW)
    assert share(reallocate(ROW, IMG, TXT, 0.6)) == pytest.approx(0.495)  # at τ: active, w = ½


def test_per_row_scores_and_zero_mass_rows() -> None:
    """Rows: below the gate; above it; no image mass (α would be infinite); no description mass
    (nothing to move). Only the second row changes."""
    no_img = np.array([0.5, 0.1, 0.0, 0.0, 0.0, 0.3, 0.1])
    no_txt = np.array([0.5, 0.1, 0.2, 0.1, 0.1, 0.0, 0.0])
    rows = np.stack([ROW, ROW, no_img, no_txt])
    out = reallocate(rows, IMG, TXT, np.array([0.2, 1.0, 1.0, 1.0]))
    assert np.array_equal(out[[0, 2, 3]], rows[[0, 2, 3]])
    w = 1 / (1 + math.exp(-4))  # σ((1 − 0.6)/0.1)
    assert share(out[1]) == pytest.approx((1 - w) * 0.25 + w * 0.9, abs=1e-12)


def test_negative_weight_guard() -> None:
    """r_eff is a share in [0, 1], so 1 − β = (1 − r_eff)·S/S_T ≥ 0: with r_max = 1 and w = 1 the
    description is drained to exactly 0, never below. Eq. 9's odds form would give 1 − β = −1 on
    S_V = S_T = ½, r_eff = ¾; the implemented Eq. 17 gives share ¾ with every weight ≥ 0. Parameters
    that would allow r_eff > 1 (r_max > 1, s > 1) are errors."""
    drained = reallocate(ROW, IMG, TXT, 1.0, r_max=1.0, temp=1e-3)
    assert np.all(drained[TXT] == 0.0) and np.all(drained >= 0)
    assert drained.sum() == pytest.approx(1.0, abs=1e-12)
    half = np.array([0.0, 0.0, 0.25, 0.25, 0.0, 0.25, 0.25])
    out = reallocate(half, IMG, TXT, 1.0, r_min=0.75, r_max=0.75, temp=1e-3)
    assert share(out) == pytest.approx(0.75) and np.all(out >= 0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        reallocate(ROW, IMG, TXT, 1.0, r_max=1.2)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        reallocate(ROW, IMG, TXT, 1.5)
    with pytest.raises(ValueError, match="both image and description"):
        reallocate(ROW, IMG, IMG, 1.0)


@st.composite
def rows(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    k = draw(st.integers(3, 12))
    kinds = np.array(draw(st.lists(st.integers(0, 2), min_size=k, max_size=k)))
    kinds[0], kinds[1] = 1, 2  # at least one image and one description key
    logits = np.array(draw(st.lists(st.floats(-12, 12), min_size=k, max_size=k)))
    w = np.exp(logits - logits.max())
    return w / w.sum(), kinds == 1, kinds == 2, draw(st.floats(0, 1))


@settings(max_examples=300, deadline=None)
@given(rows(), st.sampled_from(["hard", "soft"]), st.floats(0, 1), st.floats(0, 1))
def test_update_preserves_mass_and_stays_a_distribution(
    case: tuple[np.ndarray, np.ndarray, np.ndarray, float], gate: Gate, a: float, b: float
) -> None:
    """Eq. 13: S_V(1 + α) + S_T(1 − β) = S_V + S_T; other keys untouched; the row sums to 1; no weight
    is negative; the new share lies between r_now and r_target (Eq. 8's blend), for any r-range in [0, 1]."""
    w, img, txt, s = case
    r_min, r_max = min(a, b), max(a, b)
    out = reallocate(w, img, txt, s, r_min=r_min, r_max=r_max, gate=gate)
    other = ~(img | txt)
    assert np.array_equal(out[other], w[other])
    assert out[img | txt].sum() == pytest.approx(w[img | txt].sum(), abs=1e-9)
    assert abs(out.sum() - 1.0) < 1e-6
    assert np.all(out >= 0)
    r_now = w[img].sum() / w[img | txt].sum()
    new = out[img].sum() / out[img | txt].sum()
    r_target = r_min + s * (r_max - r_min)
    assert min(r_now, r_target) - 1e-9 <= new <= max(r_now, r_target) + 1e-9


def test_torch_matches_numpy_and_keeps_dtype() -> None:
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(7), size=(2, 3))  # [batch, heads, keys]
    s = np.array([[0.9], [0.7]])
    ref = reallocate(w, IMG, TXT, s)
    got = reallocate(torch.tensor(w, dtype=torch.float32), torch.tensor(IMG), TXT, s)
    assert got.dtype == torch.float32
    assert got.numpy() == pytest.approx(ref, abs=1e-6)
    assert torch.allclose(got.sum(-1), torch.ones(2, 3), atol=1e-6)
    half = reallocate(torch.tensor(w, dtype=torch.bfloat16), IMG, TXT, s)
    assert half.dtype == torch.bfloat16


# ------------------------------------------------------------------------------------------ window
def fig8_curve() -> np.ndarray:
    """Shaped like App. D.3 Fig. 8 (36 layers): ≈1.5 with spikes at layers 1 and 5, a plateau at 17–24
    peaking at 21 (6.3), below 1 after 24."""
    rng = np.random.default_rng(3)
    x = 1.5 + rng.uniform(-0.2, 0.2, 36)
    x[1], x[5] = 9.0, 7.5
    x[17:25] = [4.2, 4.8, 5.5, 6.0, 6.3, 5.9, 5.1, 4.5]
    x[25:] = np.linspace(1.2, 0.6, 11)
    return x


def test_window_from_lss_finds_the_plateau_not_the_spikes() -> None:
    x = fig8_curve()
    assert window_from_lss(x) == (17, 24)
    assert window_from_lss(x) == PAPER_WINDOWS["Qwen/Qwen3-VL-8B-Instruct"]
    x[30] = np.nan  # undefined layers are skipped, not fatal
    assert window_from_lss(x) == (17, 24)


def test_window_from_lss_rejects_curves_without_a_sink() -> None:
    with pytest.raises(ValueError, match="no peak"):
        window_from_lss(np.full(10, 2.0))
    spike = np.full(10, 1.0)
    spike[4] = 9.0  # a one-layer spike is not a plateau
    with pytest.raises(ValueError, match="no peak"):
        window_from_lss(spike)
    with pytest.raises(ValueError):
        window_from_lss([np.nan, np.nan])


# ------------------------------------------------------------------------------------------ modifier
def causal_weights(batch: int, heads: int, q: int, k: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(batch, heads, q, k, generator=g)
    q_pos = torch.arange(k - q, k)[:, None]
    scores = scores.masked_fill(torch.arange(k)[None, :] > q_pos, float("-inf"))
    return torch.softmax(scores, dim=-1)


SPANS = TokenSpans(
    image=[(2, 5), (2, 5)], description=[(5, 7), (5, 7)], length=[8, 7], image_runs=[[(2, 5)], [(2, 5)]]
)


def test_modifier_touches_only_the_answer_query_in_the_window() -> None:
    """Right-padded prefill (Q = K = 8): row 0 answers at position 7, row 1 at 6; earlier queries and
    other layers are untouched; the answer rows equal ``reallocate`` on them and still sum to 1."""
    w = causal_weights(2, 3, 8, 8)
    fn = make_modifier([0.9, 0.8], (1, 2))
    assert fn(0, w, SPANS) is w and fn(3, w, SPANS) is w
    out = fn(2, w, SPANS)
    assert torch.equal(out[0, :, :7], w[0, :, :7]) and torch.equal(out[1, :, :6], w[1, :, :6])
    for b, (pos, s) in enumerate([(7, 0.9), (6, 0.8)]):
        expect = reallocate(w[b, :, pos].numpy(), IMG_8, TXT_8, s)
        assert out[b, :, pos].numpy() == pytest.approx(expect, abs=1e-6)
        assert not torch.allclose(out[b, :, pos], w[b, :, pos])
    assert torch.allclose(out.sum(-1), torch.ones(2, 3, 8), atol=1e-6)


IMG_8 = np.array([False, False, True, True, True, False, False, False])
TXT_8 = np.array([False, False, False, False, False, True, True, False])


def test_modifier_in_cached_generation_steps() -> None:
    """Left-padded generation: row 1 has one pad (offset 1); a decoding step has Q = 1 over K = 9 keys
    (one generated token): the new token's query is at or after every answer position, so it is steered."""
    spans = TokenSpans(image=[(2, 5), (3, 6)], description=[(5, 7), (6, 8)], length=[8, 7], offset=[0, 1])
    w = causal_weights(2, 2, 1, 9)
    out = make_modifier(1.0, (0, 0))(0, w, spans)
    img = np.zeros((2, 9), bool)
    img[0, 2:5], img[1, 3:6] = True, True
    txt = np.zeros((2, 9), bool)
    txt[0, 5:7], txt[1, 6:8] = True, True
    for b in range(2):
        new = out[b, :, 0].numpy()
        assert not np.allclose(new, w[b, :, 0].numpy())
        expect = reallocate(w[b, :, 0].numpy(), img[b], txt[b], 1.0)
        assert new == pytest.approx(expect, abs=1e-6)


def test_modifier_gate_and_score_count() -> None:
    w = causal_weights(2, 3, 8, 8)
    assert make_modifier([0.1, 0.5], (0, 5))(2, w, SPANS) is w  # every row below τ: untouched
    mixed = make_modifier([0.1, 0.9], (0, 5))(2, w, SPANS)
    assert torch.equal(mixed[0], w[0]) and not torch.equal(mixed[1], w[1])
    with pytest.raises(ValueError, match="3 conflict scores for a batch of 2"):
        make_modifier([0.9, 0.9, 0.9], (0, 5))(2, w, SPANS)
    with pytest.raises(ValueError, match="window"):
        make_modifier(0.9, (5, 2))


def test_cecs_hooks_cover_the_window_and_tag_every_parameter() -> None:
    hooks = cecs_hooks([0.75, 0.9], PAPER_WINDOWS["Qwen/Qwen3-VL-8B-Instruct"])
    assert sorted(hooks.attention) == list(range(17, 25))
    assert hooks.tag is not None and "s=[0.750000,0.900000]" in hooks.tag and "layers=17-24" in hooks.tag
    assert cecs_hooks(0.7, (1, 2)).tag != cecs_hooks(0.8, (1, 2)).tag
