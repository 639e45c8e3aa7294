"""Suite 2 — flip sensitivity.

2a (LGIP §3.2–3.3, §4.3–4.6, App. A.2; SPEC §2a). Protocol: replace one word of a caption with another
word of the same colour / number / object vocabulary (first whole-word match, at most one flip per type,
K_diff = 6, seed 42), and for the combined case flip a paraphrase instead. A faithful scorer prefers the
original: gap g = s(I, c) − s(I, c†), E_sens = mean g (Eq. 4), PR = mean 1{s(I, c) > s(I, c†)} (Eq. 5,
strict). Flip strength s = a·type_prior + (1 − a)·clip01(1 − cos_text(c, c†)) weights the gaps and
bins them weak / medium / strong at the 25th / 75th percentiles (§4.3). SugarCrepe (positive, hard
negative) pairs are flips too: their PR equals SugarCrepe's text accuracy.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import Scored, pair_exemplars, record_missing
from faithtests.metrics.lgip import FlipStats, flip_summary
from faithtests.perturb.strength import flip_strength_from_texts
from faithtests.recording import Faith
from faithtests.scorecard.model import Series

pytestmark = pytest.mark.suite("flip_sensitivity")


def _record(faith: Faith, stats: FlipStats, slice_: str | None) -> None:
    faith.metric("PR", stats.pr.value, ci=stats.pr.ci, n=stats.pr.n_pairs, slice=slice_)
    faith.metric("E_sens", stats.gap.value, ci=stats.gap.ci, n=stats.gap.n_pairs, slice=slice_)
    for name, est in (("PR_weighted", stats.weighted_pr), ("E_sens_weighted", stats.weighted_gap)):
        if est is not None:
            faith.metric(name, est.value, ci=est.ci, n=est.n_pairs, slice=slice_)


def _flip_indices(scored: Scored, case: str) -> np.ndarray:
    families = ("combined",) if case == "combined" else ("flip",)
    return np.array([i for i, p in enumerate(scored.workload.pairs)
                     if p.family in families and case in ("all", "combined", p.label)], dtype=int)


def test_flip_positive_rate(faith: Faith, flip_scored: Scored, flip_case: str, faith_seed: int) -> None:
    scored = flip_scored
    idx = _flip_indices(scored, flip_case)
    assert idx.size, f"no {flip_case} flips were generated for {scored.workload.name}"
    pairs = [scored.workload.pairs[i] for i in idx]
    types = [p.label or "untyped" for p in pairs]
    summary = flip_summary(scored.base[idx], scored.variant[idx], [p.image_id for p in pairs],
                           flip_types=types, seed=faith_seed)

    record_missing(faith, scored)
    slice_ = None if flip_case == "all" else flip_case
    _record(faith, summary.overall, slice_)
    if flip_case == "all":
        for t, stats in sorted(summary.by_type.items()):
            _record(faith, stats, f"type={t}")
        faith.plot("PR by flip type", "bar", [Series(
            faith.model, sorted(summary.by_type),
            [summary.by_type[t].pr.value for t in sorted(summary.by_type)],
            lo=[summary.by_type[t].pr.ci[0] if summary.by_type[t].pr.ci else float("nan")
                for t in sorted(summary.by_type)],
            hi=[summary.by_type[t].pr.ci[1] if summary.by_type[t].pr.ci else float("nan")
                for t in sorted(summary.by_type)],
        )], y_label="PR (higher is better)")
        faith.items("flip_preferred_original", {
            f"{p.image_id}|{p.caption_id}|{p.variant}": bool(scored.base[i] > scored.variant[i])
            for p, i in zip(pairs, idx, strict=True)})
    wrong = idx[scored.variant[idx] >= scored.base[idx]]
    order = np.argsort(-(scored.variant[wrong] - scored.base[wrong]))[:4]
    faith.exemplars(pair_exemplars(scored, wrong[order], "flip scored at or above its original"))
    faith.check("PR", slice=slice_)


def test_flip_strength_bins(faith: Faith, flip_scored: Scored, faith_scorer: object, strength_bin: str,
                            faith_seed: int) -> None:
    scored = flip_scored
    idx = _flip_indices(scored, "all")
    pairs = [scored.workload.pairs[i] for i in idx]
    types = [p.label or "untyped" for p in pairs]
    strengths = flip_strength_from_texts([p.caption for p in pairs], [p.variant for p in pairs], types,
                                         lambda texts: faith_scorer.encode_texts(texts).numpy())  # type: ignore[attr-defined]
    summary = flip_summary(scored.base[idx], scored.variant[idx], [p.image_id for p in pairs],
                           flip_types=types, strengths=strengths, seed=faith_seed)
    stats = summary.by_bin[strength_bin]
    _record(faith, stats, f"bin={strength_bin}")
    if strength_bin == "strong":
        bins = list(STRENGTH_ORDER)
        faith.plot("PR by flip strength", "line", [Series(
            faith.model, bins, [summary.by_bin[b].pr.value for b in bins])], x_label="strength bin",
            y_label="PR")
    faith.check("PR", slice=f"bin={strength_bin}")


STRENGTH_ORDER = ("weak", "medium", "strong")
