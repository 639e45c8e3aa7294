"""Our probes against the public code (ngquangtrung57/imavb, experiments/probing/residualized_probing.py
and experiments/pgla/train_probes.py), transcribed here in their essentials and run on the same inputs:
the metrics that match it match to 1e-9, and the labelled public variants (TF-IDF unigrams / 5000
features, residualisation on standardised inputs, the full-batch Adam gate MLP) reproduce it."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.preprocessing import StandardScaler

from faithtests.protocols.imavb.pgla import train_gate_probe
from faithtests.protocols.imavb.probes import cv_accuracy, group_folds, residualised_probe, tfidf_baseline

SEED = 42


def _lr(xtr: np.ndarray, ytr: np.ndarray, xte: np.ndarray) -> np.ndarray:
    clf = LogisticRegression(max_iter=1000, C=1.0, solver="lbfgs", random_state=SEED)
    return np.asarray(clf.fit(xtr, ytr).predict(xte))


def _data(n: int = 160, d: int = 24) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray]:
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(n // 2), 2).astype(str)
    y = np.tile([0, 1], n // 2)
    h = rng.normal(size=(n, d)) + 0.8 * y[:, None] * (np.arange(d) < 3)
    words = ["red", "blue", "man", "woman", "waves", "sits", "door", "car"]
    texts = [" ".join(rng.choice(words, 6)) + (" red" if y[i] and rng.random() < 0.6 else "")
             for i in range(n)]
    emb = rng.normal(size=(n, 40))
    return h, y, groups, texts, emb


def _public_folds(y: np.ndarray, groups: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    cv = StratifiedGroupKFold(n_splits=4, shuffle=True, random_state=SEED)
    return list(cv.split(np.zeros(len(y)), y, groups=groups))


def _public_residualised(h: np.ndarray, emb: np.ndarray, y: np.ndarray, folds: list[Any]) -> float:
    accs = []
    for tr, te in folds:
        sh = StandardScaler().fit(h[tr])
        htr, hte = sh.transform(h[tr]), sh.transform(h[te])
        w = Ridge(alpha=1.0, fit_intercept=False).fit(htr, StandardScaler().fit_transform(emb[tr])).coef_
        _, s, vt = np.linalg.svd(w, full_matrices=False)
        vk = vt[: int(np.sum(s > s.max() * 1e-5))].T
        rtr, rte = htr - htr @ vk @ vk.T, hte - hte @ vk @ vk.T
        sc = StandardScaler().fit(rtr)
        accs.append(float((_lr(sc.transform(rtr), y[tr], sc.transform(rte)) == y[te]).mean()))
    return float(np.mean(accs))


def test_folds_probe_tfidf_and_residualisation_match_the_public_code() -> None:
    h, y, groups, texts, emb = _data()
    pub_folds = _public_folds(y, groups)
    ours = group_folds(y, list(groups), seed=SEED)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(ours, pub_folds, strict=True))
    # run_cv_probing: standardise on the train fold, logistic regression
    pub = [float((_lr(StandardScaler().fit(h[tr]).transform(h[tr]), y[tr],
                      StandardScaler().fit(h[tr]).transform(h[te])) == y[te]).mean()) for tr, te in pub_folds]
    assert abs(cv_accuracy(h, y, ours, seed=SEED).accuracy - float(np.mean(pub))) < 1e-9
    # run_tfidf_cv_probing: TfidfVectorizer(max_features=5000) fit per train fold
    arr = np.array(texts)
    pub_t = []
    for tr, te in pub_folds:
        vec = TfidfVectorizer(max_features=5000)
        xtr, xte = vec.fit_transform(arr[tr]).toarray(), vec.transform(arr[te]).toarray()
        pub_t.append(float((_lr(xtr, y[tr], xte) == y[te]).mean()))
    assert abs(tfidf_baseline(texts, y, ours, seed=SEED, public=True).accuracy - float(np.mean(pub_t))) < 1e-9
    # run_nested_residualized_probing on a 12-dim text embedding (12 < 24 hidden dims: defined)
    res = residualised_probe(h, emb[:, :12], y, ours, seed=SEED, standardise=True)
    assert res.result is not None
    assert abs(res.result.accuracy - _public_residualised(h, emb[:, :12], y, pub_folds)) < 1e-9
    assert residualised_probe(h, emb, y, ours, seed=SEED, standardise=True).result is None  # 40 >= 24


def test_gate_mlp_is_trained_as_app_g_and_the_public_code() -> None:
    """train_probes.py: StandardScaler, torch.manual_seed, Linear-ReLU-Linear(2), CE, full-batch Adam
    1e-3 for 100 epochs; P_mis = softmax[:, 1]. Same seed, same inputs: the same probabilities."""
    h, y, *_ = _data()
    gate = train_gate_probe(h, y, seed=SEED)
    x = torch.tensor(StandardScaler().fit_transform(h), dtype=torch.float32)
    torch.manual_seed(SEED)
    net = torch.nn.Sequential(torch.nn.Linear(h.shape[1], 256), torch.nn.ReLU(), torch.nn.Linear(256, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    yt = torch.tensor(y, dtype=torch.long)
    for _ in range(100):
        opt.zero_grad()
        torch.nn.CrossEntropyLoss()(net(x), yt).backward()
        opt.step()
    with torch.no_grad():
        pub = torch.softmax(net(x), dim=1).numpy()
    assert np.abs(gate.predict_proba(h) - pub).max() < 1e-6  # float32 network, same operations
