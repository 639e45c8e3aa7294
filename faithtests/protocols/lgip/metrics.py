"""LGIP metrics (Lee, "Language-Guided Invariance Probing", §3.3, §4.3, Tables 2–7). Pure numpy.

Inputs are per-pair score arrays: ``base[i] = s(I, c)`` and ``variant[i] = s(I, c')`` (paraphrase) or
``s(I, c†)`` (flip) for pair i, plus the image id of each pair (for the per-image CI).

Aggregation. Eq. 2/4/5 read as a nested mean E_(I,c) E_c'; the public LGIP code (``run_lgip_multi.py``)
pools all pairs instead, and the paper's Tables 2–7 come from that code. ``aggregate="pooled"`` (the
default) reproduces the published numbers; ``"per_caption"`` is the literal nested reading of the
equations (needs caption ids); ``"per_image"`` averages per image first. The two differ only when
captions have different numbers of variants.

CIs are percentile bootstraps that resample images (all pairs of an image together), via
:mod:`faithtests.stats`; ``n_resamples=0`` skips them.

One aggregation: each equation's function (``invariance_error``, ``sensitivity``, ``positive_rate``,
the weighted forms) is its per-pair term (``invariance_gaps``, ``sensitivity_gaps``, ``flip_detected``)
through :func:`_estimate`, the aggregation the summaries (``invariance_summary``, ``flip_summary``)
record on the scorecard; the tests check the equations' functions against hand-computed values, so they
check what the scorecard shows.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.protocols.lgip.strength import (
    ALL_TYPES,
    LGIP_BIN_QUANTILES,
    STRENGTH_BINS,
    BinScheme,
    FlipBins,
    pooled_bins,
    within_type_bins,
)
from faithtests.stats import cluster_bootstrap_ratio_ci, cluster_bootstrap_sums_ci

FloatArray = NDArray[np.float64]
Aggregate = Literal["pooled", "per_caption", "per_image"]
WEIGHT_FLOOR = 1e-4


def _vec(x: ArrayLike, name: str) -> FloatArray:
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    if a.size == 0:
        raise ValueError(f"{name}: empty")
    bad = int(np.sum(~np.isfinite(a)))
    if bad:
        raise ValueError(f"{name}: {bad} non-finite value(s); record them as invalid before aggregating")
    return a


def paired_scores(base: ArrayLike, other: ArrayLike, other_name: str) -> tuple[FloatArray, FloatArray]:
    """(base, other) as finite float64 vectors of one length (a clear error otherwise)."""
    b = _vec(base, "base scores")
    o = _vec(other, other_name)
    if b.shape != o.shape:
        raise ValueError(f"base scores ({b.size}) and {other_name} ({o.size}) differ in length")
    return b, o


def _point(values: FloatArray, groups: Sequence[Hashable] | None, weights: FloatArray | None = None
           ) -> float:
    """An equation's value through the summaries' own aggregation (:func:`_estimate`, without a CI):
    Σ w·v / Σ w over the pairs, or the mean of per-group means when ``groups`` is given. So each
    equation's function below and the summary the scorecard records compute one value one way."""
    if groups is not None and len(groups) != values.size:
        raise ValueError(f"{len(groups)} group labels for {values.size} pairs")
    units = None if groups is None else np.asarray([str(g) for g in groups])
    ctx = _Ctx(np.full(values.size, ""), units, n_resamples=0, level=0.95, seed=0)
    w = np.ones_like(values) if weights is None else weights
    return _estimate(values, w, ctx, np.ones(values.size, dtype=bool)).value


def invariance_gaps(base: ArrayLike, paraphrase: ArrayLike) -> FloatArray:
    """|s(I,c) − s(I,c')| per pair: the term LGIP Eq. 2 averages (:func:`invariance_summary` averages
    these, with its CIs)."""
    b, p = paired_scores(base, paraphrase, "paraphrase scores")
    return np.abs(b - p)


def invariance_error(base: ArrayLike, paraphrase: ArrayLike, *, groups: Sequence[Hashable] | None = None
                     ) -> float:
    """E_inv = E_(I,c) E_c'∈P(I,c) |s(I,c) − s(I,c')|  (LGIP Eq. 2).

    Pooled over pairs by default (public code); ``groups`` = caption keys gives the nested mean of
    Eq. 2, image ids the per-image mean. Restrict the pairs to simple or advanced paraphrases for
    E_inv^simple / E_inv^adv.
    """
    return _point(invariance_gaps(base, paraphrase), groups)


def sensitivity_gaps(base: ArrayLike, flip: ArrayLike) -> FloatArray:
    """g(I, c, c†) = s(I,c) − s(I,c†) per pair  (LGIP Eq. 3)."""
    b, f = paired_scores(base, flip, "flip scores")
    return b - f


