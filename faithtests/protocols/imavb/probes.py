"""The representation–action gap (IMAVB §4.3, App. L): linear probes for "misleading vs standard" on
last-token hidden states, text-only baselines, and the residualised probe. scikit-learn, no model calls.

* Folds: 4-fold ``StratifiedGroupKFold`` grouped by stimulus, so every variant of a clip sits in one fold
  (§4.3), stratified by the label, shuffled with the run's seed.
* Probe (Eq. 2): P(mis | h_l) = σ(w_l·h_l + b_l), logistic regression (C = 1, L-BFGS, 1000 iterations,
  App. L) on standardised states (standardisation is this project's choice: unscaled L-BFGS on raw
  residual streams does not converge in 1000 iterations on every model). l* = the layer of highest mean
  CV accuracy (the first on a tie).
* Text-only baselines on the question text alone, same folds: TF-IDF (unigrams + bigrams) and sentence
  embeddings (all-MiniLM-L6-v2; computed by ``run.sentence_embeddings``), each with the same classifier.
  The public code's TF-IDF (``residualized_probing.py``: unigrams, at most 5000 features) is offered as
  ``tfidf_baseline(..., public=True)``, recorded beside ours, not gated (the paper names no settings).
* Residualised probe (App. L): per fold, Ridge (α = 1, no intercept) from hidden states to text
  embeddings fit on the train split, W = U S Vᵀ, keep the right singular vectors with s > 1e-5·s_max
  (V_k), h_res = h − V_k V_kᵀ h on train and test, then the probe. When V_k spans the whole hidden space
  (d_hidden ≤ rank W, e.g. a 128-wide model against 384-dim embeddings) nothing is left: undefined.
  The public code standardises the states and the embeddings (fit on the train split) before the
  Ridge; App. L does not say so: ``residualised_probe(..., standardise=True)``, recorded, not gated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.progress import stage
from faithtests.scorecard.model import InsufficientData
from faithtests.stats import cluster_bootstrap_sums_ci

FloatArray = NDArray[np.float64]
Folds = list[tuple[NDArray[np.int64], NDArray[np.int64]]]
N_FOLDS = 4
REL_TOL = 1e-5


def group_folds(
    y: ArrayLike, groups: Sequence[object], *, n_splits: int = N_FOLDS, seed: int = 0, what: str = "the probe"
) -> Folds:
    """Stratified group K-fold indices (§4.3): all rows of a group in one test fold. Too few stimuli for
    the folds (fewer groups than ``n_splits``, one label only, a fold whose training rows hold one label
    or whose test rows are empty) raises :class:`InsufficientData` naming ``what``, before scikit-learn
    would ("n_splits=4 greater than the number of groups", "needs samples of at least 2 classes")."""
    # lazy: scikit-learn (a 1.5 s import; the suite imports this module at collection)
    from sklearn.model_selection import StratifiedGroupKFold

    yy = np.asarray(y, dtype=np.int64)
    g = np.asarray([str(x) for x in groups])
    n_groups, labels = len(set(g.tolist())), sorted(set(yy.tolist()))
    if n_groups < n_splits or len(labels) < 2:
        raise InsufficientData(
            f"{what} needs >= {n_splits} stimuli and both labels for {n_splits}-fold CV grouped by stimulus, "
            f"got {n_groups} stimuli with label(s) {labels}"
        )
    cv = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    folds = [(tr.astype(np.int64), te.astype(np.int64)) for tr, te in cv.split(np.zeros(len(yy)), yy, g)]
    for k, (tr, te) in enumerate(folds, 1):
        trained = sorted(set(yy[tr].tolist()))
        if te.size == 0 or len(trained) < 2:
            raise InsufficientData(
                f"{what} needs test rows and both labels in the training rows of each of {n_splits} "
                f"folds, got fold {k} with {te.size} test rows, training label(s) {trained}"
            )
    return folds


def _classifier(seed: int) -> Any:
    # lazy: scikit-learn (a 1.5 s import; the suite imports this module at collection)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline  # lazy: scikit-learn
    from sklearn.preprocessing import StandardScaler  # lazy: scikit-learn

    return make_pipeline(
        StandardScaler(), LogisticRegression(C=1.0, solver="lbfgs", max_iter=1000, random_state=seed)
    )


@dataclass(frozen=True)
class ProbeResult:
    """Mean held-out accuracy over folds, per-fold accuracies, and each row's held-out prediction."""

    accuracy: float
    fold_accuracy: tuple[float, ...]
    predictions: NDArray[np.int64]


