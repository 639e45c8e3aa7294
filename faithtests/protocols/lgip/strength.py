"""Flip strength and strength bins (LGIP §4.3, Table 5).

    s = a · prior(type) + (1 − a) · clip01(1 − cos_text(c, c†)),   bins: weak <= q25 < medium <= q75 < strong

The paper gives only the ordering of the type prior (colour < number < object) and "global quantiles".
The numbers come from the public code (``rebuttal_enhanced_lgip_by_transformation.py``): prior colour
0.25, number 0.55, object 1.00, a = 0.5, quantiles 0.25/0.75 over all flips of a model, linear
interpolation (``torch.quantile`` = ``numpy.quantile`` default). An unknown type is an error here; the
public code silently falls back to a prior of 0.6.

cos_text is the cosine between the scorer's own text embeddings of c and c† (model specific), so
strengths and bins are per model. Embeddings come in as arrays or through an ``embed`` callable; this
module never calls a model itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
StrengthBin = Literal["weak", "medium", "strong"]
STRENGTH_BINS: tuple[StrengthBin, ...] = ("weak", "medium", "strong")

LGIP_TYPE_PRIOR: Mapping[str, float] = MappingProxyType({"color": 0.25, "number": 0.55, "object": 1.0})
LGIP_ALPHA = 0.5
LGIP_BIN_QUANTILES = (0.25, 0.75)


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
    unique = list(dict.fromkeys([*originals, *flipped]))
    emb = np.asarray(embed(unique), dtype=np.float64)
    if emb.ndim != 2 or emb.shape[0] != len(unique):
        raise ValueError(f"embed returned shape {emb.shape} for {len(unique)} texts")
    row = {t: i for i, t in enumerate(unique)}
    cos = text_cosine(emb[[row[t] for t in originals]], emb[[row[t] for t in flipped]])
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
