"""Suite 4 — affective conflict (AC-Bench §3–5, App. C.3, D).

Protocol: an image with its emotion y_img and one description steering toward y_txt (aligned: y_txt =
y_img; subjective adjacent / opposite; objective object / attribute / behaviour). The model answers the
App. C.3 emotion prompt with one of the eight labels, in answer mode (a) ``generation`` (default, the
paper's: greedy, read by a strict parser; anything else is "other", P_oth) or (b) ``constrained`` (the
label whose full continuation has the highest log-probability, so P_oth is 0; a tie is no answer).
Metrics on the conflict records (y_img ≠ y_txt): P_img, P_txt, P_oth (Eqs. 1–3) and TBR (Eq. 4), overall and
per subset; accuracy on aligned records; the image-only and text-only baselines (App. C.1, the benchmark's
validity check); LSS per layer at the answer query (Eq. 22, Figs. 8–9). CIs: percentile bootstrap over
images (an image's six records resampled together). CECS (§5, App. D) is the variant ``cecs``: conflict
score s from the probe prompt (Eq. 5), the mass-preserving attention reallocation in the window for every
prompt with s ≥ τ; recorded beside ``base``, gated by nothing (a diagnostic intervention, like PGLA in
suite 3).
Gates (base variant, generation mode: the answer mode of Tables 5-7): P_img (>=) and TBR (<=) per conflict
subset, the rows those tables print; aligned accuracy (>=); image-only and text-only accuracy (>=, Tables
3-4: a model blind to one signal has no preference between them). The constrained mode is recorded beside
them (slice ``mode=constrained``). Whole-label log-probability favours labels of fewer tokens; the same
log-probabilities divided by each label's token count are recorded beside the constrained ones as the slice
``scoring=length_normalised`` (P_img, P_txt, P_oth, TBR), gated by nothing.
"""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols import diagnostic_params
from faithtests.protocols.acbench.exemplars import exemplar, item_outputs
from faithtests.protocols.acbench.fixtures import ACBENCH_BOOTSTRAP, ACBENCH_VARIANTS, AcData, CecsUnavailable
from faithtests.protocols.acbench.metrics import lss_curve
from faithtests.protocols.acbench.records import CONFLICT_SUBSETS, AcRecord
from faithtests.protocols.acbench.results import (
    CATEGORIES,
    accuracy_rows,
    aligned,
    categories,
    cecs_delta_rows,
    conflict_score_rows,
    hits,
    lss_band,
    normalised_share_rows,
    normalised_tbr_row,
    share_rows,
    subset_shares,
    tbr_rows,
)
from faithtests.protocols.acbench.run import ANSWER_MODES, UNPARSEABLE, Answers
from faithtests.scorecard.model import Series
from faithtests.scorecard.recording import Faith
from faithtests.stats import Boot

pytestmark = pytest.mark.suite("affective_conflict")
GATED = ("base", "generation")  # (variant, mode) the thresholds apply to: the paper's answer mode
CONSTRAINED = ("base", "constrained")  # recorded beside it, with the length-normalised scoring
#: Mass preservation (Eq. 13) on real attention rows, and "unchanged" below the gate (eager vs fused
#: attention kernels round differently, so outputs agree to float32 rounding, not bit for bit).
MASS_TOL = 1e-6
GATE_TOL = 1e-4


#: The slice of the length-normalised label scoring (``AcData.normalised``): recorded, never gated.
SCORING = "scoring=length_normalised"


def _normalised(faith: Faith, data: AcData) -> Answers | None:
    """The base constrained answers re-decided by mean per-token log-probability, or None (counted)
    when the adapter exposes no tokenizer to count the labels' tokens."""
    ans = data.normalised()
    if ans is None:
        faith.invalid("length-normalised scoring unavailable (the adapter exposes no tokenizer)", 1)
    return ans


def _described(data: AcData) -> list[AcRecord]:
    if not data.records:
        pytest.skip(f"{data.dataset}: no records with a description (image-only data: baselines only)")
    return data.records