def cv_accuracy(X: ArrayLike, y: ArrayLike, folds: Folds, *, seed: int = 0) -> ProbeResult:
    """Held-out accuracy of the logistic probe over ``folds`` (Eq. 2)."""
    x = np.asarray(X, dtype=np.float64)
    yy = np.asarray(y, dtype=np.int64)
    pred = np.full(yy.shape, -1, dtype=np.int64)
    accs = []
    for tr, te in folds:
        clf = _classifier(seed).fit(x[tr], yy[tr])
        pred[te] = clf.predict(x[te])
        accs.append(float((pred[te] == yy[te]).mean()))
    return ProbeResult(float(np.mean(accs)), tuple(accs), pred)


def layer_curve(states: ArrayLike, y: ArrayLike, folds: Folds, *, seed: int = 0) -> list[ProbeResult]:
    """One probe per layer of ``states`` [L, N, D] (§4.3)."""
    s = np.asarray(states, dtype=np.float64)
    out = []
    with stage("IMAVB probes/layer", total=s.shape[0]) as progress:
        for layer in range(s.shape[0]):
            out.append(cv_accuracy(s[layer], y, folds, seed=seed))
            progress.advance()
    return out


def peak_layer(accuracies: Sequence[float]) -> int:
    """l* = argmax of mean CV accuracy, the first layer on a tie (§4.3)."""
    a = np.asarray(accuracies, dtype=np.float64)
    return int(np.flatnonzero(a == a.max())[0])


def probe_margin(
    layer_accuracy: Sequence[float], baselines: Mapping[str, float], chance: float = 0.5
) -> float:
    """The gated §4.3 margin: probe accuracy at l* (:func:`peak_layer`) minus the best text-only
    baseline (TF-IDF, sentence embeddings), never less than ``chance`` (the majority-class rate): a text
    baseline that lands below chance by noise must not lower the bar."""
    if not baselines:
        raise ValueError("probe_margin: no text-only baseline")
    best = max(chance, *(float(v) for v in baselines.values()))
    return float(layer_accuracy[peak_layer(layer_accuracy)]) - best


#: The public code's TF-IDF (``residualized_probing.py``): unigrams, at most 5000 features.
PUBLIC_TFIDF_MAX_FEATURES = 5000


@dataclass(frozen=True)
class NestedPeak:
    """Held-out probe accuracy at a layer chosen without the test fold: per outer fold, l* is the peak
    of an inner grouped CV on the outer training rows; ``layers`` are those choices."""

    accuracy: float
    fold_accuracy: tuple[float, ...]
    layers: tuple[int, ...]
    predictions: NDArray[np.int64] | None = None  # each row's held-out prediction (at its fold's l*)


