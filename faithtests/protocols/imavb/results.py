"""What the premise-rejection suite tests record, computed from one run's letter logits.

Pure functions over :class:`~faithtests.protocols.imavb.run.ChoiceRun` (and PGLA's held-out result):
per-item correctness under every option order, split accuracies and Bal (IMAVB Eq. 1) with their joint
bootstrap CIs over stimuli (§3), and PGLA's ΔBal and standard-accuracy cost (§5, Table 4). The rows
the suite records say which of them are gates (``gated``): each split's accuracy (Table 1), Bal (Eq. 1)
and the rejection gap per modality (a floor). Recorded only: Table 14's vision–audio gap of the
misleading splits, and the logit lens's peak P_l(correct) per split (Eqs. 3–4).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faithtests.protocols.imavb.metrics import (
    TIE,
    SplitScores,
    answers,
    correct,
    modality_gap,
    per_order_accuracy,
    rejection_rates,
    shuffle_spread,
    slice_accuracy,
    split_mask,
    split_scores,
    tie_count,
)
from faithtests.protocols.imavb.pgla import PGLAResult, bal_of, side_accuracy
from faithtests.protocols.imavb.probes import lens_correct
from faithtests.protocols.imavb.records import SHORT, SPEECH_SUBCATEGORIES, SPLITS, modality
from faithtests.protocols.imavb.run import ChoiceRun
from faithtests.scorecard.model import MetricRow as Row  # one result row of a pure function
from faithtests.stats import cluster_bootstrap_ci

EVAL_ROWS = "rows=pgla_eval"  # the PGLA evaluation rows (75% of stimuli), for base vs pgla like for like


def item_correct(run: ChoiceRun) -> NDArray[np.bool_]:
    """[N, orders]: each record answered right under each option order (a tied top logit is wrong)."""
    gold = np.array([r.correct_index for r in run.records])
    return correct(answers(run.logits), gold)


def shuffled(c: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Per record, the mean correctness over the K shuffles (column 0, the fixed order, left out)."""
    return np.asarray(c[:, 1:].mean(axis=1), dtype=np.float64)


def run_scores(c: NDArray[np.float64], run: ChoiceRun, rows: NDArray[np.int64] | None, *, n_resamples: int,
               seed: int) -> SplitScores:
    """Split accuracies and Bal (Eq. 1) of per-item correctness ``c`` [N], on ``rows`` (default: all)."""
    idx = np.arange(len(run.records)) if rows is None else rows
    recs = [run.records[int(i)] for i in idx]
    splits, stim = [r.split for r in recs], [r.stimulus_id for r in recs]
    return split_scores(c[idx], splits, stim, n_resamples=n_resamples, seed=seed)


@dataclass(frozen=True)
class Ties:
    """Answers whose top logit is tied under some order: ``n`` of ``total`` answers, the records named."""

    n: int
    total: int
    items: list[str]


def ties(run: ChoiceRun, mask: NDArray[np.bool_]) -> Ties:
    """The tied answers of the records in ``mask`` (any order)."""
    n, total = tie_count(run.logits[mask])
    row_tied = (answers(run.logits) == TIE).any(axis=1) & mask
    said = run.unparsed  # a generated reply that named no letter: shown with the record
    return Ties(n, total, [r.item_id + (f": {said[r.item_id]!r}" if r.item_id in said else "")
                           for r, t in zip(run.records, row_tied, strict=True) if t])


def a1_correct(run: ChoiceRun, rows: NDArray[np.int64], fixed_order: bool) -> NDArray[np.float64]:
    """A1's per-record correctness on ``rows``: the fixed order's (A3 is run in it only) or the mean over
    the shuffles, to pair with another prompt's."""
    c = item_correct(run)[rows]
    return c[:, 0].astype(float) if fixed_order else shuffled(c)


@dataclass(frozen=True)
class PglaDelta:
    """PGLA − base on the evaluation rows: ``scores`` of the paired differences (Bal is linear in the
    split means, so their Bal is ΔBal and its CI is paired), ΔBal itself, and the standard-accuracy cost
    over ``n_std`` standard rows."""

    scores: SplitScores
    delta_bal: float
    std_cost: float
    n_std: int