def _answers(data: AcData, variant: str, mode: str) -> Answers:
    try:
        return data.answers(variant, mode)  # type: ignore[arg-type]
    except CecsUnavailable as e:
        pytest.skip(f"CECS not run on {data.dataset}: {e}")


def _record_invalid(faith: Faith, data: AcData, *answers: Answers) -> None:
    faith.counted(data.loaded, data.loaded_total)
    faith.counted(data.usable, data.usable.total)
    for a in answers:
        # a generated reply that names no label is the paper's "other" (P_oth), the model's answer
        answered = {UNPARSEABLE} if a.mode == "generation" else set()
        faith.counted(a.counted, len(a.ids), tag=a.mode, untotalled=answered)


@pytest.mark.parametrize("variant", diagnostic_params(ACBENCH_VARIANTS, gated=GATED))
@pytest.mark.parametrize("mode", diagnostic_params(ANSWER_MODES, gated=GATED))
def test_conflict_shares(
    faith: Faith, acbench_data: AcData, mode: str, variant: str, faith_seed: int
) -> None:
    """P_img, P_txt, P_oth (Eqs. 1–3) on Q_conf and per subset (Tables 1, 5, 6), CIs over images."""
    recs = _described(acbench_data)
    ans = _answers(acbench_data, variant, mode)
    _record_invalid(faith, acbench_data, ans)
    rows, onehot = categories(recs, ans)
    assert rows, f"no conflict records in {acbench_data.dataset}"
    boot = Boot(ACBENCH_BOOTSTRAP, faith_seed)
    shares_all = share_rows(recs, ans, mode, boot)
    faith.rows(shares_all, gate=(variant, mode) == GATED)  # gated: P_img per subset (Tables 5 / 6)
    faith.outputs(shares_all[0].name, item_outputs(recs, ans, rows, [bool(x) for x in onehot[:, 0]]),
                  slice=shares_all[0].slice)  # P_img on Q_conf: one row per conflict record
    by = subset_shares(recs, ans)
    faith.plot(
        f"answer alignment per conflict subset ({mode})",
        "bar",
        [Series(k, list(by), [float(v[j]) for v in by.values()]) for j, k in enumerate(CATEGORIES)],
        y_label="share of conflict records",
    )
    faith.items(f"image_aligned_{mode}", {recs[i].item_id: bool(onehot[j, 0]) for j, i in enumerate(rows)})
    followed = [i for j, i in enumerate(rows) if onehot[j, 1]][:4]
    faith.exemplars([exemplar(recs[i], ans, i, "followed the description, not the image") for i in followed])
    if (variant, mode) == CONSTRAINED:  # CECS and the constrained mode are recorded, gated by nothing
        norm = _normalised(faith, acbench_data)
        if norm is not None:
            faith.rows(normalised_share_rows(recs, norm, boot, SCORING))


@pytest.mark.parametrize("variant", diagnostic_params(ACBENCH_VARIANTS, gated=GATED))
@pytest.mark.parametrize("mode", diagnostic_params(ANSWER_MODES, gated=GATED))
def test_text_bias_ratio(
    faith: Faith, acbench_data: AcData, mode: str, variant: str, faith_seed: int
) -> None:
    """TBR = P_txt / (P_txt + P_img) (Eq. 4) on Q_conf and per subset (Table 7); undefined (NaN, which
    never passes) when no answer matches either label."""
    recs = _described(acbench_data)
    ans = _answers(acbench_data, variant, mode)
    _record_invalid(faith, acbench_data, ans)
    assert categories(recs, ans)[0], f"no conflict records in {acbench_data.dataset}"
    boot = Boot(ACBENCH_BOOTSTRAP, faith_seed)
    for subset, row in tbr_rows(recs, ans, mode, boot):
        faith.rows([row], gate=(variant, mode) == GATED)  # gated: TBR per subset (Table 7)
        if row.value != row.value:  # NaN
            faith.invalid("TBR undefined (no answer matched y_img or y_txt)", 1, examples=[subset or "all"])
    if (variant, mode) == CONSTRAINED:
        norm = _normalised(faith, acbench_data)
        if norm is not None:
            faith.rows([normalised_tbr_row(recs, norm, boot, SCORING)])


