"""S3E forced-choice behaviour from A/B option logits (S3E §3.2, App. A, App. H, Table 6, App. F/Table 12).

Logit arrays follow ``s3e_layout``: ``[items, orders, letters]`` for one role (e.g. the stress trials),
with order 0 = orig (c+ shown as A) and order 1 = swap (c+ shown as B). The decision is the argmax of
the two letter logits (no sampling, App. M.1). An exact tie is not a choice: it decides neither letter,
counts as "c+ not chosen" and is reported in ``BehaviourSummary.n_ties`` rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.protocols.s3e.layout import POSITIVE_LETTER

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int8]

TIE = -1


def _logits(x: ArrayLike, name: str, *, with_orders: bool) -> FloatArray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim < 1 or a.shape[-1] != 2:
        raise ValueError(f"{name}: last axis must hold the (A, B) logits, got shape {a.shape}")
    if with_orders and (a.ndim < 2 or a.shape[-2] != 2):
        raise ValueError(f"{name}: expected [..., orders=2, letters=2], got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        where = np.argwhere(~np.isfinite(a))[0].tolist()
        raise ValueError(f"{name}: non-finite logit at index {where}; count such trials as invalid first")
    return a


def ab_decisions(logits: ArrayLike) -> IntArray:
    """A/B decision per trial (S3E §3.2, App. M.1): 0 = A, 1 = B, ``TIE`` (-1) on an exact tie.

    ``logits``: ``[..., 2]`` with the (A, B) letter logits on the last axis.
    """
    a = _logits(logits, "ab_decisions", with_orders=False)
    out = np.where(a[..., 1] > a[..., 0], 1, 0).astype(np.int8)
    out[a[..., 0] == a[..., 1]] = TIE
    return out


def positive_chosen(logits: ArrayLike) -> BoolArray:
    """Whether c+ was chosen in each order (Eqs. 1, 9, 10): A in orig, B in swap.

    ``logits``: ``[..., orders=2, letters=2]`` → bool ``[..., 2]``. Ties count as not chosen.
    """
    a = _logits(logits, "positive_chosen", with_orders=True)
    d = ab_decisions(a)
    return np.stack([d[..., 0] == POSITIVE_LETTER[0], d[..., 1] == POSITIVE_LETTER[1]], axis=-1)


def strict_correct(stress_logits: ArrayLike) -> BoolArray:
    """Stress-trial strict-correct mask (S3E §3.2): c+ chosen over c_stress in BOTH orders.

    ``stress_logits``: ``[items, orders=2, letters=2]`` → bool ``[items]``.
    """
    return np.asarray(positive_chosen(stress_logits).all(axis=-1), dtype=np.bool_)


@dataclass(frozen=True)
class BehaviourSummary:
    """Stress-trial behaviour (Table 6 Orig./Swap/Strict; Table 13 pair accuracy; Table 14 A-rates)."""

    n: int
    acc_orig: float
    acc_swap: float
    pair_acc: float  # mean over both orders of "c+ chosen" (Table 13 "Pair Acc.")
    strict_rate: float
    n_strict: int
    a_rate_orig: float  # share of trials answered "A" (position bias at a glance, Table 14)
    a_rate_swap: float
    order_gap: float  # acc_orig - acc_swap (Table 14 "Gap")
    n_ties: int  # trials (item, order) with an exact A/B tie, counted as wrong


def stress_behaviour(stress_logits: ArrayLike) -> BehaviourSummary:
    """Per-order accuracy and strict-correct rate on stress trials (S3E §3.2, Table 6, App. H).

    ``stress_logits``: ``[items, orders=2, letters=2]``. Every item must be a valid trial: drop and
    count invalid ones (e.g. failed forward) before calling.
    """
    a = _logits(stress_logits, "stress_behaviour", with_orders=True)
    if a.ndim != 3 or a.shape[0] == 0:
        raise ValueError(f"stress_behaviour: expected non-empty [items, 2, 2], got shape {a.shape}")
    chosen = positive_chosen(a)
    d = ab_decisions(a)
    strict = chosen.all(axis=-1)
    acc_o, acc_s = float(chosen[:, 0].mean()), float(chosen[:, 1].mean())
    return BehaviourSummary(
        n=int(a.shape[0]),
        acc_orig=acc_o,
        acc_swap=acc_s,
        pair_acc=float(chosen.mean()),
        strict_rate=float(strict.mean()),
        n_strict=int(strict.sum()),
        a_rate_orig=float((d[:, 0] == 0).mean()),
        a_rate_swap=float((d[:, 1] == 0).mean()),
        order_gap=acc_o - acc_s,
        n_ties=int((d == TIE).sum()),
    )


def positive_margin(logits: ArrayLike) -> FloatArray:
    """Expected-logit margin per order: logit(letter of c+) − logit(letter of the candidate).

    S3E App. F / Table 12 "expected-logit margin": the margin of the expected answer (c+) over the
    other option. ``logits``: ``[..., orders=2, letters=2]`` → ``[..., 2]``. For controls (pres/lex) c+
    is not a required answer (§3.2) but the same signed margin is well defined.
    """
    a = _logits(logits, "positive_margin", with_orders=True)
    orig = a[..., 0, POSITIVE_LETTER[0]] - a[..., 0, 1 - POSITIVE_LETTER[0]]
    swap = a[..., 1, POSITIVE_LETTER[1]] - a[..., 1, 1 - POSITIVE_LETTER[1]]
    return np.stack([orig, swap], axis=-1)


@dataclass(frozen=True)
class MarginMatch:
    """The margin-matched half (S3E §6.3, Table 8, App. F Table 12)."""

    mask: BoolArray  # [items]: kept items
    threshold: float  # |Δm| threshold (Table 12 "|Δm| thr.")
    gap: FloatArray  # [items]: |m_stress − m_control| after order averaging

    @property
    def n_kept(self) -> int:
        return int(self.mask.sum())


def margin_matched_half(stress_logits: ArrayLike, control_logits: ArrayLike) -> MarginMatch:
    """Keep the half of items with the smallest |stress − control| expected-logit margin gap (Table 12).

    Pass the strict-correct items only (Table 12's N is about half the strict-correct support).
    Per item: m_k = mean over orders of ``positive_margin`` (orders averaged as everywhere in S3E),
    gap = |m_stress − m_control| (control = lexical for the Table 8 Δlex). Threshold = median gap; items
    with gap <= threshold are kept, so ties at the median are all kept (Table 12 keeps 4,849 of 9,661,
    i.e. slightly more than half, consistent with ties of bf16-quantised margins at the threshold).
    """
    ms = positive_margin(stress_logits).mean(axis=-1)
    mc = positive_margin(control_logits).mean(axis=-1)
    if ms.shape != mc.shape or ms.ndim != 1 or ms.size == 0:
        raise ValueError(
            f"margin_matched_half: need matching non-empty [items, 2, 2] inputs, got {ms.shape} vs {mc.shape}"
        )
    gap = np.abs(ms - mc)
    thr = float(np.median(gap))
    return MarginMatch(mask=gap <= thr, threshold=thr, gap=gap)
