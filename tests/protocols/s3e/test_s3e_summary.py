"""summarize_s3e end to end on a hand-built model, every number checked by hand (S3E Tables 6-8, 15-18)."""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols.s3e.metrics import (
    LEX,
    PRES,
    RAND,
    STRESS,
    LayerSelection,
    select_layer,
    summarize_s3e,
)


def _model() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = 5  # items 0-3 strict-correct, item 4 not
    S = np.zeros((2, n, 2, 5))  # [layers, items, orders, roles], same value in both orders
    # layer 0: stress 0.1, pres 0.05 -> Δpres 0.05
    S[0, :, :, STRESS], S[0, :, :, PRES], S[0, :, :, LEX], S[0, :, :, RAND] = 0.1, 0.05, 0.05, 0.1
    # layer 1: stress 0.6, pres 0.3 -> Δpres 0.3 (peak); lex [0.5, 0.5, 0.5, 0.1, 0] -> Δlex [.1, .1, .1, .5];
    # rand 0.7 -> Δrand -0.1 everywhere
    S[1, :, :, STRESS], S[1, :, :, PRES], S[1, :, :, RAND] = 0.6, 0.3, 0.7
    S[1, :, :, LEX] = np.array([0.5, 0.5, 0.5, 0.1, 0.0])[:, None]
    logits = np.zeros((n, 2, 5, 2))  # [items, orders, roles, letters]
    # stress trials: c+ margin m in both orders (orig (m, 0) -> A; swap (0, m) -> B), m = 1, 2, 3, 4;
    # item 4 answers B in both orders -> wrong in orig, right in swap.
    for i, m in enumerate([1.0, 2.0, 3.0, 4.0]):
        logits[i, 0, STRESS], logits[i, 1, STRESS] = (m, 0.0), (0.0, m)
        logits[i, 0, LEX], logits[i, 1, LEX] = (1.0, 0.0), (0.0, 1.0)  # lexical margin 1
    logits[4, :, STRESS] = (0.0, 1.0)
    dist = np.full((2, n, 2), 0.9)
    dist[1] = 0.2  # top half of 2 layers = layer 1 -> band 0.2
    return S, logits, dist


def test_summarize_s3e_hand_values() -> None:
    S, logits, dist = _model()
    strict = np.array([True, True, True, True, False])
    sel = select_layer(S, strict)
    assert sel.layer == 1 and sel.profile == pytest.approx((0.05, 0.3))
    types = ["object", "object", "attribute", "attribute", "relation"]
    out = summarize_s3e(S, logits, sel, dist=dist, stress_types=types, sources=["sc"] * 5, min_slice_n=3)

    b = out.behaviour  # orig: items 0-3 right (4/5); swap: all right (5/5); strict 4/5
    assert (b.acc_orig, b.acc_swap, b.strict_rate, b.n_strict) == (0.8, 1.0, 0.8, 4)
    # Table 6 columns: S_lex = mean(0.5, 0.5, 0.5, 0.1) = 0.4; S_stress = 0.6
    assert out.s_lex == pytest.approx(0.4) and out.s_stress == pytest.approx(0.6)
    # Δlex = [0.1, 0.1, 0.1, 0.5]: mean 0.2, sample sd sqrt((3 * 0.01 + 0.09) / 3) = 0.2 -> d_p 1.0
    lex = out.excess["lex"]
    assert lex.mean == pytest.approx(0.2) and lex.d_p == pytest.approx(1.0) and lex.n == 4
    assert out.excess["pres"].mean == pytest.approx(0.3)
    assert out.excess["rand"].mean == pytest.approx(-0.1) and out.excess["rand"].d_p is None
    # curve: Δlex per layer: layer 0: 0.1 - 0.05 = 0.05; layer 1: 0.2
    assert out.curves["lex"].mean == pytest.approx((0.05, 0.2))
    # HSR (Δlex): tau = 0.2 + 0.2 = 0.4; only 0.5 > 0.4 -> HSR_correct 1/4, HSR 1/5
    h = out.hsr["lex"]
    assert h.tau == pytest.approx(0.4) and h.n_high == 1
    assert h.hsr_correct == pytest.approx(0.25) and h.hsr == pytest.approx(0.2)
    # band (Eq. 7): layer 1 only -> 0.2
    assert out.band is not None and out.band.mean == pytest.approx(0.2)
    # margin-matched half: stress margins [1, 2, 3, 4] vs lexical 1 -> gaps [0, 1, 2, 3], median 1.5,
    # keep items 0, 1 -> Δlex mean of [0.1, 0.1] = 0.1
    assert out.margin_matched.threshold == pytest.approx(1.5)
    assert out.margin_matched_lex.mean == pytest.approx(0.1) and out.margin_matched_lex.n == 2
    # stress-type breakdown (strict items only; "relation" was item 4 and is absent)
    by = {s.label: s for s in out.by_stress_type["lex"]}
    assert set(by) == {"attribute", "object"}
    assert by["attribute"].summary.mean == pytest.approx(0.3)  # Δlex [0.1, 0.5]
    assert by["object"].summary.mean == pytest.approx(0.1)  # Δlex [0.1, 0.1]
    assert [s.label for s in out.by_source["lex"]] == ["sc"]


def test_summarize_s3e_uses_the_frozen_layer_and_tau() -> None:
    S, logits, _ = _model()
    frozen = LayerSelection(layer=0, criterion="delta_pres", reference="pos", profile=(0.05, 0.3), n_items=4)
    out = summarize_s3e(S, logits, frozen, hsr_tau={"lex": 0.0})
    assert out.excess["lex"].mean == pytest.approx(0.05)  # layer 0, not the best layer
    assert out.hsr["lex"].tau == 0.0 and out.hsr["lex"].n_high == 4
    assert out.band is None and out.by_stress_type == {}


def test_summarize_s3e_rejects_bad_inputs() -> None:
    S, logits, _ = _model()
    sel = LayerSelection(layer=5, criterion="delta_pres", reference="pos", profile=(0.0,), n_items=1)
    with pytest.raises(ValueError, match="frozen layer 5"):
        summarize_s3e(S, logits, sel)
    ok = LayerSelection(layer=0, criterion="delta_pres", reference="pos", profile=(0.0,), n_items=1)
    with pytest.raises(ValueError, match="do not match"):
        summarize_s3e(S, logits[:, :, :3], ok)
    wrong = logits.copy()
    wrong[:, :, STRESS] = (0.0, 1.0)  # always B: never strict-correct
    with pytest.raises(ValueError, match="no strict-correct items"):
        summarize_s3e(S, wrong, ok)
