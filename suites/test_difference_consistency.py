"""Suite 5 — difference consistency (SPD-Faith §3, App. B.2, D.3, §5 / App. E; SPEC §5).

Protocol: two images that differ by known atomic edits (color / remove / position on one object each;
single easy / medium / hard, multi 2-5, identical controls). The model answers the symmetric questions
"Are the two pictures the same?" / "Are the two pictures different?" (Yes / No logits at the answer
position), the count question (argmax over the number words), and the self-consistency prompt "There
are {n} differences in the picture. Can you find them?" with its own count n (greedy), whose claims a
judge (deterministic by default, pluggable) matches to the edits. Metrics: contradiction rate (Table 2),
CR (Eqs. 12-13, normalised to [0, 1] as Fig. 34) and DS_exist (§3's DS, Tables 3 / 10) from the
symmetric verdicts; DQR, DS_count (Eqs. 8-9) and the public code's n/m (``DQR_code``) from the count;
TF1, CF1 (Eqs. 10-11), the public code's CF1 (``CF1_code``) and DRF (Eq. 15) from the claims; per-layer
cos(h_same, h_diff) of the pre-answer states (App. D.3). CIs: percentile bootstrap over original images.
SAGE (§5.1, App. E) is the variant ``sage``: recorded beside ``base`` with paired deltas, gated by
nothing. Gates (base; suites/thresholds.toml names the paper row of each): contradiction rate (<=) per
single-difference difficulty, DS_exist (>=) on the multi-difference pairs, DS_count (>=; and on the
multi-difference pairs), DRF (>=) on the multi-difference pairs. Every gate of a test is checked before
the test fails, so the scorecard shows each verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from faithtests.protocols import fail_unscored
from faithtests.protocols.spdfaith.figures import edits_text, outlined
from faithtests.protocols.spdfaith.fixtures import SPD_BOOTSTRAP, SpdData
from faithtests.protocols.spdfaith.judge import Judgement
from faithtests.protocols.spdfaith.metrics import (
    WEIGHTS,
    count_ratio,
    dqr,
    ds,
    ds_exist,
    f1_terms,
    layer_cosine_band,
    layer_cosines,
    normalised_cr,
    verdict_labels,
)
from faithtests.protocols.spdfaith.records import DIFFICULTIES, EDIT_TYPES, DiffRecord
from faithtests.protocols.spdfaith.run import NO_NAMING, VARIANTS, Answers
from faithtests.scorecard.kinds import is_fatal
from faithtests.scorecard.model import ItemValues, Series
from faithtests.scorecard.recording import Faith, FaithCheckFailed
from faithtests.stats import cluster_bootstrap_ci, cluster_bootstrap_ratio_ci

pytestmark = pytest.mark.suite("difference_consistency")
GATED = "base"
#: A verdict whose P(Yes) is within this of 0.5 is "ambiguous" for CR (Eq. 13's +0.5): a coin-flip
#: answer is uncertain, not a claim. The contradiction rate (Table 2) reads every answer by its argmax.
AMBIGUITY = 0.05
#: The slice of each multi-difference gate (Table 3 reports the multi-difference subset, §3.3 RQ2).
MULTI = "subset=multi"
#: The metrics ``_check_all`` may check (tests/suites/test_thresholds_checked.py reads this table).
GATE_METRICS = {m: m for m in ("contradiction_rate", "DS_exist", "DS_count")}


def _check_all(faith: Faith, checks: Sequence[tuple[str, str | None]]) -> None:
    """Check every (metric, slice) that was recorded, then fail with the first failure: each gate's
    verdict reaches the scorecard even when an earlier one fails."""
    __tracebackhide__ = True
    failed: list[FaithCheckFailed] = []
    for name, where in checks:
        metric = GATE_METRICS[name]
        try:
            faith.check(metric, slice=where)
        except FaithCheckFailed as e:
            failed.append(e)
    if failed:
        raise failed[0]


def _ci(values: NDArray[np.float64], clusters: Sequence[str], seed: int) -> tuple[float, float] | None:
    if not len(values):
        return None
    return cluster_bootstrap_ci(values, clusters, n_resamples=SPD_BOOTSTRAP, seed=seed)


def _ratio_ci(num: NDArray[np.float64], den: NDArray[np.float64], clusters: Sequence[str],
              seed: int) -> tuple[float, float] | None:
    if not len(num) or den.sum() == 0:
        return None
    lo, hi = cluster_bootstrap_ratio_ci(num, den, clusters, n_resamples=SPD_BOOTSTRAP, seed=seed)
    return (lo, hi) if np.isfinite(lo) and np.isfinite(hi) else None


def _groups(recs: Sequence[DiffRecord], rows: Sequence[int]) -> list[tuple[str | None, list[int]]]:
    """(slice, positions within ``rows``): all, each subset, single-edit difficulty and type, multi by m."""
    out: list[tuple[str | None, list[int]]] = [(None, list(range(len(rows))))]

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


def _record_invalid(faith: Faith, data: SpdData, *answers: Answers) -> None:
    for kind, count, total, examples in data.data_invalid():
        faith.invalid(kind, count, total=total, examples=examples)
    for a in answers:
        for kind, count in sorted(a.counted.invalid.items()):
            # the one non-finite kind stays undecorated: it fails every check of the model (coverage rule).
            # A count of zero is the model's answer, scored by DS_count (and right on identical pairs), not
            # an unusable input: noted without a total, so it never makes a check INSUFFICIENT.
            total = None if kind == NO_NAMING else len(data.usable.records)
            faith.invalid(kind if is_fatal(kind) else f"{kind} [{a.variant}]", count,
                          total=total, examples=a.counted.examples[kind])


def _exemplar(data: SpdData, i: int, reason: str, texts: dict[str, str],
              scores: dict[str, float] | None = None) -> dict[str, object]:
    r = data.usable.records[i]
    a, b = data.usable.pairs[i]
    return {"image": outlined(a, r.edits), "image_b": outlined(b, r.edits),
            "texts": {"pair": r.ref, "ground truth": edits_text(r.edits), **texts},
            "scores": scores or {}, "reason": reason}


def _unmatched(j: Judgement | None) -> str:
    if j is None:
        return ""
    return "; ".join(c.text for c, m in zip(j.claims, j.matched, strict=True) if m is None)


def _answered(ans: Answers) -> list[int]:
    """Pairs with finite P(Yes) to both questions and finite states; the others are in ``ans.counted``
    once as 'non-finite score' (recorded by ``_record_invalid``), which fails every check of the model."""
    return [int(i) for i in np.flatnonzero(ans.answered)]


@pytest.mark.parametrize("variant", VARIANTS)
def test_symmetric_consistency(faith: Faith, spdfaith_data: SpdData, variant: str, faith_seed: int) -> None:
    """Contradiction rate (Yes to both or No to both, Table 2 / Fig. 11), gated per difficulty of the
    single-difference pairs; CR (Eqs. 12-13, one judged claim pair per pair, its verdict: consistent +1,
    contradictory -1, ambiguous +0.5) normalised to [0, 1] as Fig. 34 ((w + 1) / 2; ``CR_clip``:
    max(0, w)), recorded; DS_exist (§3, Tables 3 / 10: the edited pairs the model says differ, under
    both questions), gated on the multi-difference pairs; the Yes rates of both questions."""
    data = spdfaith_data
    ans = data.answers(variant)
    _record_invalid(faith, data, ans)
    recs = data.usable.records
    rows = _answered(ans)
    if not rows:
        fail_unscored(faith, "contradiction_rate", higher_is_better=False)
    ps, pd = ans.p_yes_same[rows], ans.p_yes_diff[rows]
    contradiction = np.array(verdict_labels(ps, pd)) == "contradictory"
    raw = np.array([WEIGHTS[v] for v in verdict_labels(ps, pd, AMBIGUITY)])
    cr = {"CR": normalised_cr(raw, "affine"), "CR_clip": normalised_cr(raw, "clip")}
    exist = ds_exist(ps, pd)
    edited = np.array([recs[i].m > 0 for i in rows])
    stim = [recs[i].stimulus_id for i in rows]
    for where, pos in _groups(recs, rows):
        cl = [stim[j] for j in pos]
        c = contradiction[pos].astype(np.float64)
        ids = [recs[rows[j]].item_id for j in pos]  # per-item values by stimulus: the paired gate's input
        by_stim = dict(zip(ids, cl, strict=True))
        faith.metric("contradiction_rate", float(c.mean()), ci=_ci(c, cl, faith_seed), n=len(pos),
                     higher_is_better=False, slice=where,
                     per_item=ItemValues.make(zip(ids, c, strict=True), by_stim))
        for name, x in cr.items():
            w = x[pos]
            faith.metric(name, float(w.mean()), ci=_ci(w, cl, faith_seed), n=len(pos), slice=where,
                         per_item=ItemValues.make(zip(ids, w, strict=True), by_stim))
        on = [j for j in pos if edited[j]]  # DS_exist: an identical pair has no difference to identify
        if on:
            e = exist[on]
            faith.metric("DS_exist", float(e.mean()), ci=_ci(e, [stim[j] for j in on], faith_seed),
                         n=len(on), slice=where)
        for name, p in (("yes_rate_same", ps[pos]), ("yes_rate_different", pd[pos])):
            y = (p > 0.5).astype(np.float64)
            faith.metric(name, float(y.mean()), ci=_ci(y, cl, faith_seed), n=len(pos), slice=where)
    faith.items("consistent",
                {recs[i].item_id: not bool(c) for i, c in zip(rows, contradiction, strict=True)})
    bad = [rows[j] for j in np.flatnonzero(contradiction)[:4]]
    faith.exemplars([
        _exemplar(data, i, "contradicts itself on the symmetric questions",
                  {"same?": "Yes" if ans.p_yes_same[i] > 0.5 else "No",
                   "different?": "Yes" if ans.p_yes_diff[i] > 0.5 else "No"},
                  {"P(Yes | same?)": float(ans.p_yes_same[i]),
                   "P(Yes | different?)": float(ans.p_yes_diff[i])})
        for i in bad])
    if variant == GATED:
        levels = {f"difficulty={d}" for d in DIFFICULTIES}
        gates = [("contradiction_rate", w) for w, _ in _groups(recs, rows) if w in levels]
        if any(recs[i].subset == "multi" for i in rows):
            gates.append(("DS_exist", MULTI))
        _check_all(faith, gates)  # data without difficulty labels or multi pairs: recorded, not gated


@pytest.mark.parametrize("variant", VARIANTS)
def test_difference_count(faith: Faith, spdfaith_data: SpdData, variant: str, faith_seed: int) -> None:
    """DQR = 1{n = m} (Eq. 8) and DS_count = max(0, 1 - |n - m|/m) (Eq. 9) on the edited pairs, the
    public code's uncapped n/m as ``DQR_code``, and how often an identical pair is counted as zero."""
    data = spdfaith_data
    ans = data.answers(variant)
    _record_invalid(faith, data, ans)
    recs = data.usable.records
    rows = [i for i in range(len(recs)) if ans.count[i] >= 0 and recs[i].m > 0]
    assert rows, f"{data.dataset}: no edited pair got a count"
    n = ans.count[rows]
    m = np.array([recs[i].m for i in rows])
    stim = [recs[i].stimulus_id for i in rows]
    per_item = {"DQR": dqr(n, m), "DS_count": ds(n, m), "DQR_code": count_ratio(n, m)}
    for where, pos in _groups(recs, rows):
        cl = [stim[j] for j in pos]
        for name, x in per_item.items():
            faith.metric(name, float(x[pos].mean()), ci=_ci(x[pos], cl, faith_seed), n=len(pos), slice=where,
                         higher_is_better=name != "DQR_code")
    same = [i for i in range(len(recs)) if ans.count[i] >= 0 and recs[i].m == 0]
    if same:
        z = (ans.count[same] == 0).astype(np.float64)
        faith.metric("identical_counted_zero", float(z.mean()), n=len(same),
                     ci=_ci(z, [recs[i].stimulus_id for i in same], faith_seed))
    faith.items("count_exact", {recs[i].item_id: bool(x) for i, x in zip(rows, per_item["DQR"], strict=True)})
    wrong = [rows[j] for j in np.flatnonzero(per_item["DQR"] == 0)[:4]]
    faith.exemplars([_exemplar(data, i, "miscounted the differences",
                               {"model's count": str(int(ans.count[i])), "true count": str(recs[i].m)})
                     for i in wrong])
    if variant == GATED:
        multi = any(recs[i].subset == "multi" for i in rows)
        _check_all(faith, [("DS_count", None), *([("DS_count", MULTI)] if multi else [])])


