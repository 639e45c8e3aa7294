"""What each difference-consistency suite test records, computed from one variant's answers.

Pure functions over :class:`~faithtests.protocols.spdfaith.run.Answers` and the usable records: they
pick the scored pairs, cut the slices (:func:`groups`) and compute every value with its percentile
bootstrap CI over original images (SPD-Faith §3.3 reports per subset; the pairs cut from one image are
resampled together). The suite records the :class:`Row` values and checks the gates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faithtests.protocols.spdfaith.judge import Judgement
from faithtests.protocols.spdfaith.metrics import (
    WEIGHTS,
    count_ratio,
    dqr,
    ds,
    ds_exist,
    f1_terms,
    normalised_cr,
    verdict_labels,
)
from faithtests.protocols.spdfaith.records import DIFFICULTIES, EDIT_TYPES, DiffRecord
from faithtests.protocols.spdfaith.run import Answers
from faithtests.scorecard.model import ItemValues
from faithtests.scorecard.model import MetricRow as Row  # one result row of a pure function
from faithtests.stats import Boot

FloatArray = NDArray[np.float64]
Groups = list[tuple[str | None, list[int]]]
#: A verdict whose P(Yes) is within this of 0.5 is "ambiguous" for CR (Eq. 13's +0.5): a coin-flip
#: answer is uncertain, not a claim. The contradiction rate (Table 2) reads every answer by its argmax.
AMBIGUITY = 0.05
#: The slices the paper gates (``Row.gated``; the thresholds file holds their values): Table 2's
#: contradiction rate per difficulty level of the single-difference pairs, Table 3's multi-difference
#: subset for DS_exist / DS_count / DRF (and DS_count over all edited pairs), and the identical-pair
#: control (§3) for false alarms.
MULTI = "subset=multi"
IDENTICAL = "subset=identical"



def groups(recs: Sequence[DiffRecord], rows: Sequence[int]) -> Groups:
    """(slice, positions within ``rows``): all, each subset, single-edit difficulty and type, multi by m."""
    out: Groups = [(None, list(range(len(rows))))]

    def add(name: str, keep: list[int]) -> None:
        if keep:
            out.append((name, keep))

    for subset in ("single", "multi", "identical"):
        add(f"subset={subset}", [j for j, i in enumerate(rows) if recs[i].subset == subset])
    for level in DIFFICULTIES:  # single-difference pairs only: Table 2's difficulty levels
        add(f"difficulty={level}", [j for j, i in enumerate(rows)
                                    if recs[i].subset == "single" and recs[i].difficulty == level])
    for kind in EDIT_TYPES:
        add(f"type={kind}", [j for j, i in enumerate(rows)
                             if recs[i].subset == "single" and recs[i].edits[0].type == kind])
    for m in range(2, 6):
        add(f"edits={m}", [j for j, i in enumerate(rows) if recs[i].subset == "multi" and recs[i].m == m])
    return out


def answered(ans: Answers) -> list[int]:
    """Pairs with finite P(Yes) to both questions and finite states; the others are in ``ans.counted``
    once as 'non-finite score', which fails every check of the model."""
    return [int(i) for i in np.flatnonzero(ans.answered)]


def contradictions(ans: Answers, rows: Sequence[int]) -> NDArray[np.bool_]:
    """Yes to both or No to both symmetric questions, each answer read by its argmax (Table 2)."""
    return np.asarray(np.array(verdict_labels(ans.p_yes_same[rows], ans.p_yes_diff[rows])) == "contradictory")


def cr_weights(ans: Answers, rows: Sequence[int]) -> FloatArray:
    """Per pair, Eq. 13's verdict weight (consistent +1, contradictory -1, ambiguous +0.5)."""
    labels = verdict_labels(ans.p_yes_same[rows], ans.p_yes_diff[rows], AMBIGUITY)
    return np.array([WEIGHTS[v] for v in labels], dtype=np.float64)


@dataclass(frozen=True)
class Symmetric:
    """The symmetric questions' rows and per-pair contradictions (``rows`` indexes the records)."""

    metrics: list[Row]
    rows: list[int]
    contradiction: NDArray[np.bool_]