def pgla_delta(res: PGLAResult, run: ChoiceRun, *, n_resamples: int, seed: int) -> PglaDelta:
    """ΔBal (Eq. 1 per split) with its paired CI over stimuli, and the cost in standard accuracy."""
    sp = [run.records[int(i)].split for i in res.eval_rows]
    stim = [run.records[int(i)].stimulus_id for i in res.eval_rows]
    delta = split_scores(res.pgla_correct - res.base_correct, sp, stim, n_resamples=n_resamples, seed=seed)
    d_bal = float(bal_of(res.pgla_correct, sp) - bal_of(res.base_correct, sp))
    cost = float(side_accuracy(res.base_correct, sp, False) - side_accuracy(res.pgla_correct, sp, False))
    return PglaDelta(delta, d_bal, cost, sum(not s.startswith("misleading") for s in sp))


def eval_splits(res: PGLAResult, run: ChoiceRun) -> list[str]:
    """The split of each PGLA evaluation row."""
    return [run.records[int(i)].split for i in res.eval_rows]


def stimuli(run: ChoiceRun, rows: Sequence[int] | NDArray[np.int64] | None = None) -> set[str]:
    """The distinct stimuli of ``rows`` (default: all records)."""
    idx = range(len(run.records)) if rows is None else rows
    return {run.records[int(i)].stimulus_id for i in idx}


@dataclass(frozen=True)
class RejectionGap:
    """How much more often a modality's misleading questions are rejected (E or F) than its standard ones,
    paired per stimulus: mean over stimuli of (share of shuffled answers rejecting the misleading question
    − the same share on the standard question), its CI over stimuli, and the number of stimuli."""

    value: float
    ci: tuple[float, float]
    n: int


def rejection_gap(run: ChoiceRun, kind: str, *, n_resamples: int, seed: int,
                  subcategories: Collection[str] | None = None) -> RejectionGap | None:
    """:class:`RejectionGap` of modality ``kind`` ("vision" / "audio") over the stimuli that have both of
    its questions (``subcategories``: only those whose misleading question's is one of them); None when
    none has. A model that rejects whatever the premise (the deaf twin answering F to every audio
    question, an always-E policy) has a gap near 0; one that never rejects, exactly 0."""
    rejects = np.isin(answers(run.logits[:, 1:]), (4, 5)).mean(axis=1)  # per record, over the K shuffles
    by: dict[str, dict[bool, list[float]]] = {}
    keep: set[str] = set()
    for r, x in zip(run.records, rejects, strict=True):
        if modality(r.split) == kind:
            by.setdefault(r.stimulus_id, {}).setdefault(r.misleading, []).append(float(x))
            if r.misleading and (subcategories is None or r.subcategory in subcategories):
                keep.add(r.stimulus_id)
    diffs = {s: np.mean(d[True]) - np.mean(d[False]) for s, d in by.items()
             if True in d and False in d and s in keep}
    if not diffs:
        return None
    values = np.array(list(diffs.values()), dtype=np.float64)
    ci = cluster_bootstrap_ci(values, list(diffs), n_resamples=n_resamples, seed=seed)
    return RejectionGap(float(values.mean()), (float(ci[0]), float(ci[1])), len(values))


def mis_rejection(run: ChoiceRun, rows: NDArray[np.int64]) -> float:
    """Share of the misleading rows among ``rows`` answered with their rejection option, over the
    shuffled orders (column 0, the fixed order, left out as the shuffled accuracies leave it): the
    behaviour a probe on the same rows is compared with."""
    mis = np.array([run.records[int(i)].misleading for i in rows], dtype=bool)
    gold = np.array([run.records[int(i)].correct_index for i in rows])
    return float(correct(answers(run.logits[rows][mis][:, 1:]), gold[mis]).mean())


def split_rows(run: ChoiceRun, split: str, name: str, c: NDArray[np.bool_], ss: SplitScores,
               ev: SplitScores | None) -> list[Row]:
    """Accuracy of ``split`` (named ``name``: Table 1, over the shuffles; gated), then recorded: on PGLA's
    evaluation rows (``ev``), in the fixed order, the shuffles' spread, per question type (Table 13) and
    misleading subcategory (Table 14), and the share of E/F answers (wanted on a misleading split only)."""
    m = split_mask([r.split for r in run.records], split)
    per_item, per_order = shuffled(c)[m], per_order_accuracy(c, m)
    out = [Row(name, ss.acc[split], ss.n[split], ss.ci[split], gated=True)]
    if ev is not None:
        out.append(Row(name, ev.acc[split], ev.n[split], ev.ci[split], EVAL_ROWS))
    out += [Row(name, float(per_order[0]), int(m.sum()), slice="fixed order"),
            Row(f"{name}_shuffle_pm", shuffle_spread(per_order[1:]), int(m.sum()))]
    recs = [r for r, k in zip(run.records, m, strict=True) if k]
    for prefix, labels in (("type", [r.category for r in recs]), ("sub", [r.subcategory for r in recs])):
        out += [Row(name, acc, n, slice=f"{prefix}={label}")
                for label, (acc, n) in slice_accuracy(per_item, labels).items()]
    rates = rejection_rates(answers(run.logits[m][:, 1:]))
    out.append(Row("rejects_E_or_F", rates["E_or_F"], int(m.sum()) * (c.shape[1] - 1), slice=name,
                   higher_is_better=split.startswith("misleading")))
    return out


