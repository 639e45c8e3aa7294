"""IMAVB behavioural metrics: pure numpy, canonical option order (column c = option c, E = 4, F = 5).

* answers: argmax of the six canonical logits; an exact tie at the top is no answer (-1, counted wrong
  and reported, never guessed).
* accuracy per split (std_v, mis_v, std_a, mis_a; §3 "Metrics"), per order: the fixed order (Table 1
  "Fixed Order") and the mean over K shuffles (Table 1 "Shuffled", App. D).
* Bal (Eq. 1) = ½((std_v + std_a)/2 + (mis_v + mis_a)/2); with no audio splits, ½(std_v + mis_v)
  ("vision only").
* vision − audio gaps (:func:`modality_gap`): the §4.3 probe asymmetry and Table 14's mis_v − mis_a,
  with a CI from one bootstrap over stimuli (a clip's vision and audio rows drawn together).
* CIs: percentile bootstrap over stimuli (all variants of a clip resampled together), B configurable
  (the paper's 10,000 for final numbers, §3); resamples that draw no row of a split are left out of
  the CIs and counted (``SplitScores.empty_resamples``); the shuffle spread (Table 1's ±) is
  1.96·sd/√K over the K shuffle accuracies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.stats import resample_counts

FloatArray = NDArray[np.float64]
TIE = -1


def answers(logits: ArrayLike) -> NDArray[np.int64]:
    """Canonical answer index per row of ``logits`` [..., 6]; ``TIE`` (-1) where the top logit is shared."""
    x = np.asarray(logits, dtype=np.float64)
    if x.shape[-1] != 6 or not np.isfinite(x).all():
        raise ValueError(f"answers: need finite [..., 6] logits, got shape {x.shape}")
    top = x.max(axis=-1, keepdims=True)
    return np.asarray(np.where((x == top).sum(axis=-1) > 1, TIE, x.argmax(axis=-1)), dtype=np.int64)


def tie_count(logits: ArrayLike) -> tuple[int, int]:
    """(answers with a tied top logit, answers) over ``logits`` [..., 6]: ties are counted wrong and
    reported (``faith.invalid("tied top logit", ...)``), never guessed."""
    a = answers(logits)
    return int((a == TIE).sum()), int(a.size)


def correct(ans: ArrayLike, gold: ArrayLike) -> NDArray[np.bool_]:
    """``ans`` [N, ...] against canonical gold indices [N] (broadcast over trailing axes)."""
    a = np.asarray(ans)
    g = np.asarray(gold).reshape((-1,) + (1,) * (a.ndim - 1))
    return np.asarray(a == g, dtype=np.bool_)


def majority_share(labels: ArrayLike) -> float:
    """Chance for a probe of binary ``labels``: the accuracy of always answering the majority class,
    max(p, 1 - p) with p the share of 1s (the bar a probe's margin is measured from, App. L)."""
    y = np.asarray(labels, dtype=np.float64)
    if y.size == 0:
        raise ValueError("majority_share: no labels")
    p = float(y.mean())
    return max(p, 1.0 - p)


def balanced_accuracy(
    std_v: float, mis_v: float, std_a: float | None = None, mis_a: float | None = None
) -> float:
    """Bal (IMAVB Eq. 1) = ½((std_v + std_a)/2 + (mis_v + mis_a)/2); vision only when both audio
    accuracies are ``None``: ½(std_v + mis_v)."""
    if (std_a is None) != (mis_a is None):
        raise ValueError("balanced_accuracy: give both audio accuracies or neither")
    if std_a is None or mis_a is None:
        return 0.5 * (std_v + mis_v)
    return 0.5 * ((std_v + std_a) / 2.0 + (mis_v + mis_a) / 2.0)


def shuffle_spread(per_shuffle: ArrayLike) -> float:
    """Half-width of the 95% interval over shuffles, 1.96·sd/√K (sample sd; Table 1's "±"); NaN
    (undefined, not 0) with fewer than two shuffles."""
    x = np.asarray(per_shuffle, dtype=np.float64)
    if x.size < 2:
        return float("nan")
    return float(1.96 * x.std(ddof=1) / np.sqrt(x.size))


def _index(labels: Sequence[object]) -> tuple[NDArray[np.int64], int]:
    _, inv = np.unique(np.asarray([str(s) for s in labels]), return_inverse=True)
    return inv.astype(np.int64), int(inv.max()) + 1 if inv.size else 0


@dataclass(frozen=True)
class SplitScores:
    """Per split: accuracy (mean over the orders given), its bootstrap CI over stimuli, n items."""

    acc: dict[str, float]
    ci: dict[str, tuple[float, float]]
    n: dict[str, int]
    bal: float
    bal_ci: tuple[float, float]
    vision_only: bool
    #: resamples that drew no row of some split (its accuracy undefined there): left out of the CIs and
    #: counted here, so the suite can report them (possible when a stimulus lacks some split)
    empty_resamples: int = 0
    n_resamples: int = 0


def split_scores(
    item_correct: ArrayLike,
    splits: Sequence[str],
    stimuli: Sequence[object],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> SplitScores:
    """Accuracy per split and Bal (Eq. 1) with CIs from one joint bootstrap over stimuli.

    ``item_correct`` [N]: each record's correctness (a float in [0, 1] when averaged over shuffles).
    Resampling stimuli keeps a clip's standard and misleading variants together, so Bal's CI accounts
    for their dependence. A split absent from ``splits`` is absent from the result.
    """
    c = np.asarray(item_correct, dtype=np.float64)
    if c.ndim != 1 or c.size != len(splits) or c.size != len(stimuli) or c.size == 0:
        raise ValueError(f"split_scores: {c.shape} values, {len(splits)} splits, {len(stimuli)} stimuli")
    if not np.isfinite(c).all():
        raise ValueError("split_scores: non-finite correctness; count those records invalid first")
    sidx, k = _index(stimuli)
    names = [
        s
        for s in ("standard_vision", "misleading_vision", "standard_audio", "misleading_audio")
        if s in set(splits)
    ]
    draws = resample_counts(k, n_resamples, seed)  # [R, k]: times each stimulus is drawn
    acc: dict[str, float] = {}
    boot: dict[str, FloatArray] = {}
    n: dict[str, int] = {}
    empty = np.zeros(n_resamples, dtype=np.bool_)
    for name in names:
        m = np.array([s == name for s in splits])
        sums = np.bincount(sidx[m], weights=c[m], minlength=k)
        cnts = np.bincount(sidx[m], minlength=k).astype(np.float64)
        acc[name], n[name] = float(c[m].mean()), int(m.sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            drawn = draws @ cnts
            boot[name] = draws @ sums / drawn
        empty |= drawn == 0
    alpha = (1.0 - level) / 2.0

    def ci(x: FloatArray) -> tuple[float, float]:
        x = x[np.isfinite(x)]
        if x.size == 0:
            return float("nan"), float("nan")
        lo, hi = np.quantile(x, [alpha, 1.0 - alpha])
        return float(lo), float(hi)

    sv, mv = acc.get("standard_vision"), acc.get("misleading_vision")
    sa, ma = acc.get("standard_audio"), acc.get("misleading_audio")
    vision_only = sa is None and ma is None
    if sv is None or mv is None:
        raise ValueError("split_scores: Bal needs both vision splits")
    bal = balanced_accuracy(sv, mv, sa, ma)
    if vision_only:
        bal_boot = 0.5 * (boot["standard_vision"] + boot["misleading_vision"])
    else:
        bal_boot = 0.5 * (
            (boot["standard_vision"] + boot["standard_audio"]) / 2
            + (boot["misleading_vision"] + boot["misleading_audio"]) / 2
        )
    return SplitScores(
        acc,
        {s: ci(b) for s, b in boot.items()},
        n,
        bal,
        ci(bal_boot),
        vision_only,
        int(empty.sum()),
        n_resamples,
    )


def slice_accuracy(item_correct: ArrayLike, labels: Sequence[str | None]) -> dict[str, tuple[float, int]]:
    """Accuracy and n per label (question type, misleading subcategory; App. H); ``None`` labels skipped."""
    c = np.asarray(item_correct, dtype=np.float64)
    out: dict[str, tuple[float, int]] = {}
    for lab in sorted({x for x in labels if x is not None}):
        m = np.array([x == lab for x in labels])
        out[lab] = (float(c[m].mean()), int(m.sum()))
    return out


def rejection_rates(ans: ArrayLike) -> dict[str, float]:
    """Share of answers E, F, and E or F (over-rejection on standard items, under-rejection on misleading)."""
    a = np.asarray(ans).reshape(-1)
    if a.size == 0:
        raise ValueError("rejection_rates: no answers")
    return {
        "E": float((a == 4).mean()),
        "F": float((a == 5).mean()),
        "E_or_F": float(np.isin(a, (4, 5)).mean()),
    }


def per_order_accuracy(correct_by_order: ArrayLike, mask: ArrayLike) -> FloatArray:
    """Accuracy of each order (column) over the rows in ``mask``: [N, S] → [S]."""
    c = np.asarray(correct_by_order, dtype=np.float64)
    m = np.asarray(mask, dtype=np.bool_)
    return np.asarray(c[m].mean(axis=0), dtype=np.float64)


def split_mask(splits: Sequence[str], name: str) -> NDArray[np.bool_]:
    return np.array([s == name for s in splits], dtype=np.bool_)


@dataclass(frozen=True)
class ModalityGap:
    """Vision minus audio: ``gap`` = mean(vision values) − mean(audio values), its percentile bootstrap
    CI over stimuli, the rows of each side, and resamples that drew no row of a side (left out)."""

    gap: float
    ci: tuple[float, float]
    n_vision: int
    n_audio: int
    empty_resamples: int = 0


def modality_gap(
    vision: ArrayLike,
    vision_stimuli: Sequence[object],
    audio: ArrayLike,
    audio_stimuli: Sequence[object],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> ModalityGap:
    """mean(``vision``) − mean(``audio``) with a CI from one bootstrap over stimuli: a stimulus drawn
    brings its vision rows and its audio rows together (a clip's four variants share it), so the CI
    accounts for their dependence. Used for the §4.3 asymmetry (per-row held-out probe hits: vision-
    grounded minus audio-grounded probe accuracy, "audio-grounded probes underperform") and for Table
    14's "Vision–Audio Gap" row (mis_v − mis_a)."""
    v, a = np.asarray(vision, dtype=np.float64), np.asarray(audio, dtype=np.float64)
    if v.ndim != 1 or a.ndim != 1 or v.size != len(vision_stimuli) or a.size != len(audio_stimuli):
        raise ValueError("modality_gap: one value per row and one stimulus per value, on both sides")
    if v.size == 0 or a.size == 0 or not (np.isfinite(v).all() and np.isfinite(a).all()):
        raise ValueError("modality_gap: both sides need finite values")
    sidx, k = _index([*vision_stimuli, *audio_stimuli])
    sv, sa = sidx[: v.size], sidx[v.size :]
    draws = resample_counts(k, n_resamples, seed)  # [R, k]
    with np.errstate(invalid="ignore", divide="ignore"):
        bv = draws @ np.bincount(sv, weights=v, minlength=k) / (draws @ np.bincount(sv, minlength=k))
        ba = draws @ np.bincount(sa, weights=a, minlength=k) / (draws @ np.bincount(sa, minlength=k))
    boot = bv - ba
    ok = np.isfinite(boot)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(boot[ok], [alpha, 1.0 - alpha]) if ok.any() else (np.nan, np.nan)
    return ModalityGap(float(v.mean() - a.mean()), (float(lo), float(hi)), int(v.size), int(a.size),
                       int((~ok).sum()))