@pytest.mark.parametrize("variant", diagnostic_params(ACBENCH_VARIANTS, gated=GATED))
@pytest.mark.parametrize("mode", diagnostic_params(ANSWER_MODES, gated=GATED))
def test_aligned_accuracy(
    faith: Faith, acbench_data: AcData, mode: str, variant: str, faith_seed: int
) -> None:
    """Accuracy on the aligned records (y_txt = y_img; "Align acc" of Tables 1, 2, 5)."""
    recs = _described(acbench_data)
    ans = _answers(acbench_data, variant, mode)
    _record_invalid(faith, acbench_data, ans)
    rows = aligned(recs)
    if not rows:
        pytest.skip(f"{acbench_data.dataset}: no aligned records")
    hit = hits([ans.pred[i] for i in rows], [recs[i].image_emotion for i in rows])
    acc = accuracy_rows("aligned_acc", hit, [recs[i] for i in rows], mode,
                        Boot(ACBENCH_BOOTSTRAP, faith_seed))
    faith.rows(acc, gate=(variant, mode) == GATED)
    faith.outputs(acc[0].name, item_outputs(recs, ans, rows, [bool(h) for h in hit]), slice=acc[0].slice)
    wrong = [i for i, h in zip(rows, hit, strict=True) if not h][:4]
    faith.exemplars([exemplar(recs[i], ans, i, "wrong on an aligned record") for i in wrong])


@pytest.mark.parametrize("mode", diagnostic_params(ANSWER_MODES, gated=GATED))
def test_unimodal_baselines(faith: Faith, acbench_data: AcData, mode: str, faith_seed: int) -> None:
    """Image-only (gold y_img, one answer per image) and text-only (gold y_txt, per description and
    subset) accuracies: App. C.1's check that both signals are recognisable on their own, without which
    P_img / P_txt say nothing about a preference. CECS cannot change them (a prompt without an image or
    without a description has no mass to move), so they are recorded once, for base. Gated in the
    generation mode (Tables 3-4)."""
    data = acbench_data
    boot = Boot(ACBENCH_BOOTSTRAP, faith_seed)
    images = data.baseline("image-only", mode)  # type: ignore[arg-type]
    answers = [images]
    gated = mode == GATED[1]  # a model blind to either signal has no preference to measure (App. C.1)
    if data.usable.images:
        hit = hits(images.pred, [r.image_emotion for r in data.usable.images])
        faith.rows(accuracy_rows("image_only_acc", hit, data.usable.images, mode, boot), gate=gated)
    if data.records:
        text = data.baseline("text-only", mode)  # type: ignore[arg-type]
        answers.append(text)
        hit = hits(text.pred, [r.text_emotion for r in data.records])
        faith.rows(accuracy_rows("text_only_acc", hit, data.records, mode, boot,
                                 ("aligned", *CONFLICT_SUBSETS)), gate=gated)
    _record_invalid(faith, data, *answers)
    assert data.usable.images or data.records, f"{data.dataset}: nothing to run"


