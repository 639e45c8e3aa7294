"""AC-Bench metrics: pure numpy, predictions in, numbers out (§4.1, App. D.3).

* Decision Alignment Ratio on the conflict subset Q_conf = {x : y_img ≠ y_txt} (Eqs. 1–3): P_img and
  P_txt are the fractions of predictions equal to y_img / y_txt, and P_oth = 1 − P_img − P_txt. A
  prediction is a label, or ``None`` / ``"other"`` for a generation the strict parser could not read
  (``prompts.parse_label``): it matches neither label, so it counts toward P_oth (§4.1 "other otherwise").
* Text Bias Ratio (Eq. 4): TBR = P_txt / (P_txt + P_img); undefined (NaN, for the caller to record) when
  no prediction matches either label.
* Accuracy: the aligned setting, and the image-only / text-only baselines (§4.1, App. C.1).
* Linguistic Sink Score (Eq. 22): per layer l and item i, the answer query's attention to description
  tokens summed over heads and keys, divided by its attention to image tokens summed likewise (a ratio
  of head sums, as Eq. 22 writes it, not a mean of per-head ratios); LSS_l is the mean over items.
Bootstrap CIs come from ``faithtests.stats``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.models.interfaces import TokenSpans
from faithtests.protocols.acbench.records import CONFLICT_SUBSETS

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
#: The sentinel a runner may store for an unparseable answer (``None`` works the same).
OTHER: Final = "other"
Category = Literal["image", "text", "other"]


def answer_category(pred: str | None, y_img: str, y_txt: str) -> Category:
    """§4.1's alignment category: image-aligned if ŷ = y_img, text-aligned if ŷ = y_txt, else other."""
    if pred is not None and pred == y_img:
        return "image"
    if pred is not None and pred == y_txt:
        return "text"
    return "other"


def tbr(p_txt: float, p_img: float) -> float:
    """Text Bias Ratio (Eq. 4) = P_txt / (P_txt + P_img); NaN when P_txt + P_img = 0 (no prediction
    matched either intended signal: the ratio is undefined, not 0.5)."""
    den = p_txt + p_img
    return float("nan") if den == 0 else p_txt / den


@dataclass(frozen=True)
class Shares:
    """Eqs. 1–4 on the n conflict items (y_img ≠ y_txt) of the predictions given; NaN when n = 0."""

    p_img: float
    p_txt: float
    p_oth: float
    n: int

    @property
    def tbr(self) -> float:
        return tbr(self.p_txt, self.p_img)


def _check_lengths(name: str, *seqs: Sequence[object]) -> None:
    if len({len(s) for s in seqs}) > 1:
        raise ValueError(f"{name}: sequences of different lengths {[len(s) for s in seqs]}")


def answer_shares(pred: Sequence[str | None], y_img: Sequence[str], y_txt: Sequence[str | None]) -> Shares:
    """P_img, P_txt, P_oth (Eqs. 1–3) over Q_conf: the rows with y_txt given and y_txt ≠ y_img (the
    others are not conflict items and are left out by definition, not by choice)."""
    _check_lengths("answer_shares", pred, y_img, y_txt)
    conf = [(p, a, b) for p, a, b in zip(pred, y_img, y_txt, strict=True) if b is not None and a != b]
    n = len(conf)
    if n == 0:
        return Shares(float("nan"), float("nan"), float("nan"), 0)
    cats = [answer_category(p, a, b) for p, a, b in conf]
    # each share counted on its own (1 − P_img − P_txt can round to −1e-17)
    return Shares(cats.count("image") / n, cats.count("text") / n, cats.count("other") / n, n)


def by_subset(
    pred: Sequence[str | None],
    y_img: Sequence[str],
    y_txt: Sequence[str | None],
    subsets: Sequence[str],
) -> dict[str, Shares]:
    """``answer_shares`` per conflict subset present (Tables 1, 5, 6; TBR per subset: Table 7), in the
    paper's order (S-Adj, S-Opp, O-Obj, O-Attr, O-Beh)."""
    _check_lengths("by_subset", pred, y_img, y_txt, subsets)
    out: dict[str, Shares] = {}
    for s in CONFLICT_SUBSETS:
        rows = [i for i, x in enumerate(subsets) if x == s]
        if rows:
            out[s] = answer_shares(
                [pred[i] for i in rows], [y_img[i] for i in rows], [y_txt[i] for i in rows]
            )
    return out


def accuracy(pred: Sequence[str | None], gold: Sequence[str]) -> float:
    """Fraction of predictions equal to the gold label (aligned: y_img; image-only: y_img; text-only:
    y_txt; App. C.1, Table 4); an unparseable answer is wrong. NaN for no items."""
    _check_lengths("accuracy", pred, gold)
    if not gold:
        return float("nan")
    return sum(p is not None and p == g for p, g in zip(pred, gold, strict=True)) / len(gold)


