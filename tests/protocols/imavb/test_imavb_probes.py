"""Representation–action-gap probes (IMAVB §4.3, Eq. 2, Eqs. 3–4, App. L)."""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols.imavb.probes import (
    cv_accuracy,
    group_folds,
    layer_curve,
    lens_correct,
    nullspace_basis,
    peak_layer,
    project_out,
    residualised_probe,
    tfidf_baseline,
)


def test_nullspace_projection_hand_computed() -> None:
    """App. L: W = [[2, 0, 0], [0, 1e-7, 0]] has singular values 2 and 1e-7; only s > 1e-5·2 is kept, so
    V_k = e1 and h = (3, 4, 5) projects to h − V_k V_kᵀ h = (0, 4, 5)."""
    vk = nullspace_basis([[2.0, 0, 0], [0, 1e-7, 0]])
    assert vk.shape == (3, 1) and abs(vk[0, 0]) == pytest.approx(1.0)
    assert project_out([[3.0, 4.0, 5.0]], vk)[0].tolist() == pytest.approx([0.0, 4.0, 5.0])


def test_folds_keep_every_variant_of_a_stimulus_together() -> None:
    y = np.array([0, 1] * 20)
    stim = [f"s{i // 2}" for i in range(40)]
    folds = group_folds(y, stim, seed=0)
    assert len(folds) == 4
    for tr, te in folds:
        assert not {stim[i] for i in tr} & {stim[i] for i in te}
        assert y[te].mean() == 0.5


def _synthetic(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    y = np.array([i % 2 for i in range(n)])
    states = rng.normal(size=(3, n, 6))
    states[2, :, 1] += 2.5 * y  # layer 2 encodes the label
    return states, y, [f"s{i // 2}" for i in range(n)]


def test_probe_finds_the_encoding_layer_and_text_cannot() -> None:
    states, y, stim = _synthetic()
    folds = group_folds(y, stim, seed=0)
    accs = [r.accuracy for r in layer_curve(states, y, folds)]
    assert peak_layer(accs) == 2 and accs[2] > 0.85 and accs[0] < 0.7
    texts = ["Next to the red square, what colour is the circle?"] * len(y)  # identical text: no signal
    assert tfidf_baseline(texts, y, folds).accuracy <= 0.6
    assert peak_layer([0.5, 0.7, 0.7]) == 1  # the first on a tie


def test_residualised_probe_removes_text_predictable_directions() -> None:
    """States = [text part | image part]: after projecting out what predicts the text embedding, a
    label carried only by the text part is gone, a label in the image part survives."""
    rng = np.random.default_rng(1)
    n = 160
    y = np.array([i % 2 for i in range(n)])
    stim = [f"s{i // 2}" for i in range(n)]
    folds = group_folds(y, stim, seed=0)
    emb = rng.normal(size=(n, 2))
    emb[:, 0] += 2.0 * y  # the text embedding carries the label
    h_text = np.hstack([emb, rng.normal(size=(n, 4))])
    assert cv_accuracy(h_text, y, folds).accuracy > 0.8
    res = residualised_probe(h_text, emb, y, folds)
    assert res.result is not None and res.result.accuracy < 0.7
    h_img = np.hstack([emb, rng.normal(size=(n, 4)) + np.outer(y, [2.5, 0, 0, 0])])
    res2 = residualised_probe(h_img, emb, y, folds)
    assert res2.result is not None and res2.result.accuracy > 0.8


def test_residualised_probe_is_undefined_when_nothing_is_left() -> None:
    rng = np.random.default_rng(2)
    n = 80
    y = np.array([i % 2 for i in range(n)])
    folds = group_folds(y, [f"s{i // 2}" for i in range(n)], seed=0)
    res = residualised_probe(rng.normal(size=(n, 3)), rng.normal(size=(n, 8)), y, folds)
    assert res.result is None and res.hidden_dims == 3


def test_lens_correct_picks_the_gold_letter_eq4() -> None:
    lens = np.zeros((2, 2, 6))
    lens[0, 0, 4], lens[1, 0, 4], lens[1, 1, 0] = 0.3, 0.9, 0.6
    assert lens_correct(lens, [4, 0]).tolist() == [[0.3, 0.0], [0.9, 0.6]]
