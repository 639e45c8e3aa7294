"""Suite 3 — premise rejection (IMAVB §2.3, §3, §4.3, §5, App. C, D, G, L).

Protocol: every stimulus has a standard question (answer A–D) and a misleading copy with one premise
detail swapped (answer E "The visual detail in the question is incorrect"; F for audio); all six options
are always shown (App. I.1 A1). The model answers by the argmax of its six letter logits (no free-text
parsing; a tied top logit is no answer, counted wrong and reported), under the fixed order and K = 3
permutations seeded by MD5(video_id + correct_answer + shuffle_id), mapped back through the inverse
permutation (App. D). Metrics: accuracy per split (mean over shuffles; the fixed order a slice), Bal
(Eq. 1), bootstrap CIs over stimuli; per modality the rejection gap (how much more often a misleading
question is answered E or F than its stimulus's standard one: a floor, since rejecting every premise
passes the misleading split). A model that hears (``accepts_audio``) gets every clip with its
soundtrack and runs all four splits (the full Bal); an image-only model runs the vision splits, its
audio tests skip as not applicable with the reason, and Bal is the slice "vision only".
Representation–action gap (§4.3): per-layer logistic probes for
misleading vs standard on last-token states (4-fold stratified group CV by stimulus), peak layer l*,
text-only baselines (TF-IDF, all-MiniLM-L6-v2), residualised probe (App. L), logit lens (Eqs. 3–4) per
split; per modality (vision-grounded mis_v vs std_v, audio-grounded mis_a vs std_a) and their asymmetry.
PGLA (§5, App. G): the variant ``pgla`` is the held-out 75% with the probe-gated logit adjustment
(computed offline from the base logits; the ``Hooks.logit_adjuster`` path is checked equal on a few
records); the base variant also reports the same 75% rows as the slice ``rows=pgla_eval``.
"""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols import diagnostic_params, fail_unscored
from faithtests.protocols.imavb.exemplars import exemplar, item_outputs, variant_exemplar
from faithtests.protocols.imavb.fixtures import PREMISE_BOOTSTRAP, PREMISE_VARIANTS, PremiseData
from faithtests.protocols.imavb.gap import modality_probe, representation_gap
from faithtests.protocols.imavb.metrics import (
    SplitScores,
    modality_gap,
    per_order_accuracy,
    split_mask,
    split_scores,
)
from faithtests.protocols.imavb.pgla import BUDGETS_PP, N_FOLDS, PGLAResult
from faithtests.protocols.imavb.records import SHORT, SPLITS, modality
from faithtests.protocols.imavb.results import (
    EVAL_ROWS,
    a1_correct,
    bal_rows,
    eval_splits,
    item_correct,
    lens_curves,
    mis_gap_row,
    mis_rejection,
    pgla_delta,
    rejection_gap_rows,
    run_scores,
    shuffled,
    split_rows,
    stimuli,
    ties,
)
from faithtests.protocols.imavb.run import (
    NO_LETTER,
    UNREADABLE_AUDIO,
    UNREADABLE_VIDEO,
    ChoiceRun,
    EmbedderUnavailable,
)
from faithtests.scorecard.model import InsufficientData, Series
from faithtests.scorecard.recording import Faith

pytestmark = pytest.mark.suite("premise_rejection")
#: App. I.1's other prompts beside A1; A3 and A5 generate up to 512 / 256 tokens per question, hence
#: ``slow``. A6/A7 trim a video to its answer timestamp: on images and the world's clips (no timestamp)
#: they record "not applicable" with the reason.
PROMPTS = ("A2", "A4", "A6", "A7", pytest.param("A3", marks=pytest.mark.slow),
           pytest.param("A5", marks=pytest.mark.slow))


def _run(data: PremiseData, variant: str, seed: int) -> ChoiceRun:
    return data.run if variant == "base" else data.pgla_run(seed)


def _record_invalid(faith: Faith, data: PremiseData) -> None:
    faith.counted(data, data.read)
    for split, count in sorted(data.not_applicable.items()):
        faith.invalid(f"{split} not applicable", count, examples=[data.reason])


