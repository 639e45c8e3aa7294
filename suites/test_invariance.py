"""Suite 1 — invariance (LGIP §3, App. A; SPEC §1).

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
scorer with no resolved separation (a constant or random-weight model).
"""

from __future__ import annotations

import numpy as np
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
from faithtests.protocols.lgip.metrics import invariance_summary
from faithtests.protocols.lgip.paraphrase import ParaphraseLabels, paraphrase_kinds
from faithtests.protocols.lgip.perturb import pair_keys
from faithtests.protocols.lgip.separation import relative_invariance_summary
from faithtests.scorecard.model import ItemValues, Series
from faithtests.scorecard.recording import Faith

pytestmark = pytest.mark.suite("invariance")


@pytest.mark.parametrize("subset", ["all", "simple", "advanced"])
def test_paraphrase_invariance(faith: Faith, invariance_scored: Scored, invariance_unrelated: Unrelated,
                               subset: str, faith_seed: int,
                               lgip_paraphrase_labels: ParaphraseLabels) -> None:
    scored = invariance_scored
    slice_ = None if subset == "all" else kind_slice(lgip_paraphrase_labels, subset)
    record_missing(faith, scored)
    paraphrases = [i for i, p in enumerate(scored.workload.pairs) if p.family == "paraphrase"]
    # pairs with NaN/inf scores are counted and fail the checks; the metrics use the others
    idx, unrel = finite_invariance(faith, scored, paraphrases, invariance_unrelated)
    if not idx.size:
        fail_unscored(faith, "E_inv", slice=slice_, higher_is_better=False)
    pairs = [scored.workload.pairs[i] for i in idx]
    base, para = scored.base[idx], scored.perturbed[idx]
    kinds = paraphrase_kinds([p.perturbed for p in pairs], [p.label for p in pairs], lgip_paraphrase_labels)
    summary = invariance_summary(base, para, [p.image_id for p in pairs], kinds=kinds, seed=faith_seed)
    est = {"all": summary.overall, "simple": summary.simple, "advanced": summary.advanced}[subset]
    assert est is not None, f"no {subset} paraphrases were generated for {scored.workload.name}"

    chosen = np.array([subset in ("all", k) for k in kinds])
    # |s(I, c) - s(I, c')| per pair, clustered by image: the paired gate's input; ids over the whole
    # workload, then picked (dropping a non-finite pair must not renumber its repeats)
    all_keys = pair_keys(scored.workload.pairs)
    keys = [all_keys[i] for i in idx]
    per_pair = ItemValues.make({k: d for k, d, c in zip(keys, np.abs(base - para), chosen, strict=True) if c},
                               {k: p.image_id for k, p, c in zip(keys, pairs, chosen, strict=True) if c})
    faith.metric("E_inv", est.value, ci=est.ci, n=est.n_pairs, higher_is_better=False, slice=slice_,
                 per_item=per_pair)
    if subset == "all" and summary.relative_increase_pct is not None:
        rel = summary.relative_increase_pct
        faith.metric("E_inv_rel_increase_pct", rel.value, ci=rel.ci, n=rel.n_pairs, higher_is_better=False,
                     slice=None if lgip_paraphrase_labels == "markers" else lgip_paraphrase_labels)
        kinds_est = (summary.overall, summary.simple, summary.advanced)
        cis = [e.ci if e and e.ci else None for e in kinds_est]
        faith.plot("E_inv by paraphrase kind", "bar", [Series(
            faith.model, ["all", "simple", "advanced"], [e.value if e else float("nan") for e in kinds_est],
            lo=[c[0] if c else float("nan") for c in cis], hi=[c[1] if c else float("nan") for c in cis],
        )], y_label="E_inv (lower is better)")
    rel_inv = relative_invariance_summary(
        base[chosen], para[chosen], [p.image_id for p, c in zip(pairs, chosen, strict=True) if c], unrel.base,
        unrel.unrelated, [p.image_id for p in unrel.pairs], seed=faith_seed)
    if subset == "all":  # in the scorer's units, so recorded, not gated
        sep = rel_inv.separation
        faith.metric("Delta_unrelated", sep.value, ci=sep.ci, n=sep.n_pairs)
    faith.metric("E_inv_rel", rel_inv.relative.value, ci=rel_inv.relative.ci, n=est.n_pairs,
                 higher_is_better=False, slice=slice_)
    moved = np.where(chosen, np.abs(base - para), -1.0)
    worst = idx[np.argsort(-moved)[:4]]
    faith.exemplars(pair_exemplars(scored, worst, "paraphrase moved the similarity most"))
    faith.check("E_inv", slice=slice_)
    faith.check("E_inv_rel", slice=slice_)
