"""S3E statistics over item-level scores: CIs, d_p (Eq. 8), HSR (Eqs. 6, 16), breakdowns, curves.

Inputs are order-averaged item scores ``x_i`` (e.g. one layer's row of ``paired_excess``); the item is
the bootstrap unit and every CI is a percentile bootstrap with 3,000 resamples (S3E §5.3, App. M.2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.protocols.s3e.behaviour import MarginMatch
from faithtests.protocols.s3e.layout import Control
from faithtests.protocols.s3e.states import paired_excess
from faithtests.stats import bootstrap_ci

FloatArray = NDArray[np.float64]

N_RESAMPLES = 3000  # S3E App. M.2


def _vector(x: ArrayLike, name: str) -> FloatArray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name}: expected a non-empty 1-d array of item scores, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: {int(np.sum(~np.isfinite(a)))} non-finite item score(s)")
    return a


def paired_effect_size(x: ArrayLike, *, ddof: int = 1) -> float:
    """d_p(x) = mean(x) / sd(x) over item-level paired contrasts (S3E Eq. 8).

    ``sd`` is the sample standard deviation (ddof=1), as Eq. 8's text says ("sample standard
    deviation"). Undefined (raises) for fewer than two items or zero spread, instead of returning ±inf.
    """
    a = _vector(x, "paired_effect_size")
    if a.size <= ddof:
        raise ValueError(f"paired_effect_size: need more than {ddof} item(s), got {a.size}")
    sd = float(np.std(a, ddof=ddof))
    if sd == 0.0:
        raise ValueError("paired_effect_size: zero standard deviation, d_p undefined")
    return float(np.mean(a)) / sd


@dataclass(frozen=True)
class ExcessSummary:
    """One item-level contrast summarised: Table 6 / Table 15 columns."""

    n: int
    mean: float
    ci: tuple[float, float]  # paired percentile bootstrap over items
    d_p: float | None  # Eq. 8; None when undefined (n < 2 or zero spread)
    frac_positive: float  # Table 15 "%Δ > 0" as a fraction


def summarize_excess(
    x: ArrayLike, *, n_resamples: int = N_RESAMPLES, level: float = 0.95, seed: int = 0
) -> ExcessSummary:
    """Mean, paired bootstrap CI over items (3,000 resamples), d_p (Eq. 8) and share > 0 of x_i.

    ``x``: order-averaged paired differences x_i = S̄_{i,stress} − S̄_{i,k} (Eqs. 3–5), so resampling
    rows of ``x`` resamples (stress, control) pairs jointly — the paired bootstrap of S3E §5.3.
    """
    a = _vector(x, "summarize_excess")
    try:
        d_p: float | None = paired_effect_size(a)
    except ValueError:
        d_p = None
    return ExcessSummary(
        n=int(a.size),
        mean=float(a.mean()),
        ci=bootstrap_ci(a, n_resamples=n_resamples, level=level, seed=seed),
        d_p=d_p,
        frac_positive=float(np.mean(a > 0)),
    )


@dataclass(frozen=True)
class ExcessCurve:
    """Per-layer mean and CI of one contrast, for the Δ-per-layer plot."""

    control: str
    n: int
    mean: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]


def excess_curve(
    S: ArrayLike,
    control: Control,
    strict: ArrayLike | None,
    *,
    n_resamples: int = N_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> ExcessCurve:
    """Δ^control per layer (Eqs. 3–5) with its paired bootstrap CI band, over strict-correct items.

    The same seed at every layer means the same resampled item sets, so the band is coherent across layers.
    """
    d = paired_excess(S, control, strict)
    if d.shape[1] == 0:
        raise ValueError("excess_curve: no strict-correct items")
    cis = [bootstrap_ci(row, n_resamples=n_resamples, level=level, seed=seed) for row in d]
    return ExcessCurve(
        control=control,
        n=int(d.shape[1]),
        mean=tuple(float(v) for v in d.mean(axis=1)),
        lo=tuple(c[0] for c in cis),
        hi=tuple(c[1] for c in cis),
    )


def hsr_threshold(strict_scores: ArrayLike, *, ddof: int = 1) -> float:
    """τ = mean + sd of the item score over stress-trial strict-correct items (S3E App. J, Table 18).

    Table 18 checks this distribution: Qwen3VL-2B Δlex τ = 0.0280 = 0.0190 + 0.0190/2.12 (mean + sd
    recovered from Table 6's d_p). sd uses ddof=1 like Eq. 8. Freeze τ from the base model to compare
    variants at one threshold.
    """
    a = _vector(strict_scores, "hsr_threshold")
    if a.size <= ddof:
        raise ValueError(f"hsr_threshold: need more than {ddof} item(s), got {a.size}")
    return float(a.mean() + np.std(a, ddof=ddof))


@dataclass(frozen=True)
class HSRResult:
    """Hidden stress-sensitivity rates (S3E Eq. 6, Eq. 16, Table 18)."""

    tau: float
    n_high: int  # strict-correct items with score > τ
    n_strict: int
    n_total: int  # all valid stress-trial items (the denominator of Eq. 6's HSR)
    hsr: float  # Pr(C ∧ U_τ)
    hsr_correct: float  # Pr(U_τ | C), Table 18 "HSR (%)" / 100
    mean_high: float | None  # mean score of the high items (Table 18 "Mean high"); None if none


def hidden_stress_rate(strict_scores: ArrayLike, n_total: int, *, tau: float | None = None) -> HSRResult:
    """HSR = Pr(C ∧ U_τ), HSR_correct = Pr(U_τ | C) with U_τ = {score > τ} (S3E Eqs. 6, 16).

    ``strict_scores``: the item score (e.g. Δlex at the frozen layer) of the strict-correct items C;
    ``n_total``: number of valid stress-trial items, strict-correct or not. ``tau`` defaults to
    ``hsr_threshold(strict_scores)`` (App. J).
    """
    a = _vector(strict_scores, "hidden_stress_rate")
    if n_total < a.size:
        raise ValueError(f"hidden_stress_rate: n_total={n_total} < {a.size} strict-correct items")
    t = hsr_threshold(a) if tau is None else float(tau)
    if not math.isfinite(t):
        raise ValueError(f"hidden_stress_rate: tau must be finite, got {t}")
    high = a > t
    k = int(high.sum())
    return HSRResult(
        tau=t,
        n_high=k,
        n_strict=int(a.size),
        n_total=int(n_total),
        hsr=k / n_total,
        hsr_correct=k / a.size,
        mean_high=float(a[high].mean()) if k else None,
    )


@dataclass(frozen=True)
class SliceSummary:
    label: str
    summary: ExcessSummary
    # n < min_n: kept for transparency, not for standalone claims (App. I.3). The paper gives no cut-off
    # but treats its 65-87-item compositional slices as small, hence the default min_n = 100.
    sparse: bool


def breakdown(
    x: ArrayLike,
    labels: Sequence[str],
    *,
    min_n: int = 100,
    n_resamples: int = N_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> list[SliceSummary]:
    """Per-slice summaries of an item contrast: stress type (Table 17) or source (Table 16).

    ``labels[i]`` is item i's slice (same items, same order as ``x``). Slices are sorted by label; the
    layer stays the frozen overall one (App. I: every row reports the model's selected layer).
    """
    a = _vector(x, "breakdown")
    if len(labels) != a.size:
        raise ValueError(f"breakdown: {a.size} scores but {len(labels)} labels")
    lab = np.asarray([str(v) for v in labels])
    out = []
    for name in sorted(set(lab.tolist())):
        part = a[lab == name]
        s = summarize_excess(part, n_resamples=n_resamples, level=level, seed=seed)
        out.append(SliceSummary(label=name, summary=s, sparse=part.size < min_n))
    return out


def margin_matched_excess(
    x: ArrayLike, match: MarginMatch, *, n_resamples: int = N_RESAMPLES, level: float = 0.95, seed: int = 0
) -> ExcessSummary:
    """Δlex recomputed on the margin-matched half (S3E Table 8, Table 12): ``x`` and ``match`` share items."""
    a = _vector(x, "margin_matched_excess")
    if match.mask.shape != a.shape:
        raise ValueError(f"margin_matched_excess: {a.size} scores but mask of shape {match.mask.shape}")
    return summarize_excess(a[match.mask], n_resamples=n_resamples, level=level, seed=seed)


@dataclass(frozen=True)
class ItemRate:
    """The share of items where a flag holds, with a percentile bootstrap CI over items."""

    value: float
    ci: tuple[float, float]
    n: int


def item_rate(flags: ArrayLike) -> ItemRate:
    """mean(flags) over items and its CI (``faithtests.stats.bootstrap_ci`` defaults): the per-order
    accuracy and the strict-correct rate of stress trials (S3E §3.2, Table 6)."""
    f = np.asarray(flags, dtype=np.bool_)
    if f.ndim != 1 or f.size == 0:
        raise ValueError(f"item_rate: expected a non-empty 1-d array of item flags, got shape {f.shape}")
    return ItemRate(float(f.mean()), bootstrap_ci(f.astype(float)), int(f.size))


def rate_by_label(flags: ArrayLike, labels: Sequence[str]) -> list[tuple[str, float, int]]:
    """(label, mean(flags) over its items, item count) per label, sorted by label (e.g. the strict-correct
    rate per stress type, S3E Table 17's slices); no CI."""
    f = np.asarray(flags, dtype=np.bool_)
    if len(labels) != f.size:
        raise ValueError(f"rate_by_label: {f.size} flags but {len(labels)} labels")
    out = []
    for label in sorted(set(labels)):
        m = np.array([x == label for x in labels])
        out.append((label, float(f[m].mean()), int(m.sum())))
    return out


def most_excess(x: ArrayLike, items: ArrayLike, k: int = 4) -> list[tuple[int, float]]:
    """(item, x) of the ``k`` largest item contrasts ``x`` (e.g. Δlex at the frozen layer on the
    strict-correct items), largest first; ``items[j]`` is the record index of ``x[j]``."""
    a = np.asarray(x, dtype=np.float64)
    rows = np.asarray(items, dtype=int)
    if a.shape != rows.shape:
        raise ValueError(f"most_excess: {a.size} contrasts but {rows.size} item indices")
    return [(int(rows[j]), float(a[j])) for j in np.argsort(-a)[:k]]