def bal_rows(ss: SplitScores, n_stim: int, ev: SplitScores | None, n_ev: int,
             fixed: SplitScores) -> list[Row]:
    """Bal (Eq. 1, over the shuffles; gated; the slice "vision only" for a model that cannot hear), then
    recorded: on PGLA's evaluation rows (``ev``, ``n_ev`` stimuli) and in the fixed order."""
    out = [Row("Bal", ss.bal, n_stim, ss.bal_ci, "vision only" if ss.vision_only else None, gated=True)]
    if ev is not None:
        out.append(Row("Bal", ev.bal, n_ev, ev.bal_ci, EVAL_ROWS))
    out.append(Row("Bal", fixed.bal, n_stim, fixed.bal_ci, "fixed order"))
    return out


def rejection_gap_rows(run: ChoiceRun, *, n_resamples: int, seed: int) -> list[Row]:
    """The rejection gap of each modality whose stimuli have both questions (gated: a floor, since
    rejecting whatever the premise passes the misleading split but not this), then on the audio clips whose
    premise is about speech (recorded)."""
    out = []
    for kind, subs in (("vision", None), ("audio", None), ("audio", SPEECH_SUBCATEGORIES)):
        gap = rejection_gap(run, kind, n_resamples=n_resamples, seed=seed, subcategories=subs)
        if gap is not None:
            out.append(Row("rejection_gap", gap.value, gap.n, gap.ci,
                           kind if subs is None else f"{kind}, speech premises", gated=subs is None))
    return out


def mis_gap_row(c: NDArray[np.float64], run: ChoiceRun, *, n_resamples: int, seed: int,
                where: str | None) -> tuple[Row, int]:
    """Table 14's "Vision–Audio Gap": mis_v − mis_a over the per-row correctness ``c``, with its CI from
    one bootstrap over stimuli (recorded, not gated); and how many resamples drew an empty side (left
    out of the CI)."""
    side = {t: [i for i, r in enumerate(run.records) if r.misleading and modality(r.split) == t]
            for t in ("vision", "audio")}
    stim = {t: [run.records[i].stimulus_id for i in side[t]] for t in side}
    gap = modality_gap(c[side["vision"]], stim["vision"], c[side["audio"]], stim["audio"],
                       n_resamples=n_resamples, seed=seed)
    row = Row("mis_gap_vision_minus_audio", gap.gap, gap.n_vision + gap.n_audio, gap.ci, where,
              higher_is_better=False)
    return row, gap.empty_resamples


@dataclass(frozen=True)
class LensCurves:
    """The logit lens (Eqs. 3–4) per split present: mean P_l(correct) by layer (``curves``, keyed by the
    split's short name) and each split's peak over the layers (``rows``, recorded)."""

    curves: dict[str, list[float]]
    rows: list[Row]


def lens_curves(lens: NDArray[np.float64], run: ChoiceRun) -> LensCurves:
    """:class:`LensCurves` from ``lens`` [L, N, 6] (the letter probabilities per layer and row of
    ``run``), for every split the run holds (both modalities' where the model hears)."""
    pc = lens_correct(lens, np.array([r.correct_index for r in run.records]))
    splits = [r.split for r in run.records]
    masks = {s: split_mask(splits, s) for s in SPLITS if s in splits}
    means = {s: pc[:, m].mean(axis=1) for s, m in masks.items()}
    return LensCurves({SHORT[s]: list(v) for s, v in means.items()},
                      [Row("lens_peak_P_correct", float(v.max()), int(masks[s].sum()), slice=SHORT[s])
                       for s, v in means.items()])
