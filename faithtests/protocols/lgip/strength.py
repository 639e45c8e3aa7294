"""Flip strength and strength bins (LGIP §4.3, Table 5).

    s = a · prior(type) + (1 − a) · clip01(1 − cos_text(c, c†)),   bins: weak <= q25 < medium <= q75 < strong

§4.3 has no equation number for s; it gives only the ordering of the type prior (colour < number <
object) and "global quantiles". The numbers come from the public code
(``rebuttal_enhanced_lgip_by_transformation.py``): prior colour 0.25, number 0.55, object 1.00, a = 0.5,
quantiles 0.25/0.75 with linear interpolation (``torch.quantile`` = ``numpy.quantile`` default), bin
rule ``s <= q_low`` weak, ``s <= q_high`` medium, else strong. An unknown type is an error here; the
public code silently falls back to a prior of 0.6.

Bin schemes (:data:`BIN_SCHEMES`, :func:`bin_flips`):

- ``within-type`` (default): quantiles of each flip type's own strengths. The prior is constant within a
  type, so these bins rank flips by text distance inside their type; every bin holds about a quarter /
  half / quarter of each type. Pooled bins cannot do that: the prior steps (0.125 / 0.275 / 0.5 after
  weighting) outweigh the text-distance term for most flips, so pooled bins sort flips by type and
  their PRs repeat the per-type PRs.
- ``paper``: what the public script computes for Table 5. It reads every flip twice, once typed (from
  ``diff_caps_<type>``) and once as type ``"all"`` with prior 0.6 (from ``diff_caps``), takes the
  quantiles of all those strengths together (the "doubled, mixed set"), and bins each type's flips by
  its own strength against them. The all-types row of Table 5 is the ``"all"`` entry: every flip binned
  by a·0.6 + (1 − a)·d. So here: thresholds from the doubled set, each flip binned by its ``"all"``
  strength. Bins can be empty (the weak bin whenever the typed colour and number strengths fill the
  lowest quarter of the doubled set, since the ``"all"`` strength is never below a·0.6 = 0.3).
- ``pooled``: the literal one-strength-per-flip reading of §4.3: quantiles over every flip's typed
  strength, each flip counted once. This collapses into flip types (see above).

cos_text is the cosine between the scorer's own text embeddings of c and c† (model specific), so
strengths and bins are per model. Embeddings come in as arrays or through an ``embed`` callable; this
module never calls a model itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
StrengthBin = Literal["weak", "medium", "strong"]
STRENGTH_BINS: tuple[StrengthBin, ...] = ("weak", "medium", "strong")

LGIP_TYPE_PRIOR: Mapping[str, float] = MappingProxyType({"color": 0.25, "number": 0.55, "object": 1.0})
LGIP_ALPHA = 0.5
LGIP_BIN_QUANTILES = (0.25, 0.75)
#: The public code's prior for a flip of type "all" (every flip read again from ``diff_caps``).
LGIP_ALL_PRIOR = 0.6

BinScheme = Literal["within-type", "paper", "pooled"]
BIN_SCHEMES: tuple[BinScheme, ...] = get_args(BinScheme)
#: The thresholds key of a scheme whose quantiles are over all flips.
ALL_TYPES = "all"


def text_cosine(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """Row-wise cosine of two [N, D] embedding arrays (rows are L2-normalised here)."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 2 or x.shape != y.shape:
        raise ValueError(f"text_cosine: need two [N, D] arrays of one shape, got {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("text_cosine: non-finite embedding values")
    nx = np.linalg.norm(x, axis=1)
    ny = np.linalg.norm(y, axis=1)
    if np.any(nx == 0) or np.any(ny == 0):
        raise ValueError("text_cosine: zero-norm embedding row")
    return np.asarray(np.sum(x * y, axis=1) / (nx * ny), dtype=np.float64)


def flip_strength(
    flip_types: Sequence[str],
    text_cos: ArrayLike,
    *,
    type_prior: Mapping[str, float] = LGIP_TYPE_PRIOR,
    alpha: float = LGIP_ALPHA,
) -> FloatArray:
    """s = a·prior(type) + (1 − a)·clip01(1 − cos_text(c, c†)) per flip (LGIP §4.3)."""
    cos = np.asarray(text_cos, dtype=np.float64).reshape(-1)
    if len(flip_types) != cos.shape[0]:
        raise ValueError(f"flip_strength: {len(flip_types)} types but {cos.shape[0]} cosines")
    if not np.all(np.isfinite(cos)):
        raise ValueError("flip_strength: non-finite cosine")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"flip_strength: alpha must be in [0, 1], got {alpha}")
    unknown = sorted({t for t in flip_types if t not in type_prior})
    if unknown:
        raise KeyError(f"flip_strength: no type prior for {unknown}; known: {sorted(type_prior)}")
    prior = np.array([type_prior[t] for t in flip_types], dtype=np.float64)
    dist = np.clip(1.0 - cos, 0.0, 1.0)
    return np.asarray(np.clip(alpha * prior + (1.0 - alpha) * dist, 0.0, 1.0), dtype=np.float64)