def _record_ties(faith: Faith, run: ChoiceRun, mask: np.ndarray) -> None:
    """Answers whose top logit is tied (any order): counted wrong in the accuracies, reported here. A
    generated letter (``run.generated``) ties only where the reply names no letter: counted as that."""
    t = ties(run, mask)
    faith.invalid(NO_LETTER if run.generated else "tied top logit", t.n, total=t.total, examples=t.items[:5])


def _record_boot(faith: Faith, ss: SplitScores, what: str) -> None:
    if ss.empty_resamples:
        faith.invalid(
            f"bootstrap resamples with an empty split ({what}; left out of the CI)",
            ss.empty_resamples,
            total=ss.n_resamples,
        )


def _scores(c: np.ndarray, run: ChoiceRun, rows: np.ndarray | None, seed: int) -> SplitScores:
    return run_scores(c, run, rows, n_resamples=PREMISE_BOOTSTRAP, seed=seed)


def _eval_rows(
    faith: Faith, data: PremiseData, variant: str, seed: int
) -> np.ndarray | InsufficientData | None:
    """Rows of ``_run(...)`` that are PGLA's evaluation rows: a subset for base, all of pgla's (None).
    With too few stimuli for PGLA the base test leaves the ``rows=pgla_eval`` slice out, records why,
    and gives its verdict on all rows (the ``pgla`` tests are INSUFFICIENT)."""
    if variant != "base":
        return None
    if why := data.no_states():  # a served model: PGLA is not applicable, the base verdicts stand
        faith.invalid(f"{EVAL_ROWS} slice not computed", 1, examples=[why])
        return InsufficientData(why)
    try:
        return data.pgla(seed).eval_rows
    except InsufficientData as e:
        faith.invalid(f"{EVAL_ROWS} slice not computed", 1, examples=[e.reason])
        return e


def _not_applicable(data: PremiseData, what: str) -> None:
    """Skip (never pass) a test of the audio half the model cannot take, saying why."""
    pytest.skip(f"{what} not applicable: {data.reason or 'no audio records in this dataset'}")


@pytest.mark.parametrize("variant", diagnostic_params(PREMISE_VARIANTS, gated=("base",)))
@pytest.mark.parametrize("split", SPLITS)
def test_premise_accuracy(
    faith: Faith, premise_data: PremiseData, split: str, variant: str, faith_seed: int
) -> None:
    """Accuracy per split (std_v, mis_v, std_a, mis_a; Table 1) with its question-type and misleading-
    subcategory slices (Tables 13, 14). An audio split the model cannot take skips as not applicable."""
    _record_invalid(faith, premise_data)
    if modality(split) == "audio" and split not in premise_data.splits():
        _not_applicable(premise_data, SHORT[split])
    run = _run(premise_data, variant, faith_seed)
    c = item_correct(run)
    splits = [r.split for r in run.records]
    m = split_mask(splits, split)
    name = SHORT[split]
    if not m.any():  # every row non-finite (fails, counted) or rejected (INSUFFICIENT, counted)
        fail_unscored(faith, name)
    _record_ties(faith, run, m)
    per_item = shuffled(c)  # per item: mean over the K shuffles
    ss = _scores(per_item, run, None, faith_seed)
    _record_boot(faith, ss, "all rows")
    ev = None
    rows = _eval_rows(faith, premise_data, variant, faith_seed)
    if not isinstance(rows, InsufficientData):
        ev = _scores(per_item, run, rows, faith_seed)
        _record_boot(faith, ev, EVAL_ROWS)
    # the split's accuracy gated (the pgla variant is a diagnostic intervention, §5: recorded only)
    faith.rows(split_rows(run, split, name, c, ss, ev), gate=variant == "base")
    recs = [r for r, k in zip(run.records, m, strict=True) if k]
    faith.items(f"{name}_correct", {r.item_id: float(v) for r, v in zip(recs, per_item[m], strict=True)})
    faith.outputs(name, item_outputs(run, recs, per_item[m]))
    wrong = [j for j in np.argsort(per_item[m])[:4] if per_item[m][j] < 1]
    faith.exemplars([exemplar(run, recs[j], f"correct in {per_item[m][j]:.0%} of shuffles") for j in wrong])