@pytest.mark.parametrize("variant", VARIANTS)
def test_difference_naming(faith: Faith, spdfaith_data: SpdData, variant: str, faith_seed: int) -> None:
    """The self-consistency prompt with the model's own count (App. B.2): TF1 / CF1 (Eqs. 10-11, micro-F1
    over types / categories; a pair the model counted as unchanged contributes its edits as misses),
    ``CF1_code`` (categories matched as the public code does, recorded) and DRF (Eq. 15, the share of
    claims matching an edit, over pairs with a claim; gated on the multi-difference pairs, Table 3's
    subset); ``DQR_code_listed``: the public code's n/m with n = the claims the reply lists, recorded.
    The judge is named in each slice: numbers of different judges are different metrics."""
    data = spdfaith_data
    ans = data.answers(variant)
    _record_invalid(faith, data, ans)
    recs = data.usable.records
    rows = [i for i in range(len(recs)) if ans.count[i] >= 0]
    assert rows, f"{data.dataset}: no pair got a count"
    judge = f"judge={ans.judge}"
    judged = [ans.judgements[i] for i in rows]
    claims = sum(len(j.claims) for j in judged if j)
    unparseable = sum(j.unparseable for j in judged if j)
    # unparseable fragments stay in the claims as unmatched (they lower DRF) and are counted here
    faith.invalid(f"unparseable claim [{variant}, {judge}]", unparseable, total=claims)
    stim = [recs[i].stimulus_id for i in rows]
    cats = ([j.categories if j else () for j in judged], [[e.category for e in recs[i].edits] for i in rows])
    terms = {
        "TF1": f1_terms([j.types if j else () for j in judged],
                        [[e.type for e in recs[i].edits] for i in rows]),
        "CF1": f1_terms(*cats),
        "CF1_code": f1_terms(*cats, matching="membership"),
    }
    hits = [np.array(j.hits, dtype=bool) if j else np.zeros(0, dtype=bool) for j in judged]
    drf_item = np.array([h.mean() if h.size else np.nan for h in hits])
    for where, pos in _groups(recs, rows):
        sl = f"{where}, {judge}" if where else judge
        cl = [stim[j] for j in pos]
        for name, (num, den) in terms.items():
            nu, de = num[pos].astype(np.float64), den[pos].astype(np.float64)
            if de.sum():
                faith.metric(name, float(nu.sum() / de.sum()), ci=_ratio_ci(nu, de, cl, faith_seed),
                             n=len(pos), slice=sl)
        scored = [j for j in pos if np.isfinite(drf_item[j])]
        if scored:
            x = drf_item[scored]
            faith.metric("DRF", float(x.mean()), ci=_ci(x, [stim[j] for j in scored], faith_seed),
                         n=len(scored), slice=sl)
    # the public code's DQR counts n as the claims the reply lists, not the count question's answer
    listed = [(recs[i], len(j.claims)) for i, j in zip(rows, judged, strict=True) if j and recs[i].m > 0]
    if listed:
        x = count_ratio(np.array([n for _, n in listed]), np.array([r.m for r, _ in listed]))
        faith.metric("DQR_code_listed", float(x.mean()), ci=_ci(x, [r.stimulus_id for r, _ in listed],
                     faith_seed), n=len(listed), slice=judge, higher_is_better=False)
    faith.items("claims_all_grounded",
                {recs[i].item_id: bool(h.all()) for i, h in zip(rows, hits, strict=True) if h.size})
    shown = [rows[j] for j, h in enumerate(hits) if h.size and not h.all()][:4]
    faith.exemplars([_exemplar(data, i, "named a difference that is not there",
                               {"prompt count": str(int(ans.count[i])), "reply": ans.replies[i] or "",
                                "unmatched claims": _unmatched(ans.judgements[i])})
                     for i in shown])
    if variant == GATED and any(recs[rows[j]].subset == "multi" and np.isfinite(drf_item[j])
                                for j in range(len(rows))):
        faith.check("DRF", slice=f"{MULTI}, {judge}")  # Table 3's subset; without multi pairs, recorded


