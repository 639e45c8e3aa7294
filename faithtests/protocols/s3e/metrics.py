"""S3E decision-state stress metrics (Zhao, Han & Hovy 2026, §3, §5) — the public entry point.

The pieces live in ``layout`` (array layout), ``behaviour`` (A/B decisions, strict-correct,
margins), ``states`` (Eq. 2 scores, Eqs. 3–5 excess, Eq. 7 band, frozen layer selection) and
``effects`` (CIs, Eq. 8 d_p, HSR, breakdowns); this module re-exports them and adds
``summarize_s3e``, which turns one model's arrays into every number the suite records.

Typical flow for one model (arrays in ``s3e_layout`` order)::

    S = s_scores(states)                          # [L, N, 2, 5], chunk over items if needed
    dist = stress_pres_distance(states)           # [L, N, 2], for Eq. 7
    strict = strict_correct(logits[:, :, STRESS]) # [N]
    sel = select_layer(S[:, sel_idx], strict[sel_idx])   # once, on the base model; then frozen
    out = summarize_s3e(S, logits, sel, dist=dist, stress_types=..., sources=...)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from faithtests.protocols.s3e.behaviour import (
    TIE,
    BehaviourSummary,
    MarginMatch,
    ab_decisions,
    margin_matched_half,
    positive_chosen,
    positive_margin,
    stress_behaviour,
    strict_correct,
)
from faithtests.protocols.s3e.effects import (
    N_RESAMPLES,
    ExcessCurve,
    ExcessSummary,
    HSRResult,
    ItemRate,
    SliceSummary,
    breakdown,
    excess_curve,
    hidden_stress_rate,
    hsr_threshold,
    item_rate,
    margin_matched_excess,
    most_excess,
    paired_effect_size,
    rate_by_label,
    summarize_excess,
)
from faithtests.protocols.s3e.layout import (
    CONTROLS,
    LETTERS,
    LEX,
    ORDERS,
    ORIG,
    POS,
    POSITIVE_LETTER,
    PRES,
    RAND,
    ROLE_INDEX,
    ROLES,
    STRESS,
    SWAP,
    Control,
    Role,
)
from faithtests.protocols.s3e.states import (
    LayerSelection,
    cosine_distance,
    layer_selection_from_profile,
    order_averaged_scores,
    paired_excess,
    pc1_gap_profile,
    s_scores,
    select_layer,
    selection_split,
    stress_pres_distance,
    stress_specificity_profile,
    top_half_band,
    top_half_layers,
)

__all__ = [
    "CONTROLS",
    "LETTERS",
    "LEX",
    "N_RESAMPLES",
    "ORDERS",
    "ORIG",
    "POS",
    "POSITIVE_LETTER",
    "PRES",
    "RAND",
    "ROLES",
    "ROLE_INDEX",
    "STRESS",
    "SWAP",
    "TIE",
    "BehaviourSummary",
    "Control",
    "ExcessCurve",
    "ExcessSummary",
    "HSRResult",
    "ItemRate",
    "LayerSelection",
    "MarginMatch",
    "Role",
    "S3ESummary",
    "SliceSummary",
    "ab_decisions",
    "breakdown",
    "cosine_distance",
    "excess_curve",
    "hidden_stress_rate",
    "hsr_threshold",
    "item_rate",
    "layer_selection_from_profile",
    "margin_matched_excess",
    "margin_matched_half",
    "most_excess",
    "order_averaged_scores",
    "paired_effect_size",
    "paired_excess",
    "pc1_gap_profile",
    "positive_chosen",
    "positive_margin",
    "rate_by_label",
    "s_scores",
    "select_layer",
    "selection_split",
    "stress_behaviour",
    "stress_pres_distance",
    "stress_specificity_profile",
    "strict_correct",
    "summarize_excess",
    "summarize_s3e",
    "top_half_band",
    "top_half_layers",
]


@dataclass(frozen=True)
class S3ESummary:
    """Everything S3E reports for one model/variant at its frozen layer (Tables 6, 7, 8, 15–18)."""

    behaviour: BehaviourSummary
    selection: LayerSelection
    s_lex: float  # Table 6 S_lex: mean order-averaged S_lex over strict-correct items at the layer
    s_stress: float  # Table 6 S_stress
    excess: dict[str, ExcessSummary]  # "pres" / "lex" / "rand" at the frozen layer (Eqs. 3–5, 8)
    curves: dict[str, ExcessCurve]  # per-layer Δ with CI band, same keys
    hsr: dict[str, HSRResult]  # "lex" / "rand", τ = mean + sd on strict-correct items (App. J)
    band: ExcessSummary | None  # Eq. 7 top-half band (Table 7); None without ``dist``
    margin_matched: MarginMatch  # Table 12's half (on strict-correct items)
    margin_matched_lex: ExcessSummary  # Table 8 "Margin-matched Δlex"
    by_stress_type: dict[str, list[SliceSummary]]  # control -> slices (Table 17)
    by_source: dict[str, list[SliceSummary]]  # control -> slices (Table 16)


def summarize_s3e(
    S: ArrayLike,
    logits: ArrayLike,
    selection: LayerSelection,
    *,
    dist: ArrayLike | None = None,
    stress_types: Sequence[str] | None = None,
    sources: Sequence[str] | None = None,
    hsr_tau: dict[str, float] | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    min_slice_n: int = 100,
) -> S3ESummary:
    """One model's S3E numbers from its score and logit arrays, at the frozen ``selection.layer``.

    ``S``: ``[layers, items, orders, roles]`` (``s_scores``); ``logits``: ``[items, orders, roles,
    letters]`` A/B logits (the ``pos`` role's logits are not used); ``dist``: ``[layers, items,
    orders]`` (``stress_pres_distance``) for the Eq. 7 band; ``stress_types`` / ``sources``: one label per
    item. ``hsr_tau``: frozen thresholds per control (e.g. the base model's) instead of this model's own.
    """
    s = np.asarray(S, dtype=np.float64)
    lg = np.asarray(logits, dtype=np.float64)
    if lg.ndim != 4 or lg.shape[1:] != (2, len(ROLES), 2) or s.ndim != 4 or s.shape[1] != lg.shape[0]:
        raise ValueError(f"summarize_s3e: S {s.shape} and logits {lg.shape} do not match the s3e layout")
    if not 0 <= selection.layer < s.shape[0]:
        raise ValueError(f"summarize_s3e: frozen layer {selection.layer} outside 0..{s.shape[0] - 1}")
    behaviour = stress_behaviour(lg[:, :, STRESS])
    strict = strict_correct(lg[:, :, STRESS])
    if not strict.any():
        raise ValueError("summarize_s3e: no strict-correct items; internal contrasts are undefined")
    layer = selection.layer
    kw = {"n_resamples": n_resamples, "seed": seed}
    excess: dict[str, ExcessSummary] = {}
    curves: dict[str, ExcessCurve] = {}
    hsr: dict[str, HSRResult] = {}
    by_type: dict[str, list[SliceSummary]] = {}
    by_source: dict[str, list[SliceSummary]] = {}
    for c in CONTROLS:
        d = paired_excess(s, c, strict)
        excess[c] = summarize_excess(d[layer], **kw)
        curves[c] = excess_curve(s, c, strict, **kw)
        types = None if stress_types is None else [t for t, k in zip(stress_types, strict, strict=True) if k]
        srcs = None if sources is None else [t for t, k in zip(sources, strict, strict=True) if k]
        if types is not None:
            by_type[c] = breakdown(d[layer], types, min_n=min_slice_n, **kw)
        if srcs is not None:
            by_source[c] = breakdown(d[layer], srcs, min_n=min_slice_n, **kw)
    for c in ("lex", "rand"):
        tau = None if hsr_tau is None else hsr_tau.get(c)
        hsr[c] = hidden_stress_rate(paired_excess(s[layer : layer + 1], c, strict)[0], behaviour.n, tau=tau)
    match = margin_matched_half(lg[strict][:, :, STRESS], lg[strict][:, :, LEX])
    band = None
    if dist is not None:
        band = summarize_excess(top_half_band(dist, strict), **kw)
    return S3ESummary(
        behaviour=behaviour,
        selection=selection,
        s_lex=float(order_averaged_scores(s[layer : layer + 1], "lex", strict).mean()),
        s_stress=float(order_averaged_scores(s[layer : layer + 1], "stress", strict).mean()),
        excess=excess,
        curves=curves,
        hsr=hsr,
        band=band,
        margin_matched=match,
        margin_matched_lex=margin_matched_excess(paired_excess(s, "lex", strict)[layer], match, **kw),
        by_stress_type=by_type,
        by_source=by_source,
    )