def aligned_accuracy(pred: Sequence[str | None], y_img: Sequence[str], subsets: Sequence[str]) -> float:
    """Accuracy on the aligned (EA) rows: the "Align acc" column of Tables 1 and 5."""
    _check_lengths("aligned_accuracy", pred, y_img, subsets)
    rows = [i for i, s in enumerate(subsets) if s == "aligned"]
    return accuracy([pred[i] for i in rows], [y_img[i] for i in rows])


# ------------------------------------------------------------------------------------------ LSS
def length_normalised(logprobs: ArrayLike, token_counts: ArrayLike) -> FloatArray:
    """Each label's mean log-probability per token, log p(label) / |label tokens| ([N, 8] / [N, 8] or
    [8]): the length-normalised alternative to scoring whole labels (the default, Eqs. 1–4 take the
    argmax of the whole-label log-probability, which favours labels of fewer tokens: every extra token
    adds a negative term). Not in the paper (it generates); recorded, not gated."""
    lp = np.asarray(logprobs, dtype=np.float64)
    n = np.broadcast_to(np.asarray(token_counts, dtype=np.float64), lp.shape)
    if (n < 1).any():
        raise ValueError("every label has at least one token")
    out: FloatArray = lp / n
    return out


def masks_from_spans(spans: TokenSpans, width: int) -> tuple[BoolArray, BoolArray]:
    """(image mask, description mask), each [N, width] bool, from the spans of an ``Attentions`` result.

    Image keys are the exact runs of image tokens (``image_runs``), else the ``image`` range; keys past
    ``width`` are dropped (a span never extends past its row's real tokens)."""
    n = len(spans.length)
    image = np.zeros((n, width), dtype=np.bool_)
    desc = np.zeros((n, width), dtype=np.bool_)
    for row in range(n):
        runs = spans.image_runs[row] if spans.image_runs else [spans.image[row]]
        for a, b in runs:
            image[row, a : min(b, width)] = True
        a, b = spans.description[row]
        desc[row, a : min(b, width)] = True
    return image, desc


@dataclass(frozen=True)
class LssCurve:
    """LSS (Eq. 22): ``per_item`` [L, N] (NaN where the item's image mass is 0 in that layer, i.e. the
    ratio is undefined), ``mean`` [L] over the items where it is defined, and ``undefined`` [L] how many
    items were left out of each layer's mean (reported, never silently dropped)."""

    per_item: FloatArray
    mean: FloatArray
    undefined: NDArray[np.int64]


def lss_items(weights: ArrayLike, image_mask: ArrayLike, desc_mask: ArrayLike) -> FloatArray:
    """Eq. 22's inner ratio for one layer: ``weights`` [N, heads, keys] (the answer query's post-softmax
    attention), masks [N, keys] → [N] = Σ_h Σ_{k∈T_desc} A / Σ_h Σ_{k∈V} A; NaN where the denominator
    is 0. A row with an empty image or description mask is a caller error (no span to measure)."""
    w = np.asarray(weights, dtype=np.float64)
    img = np.asarray(image_mask, dtype=np.bool_)
    desc = np.asarray(desc_mask, dtype=np.bool_)
    if w.ndim != 3 or img.shape != (w.shape[0], w.shape[2]) or desc.shape != img.shape:
        raise ValueError(
            f"lss: weights [N, heads, keys] and masks [N, keys], got {w.shape}, {img.shape}, {desc.shape}"
        )
    if not (img.any(axis=1).all() and desc.any(axis=1).all()):
        raise ValueError("lss: every item needs image tokens and description tokens")
    if (img & desc).any():
        raise ValueError("lss: a key is marked both image and description")
    head_sum = w.sum(axis=1)  # [N, keys]: Eq. 22 sums over heads before dividing
    num = (head_sum * desc).sum(axis=1)
    den = (head_sum * img).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def lss(
    weights: Sequence[ArrayLike] | NDArray[np.floating[Any]], image_mask: ArrayLike, desc_mask: ArrayLike
) -> LssCurve:
    """LSS_l (Eq. 22) for every layer: ``weights`` is one [N, heads, keys] array per layer (e.g.
    ``Attentions.weights`` as numpy) or one [L, N, heads, keys] array; masks [N, keys] as from
    :func:`masks_from_spans`."""
    layers = [lss_items(w, image_mask, desc_mask) for w in weights]
    if not layers:
        raise ValueError("lss: no layers")
    return lss_curve(np.stack(layers))


def lss_curve(per_item: ArrayLike) -> LssCurve:
    """The :class:`LssCurve` of per-item ratios [L, N] (e.g. chunks of :func:`lss` joined along items):
    each layer's mean over the items where it is defined, and how many were not."""
    x = np.asarray(per_item, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"lss_curve: per-item LSS must be [layers, items], got shape {x.shape}")
    defined = np.isfinite(x)
    count = defined.sum(axis=1)
    total = np.where(defined, x, 0.0).sum(axis=1)
    mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return LssCurve(per_item=x, mean=mean, undefined=(~defined).sum(axis=1).astype(np.int64))