@pytest.mark.parametrize("variant", diagnostic_params(PREMISE_VARIANTS, gated=("base",)))
def test_balanced_accuracy(faith: Faith, premise_data: PremiseData, variant: str, faith_seed: int) -> None:
    run = _run(premise_data, variant, faith_seed)
    _record_invalid(faith, premise_data)
    if not {"standard_vision", "misleading_vision"} <= {r.split for r in run.records}:
        fail_unscored(faith, "Bal")  # Eq. 1 needs both vision splits: their rows were non-finite or rejected
    _record_ties(faith, run, np.ones(len(run.records), dtype=bool))
    c = item_correct(run)
    splits = [r.split for r in run.records]
    n_stim = len(stimuli(run))
    ss = _scores(shuffled(c), run, None, faith_seed)
    _record_boot(faith, ss, "all rows")
    ev, n_ev = None, 0
    rows = _eval_rows(faith, premise_data, variant, faith_seed)
    if not isinstance(rows, InsufficientData):
        ev = _scores(shuffled(c), run, rows, faith_seed)
        _record_boot(faith, ev, EVAL_ROWS)
        n_ev = n_stim if rows is None else len(stimuli(run, rows))
    fixed = _scores(c[:, 0].astype(float), run, None, faith_seed)
    _record_boot(faith, fixed, "fixed order")
    # Bal, and the rejection gap per modality (a floor: rejecting every premise passes the misleading
    # split, not this), gated on the base variant
    gated = variant == "base"
    faith.rows(bal_rows(ss, n_stim, ev, n_ev, fixed), gate=gated)
    faith.rows(rejection_gap_rows(run, n_resamples=PREMISE_BOOTSTRAP, seed=faith_seed), gate=gated)
    orders: list[float | str] = ["fixed", *(f"shuffle {k}" for k in range(c.shape[1] - 1))]
    if not ss.vision_only:  # Table 14's "Vision–Audio Gap" row: mis_v − mis_a (recorded, not gated)
        for values, where in ((shuffled(c), None), (c[:, 0].astype(float), "fixed order")):
            row, empty = mis_gap_row(values, run, n_resamples=PREMISE_BOOTSTRAP, seed=faith_seed, where=where)
            _record_empty(faith, empty, f"mis gap {where or 'shuffled'}")
            faith.rows([row])
    faith.plot(
        "accuracy per split by option order",
        "bar",
        [Series(SHORT[s], orders, list(per_order_accuracy(c, split_mask(splits, s)))) for s in ss.acc],
        y_label="accuracy",
    )


@pytest.mark.faith_diagnostic
@pytest.mark.parametrize("prompt", PROMPTS)
def test_prompt_variant(faith: Faith, premise_data: PremiseData, prompt: str, faith_seed: int) -> None:
    """A2 (binary TRUE/FALSE), A3 (chain of thought, last valid letter), A4 (warned), A5 (TRUE/FALSE with
    an explanation, verdict parsed) and A6/A7 (A1 on the clip trimmed to the answer timestamp, ±50% for
    A7) beside A1 on the same records (App. C, I.1): accuracy per split and Bal (Eq. 1), and ΔBal against
    A1 paired over stimuli (A3 against A1's fixed order, since CoT is run in the fixed order only).
    Diagnostic: no gate; answers that cannot be read are counted wrong and reported, never guessed;
    records a variant does not apply to (A6/A7 on images) are reported not applicable with the reason."""
    vr = premise_data.prompt_run(prompt)
    _record_invalid(faith, premise_data)
    run = premise_data.run
    for why, count in sorted(vr.not_applicable.items()):
        faith.invalid(f"{prompt} not applicable", count, total=len(run.records), examples=[why])
    faith.counted(vr, len(vr.records))  # a tie per shuffle: out of K answers per record (its own total)
    at = {r.item_id: i for i, r in enumerate(run.records)}
    rows = np.array([at[r.item_id] for r in vr.records], dtype=np.int64)
    lost = len(run.records) - len(rows)
    unread = vr.invalid.get(UNREADABLE_VIDEO, 0) + vr.invalid.get(UNREADABLE_AUDIO, 0)
    unread += sum(vr.not_applicable.values())
    assert lost == unread, f"{prompt}: {lost - unread} records neither answered nor counted invalid"
    if not vr.records:  # nothing it applies to (A6/A7 on image stimuli): the counts above say why
        return
    where = f"prompt={prompt}"
    sp, stim = [r.split for r in vr.records], [r.stimulus_id for r in vr.records]
    ss = split_scores(vr.correct, sp, stim, n_resamples=PREMISE_BOOTSTRAP, seed=faith_seed)
    _record_boot(faith, ss, where)
    for split in ss.acc:
        faith.metric(SHORT[split], ss.acc[split], ci=ss.ci[split], n=ss.n[split], slice=where)
    faith.metric("Bal", ss.bal, ci=ss.bal_ci, n=len(set(stim)), slice=where)
    a1 = a1_correct(run, rows, fixed_order=prompt == "A3")
    delta = split_scores(vr.correct - a1, sp, stim, n_resamples=PREMISE_BOOTSTRAP, seed=faith_seed)
    faith.metric("delta_Bal_vs_A1", delta.bal, ci=delta.bal_ci, n=len(set(stim)), slice=where)
    wrong = [j for j in np.argsort(vr.correct)[:4] if vr.correct[j] < 1]
    faith.exemplars([variant_exemplar(vr, j) for j in wrong])