@pytest.mark.parametrize("variant", VARIANTS)
def test_residual_stream(faith: Faith, spdfaith_data: SpdData, variant: str, faith_seed: int) -> None:
    """cos(h_same, h_diff) of the pre-answer residual states per layer (App. D.3, Fig. 21), with its CI
    band over images, for consistent and for contradictory pairs. Recorded, not gated."""
    data = spdfaith_data
    ans = data.answers(variant)
    _record_invalid(faith, data, ans)
    recs = data.usable.records
    rows = _answered(ans)
    assert rows, f"{data.dataset}: no pair got finite Yes/No logits (counted as 'non-finite score')"
    cos = layer_cosines(ans.states_same[:, rows], ans.states_diff[:, rows])
    labels = np.array(verdict_labels(ans.p_yes_same[rows], ans.p_yes_diff[rows]))
    series = []
    for label in ("consistent", "contradictory"):
        pos = np.flatnonzero(labels == label)
        if not pos.size:
            continue
        band = layer_cosine_band(cos[:, pos], n_boot=SPD_BOOTSTRAP // 10, seed=faith_seed,
                                 clusters=[recs[rows[j]].stimulus_id for j in pos])
        layers: list[float | str] = list(range(len(band.mean)))
        series.append(Series(f"{label} (n={band.n})", layers, list(band.mean), lo=list(band.lo),
                             hi=list(band.hi)))
        last = len(band.mean) - 1
        faith.metric("cos_same_diff_last_layer", band.mean[last], ci=(band.lo[last], band.hi[last]), n=band.n,
                     slice=label)
        faith.metric("cos_same_diff_min", float(min(band.mean)), n=band.n, slice=label)
    faith.plot("cos(h_same, h_diff) by layer (App. D.3)", "line", series, x_label="decoder layer (0-based)",
               y_label="cosine of the pre-answer states")