def text_cosines_from_texts(originals: Sequence[str], flipped: Sequence[str],
                            embed: Callable[[list[str]], ArrayLike]) -> FloatArray:
    """cos_text(c, c†) per pair with embeddings from ``embed`` (called once, on the unique texts)."""
    if len(originals) != len(flipped):
        raise ValueError("text_cosines_from_texts: originals and flipped differ in length")
    unique = list(dict.fromkeys([*originals, *flipped]))
    emb = np.asarray(embed(unique), dtype=np.float64)
    if emb.ndim != 2 or emb.shape[0] != len(unique):
        raise ValueError(f"embed returned shape {emb.shape} for {len(unique)} texts")
    row = {t: i for i, t in enumerate(unique)}
    return text_cosine(emb[[row[t] for t in originals]], emb[[row[t] for t in flipped]])


def flip_strength_from_texts(
    originals: Sequence[str],
    flipped: Sequence[str],
    flip_types: Sequence[str],
    embed: Callable[[list[str]], ArrayLike],
    *,
    type_prior: Mapping[str, float] = LGIP_TYPE_PRIOR,
    alpha: float = LGIP_ALPHA,
) -> FloatArray:
    """Strengths with text embeddings from ``embed`` (called once, on the unique texts)."""
    if not len(originals) == len(flipped) == len(flip_types):
        raise ValueError("flip_strength_from_texts: originals, flipped and flip_types differ in length")
    cos = text_cosines_from_texts(originals, flipped, embed)
    return flip_strength(flip_types, cos, type_prior=type_prior, alpha=alpha)


def strength_thresholds(strengths: ArrayLike, quantiles: tuple[float, float] = LGIP_BIN_QUANTILES
                        ) -> tuple[float, float]:
    """(q_low, q_high): global quantiles of all strengths, linear interpolation (LGIP §4.3)."""
    s = np.asarray(strengths, dtype=np.float64).reshape(-1)
    if s.size == 0:
        raise ValueError("strength_thresholds: no strengths")
    if not np.all(np.isfinite(s)):
        raise ValueError("strength_thresholds: non-finite strength")
    lo, hi = quantiles
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"strength_thresholds: bad quantiles {quantiles}")
    q = np.quantile(s, [lo, hi])
    return float(q[0]), float(q[1])


def strength_bins(strengths: ArrayLike, thresholds: tuple[float, float] | None = None,
                  *, quantiles: tuple[float, float] = LGIP_BIN_QUANTILES
                  ) -> tuple[list[StrengthBin], tuple[float, float]]:
    """Bin label per flip: weak if s <= q_low, medium if s <= q_high, else strong (public-code rule).

    ``thresholds`` default to :func:`strength_thresholds` of the same strengths.
    """
    s = np.asarray(strengths, dtype=np.float64).reshape(-1)
    lo, hi = thresholds if thresholds is not None else strength_thresholds(s, quantiles)
    labels: list[StrengthBin] = ["weak" if v <= lo else "medium" if v <= hi else "strong" for v in s]
    return labels, (lo, hi)


