"""Suite 2 — flip sensitivity.

2a (LGIP §3.2–3.3, §4.3–4.6, App. A.2). Protocol: replace one word of a caption with another
word of the same colour / number / object vocabulary (first whole-word match, at most one flip per type,
K_diff = 6, seed 42), and for the combined case flip a paraphrase instead. A faithful scorer prefers the
original: gap g = s(I, c) − s(I, c†), E_sens = mean g (Eq. 4), PR = mean 1{s(I, c) > s(I, c†)} (Eq. 5,
strict). Flip strength s = a·type_prior + (1 − a)·clip01(1 − cos_text(c, c†)) weights the gaps and
bins them weak / medium / strong at the 25th / 75th percentiles (§4.3): within each flip type by
default (slices ``bin=weak`` ..., and ``bin=weak,type=color`` ... for the make-up), or with
``--faith-lgip-bins paper`` the public script's Table 5 bins (``paper_bin=weak`` ...) or ``pooled``
(``pooled_bin=weak`` ...); see ``faithtests/protocols/lgip/strength.py``. SugarCrepe (positive, hard
negative) pairs are flips too: their PR equals SugarCrepe's text accuracy. The numbers come from
``faithtests/protocols/lgip/results.py`` (2a) and ``faithtests/protocols/s3e/results.py`` (2b), which
also say which of them are gates; this file records them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from faithtests.protocols import fail_unscored
from faithtests.protocols.lgip.fixtures import (
    Scored,
    bin_slice,
    family_of_case,
    finite_pairs,
    pair_exemplars,
    record_missing,
)
from faithtests.protocols.lgip.metrics import FlipStats
from faithtests.protocols.lgip.results import (
    ci_bars,
    count_pairs,
    flip_indices,
    flip_rate,
    pair_outputs,
    strength_bins,
)
from faithtests.protocols.lgip.strength import BinScheme
from faithtests.protocols.s3e.fixtures import S3E_ANCHOR, S3E_MIN_SUPPORT, S3EData, finite_records
from faithtests.protocols.s3e.metrics import (
    STRESS,
    BehaviourSummary,
    most_excess,
    paired_excess,
    s_scores,
    select_layer,
    stress_behaviour,
    stress_pres_distance,
    strict_correct,
    summarize_s3e,
)
from faithtests.protocols.s3e.results import hidden_stress, order_accuracy
from faithtests.protocols.s3e.results import strict as strict_rows
from faithtests.protocols.s3e.run import NO_LETTER
from faithtests.scorecard.model import Series
from faithtests.scorecard.recording import Faith

pytestmark = pytest.mark.suite("flip_sensitivity")


def _pr_bars(faith: Faith, title: str, stats: Mapping[str, FlipStats], keys: list[str]) -> None:
    values, lo, hi = ci_bars([stats[k].pr for k in keys])
    faith.plot(title, "bar", [Series(faith.model, list(keys), values, lo=lo, hi=hi)],
               y_label="PR (higher is better)")


def test_flip_positive_rate(faith: Faith, flip_scored: Scored, flip_case: str, faith_seed: int) -> None:
    scored = flip_scored
    pairs = scored.workload.pairs
    idx = flip_indices(pairs, family_of_case(flip_case), flip_case)
    assert idx.size, f"no {flip_case} flips were generated for {scored.workload.name}"
    record_missing(faith, scored)
    slice_ = None if flip_case == "all" else flip_case
    idx = finite_pairs(faith, scored, idx)  # NaN/inf pairs are counted and fail the checks
    if not idx.size:
        fail_unscored(faith, "PR", slice=slice_)
    rate = flip_rate(pairs, scored.base, scored.perturbed, idx, seed=faith_seed)

    faith.rows(rate.rows(slice_, by_type=flip_case == "all"), gate=True)  # PR of the case gated
    faith.outputs("PR", pair_outputs(pairs, scored.base, scored.perturbed,
                                     {k: v > 0 for k, v in rate.won.values.items()}), slice=slice_)
    if flip_case == "all":
        _pr_bars(faith, "PR by flip type", rate.summary.by_type, sorted(rate.summary.by_type))
        faith.items("flip_preferred_original", rate.preferred_original)
    faith.exemplars(pair_exemplars(scored, rate.worst, "flip scored at or above its original"))
    if flip_case == "number":
        _record_count_pairs(faith, scored, idx, faith_seed)


def _record_count_pairs(faith: Faith, scored: Scored, idx: np.ndarray, seed: int) -> None:
    """Number flips by (true -> flipped) count and by direction (the flip names more / fewer objects).
    Recorded, not gated; the worst pair's hardest flips are exemplars."""
    counts = count_pairs(scored.workload.pairs, scored.base, scored.perturbed, idx, seed=seed)
    if counts is None:
        return
    faith.rows(counts.rows())
    _pr_bars(faith, f"PR by count pair (true -> flipped), {scored.workload.name}", counts.by_pair,
             sorted(counts.by_pair))
    faith.exemplars(pair_exemplars(scored, counts.worst_flips, f"worst count pair {counts.worst}: flip "
                                   "scored at or above its original"))