def nested_peak(
    states: ArrayLike, y: ArrayLike, groups: Sequence[object], folds: Folds, *, seed: int = 0,
    inner_splits: int = N_FOLDS - 1,
) -> NestedPeak:
    """The probe at l* with l* chosen out of sample (the gated ``probe_margin``): the peak of a CV
    curve is the maximum over L noisy accuracies, biased upwards at a few hundred rows (random states
    reach +0.07 at 400 rows); choosing l* on each outer fold's training rows removes that bias. The
    paper reads l* off the curve itself (recorded beside it); at its 2,000 rows the bias is smaller."""
    s = np.asarray(states, dtype=np.float64)
    yy = np.asarray(y, dtype=np.int64)
    g = [groups[int(i)] for i in range(len(yy))]
    accs: list[float] = []
    layers: list[int] = []
    pred = np.full(yy.shape, -1, dtype=np.int64)
    with stage("IMAVB nested l*", total=len(folds)) as progress:
        for tr, te in folds:
            inner = group_folds(yy[tr], [g[int(i)] for i in tr], n_splits=inner_splits, seed=seed,
                                what="the nested choice of l*")
            layer = peak_layer([r.accuracy for r in layer_curve(s[:, tr], yy[tr], inner, seed=seed)])
            clf = _classifier(seed).fit(s[layer, tr], yy[tr])
            pred[te] = clf.predict(s[layer, te])
            accs.append(float((pred[te] == yy[te]).mean()))
            layers.append(layer)
            progress.advance()
    return NestedPeak(float(np.mean(accs)), tuple(accs), tuple(layers), pred)


def margin_over_text(accuracy: float, baselines: Mapping[str, float], chance: float = 0.5) -> float:
    """``accuracy`` minus the best text-only baseline, floored at ``chance`` (as :func:`probe_margin`)."""
    if not baselines:
        raise ValueError("margin_over_text: no text-only baseline")
    return float(accuracy) - max(chance, *(float(v) for v in baselines.values()))


def margin_ci(
    probe: ArrayLike, baselines: Mapping[str, ArrayLike], y: ArrayLike, clusters: Sequence[object],
    chance: float = 0.5, *, n_resamples: int = 1000, seed: int = 0,
) -> tuple[float, float]:
    """95% CI of :func:`margin_over_text` from each row's held-out predictions (the probe's, each text
    baseline's), resampling whole ``clusters`` (stimuli): per resample the probe's accuracy minus the
    best baseline's, floored at ``chance``, so the baselines' own noise and the choice of the best are
    inside the interval. The resampled accuracies are pooled over rows; the recorded margin averages the
    folds' accuracies (§4.3's CV), which differ from the pooled ones only by the folds' unequal sizes."""
    yy = np.asarray(y, dtype=np.int64)
    hits = [np.asarray(probe) == yy, *((np.asarray(b) == yy) for b in baselines.values())]
    columns = np.stack([*(h.astype(np.float64) for h in hits), np.ones(yy.shape)], axis=1)

    def margin(t: NDArray[np.float64]) -> NDArray[np.float64]:
        acc = t[:, :-1] / t[:, -1:]
        out: NDArray[np.float64] = acc[:, 0] - np.maximum(chance, acc[:, 1:].max(axis=1))
        return out
    return cluster_bootstrap_sums_ci(columns, clusters, margin, n_resamples=n_resamples, seed=seed)


def tfidf_features(texts: Sequence[str], train: ArrayLike, *, public: bool = False) -> Any:
    """TF-IDF of the texts, vocabulary and idf fit on the ``train`` rows only: unigrams + bigrams, or
    with ``public`` the public code's unigrams capped at 5000 features."""
    # lazy: scikit-learn (a 1.5 s import; the suite imports this module at collection)
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = (TfidfVectorizer(max_features=PUBLIC_TFIDF_MAX_FEATURES) if public
           else TfidfVectorizer(ngram_range=(1, 2), min_df=1))
    vec.fit([texts[int(i)] for i in np.asarray(train)])
    return vec.transform(list(texts))


def tfidf_baseline(
    texts: Sequence[str], y: ArrayLike, folds: Folds, *, seed: int = 0, public: bool = False
) -> ProbeResult:
    """Text-only TF-IDF classifier over the same folds (§4.3 "Text confound control"); ``public``: the
    public code's vectoriser (:func:`tfidf_features`)."""
    # lazy: scikit-learn (a 1.5 s import; the suite imports this module at collection)
    from sklearn.linear_model import LogisticRegression

    yy = np.asarray(y, dtype=np.int64)
    pred = np.full(yy.shape, -1, dtype=np.int64)
    accs = []
    for tr, te in folds:
        feats = tfidf_features(texts, tr, public=public)
        clf = LogisticRegression(C=1.0, solver="lbfgs", max_iter=1000, random_state=seed).fit(
            feats[tr], yy[tr]
        )
        pred[te] = clf.predict(feats[te])
        accs.append(float((pred[te] == yy[te]).mean()))
    return ProbeResult(float(np.mean(accs)), tuple(accs), pred)