@dataclass(frozen=True)
class FlipBins:
    """Bin label per flip and the (q_low, q_high) they were cut at: per flip type for ``within-type``,
    under :data:`ALL_TYPES` for ``paper`` and ``pooled``."""

    scheme: BinScheme
    labels: tuple[StrengthBin, ...]
    thresholds: Mapping[str, tuple[float, float]]


def within_type_bins(strengths: ArrayLike, flip_types: Sequence[str],
                     quantiles: tuple[float, float] = LGIP_BIN_QUANTILES) -> FlipBins:
    """Bins cut at the quantiles of each flip type's own strengths (the ``within-type`` scheme)."""
    s = np.asarray(strengths, dtype=np.float64).reshape(-1)
    if len(flip_types) != s.size:
        raise ValueError(f"within_type_bins: {len(flip_types)} types for {s.size} strengths")
    types = np.asarray(flip_types, dtype=object)
    labels: list[StrengthBin] = ["weak"] * s.size
    thresholds: dict[str, tuple[float, float]] = {}
    for t in dict.fromkeys(flip_types):
        idx = np.flatnonzero(types == t)
        part, thresholds[t] = strength_bins(s[idx], quantiles=quantiles)
        for i, label in zip(idx, part, strict=True):
            labels[int(i)] = label
    return FlipBins("within-type", tuple(labels), MappingProxyType(thresholds))


def pooled_bins(strengths: ArrayLike, quantiles: tuple[float, float] = LGIP_BIN_QUANTILES) -> FlipBins:
    """Bins cut at the quantiles of all strengths, each flip counted once (the ``pooled`` scheme)."""
    labels, lo_hi = strength_bins(strengths, quantiles=quantiles)
    return FlipBins("pooled", tuple(labels), MappingProxyType({ALL_TYPES: lo_hi}))


def paper_bins(flip_types: Sequence[str], text_cos: ArrayLike, *,
               type_prior: Mapping[str, float] = LGIP_TYPE_PRIOR, alpha: float = LGIP_ALPHA,
               all_prior: float = LGIP_ALL_PRIOR,
               quantiles: tuple[float, float] = LGIP_BIN_QUANTILES) -> FlipBins:
    """The public script's all-types bins (Table 5): thresholds at the quantiles of the typed strengths
    and the ``"all"`` strengths a·all_prior + (1 − a)·clip01(1 − cos) together; each flip binned by its
    ``"all"`` strength."""
    typed = flip_strength(flip_types, text_cos, type_prior=type_prior, alpha=alpha)
    untyped = flip_strength([ALL_TYPES] * typed.size, text_cos, type_prior={ALL_TYPES: all_prior},
                            alpha=alpha)
    lo_hi = strength_thresholds(np.concatenate([typed, untyped]), quantiles)
    labels, _ = strength_bins(untyped, lo_hi)
    return FlipBins("paper", tuple(labels), MappingProxyType({ALL_TYPES: lo_hi}))


def bin_flips(flip_types: Sequence[str], text_cos: ArrayLike, scheme: BinScheme = "within-type", *,
              type_prior: Mapping[str, float] = LGIP_TYPE_PRIOR, alpha: float = LGIP_ALPHA,
              quantiles: tuple[float, float] = LGIP_BIN_QUANTILES) -> FlipBins:
    """Weak / medium / strong per flip under ``scheme`` (module doc); strengths from ``text_cos``."""
    if scheme == "paper":
        return paper_bins(flip_types, text_cos, type_prior=type_prior, alpha=alpha, quantiles=quantiles)
    s = flip_strength(flip_types, text_cos, type_prior=type_prior, alpha=alpha)
    if scheme == "within-type":
        return within_type_bins(s, flip_types, quantiles)
    if scheme == "pooled":
        return pooled_bins(s, quantiles)
    raise ValueError(f"unknown bin scheme {scheme!r}; one of {BIN_SCHEMES}")