def sensitivity(base: ArrayLike, flip: ArrayLike, *, groups: Sequence[Hashable] | None = None) -> float:
    """E_sens = E_(I,c) E_c†∈F(I,c) [s(I,c) − s(I,c†)]  (LGIP Eq. 4); pooled unless ``groups``."""
    return _point(sensitivity_gaps(base, flip), groups)


def positive_rate(base: ArrayLike, flip: ArrayLike, *, groups: Sequence[Hashable] | None = None) -> float:
    """PR = E_(I,c) E_c† 1{s(I,c) > s(I,c†)}  (LGIP Eq. 5, strict: a tie counts as a failure).

    Over SugarCrepe (positive, negative) pairs this is SugarCrepe's text accuracy.
    """
    return _point(flip_detected(sensitivity_gaps(base, flip)), groups)


def flip_detected(gaps: FloatArray) -> FloatArray:
    """1{g > 0} per pair, as 0.0 / 1.0: the term LGIP Eq. 5 averages (strict: a tie is a miss)."""
    return (gaps > 0).astype(np.float64)


def strength_weights(strengths: ArrayLike, floor: float = WEIGHT_FLOOR) -> FloatArray:
    """Weights max(floor, s) for strength-weighted metrics (LGIP §4.3; the public code's floor 1e-4)."""
    s = _vec(strengths, "strengths")
    if np.any(s < 0):
        raise ValueError("strengths must be >= 0")
    return np.maximum(floor, s)


def weighted_sensitivity(base: ArrayLike, flip: ArrayLike, weights: ArrayLike) -> float:
    """Σ w·g / Σ w: strength-weighted E_sens (LGIP §4.3, Eq. 4 weighted by flip strength)."""
    g = sensitivity_gaps(base, flip)
    return _point(g, None, _weights(weights, g.size))


def weighted_positive_rate(base: ArrayLike, flip: ArrayLike, weights: ArrayLike) -> float:
    """Σ w·1{g > 0} / Σ w: strength-weighted PR (LGIP §4.3, Eq. 5 weighted by flip strength)."""
    g = sensitivity_gaps(base, flip)
    return _point(flip_detected(g), None, _weights(weights, g.size))


def _weights(weights: ArrayLike, n: int) -> FloatArray:
    w = _vec(weights, "weights")
    if w.size != n:
        raise ValueError(f"{w.size} weights for {n} pairs")
    if np.any(w < 0) or not np.sum(w) > 0:
        raise ValueError("weights must be >= 0 with a positive sum")
    return w


def relative_increase(simple: float, advanced: float) -> float:
    """100 · (E_inv^adv − E_inv^simple) / E_inv^simple, in percent (LGIP Table 4 "Adv")."""
    if not (np.isfinite(simple) and np.isfinite(advanced)) or simple <= 0:
        raise ValueError(f"relative increase undefined for E_inv^simple = {simple}")
    return 100.0 * (advanced - simple) / simple


# ----------------------------------------------------------------------------------------------
# Summaries with bootstrap CIs over images


@dataclass(frozen=True)
class Estimate:
    """A point estimate, its bootstrap CI over images (None when not computed) and its support."""

    value: float
    ci: tuple[float, float] | None
    n_pairs: int
    n_images: int


@dataclass(frozen=True)
class InvarianceSummary:
    """E_inv overall, per paraphrase kind, and the relative increase (LGIP Eq. 2, Table 4)."""

    overall: Estimate
    simple: Estimate | None
    advanced: Estimate | None
    relative_increase_pct: Estimate | None


@dataclass(frozen=True)
class FlipStats:
    """E_sens (Eq. 4) and PR (Eq. 5), plus their strength-weighted forms when strengths were given."""

    gap: Estimate
    pr: Estimate
    weighted_gap: Estimate | None
    weighted_pr: Estimate | None


@dataclass(frozen=True)
class FlipSummary:
    """Flip sensitivity overall, per type (Tables 6–7), per strength bin (Table 5), and type × bin."""

    overall: FlipStats
    by_type: Mapping[str, FlipStats]
    by_bin: Mapping[str, FlipStats]
    by_type_bin: Mapping[tuple[str, str], FlipStats]
    #: (q_low, q_high) per flip type (``within-type``) or under "all" (``pooled``); None for given bins
    bin_thresholds: Mapping[str, tuple[float, float]] | None


@dataclass(frozen=True)
class _Ctx:
    images: NDArray[np.str_]
    units: NDArray[np.str_] | None  # None: pooled (every pair is a unit)
    n_resamples: int
    level: float
    seed: int