def test_sage_effect(faith: Faith, spdfaith_data: SpdData, faith_seed: int) -> None:
    """SAGE − base on the same pairs (paired differences, CIs over images): contradiction, CR (normalised,
    Fig. 34), DS_count, DRF. Diagnostic: the paper reports CR 38.2 -> 43.8 and DRF 29.5 -> 33.7 on
    Qwen2.5-VL-7B (Table 6)."""
    data = spdfaith_data
    base, sage = data.answers("base"), data.answers("sage")
    recs = data.usable.records
    _record_invalid(faith, data, base, sage)
    both = sorted(set(_answered(base)) & set(_answered(sage)))
    assert both, f"{data.dataset}: no pair answered under both variants"
    stim = [recs[i].stimulus_id for i in both]

    def per_pair(a: Answers) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        ps, pd = a.p_yes_same[both], a.p_yes_diff[both]
        c = (np.array(verdict_labels(ps, pd)) == "contradictory").astype(np.float64)
        return c, normalised_cr([WEIGHTS[v] for v in verdict_labels(ps, pd, AMBIGUITY)])

    (cb, wb), (cs, ws) = per_pair(base), per_pair(sage)
    for name, d in (("delta_contradiction_rate", cs - cb), ("delta_CR", ws - wb)):
        faith.metric(name, float(d.mean()), ci=_ci(d, stim, faith_seed), n=len(both),
                     higher_is_better=name == "delta_CR")
    counted = [i for i in both if recs[i].m > 0 and base.count[i] >= 0 and sage.count[i] >= 0]
    if counted:
        m = np.array([recs[i].m for i in counted])
        d = ds(sage.count[counted], m) - ds(base.count[counted], m)
        faith.metric("delta_DS_count", float(d.mean()), n=len(counted),
                     ci=_ci(d, [recs[i].stimulus_id for i in counted], faith_seed))
    named = [i for i in both if base.judgements[i] and sage.judgements[i]
             and base.judgements[i].claims and sage.judgements[i].claims]  # type: ignore[union-attr]
    if named:
        d = np.array([np.mean(sage.judgements[i].hits) - np.mean(base.judgements[i].hits)  # type: ignore[union-attr]
                      for i in named])
        faith.metric("delta_DRF", float(d.mean()), n=len(named),
                     ci=_ci(d, [recs[i].stimulus_id for i in named], faith_seed))


def test_edit_pairs(faith: Faith, spdfaith_data: SpdData) -> None:
    """The pairs this run used: how many per subset, difficulty and edit type, every rejected record by
    kind, and a few pairs with their edits outlined (the generated COCO edits can be inspected here)."""
    data = spdfaith_data
    _record_invalid(faith, data)
    recs = data.usable.records
    assert recs, f"{data.dataset}: no usable pair (see the invalid counts)"
    for where, pos in _groups(recs, list(range(len(recs)))):
        faith.metric("pairs", float(len(pos)), n=len(pos), slice=where)
    edits = [e.type for r in recs for e in r.edits]
    for kind in EDIT_TYPES:
        faith.metric("edits", float(edits.count(kind)), n=len(edits), slice=f"type={kind}")
    shown = [next((i for i, r in enumerate(recs) if r.subset == s), None) for s in ("single", "multi")]
    faith.exemplars([_exemplar(data, i, f"a {recs[i].subset} pair ({recs[i].difficulty or recs[i].m})", {})
                     for i in shown if i is not None])