def nullspace_basis(W: ArrayLike, rel_tol: float = REL_TOL) -> FloatArray:
    """V_k: right singular vectors of W [d_text, d_hidden] with s > rel_tol·s_max, as columns
    [d_hidden, k] (App. L)."""
    w = np.asarray(W, dtype=np.float64)
    _, s, vt = np.linalg.svd(w, full_matrices=False)
    if s.size == 0 or s[0] == 0:
        return np.zeros((w.shape[1], 0))
    return np.asarray(vt[s > rel_tol * s[0]].T, dtype=np.float64)


def project_out(H: ArrayLike, Vk: ArrayLike) -> FloatArray:
    """h_res = h − V_k V_kᵀ h for each row of H (App. L)."""
    h = np.asarray(H, dtype=np.float64)
    v = np.asarray(Vk, dtype=np.float64)
    return np.asarray(h - (h @ v) @ v.T, dtype=np.float64)


@dataclass(frozen=True)
class Residualised:
    result: ProbeResult | None  # None: the null space is empty (nothing left to probe)
    removed_dims: tuple[int, ...]  # k per fold
    hidden_dims: int


def residualised_probe(
    H: ArrayLike, E: ArrayLike, y: ArrayLike, folds: Folds, *, alpha: float = 1.0, seed: int = 0,
    standardise: bool = False,
) -> Residualised:
    """The residualised probe of App. L at one layer: ``H`` [N, d_hidden], ``E`` [N, d_text]; with
    ``standardise``, the public code's variant (states and embeddings standardised on the train split
    before the Ridge; the projection then acts on the standardised states)."""
    # lazy: scikit-learn (a 1.5 s import; the suite imports this module at collection)
    from sklearn.linear_model import Ridge
    from sklearn.preprocessing import StandardScaler  # lazy: scikit-learn

    h = np.asarray(H, dtype=np.float64)
    e = np.asarray(E, dtype=np.float64)
    yy = np.asarray(y, dtype=np.int64)
    pred = np.full(yy.shape, -1, dtype=np.int64)
    accs: list[float] = []
    ks: list[int] = []
    for tr, te in folds:
        h_tr, h_te, e_tr = h[tr], h[te], e[tr]
        if standardise:
            sh = StandardScaler().fit(h_tr)
            h_tr, h_te = sh.transform(h_tr), sh.transform(h_te)
            e_tr = StandardScaler().fit_transform(e_tr)
        W = Ridge(alpha=alpha, fit_intercept=False).fit(h_tr, e_tr).coef_  # [d_text, d_hidden]
        vk = nullspace_basis(W)
        ks.append(int(vk.shape[1]))
        if vk.shape[1] >= h.shape[1]:
            return Residualised(None, tuple(ks), h.shape[1])
        clf = _classifier(seed).fit(project_out(h_tr, vk), yy[tr])
        pred[te] = clf.predict(project_out(h_te, vk))
        accs.append(float((pred[te] == yy[te]).mean()))
    return Residualised(ProbeResult(float(np.mean(accs)), tuple(accs), pred), tuple(ks), h.shape[1])


def lens_correct(lens: ArrayLike, gold: ArrayLike) -> FloatArray:
    """P_l(correct) per layer and row (Eq. 4): ``lens`` [L, N, 6] letter probabilities → [L, N]."""
    p = np.asarray(lens, dtype=np.float64)
    g = np.asarray(gold, dtype=np.int64)
    return np.asarray(np.take_along_axis(p, g[None, :, None].repeat(p.shape[0], 0), axis=2)[..., 0])