@pytest.mark.faith_diagnostic
def test_linguistic_sink(faith: Faith, acbench_data: AcData, faith_seed: int) -> None:
    """LSS per layer (Eq. 22) at the answer query with its 95% CI band over images, base and CECS on
    one plot (Figs. 8–9), on the rows App. D.3 diagnoses (S-Opp); the CECS window and its rule."""
    data = acbench_data
    recs = _described(data)
    rows, name = data.sink_rows()
    stim = [recs[i].stimulus_id for i in rows]
    curves = {"base": data.lss("base")}
    try:
        window, rule = data.window()
        curves["cecs"] = data.lss("cecs")
    except CecsUnavailable as e:
        window, rule = None, str(e)
        faith.invalid("CECS not run (no intervention window)", 1, examples=[rule])
    series = []
    for variant, run in curves.items():
        faith.bind(variant=variant)
        curve = lss_curve(run.per_item[:, rows])
        layers: list[float | str] = list(range(curve.mean.size))
        band = lss_band(curve, stim, Boot(ACBENCH_BOOTSTRAP, faith_seed))
        lo, hi = band.lo, band.hi
        for layer in range(curve.mean.size):
            if curve.undefined[layer]:
                faith.invalid(
                    f"LSS undefined at layer {layer} (no image attention)",
                    int(curve.undefined[layer]),
                    total=len(rows),
                )
        series.append(Series(variant, layers, list(curve.mean), lo=lo, hi=hi))
        if not np.isfinite(curve.mean).any():  # no layer attends to the image: counted above, no peak
            continue
        peak = int(np.nanargmax(curve.mean))
        faith.metric(
            "LSS_peak",
            float(curve.mean[peak]),
            ci=(lo[peak], hi[peak]) if np.isfinite(lo[peak]) else None,
            n=len(rows),
            slice=name,
        )
        faith.metric("LSS_peak_layer", float(peak), n=len(rows), slice=name)
        if window is not None:
            faith.metric(
                "LSS_window_mean",
                float(np.nanmean(curve.mean[window[0] : window[1] + 1])),
                n=len(rows),
                slice=f"{name}, layers {window[0]}-{window[1]}",
            )
    faith.bind(variant="base")
    where = f"window {window[0]}-{window[1]}: {rule}" if window else rule
    faith.plot(
        f"LSS by layer on {name} records, base and CECS ({where})",
        "line",
        series,
        x_label="decoder layer (0-based)",
        y_label="LSS (description / image attention)",
    )
    if window is not None:
        faith.metric("cecs_window_first", float(window[0]), slice=rule)
        faith.metric("cecs_window_last", float(window[1]), slice=rule)


def _check_mass_and_gate(faith: Faith, data: AcData, window: tuple[int, int]) -> None:
    """Eq. 13 (every modified attention row still sums to 1) and the hard gate (s < τ changes nothing)."""
    mass = data.mass()
    faith.metric("cecs_mass_max_err", mass.max_sum_err, n=mass.rows, slice="s=1 check")
    assert mass.rows > 0, f"the CECS update changed no attention row in layers {window} at s = 1"
    assert mass.max_sum_err <= MASS_TOL, f"a modified attention row sums to 1 ± {mass.max_sum_err:.2e}"
    steered = data.steered_mass()  # every row the real CECS runs change (cached only beside their outputs)
    if steered.rows:
        faith.metric("cecs_mass_max_err", steered.max_sum_err, n=steered.rows, slice="CECS runs")
    assert steered.max_sum_err <= MASS_TOL, f"a steered attention row sums to 1 ± {steered.max_sum_err:.2e}"
    gate = data.gate()
    faith.metric("cecs_gate_closed_max_logprob_diff", gate.max_logprob_diff, n=gate.prompts)
    faith.metric("cecs_gate_closed_max_lss_diff", gate.max_lss_diff, n=gate.prompts)
    assert gate.max_logprob_diff <= GATE_TOL and gate.max_lss_diff <= GATE_TOL and gate.same_replies, gate


@pytest.mark.faith_diagnostic
def test_cecs_intervention(faith: Faith, acbench_data: AcData, faith_seed: int) -> None:
    """CECS (§5.1, App. D): the update keeps every modified attention row a distribution (Eq. 13: sums
    to 1 within 1e-6 on real attentions) and leaves the outputs unchanged below the gate (s < τ); the
    conflict score's spread over aligned / conflict records, how many rows it steers, and what it does
    to P_img, TBR and aligned accuracy (paired differences vs base, CIs over images). Diagnostic."""
    data = acbench_data
    recs = _described(data)
    try:
        window, _ = data.window()
    except CecsUnavailable as e:
        pytest.skip(f"CECS not run on {data.dataset}: {e}")
    _check_mass_and_gate(faith, data, window)
    s, bad, examples = data.score_run()
    for kind, count in sorted(bad.items()):
        faith.invalid(kind, count, total=len(recs), examples=examples[kind])
    faith.rows(conflict_score_rows(recs, s))
    base, cecs = data.answers("base", "constrained"), data.answers("cecs", "constrained")
    faith.rows(cecs_delta_rows(recs, base, cecs, Boot(ACBENCH_BOOTSTRAP, faith_seed)))
