"""Suite 1 — invariance (LGIP §3, App. A; SPEC §1).

Protocol: for each image I and caption c, score c and each meaning-preserving paraphrase c' (the 9
simple templates and the advanced rewrite rules, at most K_same = 6 per caption, seed 42). A faithful
scorer keeps s(I, c') close to s(I, c): E_inv = mean |s(I, c) − s(I, c')| (Eq. 2), pooled over all
(caption, paraphrase) pairs as the public code does, with a bootstrap CI over images. Lower is better.
"""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols.lgip.fixtures import Scored, pair_exemplars, record_missing
from faithtests.protocols.lgip.metrics import invariance_summary
from faithtests.scorecard.model import Series
from faithtests.scorecard.recording import Faith

pytestmark = pytest.mark.suite("invariance")


@pytest.mark.parametrize("subset", ["all", "simple", "advanced"])
def test_paraphrase_invariance(faith: Faith, invariance_scored: Scored, subset: str, faith_seed: int) -> None:
    scored = invariance_scored
    idx = np.array([i for i, p in enumerate(scored.workload.pairs) if p.family == "paraphrase"])
    pairs = [scored.workload.pairs[i] for i in idx]
    base, para = scored.base[idx], scored.perturbed[idx]
    kinds = [p.label or "simple" for p in pairs]
    summary = invariance_summary(base, para, [p.image_id for p in pairs], kinds=kinds, seed=faith_seed)
    est = {"all": summary.overall, "simple": summary.simple, "advanced": summary.advanced}[subset]
    assert est is not None, f"no {subset} paraphrases were generated for {scored.workload.name}"
    slice_ = None if subset == "all" else subset

    record_missing(faith, scored)
    faith.metric("E_inv", est.value, ci=est.ci, n=est.n_pairs, higher_is_better=False, slice=slice_)
    if subset == "all" and summary.relative_increase_pct is not None:
        rel = summary.relative_increase_pct
        faith.metric("E_inv_rel_increase_pct", rel.value, ci=rel.ci, n=rel.n_pairs, higher_is_better=False)
        faith.plot("E_inv by paraphrase kind", "bar", [Series(
            faith.model, ["all", "simple", "advanced"],
            [summary.overall.value,
             *(e.value if e else float("nan") for e in (summary.simple, summary.advanced))],
        )], y_label="E_inv (lower is better)")
    moved = np.where([subset in ("all", k) for k in kinds], np.abs(base - para), -1.0)
    worst = idx[np.argsort(-moved)[:4]]
    faith.exemplars(pair_exemplars(scored, worst, "paraphrase moved the similarity most"))
    faith.check("E_inv", slice=slice_)
