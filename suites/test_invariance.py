"""Suite 1 — invariance (LGIP §3, Eqs. 2 and 4, App. A).

Protocol: for each image I and caption c, score c and each meaning-preserving paraphrase c' (the 9
simple templates and the advanced rewrite rules, at most K_same = 6 per caption, seed 42). A faithful
scorer keeps s(I, c') close to s(I, c): E_inv = mean |s(I, c) − s(I, c')| (Eq. 2), pooled over all
(caption, paraphrase) pairs as the public code does, with a bootstrap CI over images. Lower is better.
Simple / advanced are labelled by the paper's template markers (App. A.1, so Table 4 compares; slices
``simple``, ``advanced``) or, with ``--faith-lgip-paraphrase-labels provenance``, by how each paraphrase
was made (slices ``provenance=simple``, ``provenance=advanced``).
Raw E_inv is in the scorer's units, and a scorer that ignores its inputs is perfectly invariant, so each
subset also gates E_inv_rel = E_inv / Δ_u, with Δ_u the mean gap s(I, c) − s(I, c_u) to a true caption
c_u of another image (Eq. 2 over Eq. 4; ``protocols/lgip/separation.py``): undefined, and failing, for a
scorer with no resolved separation (a constant or random-weight model). The numbers, and which of them
are gates, come from ``protocols/lgip/results.py``; this file records them.
"""

from __future__ import annotations

import pytest

from faithtests.protocols import fail_unscored
from faithtests.protocols.lgip.fixtures import (
    Scored,
    Unrelated,
    finite_invariance,
    kind_slice,
    pair_exemplars,
    record_missing,
)
from faithtests.protocols.lgip.paraphrase import ParaphraseLabels
from faithtests.protocols.lgip.results import ci_bars, pair_outputs, paraphrase_indices, paraphrase_invariance
from faithtests.scorecard.model import Series
from faithtests.scorecard.recording import Faith

pytestmark = pytest.mark.suite("invariance")


@pytest.mark.parametrize("subset", ["all", "simple", "advanced"])
def test_paraphrase_invariance(faith: Faith, invariance_scored: Scored, invariance_unrelated: Unrelated,
                               subset: str, faith_seed: int,
                               lgip_paraphrase_labels: ParaphraseLabels) -> None:
    scored = invariance_scored
    slice_ = None if subset == "all" else kind_slice(lgip_paraphrase_labels, subset)
    record_missing(faith, scored)
    # pairs with NaN/inf scores are counted and fail the checks; the metrics use the others
    idx, unrel = finite_invariance(faith, scored, paraphrase_indices(scored.workload.pairs),
                                   invariance_unrelated)
    if not idx.size:
        fail_unscored(faith, "E_inv", slice=slice_)
    result = paraphrase_invariance(
        scored.workload.pairs, scored.base, scored.perturbed, idx, subset,
        (unrel.base, unrel.unrelated, [p.image_id for p in unrel.pairs]),
        labels=lgip_paraphrase_labels, seed=faith_seed)
    assert result is not None, f"no {subset} paraphrases were generated for {scored.workload.name}"

    faith.rows(result.rows(subset, slice_, lgip_paraphrase_labels), gate=True)  # E_inv, E_inv_rel gated
    faith.outputs("E_inv", pair_outputs(scored.workload.pairs, scored.base, scored.perturbed,
                                        result.per_pair.values), slice=slice_)
    summary = result.summary
    if subset == "all" and summary.relative_increase_pct is not None:
        values, lo, hi = ci_bars((summary.overall, summary.simple, summary.advanced))
        bars = Series(faith.model, ["all", "simple", "advanced"], values, lo=lo, hi=hi)
        faith.plot("E_inv by paraphrase kind", "bar", [bars], y_label="E_inv (lower is better)")
    faith.exemplars(pair_exemplars(scored, result.worst, "paraphrase moved the similarity most"))
