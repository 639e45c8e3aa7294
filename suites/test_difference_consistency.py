"""Suite 5 — difference consistency (SPD-Faith §3, App. B.2, D.3, §5 / App. E).

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
nothing. Gates (base; the rows results.py marks ``gated``; suites/thresholds.toml says the kind
and the paper row or floor of each):
contradiction rate (<=) per single-difference difficulty, DS_exist (>=) on the multi-difference pairs,
false_alarm_rate (<=) on the identical pairs, DS_count (>=; and on the multi-difference pairs), DRF (>=) on
the multi-difference pairs. Every gate of a test is checked before the test fails, so the scorecard shows
each verdict.
"""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols import diagnostic_params, fail_unscored
from faithtests.protocols.spdfaith.exemplars import contradiction_exemplar, exemplar, item_outputs, unmatched
from faithtests.protocols.spdfaith.fixtures import SPD_BOOTSTRAP, SpdData
from faithtests.protocols.spdfaith.metrics import layer_cosine_band, layer_cosines, verdict_labels
from faithtests.protocols.spdfaith.records import EDIT_TYPES
from faithtests.protocols.spdfaith.results import (
    answered,
    counted,
    counts,
    groups,
    naming,
    sage_deltas,
    symmetric,
)
from faithtests.protocols.spdfaith.run import NO_NAMING, VARIANTS, Answers
from faithtests.scorecard.model import Series
from faithtests.scorecard.recording import Faith
from faithtests.stats import Boot

pytestmark = pytest.mark.suite("difference_consistency")
GATED = "base"  # the variant whose gated rows (results.py: Row.gated) are checked


def _record_invalid(faith: Faith, data: SpdData, *answers: Answers) -> None:
    faith.counted(data.loaded, data.loaded_total)
    faith.counted(data.usable, data.usable.total)
    for a in answers:
        # a count of zero is the model's answer, scored by DS_count (and right on identical pairs), not an
        # unusable input
        faith.counted(a.counted, len(data.usable.records), tag=a.variant, untotalled={NO_NAMING})


@pytest.mark.parametrize("variant", diagnostic_params(VARIANTS, gated=(GATED,)))
def test_symmetric_consistency(faith: Faith, spdfaith_data: SpdData, variant: str, faith_seed: int) -> None:
    """Contradiction rate (Yes to both or No to both, Table 2 / Fig. 11), gated per difficulty of the
    single-difference pairs; CR (Eqs. 12-13, one judged claim pair per pair, its verdict: consistent +1,
    contradictory -1, ambiguous +0.5) normalised to [0, 1] as Fig. 34 ((w + 1) / 2; ``CR_clip``:
    max(0, w)), recorded; DS_exist (§3, Tables 3 / 10: the edited pairs the model says differ, under
    both questions), gated on the multi-difference pairs; false_alarm_rate (a difference found under both
    questions where there is none), gated on the identical pairs; the Yes rates of both questions."""
    data = spdfaith_data
    ans = data.answers(variant)
    _record_invalid(faith, data, ans)
    recs = data.usable.records
    rows = answered(ans)  # the others are counted once as 'non-finite score', which fails every check
    if not rows:
        fail_unscored(faith, "contradiction_rate")
    sym = symmetric(recs, ans, rows, Boot(SPD_BOOTSTRAP, faith_seed))
    faith.rows(sym.metrics, gate=variant == GATED)  # contradictions per difficulty, DS_exist, false alarms
    faith.items("consistent",
                {recs[i].item_id: not bool(c) for i, c in zip(rows, sym.contradiction, strict=True)})
    contradicted = [bool(c) for c in sym.contradiction]
    faith.outputs("contradiction_rate", item_outputs(data, rows, contradicted, lambda i: {
        "P(Yes | same?)": float(ans.p_yes_same[i]), "P(Yes | different?)": float(ans.p_yes_diff[i])}))
    faith.exemplars([contradiction_exemplar(data, ans, rows[j])
                     for j in np.flatnonzero(sym.contradiction)[:4]])


@pytest.mark.parametrize("variant", diagnostic_params(VARIANTS, gated=(GATED,)))
def test_difference_count(faith: Faith, spdfaith_data: SpdData, variant: str, faith_seed: int) -> None:
    """DQR = 1{n = m} (Eq. 8) and DS_count = max(0, 1 - |n - m|/m) (Eq. 9) on the edited pairs, the
    public code's uncapped n/m as ``DQR_code``, and how often an identical pair is counted as zero."""
    data = spdfaith_data
    ans = data.answers(variant)
    _record_invalid(faith, data, ans)
    recs = data.usable.records
    rows = counted(recs, ans, edited=True)
    assert rows, f"{data.dataset}: no edited pair got a count"
    res = counts(recs, ans, rows, Boot(SPD_BOOTSTRAP, faith_seed))
    faith.rows(res.metrics, gate=variant == GATED)  # DS_count, and on the multi-difference pairs
    faith.items("count_exact", {recs[i].item_id: bool(x) for i, x in zip(rows, res.exact, strict=True)})
    faith.outputs("DS_count", item_outputs(data, rows, [bool(x) for x in res.exact],
                                       lambda i: {"count": int(ans.count[i]), "true count": recs[i].m}))
    wrong = [rows[j] for j in np.flatnonzero(res.exact == 0)[:4]]
    faith.exemplars([exemplar(data, i, "miscounted the differences",
                               {"model's count": str(int(ans.count[i])), "true count": str(recs[i].m)})
                     for i in wrong])