def test_flip_strength_bins(faith: Faith, flip_scored: Scored, faith_scorer: object, strength_bin: str,
                            faith_seed: int, lgip_bin_scheme: BinScheme) -> None:
    scored = flip_scored
    pairs = scored.workload.pairs
    slice_ = bin_slice(lgip_bin_scheme, strength_bin)
    idx = finite_pairs(faith, scored, flip_indices(pairs, "flip", "all"))
    if not idx.size:
        fail_unscored(faith, "PR", slice=slice_)
    bins = strength_bins(pairs, scored.base, scored.perturbed, idx,
                         lambda texts: faith_scorer.encode_texts(texts).numpy(),  # type: ignore[attr-defined]
                         lgip_bin_scheme, seed=faith_seed)
    if strength_bin not in bins.summary.by_bin:  # possible with the paper's bins (strength.py)
        pytest.skip(f"no flip falls in the {strength_bin} bin ({lgip_bin_scheme} bins, q25/q75: {bins.cuts})")
    faith.rows(bins.rows(strength_bin, slice_), gate=True)  # the bin's PR gated; its make-up recorded
    if strength_bin == "strong":
        order = bins.present()
        values, lo, hi = ci_bars([bins.summary.by_bin[b].pr for b in order])
        faith.plot(f"PR by flip strength ({lgip_bin_scheme} bins; q25/q75 {bins.cuts})", "line", [
            Series(faith.model, list(order), values, lo=lo, hi=hi)], x_label="strength bin", y_label="PR")


# ------------------------------------------------------------------------------------------------------
# 2b (S3E §3, §5–6, App. A, I, J, M). Protocol: each record's candidates (preserve, lexical,
# stress, random) are paired with the image-supported c+ in both orders and the model answers A or B
# from its option logits (no sampling). Behaviour: per-order accuracy on stress trials and the
# strict-correct rate (c+ chosen in both orders). Internal: on strict-correct items, the pre-answer
# state's cosine distance to the anchor state (Eq. 2) under stress minus under each control, order-
# averaged (Eqs. 3–5), at one layer chosen by peak stress specificity and frozen; paired bootstrap CI
# (3,000 resamples), d_p (Eq. 8), HSR (App. J), top-half band (Eq. 7).

def _behaviour(s3e: S3EData) -> BehaviourSummary:
    return stress_behaviour(s3e.logits[:, :, STRESS])


@pytest.mark.parametrize("order", ["orig", "swap"])
def test_forced_choice_order_accuracy(faith: Faith, s3e_data: S3EData, order: str) -> None:
    s3e_data = finite_records(faith, s3e_data)  # NaN/inf logits are counted and fail the checks
    if not s3e_data.records:
        fail_unscored(faith, "AB_accuracy", slice=order)
    b = _behaviour(s3e_data)
    faith.invalid("excluded record", sum(s3e_data.excluded.values()),
                  examples=[f"{k}: {v}" for k, v in sorted(s3e_data.excluded.items())])
    # a generated letter (s3e_data.generated) ties only where the reply names neither A nor B
    faith.invalid(NO_LETTER if s3e_data.generated else "A/B tie (never guessed)", b.n_ties, total=2 * b.n)
    ids = [r.item_id for r in s3e_data.records]
    rows, correct = order_accuracy(s3e_data.logits[:, :, STRESS], b, ids, order)
    faith.rows(rows, gate=True)  # AB_accuracy in this order gated, the A rate recorded
    faith.outputs("AB_accuracy", _s3e_outputs(s3e_data, correct, (0,) if order == "orig" else (1,)),
                  slice=order)
    if order == "swap":
        faith.plot("A/B accuracy by option order (position bias at a glance)", "bar", [
            Series(faith.model, ["orig [c+, c]", "swap [c, c+]"], [b.acc_orig, b.acc_swap])],
            y_label="accuracy on stress trials")