def _context(n: int, image_ids: Sequence[Hashable], caption_ids: Sequence[Hashable] | None,
             aggregate: Aggregate, n_resamples: int, level: float, seed: int) -> _Ctx:
    if len(image_ids) != n:
        raise ValueError(f"{len(image_ids)} image ids for {n} pairs")
    images = np.asarray([str(i) for i in image_ids])
    units: NDArray[np.str_] | None
    if aggregate == "pooled":
        units = None
    elif aggregate == "per_image":
        units = images
    elif aggregate == "per_caption":
        if caption_ids is None or len(caption_ids) != n:
            raise ValueError("aggregate='per_caption' needs one caption id per pair")
        units = np.asarray([f"{i}\x1f{c}" for i, c in zip(images, caption_ids, strict=True)])
    else:
        raise ValueError(f"unknown aggregate {aggregate!r}")
    return _Ctx(images, units, n_resamples, level, seed)


def _unit_rows(values: FloatArray, weights: FloatArray, ctx: _Ctx, mask: NDArray[np.bool_]
               ) -> tuple[FloatArray, FloatArray, NDArray[np.str_]]:
    """(numerator, denominator, image) per unit; the estimate is Σ num / Σ den."""
    v, w, img = values[mask], weights[mask], ctx.images[mask]
    if ctx.units is None:
        return w * v, w, img
    keys, first, inverse = np.unique(ctx.units[mask], return_index=True, return_inverse=True)
    num = np.bincount(inverse, weights=w * v, minlength=keys.size)
    den = np.bincount(inverse, weights=w, minlength=keys.size)
    return num / den, np.ones(keys.size), img[first]


def _estimate(values: FloatArray, weights: FloatArray, ctx: _Ctx, mask: NDArray[np.bool_]) -> Estimate:
    num, den, img = _unit_rows(values, weights, ctx, mask)
    ci = None
    if ctx.n_resamples > 0:
        ci = cluster_bootstrap_ratio_ci(num, den, list(img), n_resamples=ctx.n_resamples,
                                        level=ctx.level, seed=ctx.seed)
    return Estimate(float(num.sum() / den.sum()), ci, int(mask.sum()), int(np.unique(img).size))