def symmetric(recs: Sequence[DiffRecord], ans: Answers, rows: list[int], boot: Boot) -> Symmetric:
    """Contradiction rate (Table 2), CR and CR_clip (Eqs. 12-13 normalised as Fig. 34), DS_exist (§3,
    Tables 3 / 10; edited pairs only), its mirror on the identical pairs ``false_alarm_rate`` (No to
    "same?" and Yes to "different?" where nothing changed) and both Yes rates, on every slice of the
    answered ``rows``."""
    ps, pd = ans.p_yes_same[rows], ans.p_yes_diff[rows]
    contradiction = contradictions(ans, rows)
    raw = cr_weights(ans, rows)
    cr = {"CR": normalised_cr(raw, "affine"), "CR_clip": normalised_cr(raw, "clip")}
    exist = ds_exist(ps, pd)
    edited = np.array([recs[i].m > 0 for i in rows])
    stim = [recs[i].stimulus_id for i in rows]
    out: list[Row] = []
    for where, pos in groups(recs, rows):
        cl = [stim[j] for j in pos]
        ids = [recs[rows[j]].item_id for j in pos]  # per-item values by stimulus: the paired gate's input
        by_stim = dict(zip(ids, cl, strict=True))
        c = contradiction[pos].astype(np.float64)
        out.append(Row("contradiction_rate", float(c.mean()), len(pos), boot.ci(c, cl), where, False,
                       ItemValues.make(zip(ids, c, strict=True), by_stim),
                       gated=(where or "").startswith("difficulty=")))
        for name, x in cr.items():
            w = x[pos]
            out.append(Row(name, float(w.mean()), len(pos), boot.ci(w, cl), where,
                           per_item=ItemValues.make(zip(ids, w, strict=True), by_stim)))
        on = [j for j in pos if edited[j]]  # DS_exist: an identical pair has no difference to identify
        if on:
            e = exist[on]
            out.append(Row("DS_exist", float(e.mean()), len(on), boot.ci(e, [stim[j] for j in on]), where,
                           gated=where == MULTI))
        off = [j for j in pos if not edited[j]]  # the identical-pair control (§3): a difference "found"
        if off:                                  # where there is none, under both questions
            f = exist[off]
            out.append(Row("false_alarm_rate", float(f.mean()), len(off), boot.ci(f, [stim[j] for j in off]),
                           where, False, gated=where == IDENTICAL))
        for name, p in (("yes_rate_same", ps[pos]), ("yes_rate_different", pd[pos])):
            y = (p > 0.5).astype(np.float64)
            out.append(Row(name, float(y.mean()), len(pos), boot.ci(y, cl), where))
    return Symmetric(out, rows, contradiction)


@dataclass(frozen=True)
class Counts:
    """The count question's rows and per-pair DQR (``rows``: the edited pairs that got a count)."""

    metrics: list[Row]
    rows: list[int]
    exact: FloatArray


def counted(recs: Sequence[DiffRecord], ans: Answers, *, edited: bool) -> list[int]:
    """The pairs that got a count (only the edited ones with ``edited``)."""
    return [i for i in range(len(recs)) if ans.count[i] >= 0 and (recs[i].m > 0 or not edited)]


def counts(recs: Sequence[DiffRecord], ans: Answers, rows: list[int], boot: Boot) -> Counts:
    """DQR (Eq. 8), DS_count (Eq. 9) and the public code's n/m (``DQR_code``) on every slice of the
    edited pairs with a count (``rows``), and the share of identical pairs counted as zero."""
    n = ans.count[rows]
    m = np.array([recs[i].m for i in rows])
    stim = [recs[i].stimulus_id for i in rows]
    per_item = {"DQR": dqr(n, m), "DS_count": ds(n, m), "DQR_code": count_ratio(n, m)}
    out: list[Row] = []
    for where, pos in groups(recs, rows):
        cl = [stim[j] for j in pos]
        for name, x in per_item.items():
            out.append(Row(name, float(x[pos].mean()), len(pos), boot.ci(x[pos], cl), where,
                           higher_is_better=False if name == "DQR_code" else None,
                           gated=name == "DS_count" and where in (None, MULTI)))
    same = [i for i in range(len(recs)) if ans.count[i] >= 0 and recs[i].m == 0]
    if same:
        z = (ans.count[same] == 0).astype(np.float64)
        out.append(Row("identical_counted_zero", float(z.mean()), len(same),
                       boot.ci(z, [recs[i].stimulus_id for i in same])))
    return Counts(out, rows, per_item["DQR"])


@dataclass(frozen=True)
class Naming:
    """The naming prompt's rows; ``hits[j]`` are the claims of pair ``rows[j]`` that match an edit."""

    metrics: list[Row]
    rows: list[int]
    hits: list[NDArray[np.bool_]]
    drf_item: FloatArray
    claims: int
    unparseable: int