@pytest.mark.parametrize("variant", diagnostic_params(VARIANTS, gated=(GATED,)))
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
    rows = counted(recs, ans, edited=False)
    assert rows, f"{data.dataset}: no pair got a count"
    judge = f"judge={ans.judge}"
    res = naming(recs, ans, rows, Boot(SPD_BOOTSTRAP, faith_seed))
    # unparseable fragments stay in the claims as unmatched (they lower DRF) and are counted here
    faith.invalid(f"unparseable claim [{variant}, {judge}]", res.unparseable, total=res.claims)
    faith.rows(res.metrics, gate=variant == GATED)  # DRF on the multi-difference pairs (Table 3)
    faith.items("claims_all_grounded",
                {recs[i].item_id: bool(h.all()) for i, h in zip(rows, res.hits, strict=True) if h.size})
    scored = [j for j, x in enumerate(res.drf_item) if np.isfinite(x)]  # DRF's pairs: those with a claim
    drf = [float(res.drf_item[j]) for j in scored]
    faith.outputs("DRF", item_outputs(data, [rows[j] for j in scored], drf,
                                      lambda i: {"count": int(ans.count[i]), "reply": ans.replies[i] or "",
                                                 "unmatched claims": unmatched(ans.judgements[i])}),
                  slice=judge)
    shown = [rows[j] for j, h in enumerate(res.hits) if h.size and not h.all()][:4]
    faith.exemplars([exemplar(data, i, "named a difference that is not there",
                               {"prompt count": str(int(ans.count[i])), "reply": ans.replies[i] or "",
                                "unmatched claims": unmatched(ans.judgements[i])})
                     for i in shown])


@pytest.mark.faith_diagnostic
@pytest.mark.parametrize("variant", VARIANTS)
def test_residual_stream(faith: Faith, spdfaith_data: SpdData, variant: str, faith_seed: int) -> None:
    """cos(h_same, h_diff) of the pre-answer residual states per layer (App. D.3, Fig. 21), with its CI
    band over images, for consistent and for contradictory pairs. Recorded, not gated."""
    data = spdfaith_data
    data.require_states()
    ans = data.answers(variant)
    _record_invalid(faith, data, ans)
    recs = data.usable.records
    rows = answered(ans)
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


@pytest.mark.faith_diagnostic
def test_sage_effect(faith: Faith, spdfaith_data: SpdData, faith_seed: int) -> None:
    """SAGE − base on the same pairs (paired differences, CIs over images): contradiction, CR (normalised,
    Fig. 34), DS_count, DRF. Diagnostic: the paper reports CR 38.2 -> 43.8 and DRF 29.5 -> 33.7 on
    Qwen2.5-VL-7B (Table 6)."""
    data = spdfaith_data
    base, sage = data.answers("base"), data.answers("sage")
    _record_invalid(faith, data, base, sage)
    deltas = sage_deltas(data.usable.records, base, sage, Boot(SPD_BOOTSTRAP, faith_seed))
    assert deltas, f"{data.dataset}: no pair answered under both variants"
    faith.rows(deltas)


@pytest.mark.faith_diagnostic
def test_edit_pairs(faith: Faith, spdfaith_data: SpdData) -> None:
    """The pairs this run used: how many per subset, difficulty and edit type, every rejected record by
    kind, and a few pairs with their edits outlined (the generated COCO edits can be inspected here)."""
    data = spdfaith_data
    _record_invalid(faith, data)
    recs = data.usable.records
    assert recs, f"{data.dataset}: no usable pair (see the invalid counts)"
    for where, pos in groups(recs, list(range(len(recs)))):
        faith.metric("pairs", float(len(pos)), n=len(pos), slice=where)
    edits = [e.type for r in recs for e in r.edits]
    for kind in EDIT_TYPES:
        faith.metric("edits", float(edits.count(kind)), n=len(edits), slice=f"type={kind}")
    shown = [next((i for i, r in enumerate(recs) if r.subset == s), None) for s in ("single", "multi")]
    faith.exemplars([exemplar(data, i, f"a {recs[i].subset} pair ({recs[i].difficulty or recs[i].m})", {})
                     for i in shown if i is not None])
