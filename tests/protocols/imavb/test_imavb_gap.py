"""The representation–action gap's rows (IMAVB §4.3, App. L): what the suite records, hand-checked on
synthetic states whose label lives in one layer and in no question text."""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols.imavb.gap import (
    IN_SAMPLE,
    PUBLIC_RESID,
    PUBLIC_TFIDF,
    Gap,
    GapInputs,
    modality_probe,
    representation_gap,
)
from faithtests.protocols.imavb.probes import group_folds, layer_curve, nested_peak
from faithtests.scorecard.model import MetricRow


def _inputs(n: int = 120) -> GapInputs:
    rng = np.random.default_rng(0)
    y = np.array([i % 2 for i in range(n)], dtype=np.int64)  # one standard, one misleading per stimulus
    states = rng.normal(size=(3, n, 6))
    states[2, :, 1] += 2.5 * y  # layer 2 encodes the label
    stim = [f"s{i // 2}" for i in range(n)]
    folds = group_folds(y, stim, seed=0)
    texts = ["Next to the red square, what colour is the circle?"] * n  # identical text: no signal
    return GapInputs(states, y, stim, texts, layer_curve(states, y, folds), folds)


def _row(gap: Gap, name: str, slice: str | None = None) -> MetricRow:
    rows = [r for r in gap.rows if (r.name, r.slice) == (name, slice)]
    assert len(rows) == 1, (name, slice)
    return rows[0]


def test_margin_is_the_out_of_sample_probe_over_the_best_text_baseline_floored_at_chance() -> None:
    """probe_margin = nested-l* accuracy − max(chance, TF-IDF, SBERT) (§4.3 with the floor at the majority
    share, 0.5 here): identical texts put TF-IDF at or under chance, so the margin is accuracy − 0.5.
    Only that row is gated; the paper's in-sample margin (the peak of the same curve) is recorded."""
    g = _inputs()
    gap = representation_gap(g, "no embedder here", mis_rejection=0.25, n_resamples=50, seed=0)
    nested = nested_peak(g.states, g.y, g.stimuli, g.folds, seed=0)
    margin = _row(gap, "probe_margin")
    assert margin.value == pytest.approx(nested.accuracy - 0.5)
    assert margin.gated and margin.ci is not None
    assert [r.name for r in gap.rows if r.gated] == ["probe_margin"]
    in_sample = _row(gap, "probe_margin", IN_SAMPLE)
    assert in_sample.value == pytest.approx(gap.layer_accuracy[2] - 0.5) and not in_sample.gated
    assert _row(gap, "l_star").value == 2.0
    assert _row(gap, "probe_acc", "final layer").value == gap.layer_accuracy[-1]
    assert _row(gap, "behaviour_mis_rejection").value == 0.25
    assert _row(gap, "behaviour_mis_rejection").n == 60  # out of the misleading rows
    assert _row(gap, "probe_misleading_share").value == 0.5
    assert gap.baselines["TF-IDF"] <= 0.6 and _row(gap, "text_tfidf_acc", PUBLIC_TFIDF)
    # no embeddings: counted once with the reason, and no SBERT or residualised row is made up
    assert gap.invalid == [("sentence-embedding baseline not run", 1, ["no embedder here"])]
    assert not [r for r in gap.rows if r.name in ("text_sbert_acc", "probe_acc_residualised")]


def test_embeddings_that_carry_the_label_raise_the_bar() -> None:
    """Sentence embeddings that predict the label perfectly: the best baseline is SBERT's ~1.0, so the
    margin falls to about 0 or below (the probe explains nothing the text does not). Both residualised
    rows are recorded (App. L's and the public code's); a 2-dim embedding leaves a null space."""
    g = _inputs()
    noise = np.random.default_rng(1).normal(size=(len(g.y), 2)) * 0.1
    emb = np.stack([g.y * 3.0, np.zeros(len(g.y))], axis=1) + noise
    gap = representation_gap(g, emb, mis_rejection=0.0, n_resamples=50, seed=0)
    assert gap.baselines["SBERT"] == 1.0
    nested = nested_peak(g.states, g.y, g.stimuli, g.folds, seed=0)
    assert _row(gap, "probe_margin").value == pytest.approx(nested.accuracy - 1.0)
    assert _row(gap, "probe_acc_residualised") and _row(gap, "probe_acc_residualised", PUBLIC_RESID)
    assert gap.invalid == []


def test_a_modality_probe_is_sliced_by_its_modality_and_gates_nothing() -> None:
    """§4.3's modality-specific probe: the probe at l* with its held-out hits (the asymmetry's bootstrap
    reads them), its own TF-IDF baseline and the in-sample margin over max(chance, TF-IDF) = 0.5 here."""
    g = _inputs()
    probe = modality_probe(g, 0.4, seed=0, where="audio-grounded")
    assert [(r.name, r.slice) for r in probe.rows] == [
        ("probe_acc", "audio-grounded"), ("l_star", "audio-grounded"), ("text_tfidf_acc", "audio-grounded"),
        ("probe_margin", f"audio-grounded, {IN_SAMPLE}"), ("behaviour_mis_rejection", "audio-grounded")]
    assert not any(r.gated for r in probe.rows)
    accs = [p.accuracy for p in g.curve]
    assert probe.rows[0].value == accs[2] == probe.hits.mean() and probe.rows[0].ci is not None
    assert probe.rows[3].value == pytest.approx(accs[2] - 0.5)
    assert probe.rows[4].value == 0.4 and probe.rows[4].n == 60
