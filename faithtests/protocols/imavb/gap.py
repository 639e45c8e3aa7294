"""What the representation–action gap tests record (IMAVB §4.3, App. L), from one modality's probes.

Pure functions over one modality's rows (:class:`GapInputs`: mis_v vs std_v or mis_a vs std_a, one of
each per stimulus, with their per-layer probe curve and folds from
:func:`~faithtests.protocols.imavb.probes.layer_curve`, computed once per run by the data fixture).
:func:`representation_gap`, on the vision-grounded rows: the probe at l*, the text-only baselines, the
residualised probe, and the gated ``probe_margin`` (l* chosen out of sample,
:func:`~faithtests.protocols.imavb.probes.nested_peak`; the paper's in-sample margin recorded beside
it). :func:`modality_probe`: one modality's probe for the asymmetry, recorded only. The public code's
variants are rows with their own slice, recorded and not gated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faithtests.protocols.imavb.metrics import majority_share
from faithtests.protocols.imavb.probes import (
    Folds,
    ProbeResult,
    cv_accuracy,
    margin_ci,
    margin_over_text,
    nested_peak,
    peak_layer,
    probe_margin,
    residualised_probe,
    tfidf_baseline,
)
from faithtests.scorecard.model import MetricRow as Row  # one result row of a pure function
from faithtests.stats import cluster_bootstrap_ci

#: Public-code variants (ngquangtrung57/imavb, residualized_probing.py), recorded beside the paper's.
PUBLIC_TFIDF = "public code: unigrams, max 5000 features"
PUBLIC_RESID = "public code: standardised inputs"
#: The paper's margin: l* chosen on the same CV curve it is read from (recorded; the gate uses l* chosen
#: out of sample, ``probes.nested_peak``).
IN_SAMPLE = "l* in-sample (paper)"


@dataclass(frozen=True)
class GapInputs:
    """One modality's rows: ``states`` [L, N, D], labels ``y`` (1 = misleading), their stimuli (the
    bootstrap's clusters), question texts, the probe ``curve`` per layer and its ``folds``."""

    states: NDArray[Any]
    y: NDArray[np.int64]
    stimuli: list[str]
    texts: list[str]
    curve: Sequence[ProbeResult]
    folds: Folds


@dataclass(frozen=True)
class Gap:
    """The rows to record (``probe_margin``'s out-of-sample row gated), the inputs that could not be
    used as (kind, count, examples), and the probe accuracy per layer beside the text baselines."""

    rows: list[Row]
    invalid: list[tuple[str, int, list[str]]] = field(default_factory=list)
    layer_accuracy: list[float] = field(default_factory=list)
    baselines: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ModalityProbe:
    """One modality's probe (§4.3's modality-specific probes): its rows, sliced by ``where``, and each
    row's held-out hit at l* (for the asymmetry's bootstrap over stimuli)."""

    rows: list[Row]
    hits: NDArray[np.float64]


def _at_peak(g: GapInputs, seed: int, where: str | None) -> tuple[list[Row], NDArray[np.float64]]:
    """The probe at l* (the first peak of the CV curve) with its CI over stimuli, and l* itself."""
    accs = [p.accuracy for p in g.curve]
    layer = peak_layer(accs)
    hits = (g.curve[layer].predictions == g.y).astype(float)
    ci = cluster_bootstrap_ci(hits, g.stimuli, seed=seed)
    return [Row("probe_acc", g.curve[layer].accuracy, len(g.y), ci=ci, slice=where),
            Row("l_star", float(layer), len(g.y), slice=where)], hits


def modality_probe(g: GapInputs, mis_rejection: float, *, seed: int, where: str) -> ModalityProbe:
    """The probe at l* against its own TF-IDF baseline (the in-sample margin, as the paper reads it) and
    the behaviour on the same rows: recorded, not gated (Table 3's probes are 1:2, these 1:1)."""
    rows, hits = _at_peak(g, seed, where)
    tfidf = tfidf_baseline(g.texts, g.y, g.folds, seed=seed).accuracy
    margin = probe_margin([p.accuracy for p in g.curve], {"TF-IDF": tfidf}, majority_share(g.y))
    rows += [Row("text_tfidf_acc", tfidf, len(g.y), slice=where),
             Row("probe_margin", margin, len(g.y), slice=f"{where}, {IN_SAMPLE}"),
             Row("behaviour_mis_rejection", mis_rejection, int(g.y.sum()), slice=where)]
    return ModalityProbe(rows, hits)


def representation_gap(g: GapInputs, embeddings: NDArray[Any] | str, mis_rejection: float, *,
                       n_resamples: int, seed: int) -> Gap:
    """§4.3's probe at l*, its text-only baselines (TF-IDF, and all-MiniLM-L6-v2 on ``embeddings``; a
    string there is why they could not be computed: counted, and no SBERT or residualised row is made),
    App. L's residualised probe, and the margin over the best baseline floored at chance (the majority
    share: one of each per stimulus is 1:1, like Table 16's "Original" column; Table 3's 1:2 cross-modal
    probe is another quantity)."""
    n, y = len(g.y), g.y
    accs = [p.accuracy for p in g.curve]
    layer = peak_layer(accs)
    rows = _at_peak(g, seed, None)[0] + [Row("probe_acc", accs[-1], n, slice="final layer")]
    tfidf = tfidf_baseline(g.texts, y, g.folds, seed=seed)
    public = tfidf_baseline(g.texts, y, g.folds, seed=seed, public=True)
    rows += [Row("text_tfidf_acc", tfidf.accuracy, n),
             Row("text_tfidf_acc", public.accuracy, n, slice=PUBLIC_TFIDF)]
    baselines = {"TF-IDF": tfidf.accuracy}
    predicted = {"TF-IDF": tfidf.predictions}  # each row's held-out answer: the margin's CI
    invalid: list[tuple[str, int, list[str]]] = []
    if isinstance(embeddings, str):
        invalid.append(("sentence-embedding baseline not run", 1, [embeddings]))
    else:
        sbert = cv_accuracy(embeddings, y, g.folds, seed=seed)
        baselines["SBERT"], predicted["SBERT"] = sbert.accuracy, sbert.predictions
        rows.append(Row("text_sbert_acc", sbert.accuracy, n))
        for where, standardise in (("App. L", False), (PUBLIC_RESID, True)):
            r = residualised_probe(g.states[layer], embeddings, y, g.folds, seed=seed,
                                   standardise=standardise)
            rows.append(Row("probe_acc_residualised", r.result.accuracy if r.result else float("nan"), n,
                            slice=None if where == "App. L" else where))
            if r.result is None:
                invalid.append((f"residualised probe undefined (null space empty; {where})", 1,
                                [f"Ridge W spans {max(r.removed_dims)} of {r.hidden_dims} hidden dims"]))
    chance = majority_share(y)
    nested = nested_peak(g.states, y, g.stimuli, g.folds, seed=seed)
    assert nested.predictions is not None  # nested_peak always returns them
    ci = margin_ci(nested.predictions, predicted, y, g.stimuli, chance, n_resamples=n_resamples, seed=seed)
    rows += [Row("behaviour_mis_rejection", mis_rejection, int(y.sum())),
             Row("probe_misleading_share", float(y.mean()), n, higher_is_better=False),
             Row("probe_margin", margin_over_text(nested.accuracy, baselines, chance), n, ci=ci, gated=True),
             Row("probe_margin", probe_margin(accs, baselines, chance), n, slice=IN_SAMPLE)]
    return Gap(rows, invalid, accs, baselines)
