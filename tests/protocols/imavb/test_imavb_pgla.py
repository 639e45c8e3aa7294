"""PGLA (IMAVB §5, Eqs. 5–6, App. G) against hand-computed values, and its Hooks factory."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from faithtests.protocols.imavb.metrics import answers
from faithtests.protocols.imavb.pgla import (
    GRID,
    IDENTITY,
    PGLAConfig,
    bal_of,
    grid_correct,
    pgla_adjust,
    pgla_beta,
    pgla_cv,
    pgla_gate,
    pgla_layer,
    split_stimuli,
    train_gate_probe,
)
from faithtests.protocols.imavb.records import PremiseRecord
from faithtests.protocols.imavb.run import pgla_hooks

STD, MIS = "standard_vision", "misleading_vision"


def test_update_eqs_5_6_hand_computed() -> None:
    """Logits A..F = (2, 1, 0, 0, −1, −3), P_mis = 0.8, γ = 2, p = 1, α = 0.5, s = 1, δ = 5, β = 1.
    g = 0.8; σ(2·0.3) = σ(0.6) = 0.645656; Δ = 2 − (−1) = 3; boost = 0.645656·(3 + 5) = 5.165250.
    L_E' = −1 + 5.165250 − 0.5 = 3.665250 (Eq. 5); L_F' = −3 + 5.165250 + 0.5 = 2.665250 (Eq. 6)."""
    cfg = PGLAConfig(gamma=2.0, p=1.0, alpha=0.5, s=1.0, delta=5.0)
    out = pgla_adjust([2, 1, 0, 0, -1, -3], 0.8, cfg, beta=1.0)
    assert out[:4].tolist() == [2, 1, 0, 0]
    assert out[4] == pytest.approx(3.665250, abs=1e-6)
    assert out[5] == pytest.approx(2.665250, abs=1e-6)
    # the power p sharpens the gate: g = 0.8² = 0.64, σ(2·0.14) = 0.569546, boost = 4.556368
    out2 = pgla_adjust([2, 1, 0, 0, -1, -3], 0.8, PGLAConfig(2.0, 2.0, 0.5, 1.0, 5.0), beta=0.0)
    assert out2[4] == pytest.approx(-1 + 4.556368, abs=1e-5)


def test_beta_is_mean_e_minus_f_over_standard_items() -> None:
    """App. G: β = mean(L_E − L_F) = mean(3 − 1, 0 − 2) = 0."""
    assert pgla_beta([[0, 0, 0, 0, 3, 1], [0, 0, 0, 0, 0, 2]]) == 0.0
    assert pgla_beta([[0, 0, 0, 0, 5, 1]]) == 4.0


def test_grid_is_the_162_configurations_and_identity_changes_nothing() -> None:
    assert len(GRID) == 162 == len(set(GRID))
    x = np.random.default_rng(0).normal(size=(5, 6))
    assert np.array_equal(pgla_adjust(x, np.full(5, 0.9), IDENTITY, 0.0), x)


def test_grid_correct_averages_over_orders() -> None:
    lg = np.zeros((1, 2, 6))
    lg[0, 0, 0], lg[0, 1, 4] = 5.0, 5.0  # order 0 answers A (gold), order 1 answers E
    assert grid_correct(lg, [0.0], [0], 0.0, (IDENTITY,))[0].tolist() == [0.5]


def test_split_keeps_stimuli_together() -> None:
    stim = [f"s{i // 2}" for i in range(40)]
    tr = split_stimuli(stim, seed=3)
    assert tr.sum() == 10  # 25% of 20 stimuli, both variants each
    for i in range(0, 40, 2):
        assert tr[i] == tr[i + 1]


def _pairs(n: int) -> tuple[np.ndarray, list[str], list[str]]:
    mis = np.array([i % 2 == 1 for i in range(n)])
    return mis, [MIS if m else STD for m in mis], [f"s{i // 2}" for i in range(n)]


def test_pgla_cv_lifts_an_under_rejecting_model_with_an_informative_probe() -> None:
    """A model that never rejects (content logit high) but whose states encode the label: PGLA must
    raise held-out Bal (the paper's under-rejection case) and report only held-out rows."""
    rng = np.random.default_rng(0)
    n = 200
    mis, splits, stim = _pairs(n)
    gold = np.where(mis, 4, 0)
    lg = rng.normal(0, 0.3, size=(n, 6))
    lg[:, 0] += 3.0  # always answers A: right on standard, wrong on misleading
    lg[:, 4] += np.where(mis, 2.0, 1.0)  # E leads F by more on misleading items than β (mean over std)
    h = rng.normal(size=(2, n, 8))
    h[1, :, 0] += 3.0 * mis  # layer 1 encodes the label
    res = pgla_cv(h, lg, gold, splits, stim, seed=0)
    y = [splits[int(i)] for i in res.eval_rows]
    assert res.layer == 1
    assert not set(res.eval_rows.tolist()) & set(np.flatnonzero(split_stimuli(stim, seed=0)).tolist())
    assert bal_of(res.base_correct, y) < 0.6
    assert bal_of(res.pgla_correct, y) > 0.8
    assert res.probe_accuracy > 0.75  # 25% of 100 stimuli, 8 dims: an MLP gate well above chance
    # the offline pgla variant: each eval row's fold configuration applied to its logits
    adj = res.adjusted(lg[res.eval_rows])
    assert np.array_equal(answers(adj) == gold[res.eval_rows], res.pgla_correct.astype(bool))


def test_a_shared_layer_and_gate_give_the_same_result() -> None:
    """The fixed- and shuffled-order protocols share l* and the gate probe (trained once): passing them
    in changes nothing."""
    rng = np.random.default_rng(6)
    n = 120
    mis, splits, stim = _pairs(n)
    lg = rng.normal(size=(n, 6))
    h = rng.normal(size=(2, n, 8))
    h[1, :, 0] += 3.0 * mis
    alone = pgla_cv(h, lg, np.where(mis, 4, 0), splits, stim, seed=1)
    layer = pgla_layer(h, splits, stim, seed=1)
    shared = pgla_cv(h, lg, np.where(mis, 4, 0), splits, stim, layer=layer,
                     gate=pgla_gate(h, layer[0], splits, stim, seed=1), seed=1)
    assert np.array_equal(shared.p_mis, alone.p_mis) and shared.configs == alone.configs
    assert np.array_equal(shared.pgla_correct, alone.pgla_correct)
    # the gate is App. G's: the MLP on l*'s states of the probe-training stimuli, labelled misleading
    tr = split_stimuli(stim, seed=1)
    direct = train_gate_probe(h[layer[0]][tr], mis[tr], seed=1)
    gate = pgla_gate(h, layer[0], splits, stim, seed=1)
    assert np.array_equal(gate.predict_proba(h[layer[0]]), direct.predict_proba(h[layer[0]]))


def test_bal_of_is_eq1_per_split_not_pooled() -> None:
    """Eq. 1 averages split accuracies: std_v 1/1, std_a 0/3, mis_v 1/1, mis_a 0/1 gives
    ½((1 + 0)/2 + (1 + 0)/2) = 0.5 (pooling rows would give ½(1/4 + 1/2) = 0.375)."""
    splits = ["standard_vision", "standard_audio", "standard_audio", "standard_audio",
              "misleading_vision", "misleading_audio"]
    c = np.array([1, 0, 0, 0, 1, 0], dtype=float)
    assert float(bal_of(c, splits)) == pytest.approx(0.5)
    assert bal_of(np.stack([c, 1 - c]), splits).tolist() == pytest.approx([0.5, 0.5])
    assert float(bal_of([1, 0, 0], [STD, STD, MIS])) == pytest.approx(0.25)  # vision only: ½(1/2 + 0)


def test_pgla_layer_is_chosen_on_the_probe_training_stimuli_only() -> None:
    """Layer 1 encodes the label on the evaluation rows only, layer 2 on the probe-training rows only:
    CV over all rows would pick layer 1 (it sees the 75%); l* for PGLA must be 2."""
    rng = np.random.default_rng(3)
    n = 400
    mis, splits, stim = _pairs(n)
    train = split_stimuli(stim, seed=0)
    h = rng.normal(size=(3, n, 6))
    h[1, :, 0] += 3.0 * (mis & ~train)
    h[2, :, 0] += 3.0 * (mis & train)
    layer, curve = pgla_layer(h, splits, stim, seed=0)
    assert layer == 2 and curve[2] > 0.85 and curve[1] < 0.7


def test_beta_comes_from_the_orders_it_corrects() -> None:
    """App. G: β = mean(L_E − L_F) over standard training items, in the option orders the adjustment is
    applied to: the fixed order for [N, 6] logits, all shuffled orders for [N, S, 6]."""
    rng = np.random.default_rng(4)
    n = 80
    mis, splits, stim = _pairs(n)
    shuffled = rng.normal(size=(n, 3, 6))
    fixed = rng.normal(size=(n, 6))
    fixed[:, 4] += 2.0
    gold = np.where(mis, 4, 0)
    h = rng.normal(size=(1, n, 4))
    std_tr = split_stimuli(stim, seed=0) & ~mis
    res = pgla_cv(h, fixed, gold, splits, stim, seed=0)
    assert res.beta == pytest.approx(float((fixed[std_tr, 4] - fixed[std_tr, 5]).mean()))
    res = pgla_cv(h, shuffled, gold, splits, stim, seed=0)
    assert res.beta == pytest.approx(float((shuffled[std_tr][..., 4] - shuffled[std_tr][..., 5]).mean()))
    res = pgla_cv(h, shuffled, gold, splits, stim, beta_logits=fixed, seed=0)
    assert res.beta == pytest.approx(float((fixed[std_tr, 4] - fixed[std_tr, 5]).mean()))


def test_pareto_keeps_every_fold_with_the_identity_admissible() -> None:
    """Every configuration flips the (correct) standard answers: no configuration fits any budget, so
    each budget row is the identity (ΔBal 0, no cost) over all five folds, never NaN or a dropped fold."""
    rng = np.random.default_rng(5)
    n = 200
    mis, splits, stim = _pairs(n)
    lg = np.zeros((n, 6))
    lg[:, 0], lg[:, 4] = 10.0, 9.7  # A leads E by 0.3: any boost (>= 0.6) overtakes it
    lg[:, 5] = 9.7 - rng.uniform(0.1, 0.3, n)
    res = pgla_cv(rng.normal(size=(1, n, 4)), lg, np.where(mis, 4, 0), splits, stim, seed=0)
    y = [splits[int(i)] for i in res.eval_rows]
    assert float(bal_of(res.base_correct, y)) == pytest.approx(0.5)
    for row in res.pareto.values():
        assert row.identity_folds == 5
        assert row.delta_bal == 0.0 and row.std == 1.0 and row.mis == 0.0


def test_hooks_apply_the_update_in_canonical_order() -> None:
    """The adjuster sees displayed-order logits; it must adjust canonical E/F wherever they are shown."""
    rec = PremiseRecord("v/misleading_vision", "v", "misleading_vision", "q?", tuple("abcdEF"), "E")
    perm = np.array([[5, 0, 1, 4, 2, 3]])  # canonical E shown as D, F as A
    cfg = PGLAConfig(2.0, 1.0, 0.5, 1.0, 5.0)
    hooks = pgla_hooks({rec.item_id: cfg}, {rec.item_id: 0.8}, 1.0)([rec], perm)
    shown = torch.tensor([[-3.0, 2.0, 1.0, -1.0, 0.0, 0.0]])  # = canonical (2, 1, 0, 0, −1, −3)
    assert hooks.logit_adjuster is not None
    out = hooks.logit_adjuster(shown, list("ABCDEF"))
    assert out[0, 3].item() == pytest.approx(3.665250, abs=1e-5)  # canonical E, shown as D
    assert out[0, 0].item() == pytest.approx(2.665250, abs=1e-5)  # canonical F, shown as A
    assert out[0, 1].item() == 2.0