def _f1_terms(recs: Sequence[DiffRecord], rows: Sequence[int],
              judged: Sequence[Judgement | None]) -> dict[str, tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Per-pair (numerator, denominator) of TF1, CF1 (Eqs. 10-11) and the public code's CF1."""
    cats = ([j.categories if j else () for j in judged], [[e.category for e in recs[i].edits] for i in rows])
    return {
        "TF1": f1_terms([j.types if j else () for j in judged],
                        [[e.type for e in recs[i].edits] for i in rows]),
        "CF1": f1_terms(*cats),
        "CF1_code": f1_terms(*cats, matching="membership"),
    }


def naming(recs: Sequence[DiffRecord], ans: Answers, rows: list[int], boot: Boot) -> Naming:
    """TF1, CF1, CF1_code (micro-F1 ratios, CIs of the ratio) and DRF (Eq. 15, over pairs with a claim)
    on every slice of the pairs with a count (``rows``), each slice naming the judge; then
    ``DQR_code_listed``."""
    judge = f"judge={ans.judge}"
    judged = [ans.judgements[i] for i in rows]
    stim = [recs[i].stimulus_id for i in rows]
    terms = _f1_terms(recs, rows, judged)
    hits = [np.array(j.hits, dtype=bool) if j else np.zeros(0, dtype=bool) for j in judged]
    drf_item = np.array([h.mean() if h.size else np.nan for h in hits])
    out: list[Row] = []
    for where, pos in groups(recs, rows):
        sl = f"{where}, {judge}" if where else judge
        cl = [stim[j] for j in pos]
        for name, (num, den) in terms.items():
            nu, de = num[pos].astype(np.float64), den[pos].astype(np.float64)
            if de.sum():
                out.append(Row(name, float(nu.sum() / de.sum()), len(pos), boot.ratio_ci(nu, de, cl), sl))
        scored = [j for j in pos if np.isfinite(drf_item[j])]
        if scored:
            x = drf_item[scored]
            out.append(Row("DRF", float(x.mean()), len(scored), boot.ci(x, [stim[j] for j in scored]), sl,
                           gated=where == MULTI))
    out += _listed(recs, rows, judged, boot, judge)
    return Naming(out, rows, hits, drf_item, sum(len(j.claims) for j in judged if j),
                  sum(j.unparseable for j in judged if j))


def _listed(recs: Sequence[DiffRecord], rows: Sequence[int], judged: Sequence[Judgement | None],
            boot: Boot, judge: str) -> list[Row]:
    """The public code's DQR with n = the claims the reply lists, not the count question's answer."""
    listed = [(recs[i], len(j.claims)) for i, j in zip(rows, judged, strict=True) if j and recs[i].m > 0]
    if not listed:
        return []
    x = count_ratio(np.array([n for _, n in listed]), np.array([r.m for r, _ in listed]))
    return [Row("DQR_code_listed", float(x.mean()), len(listed),
                boot.ci(x, [r.stimulus_id for r, _ in listed]), judge, higher_is_better=False)]


def _sage_symmetric(ans: Answers, both: Sequence[int]) -> tuple[FloatArray, FloatArray]:
    """Per pair: contradiction (0/1) and CR normalised as Fig. 34."""
    return contradictions(ans, both).astype(np.float64), normalised_cr(cr_weights(ans, both))


def _mean_hits(j: Judgement | None) -> float:
    assert j is not None and j.claims  # callers pass only judged pairs with a claim
    return float(np.mean(j.hits))


def sage_deltas(recs: Sequence[DiffRecord], base: Answers, sage: Answers, boot: Boot) -> list[Row]:
    """SAGE − base on the same pairs (paired differences, CIs over images): contradiction rate, CR
    (normalised, Fig. 34), DS_count (Eq. 9) and DRF (Eq. 15); empty when no pair is answered by both."""
    both = sorted(set(answered(base)) & set(answered(sage)))
    if not both:
        return []
    stim = [recs[i].stimulus_id for i in both]
    (cb, wb), (cs, ws) = _sage_symmetric(base, both), _sage_symmetric(sage, both)
    out = [Row(name, float(d.mean()), len(both), boot.ci(d, stim))
           for name, d in (("delta_contradiction_rate", cs - cb), ("delta_CR", ws - wb))]
    counted = [i for i in both if recs[i].m > 0 and base.count[i] >= 0 and sage.count[i] >= 0]
    if counted:
        m = np.array([recs[i].m for i in counted])
        d = ds(sage.count[counted], m) - ds(base.count[counted], m)
        out.append(Row("delta_DS_count", float(d.mean()), len(counted),
                       boot.ci(d, [recs[i].stimulus_id for i in counted])))
    named = [i for i in both if _has_claims(base.judgements[i]) and _has_claims(sage.judgements[i])]
    if named:
        d = np.array([_mean_hits(sage.judgements[i]) - _mean_hits(base.judgements[i]) for i in named])
        out.append(Row("delta_DRF", float(d.mean()), len(named),
                       boot.ci(d, [recs[i].stimulus_id for i in named])))
    return out


def _has_claims(j: Judgement | None) -> bool:
    return bool(j and j.claims)