def invariance_summary(
    base: ArrayLike,
    paraphrase: ArrayLike,
    image_ids: Sequence[Hashable],
    *,
    kinds: Sequence[str] | None = None,
    caption_ids: Sequence[Hashable] | None = None,
    aggregate: Aggregate = "pooled",
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> InvarianceSummary:
    """E_inv, E_inv^simple, E_inv^adv (LGIP Eq. 2) and the relative increase (Table 4), with CIs.

    ``kinds[i]`` is "simple" or "advanced" for pair i: ``paraphrase.paraphrase_kinds`` gives the paper's
    template-marker labels (App. A.1, Table 4) or the generator's provenance.
    """
    diffs = invariance_gaps(base, paraphrase)
    ones = np.ones_like(diffs)
    ctx = _context(diffs.size, image_ids, caption_ids, aggregate, n_resamples, level, seed)
    overall = _estimate(diffs, ones, ctx, np.ones(diffs.size, dtype=bool))
    if kinds is None:
        return InvarianceSummary(overall, None, None, None)
    if len(kinds) != diffs.size or not set(kinds) <= {"simple", "advanced"}:
        raise ValueError("kinds must give 'simple' or 'advanced' for every pair")
    k = np.asarray(kinds)
    masks = {kind: k == kind for kind in ("simple", "advanced")}
    est = {kind: _estimate(diffs, ones, ctx, m) if m.any() else None for kind, m in masks.items()}
    s_est, a_est = est["simple"], est["advanced"]
    rel = None
    if s_est is not None and a_est is not None and s_est.value > 0:
        rel = _relative_increase_estimate(diffs, ctx, masks["simple"], masks["advanced"],
                                          relative_increase(s_est.value, a_est.value))
    return InvarianceSummary(overall, s_est, a_est, rel)


def _relative_increase_estimate(diffs: FloatArray, ctx: _Ctx, simple: NDArray[np.bool_],
                                advanced: NDArray[np.bool_], value: float) -> Estimate:
    ones = np.ones_like(diffs)
    ns, ds, imgs = _unit_rows(diffs, ones, ctx, simple)
    na, da, imga = _unit_rows(diffs, ones, ctx, advanced)
    cols = np.zeros((ns.size + na.size, 4))
    cols[: ns.size, 0], cols[: ns.size, 1] = ns, ds
    cols[ns.size :, 2], cols[ns.size :, 3] = na, da
    ci = None
    if ctx.n_resamples > 0:
        ci = cluster_bootstrap_sums_ci(
            cols, [*imgs, *imga], lambda t: 100.0 * ((t[:, 2] / t[:, 3]) / (t[:, 0] / t[:, 1]) - 1.0),
            n_resamples=ctx.n_resamples, level=ctx.level, seed=ctx.seed,
        )
    n_images = int(np.unique(np.concatenate([imgs, imga])).size)
    return Estimate(value, ci, int(simple.sum() + advanced.sum()), n_images)


def _flip_stats(gaps: FloatArray, weights: FloatArray | None, ctx: _Ctx, mask: NDArray[np.bool_]
                ) -> FlipStats:
    ones = np.ones_like(gaps)
    pos = flip_detected(gaps)
    wg = wp = None
    if weights is not None:
        wg, wp = _estimate(gaps, weights, ctx, mask), _estimate(pos, weights, ctx, mask)
    return FlipStats(_estimate(gaps, ones, ctx, mask), _estimate(pos, ones, ctx, mask), wg, wp)


def flip_summary(
    base: ArrayLike,
    flip: ArrayLike,
    image_ids: Sequence[Hashable],
    *,
    flip_types: Sequence[str] | None = None,
    strengths: ArrayLike | None = None,
    bins: Sequence[str] | None = None,
    caption_ids: Sequence[Hashable] | None = None,
    aggregate: Aggregate = "pooled",
    bin_scheme: BinScheme = "within-type",
    bin_quantiles: tuple[float, float] = LGIP_BIN_QUANTILES,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> FlipSummary:
    """E_sens (Eq. 4) and PR (Eq. 5) overall, per flip type, strength-weighted and per strength bin.

    For combined perturbations (Table 3) pass s(I, c) as ``base`` and the scores of the paraphrased
    flips as ``flip``. ``strengths`` (from :func:`faithtests.protocols.lgip.strength.flip_strength`) enable
    the weighted metrics (weights max(1e-4, s)) and, unless ``bins`` is given, weak/medium/strong bins at
    the ``bin_quantiles`` of the strengths (LGIP §4.3, Table 5): of each flip type's own strengths
    (``bin_scheme="within-type"``, the default; one type when ``flip_types`` is None) or of all of them
    (``"pooled"``). The paper's Table 5 bins need the text cosines: pass
    ``bins=strength.bin_flips(types, cos, "paper").labels``.
    """
    gaps = sensitivity_gaps(base, flip)
    n = gaps.size
    ctx = _context(n, image_ids, caption_ids, aggregate, n_resamples, level, seed)
    weights = None
    thresholds: Mapping[str, tuple[float, float]] | None = None
    if strengths is not None:
        s = _vec(strengths, "strengths")
        if s.size != n:
            raise ValueError(f"{s.size} strengths for {n} pairs")
        weights = strength_weights(s)
        if bins is None:
            fb = _strength_bins(s, flip_types, bin_scheme, bin_quantiles)
            bins, thresholds = fb.labels, fb.thresholds
    everything = np.ones(n, dtype=bool)
    overall = _flip_stats(gaps, weights, ctx, everything)
    by_type: dict[str, FlipStats] = {}
    types = None
    if flip_types is not None:
        if len(flip_types) != n:
            raise ValueError(f"{len(flip_types)} flip types for {n} pairs")
        types = np.asarray(flip_types)
        for t in dict.fromkeys(flip_types):
            by_type[t] = _flip_stats(gaps, weights, ctx, types == t)
    by_bin: dict[str, FlipStats] = {}
    by_type_bin: dict[tuple[str, str], FlipStats] = {}
    if bins is not None:
        if len(bins) != n:
            raise ValueError(f"{len(bins)} bin labels for {n} pairs")
        b = np.asarray(bins)
        order = [x for x in STRENGTH_BINS if x in set(bins)] + sorted(set(bins) - set(STRENGTH_BINS))
        for label in order:
            by_bin[label] = _flip_stats(gaps, weights, ctx, b == label)
            for t in by_type if types is not None else ():
                m = (b == label) & (types == t)
                if m.any():
                    by_type_bin[(t, label)] = _flip_stats(gaps, weights, ctx, m)
    return FlipSummary(overall, by_type, by_bin, by_type_bin, thresholds)


def _strength_bins(s: FloatArray, flip_types: Sequence[str] | None, scheme: BinScheme,
                   quantiles: tuple[float, float]) -> FlipBins:
    if scheme == "within-type":
        return within_type_bins(s, flip_types if flip_types is not None else [ALL_TYPES] * s.size, quantiles)
    if scheme == "pooled":
        return pooled_bins(s, quantiles)
    raise ValueError(f"bin_scheme {scheme!r} needs the text cosines: pass "
                     f"bins=bin_flips(types, cos, {scheme!r}).labels")