def test_representation_action_gap(faith: Faith, premise_data: PremiseData, faith_seed: int) -> None:
    """§4.3 on the vision-grounded rows (mis_v vs std_v, the gate's quantity for every model), App. L,
    and the logit lens per split (Table 3's four columns where the model hears)."""
    run = premise_data.run
    inputs = premise_data.gap_inputs(faith_seed, "vision")  # not applicable without hidden states
    rows = premise_data.modality_rows("vision")
    try:
        emb: np.ndarray | str = premise_data.embeddings()[rows]
    except EmbedderUnavailable as e:
        emb = str(e)
    gap = representation_gap(inputs, emb, mis_rejection(run, rows), n_resamples=PREMISE_BOOTSTRAP,
                             seed=faith_seed)
    faith.rows(gap.rows, gate=True)
    for kind, count, examples in gap.invalid:
        faith.invalid(kind, count, examples=examples)
    layers: list[float | str] = list(range(len(gap.layer_accuracy)))
    faith.plot(
        "probe accuracy by layer (misleading vs standard), text-only baselines as lines",
        "line",
        [
            Series("hidden-state probe", layers, gap.layer_accuracy),
            *(Series(k, layers, [v] * len(layers)) for k, v in gap.baselines.items()),
        ],
        x_label="decoder layer",
        y_label="held-out accuracy",
    )
    _record_lens(faith, premise_data, layers)


def _record_lens(faith: Faith, data: PremiseData, layers: list[float | str]) -> None:
    """Logit lens (Eqs. 3–4): P_l(correct) by layer per split present (both modalities where heard)."""
    if data.lens is None:
        faith.invalid("logit lens not run", 1, examples=[data.lens_reason])
        return
    lens = lens_curves(data.lens, data.run)
    faith.plot("logit lens P_l(correct) by layer per split", "line",
               [Series(s, layers, curve) for s, curve in lens.curves.items()],
               x_label="decoder layer", y_label="P_l(correct)")
    faith.rows(lens.rows)