def test_forced_choice_strict_correct(faith: Faith, s3e_data: S3EData) -> None:
    s3e_data = finite_records(faith, s3e_data)
    if not s3e_data.records:
        fail_unscored(faith, "strict_correct")
    rows, strict = strict_rows(s3e_data.logits[:, :, STRESS], [r.item_id for r in s3e_data.records],
                               [r.stress_type for r in s3e_data.records])
    faith.rows(rows, gate=True)  # the strict-correct rate gated, per stress type recorded
    faith.items("strict_correct", {r.item_id: bool(s) for r, s in zip(s3e_data.records, strict, strict=True)})
    faith.outputs("strict_correct", _s3e_outputs(s3e_data, strict, (0, 1)))
    wrong = np.flatnonzero(~strict)[:4]
    faith.exemplars([_s3e_exemplar(s3e_data, int(i), "stress candidate chosen in at least one order")
                     for i in wrong])


def test_hidden_stress(faith: Faith, s3e_data: S3EData, faith_seed: int) -> None:
    s3e_data = finite_records(faith, s3e_data, states=True)
    if not s3e_data.records:
        fail_unscored(faith, "Delta_lex")
    S = s_scores(s3e_data.states, reference=S3E_ANCHOR)
    strict = strict_correct(s3e_data.logits[:, :, STRESS])
    if strict.sum() < S3E_MIN_SUPPORT:  # Eqs. 3–5 live on strict-correct items; low support is no verdict
        faith.metric("Delta_lex", float("nan"), n=int(strict.sum()))
        faith.check("Delta_lex", min_n=S3E_MIN_SUPPORT, unit="strict-correct items")  # INSUFFICIENT
        faith.settle()  # nothing more to compute on so few items: the test ends with its verdicts so far
        return
    selection = select_layer(S, strict, reference=S3E_ANCHOR)  # frozen: chosen once on the base model
    summary = summarize_s3e(S, s3e_data.logits, selection, dist=stress_pres_distance(s3e_data.states),
                            stress_types=[r.stress_type for r in s3e_data.records],
                            sources=[r.source for r in s3e_data.records], seed=faith_seed)
    faith.rows(hidden_stress(summary), gate=True)  # Δ_lex gated; the other controls, d_p, HSR recorded
    layers: list[float | str] = list(range(len(summary.curves["lex"].mean)))
    faith.plot(f"Δ per layer with 95% CI (frozen layer {selection.layer}, anchor={S3E_ANCHOR})", "line", [
        Series(f"Δ{c}", layers, list(cv.mean), lo=list(cv.lo), hi=list(cv.hi))
        for c, cv in summary.curves.items()], x_label="decoder layer", y_label="Δ (stress − control)")
    d_lex = paired_excess(S, "lex", strict)[selection.layer]
    faith.exemplars([_s3e_exemplar(s3e_data, i, f"strict-correct, Δlex = {d:.4f}")
                     for i, d in most_excess(d_lex, np.flatnonzero(strict))])


def _s3e_outputs(s3e: S3EData, outcome: np.ndarray, orders: tuple[int, ...]) -> dict[str, dict[str, object]]:
    """Item-log rows of the stress trials: the image ref, c+ and the stress foil, and per option order
    the option chosen (orig shows [c+, stress], swap [stress, c+]) with its A and B logits."""
    rows: dict[str, dict[str, object]] = {}
    for i, r in enumerate(s3e.records):
        output: dict[str, object] = {}
        for o in orders:
            a, b = float(s3e.logits[i, o, STRESS, 0]), float(s3e.logits[i, o, STRESS, 1])
            name = ("orig", "swap")[o]
            chosen = "tie" if a == b else ("A" if a > b else "B")
            text = {"A": (r.c_pos, r.c_stress)[o], "B": (r.c_stress, r.c_pos)[o]}.get(chosen, "")
            output |= {f"{name} chosen": f"{chosen}. {text}".rstrip(". "), f"{name} logit A": a,
                       f"{name} logit B": b}
        rows[r.item_id] = {"inputs": {"image": r.image_ref, "c+": r.c_pos, "stress": r.c_stress,
                                      "type": r.stress_type},
                           "output": output, "outcome": bool(outcome[i])}
    return rows


def _s3e_exemplar(s3e: S3EData, i: int, reason: str) -> dict[str, object]:
    r = s3e.records[i]
    lg = s3e.logits[i]
    return {"image": s3e.images[r.item_id](),
            "texts": {"c+": r.c_pos, "stress": r.c_stress, "lexical": r.c_lex, "type": r.stress_type},
            "scores": {"orig A−B": float(lg[0, STRESS, 0] - lg[0, STRESS, 1]),
                       "swap A−B": float(lg[1, STRESS, 0] - lg[1, STRESS, 1])},
            "reason": reason}