@pytest.mark.faith_diagnostic
def test_probe_asymmetry(faith: Faith, premise_data: PremiseData, faith_seed: int) -> None:
    """§4.3's modality-specific probes: vision-grounded (mis_v vs std_v) and audio-grounded (mis_a vs
    std_a), each at its own l* against its own TF-IDF baseline, and the asymmetry = vision-grounded −
    audio-grounded probe accuracy (the paper's "audio-grounded probes underperform vision-grounded
    ones") with a CI from a bootstrap over stimuli of the per-row held-out hits at l*. Recorded, not
    gated: Table 3's probes are 1:2 (all standard rows as negatives), another quantity than these 1:1
    within-modality probes. A model that takes no audio skips as not applicable."""
    run = premise_data.run
    if not premise_data.modality_rows("audio").size:
        _not_applicable(premise_data, "the audio-grounded probe")
    hits: dict[str, tuple[np.ndarray, list[str]]] = {}
    for target in ("vision", "audio"):
        inputs = premise_data.gap_inputs(faith_seed, target)  # not applicable without hidden states
        rejected = mis_rejection(run, premise_data.modality_rows(target))
        probe = modality_probe(inputs, rejected, seed=faith_seed, where=f"{target}-grounded")
        faith.rows(probe.rows)
        hits[target] = (probe.hits, inputs.stimuli)
    gap = modality_gap(*hits["vision"], *hits["audio"], n_resamples=PREMISE_BOOTSTRAP, seed=faith_seed)
    _record_empty(faith, gap.empty_resamples, "probe asymmetry")
    faith.metric("probe_asymmetry", gap.gap, ci=gap.ci, n=gap.n_vision + gap.n_audio, higher_is_better=False)
    assert np.isfinite(gap.gap) and np.isfinite(gap.ci).all(), f"probe asymmetry undefined: {gap}"


def _record_empty(faith: Faith, empty: int, what: str) -> None:
    if empty:
        faith.invalid(f"bootstrap resamples with an empty side ({what}; left out of the CI)", empty,
                      total=PREMISE_BOOTSTRAP)


@pytest.mark.faith_diagnostic
def test_pgla_gain(faith: Faith, premise_data: PremiseData, faith_seed: int) -> None:
    """ΔBal of PGLA on held-out folds (Table 4), its standard-accuracy cost, the Pareto rows (Table 11),
    and that the adapter path (``Hooks.logit_adjuster``) reproduces Eqs. 5–6 applied offline."""
    res = premise_data.pgla(faith_seed)
    run = premise_data.run
    sp = eval_splits(res, run)
    _record_pgla(faith, res, run, sp, faith_seed, None)
    faith.metric("PGLA_probe_acc", res.probe_accuracy, n=len(sp))
    faith.metric("PGLA_tune_test_gap", res.tune_test_gap, n=len(sp))
    n_train = len(run.records) - len(sp)
    faith.metric("l_star", float(res.layer), n=n_train, slice="PGLA (probe-training stimuli)")
    faith.metric("PGLA_beta", res.beta, n=n_train)
    for b in BUDGETS_PP:
        row = res.pareto[b]
        faith.metric("PGLA_delta_Bal", row.delta_bal, n=len(sp), slice=f"std budget <= {b:g} pp")
        faith.metric("PGLA_std", row.std, n=len(sp), slice=f"std budget <= {b:g} pp")
        faith.metric("PGLA_mis", row.mis, n=len(sp), slice=f"std budget <= {b:g} pp")
        faith.metric(
            "PGLA_identity_folds",
            float(row.identity_folds),
            n=N_FOLDS,
            slice=f"std budget <= {b:g} pp",
            higher_is_better=False,
        )
    _record_pgla(faith, premise_data.pgla(faith_seed, "fixed"), run, sp, faith_seed, "fixed order")
    err, n = premise_data.pgla_hook_check(faith_seed)
    faith.metric("PGLA_hook_max_abs_err", err, n=n)
    assert n > 0 and err < 1e-3, f"the Hooks.logit_adjuster path differs from Eqs. 5-6 offline by {err:.2e}"


def _record_pgla(
    faith: Faith, res: PGLAResult, run: ChoiceRun, sp: list[str], seed: int, where: str | None
) -> None:
    """ΔBal (Eq. 1 per split) with its paired CI over stimuli, and the standard-accuracy cost."""
    d = pgla_delta(res, run, n_resamples=PREMISE_BOOTSTRAP, seed=seed)
    _record_boot(faith, d.scores, f"PGLA ΔBal {where or 'shuffled'}")
    faith.metric("PGLA_delta_Bal", d.delta_bal, ci=d.scores.bal_ci, n=len(sp), slice=where)
    faith.metric("PGLA_std_cost", d.std_cost, n=d.n_std, slice=where)
