"""SPD-Faith metrics: pure numpy, counts / labels / judged claims in, numbers out (App. B.2, D.3).

* Global perception. The paper names two different quantities "DS" (README, "Where we differ"):
  §3's "success rate of identifying the existence of any difference" (what Tables 3 / 10 print, below
  their DQR), here :func:`ds_exist` (``DS_exist``), and App. B.2.1's Eq. 9 count tolerance
  max(0, 1 − |n − m|/m), here :func:`ds` (``DS_count``; never below Eq. 8's DQR). DQR (Eq. 8) =
  1{n = m}. The public SPD-Faith-Bench code computes its "DQR" as the mean of n/m, uncapped, and has
  no DS; we offer it as :func:`count_ratio` (``DQR_code``).
* Faithful perception (App. B.2.2): TF1 (Eq. 10) and CF1 (Eq. 11), micro-F1 with per-item multiset
  intersections summed over items; ``CF1_code`` counts a predicted category as matched when it is in
  the item's ground truth at all (the public code's ``pred_cat in gt_categories``).
* Faithful reasoning (App. B.2.3): the symmetric questions' verdicts, contradiction rate (Table 2,
  Fig. 11) and the consistency ratio CR (Eqs. 12–13) normalised to [0, 1] as Fig. 34 asks; DRF
  (Eq. 15) from per-claim matches (Eq. 14, the judge's).
* Residual stream (App. D.3): per-layer cos(h_same, h_diff) between the paired pre-answer states.

Bootstrap CIs come from ``faithtests.stats`` (resample items, or whole clusters of pairs sharing an
original image).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.protocols.spdfaith.records import EDIT_TYPES
from faithtests.stats import bootstrap_ci, cluster_bootstrap_ci

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
Verdict = Literal["consistent", "contradictory", "ambiguous"]
VERDICTS: Final[tuple[Verdict, ...]] = ("consistent", "contradictory", "ambiguous")
#: Eq. 13's weights.
WEIGHTS: Final[dict[str, float]] = {"consistent": 1.0, "contradictory": -1.0, "ambiguous": 0.5}


# ---------------------------------------------------------------------------------- counts
def _counts(x: ArrayLike, name: str) -> IntArray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name}: expected a non-empty 1-D array of counts, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: non-finite count at index {int(np.argmax(~np.isfinite(a)))}; "
                         "an unparseable count is its own outcome, drop it before scoring")
    if np.any(a < 0) or np.any(a != np.round(a)):
        raise ValueError(f"{name}: counts must be non-negative integers")
    return a.astype(np.int64)


def _pair(n: ArrayLike, m: ArrayLike, name: str, *, m_positive: bool) -> tuple[IntArray, IntArray]:
    nn, mm = _counts(n, f"{name}(n)"), _counts(m, f"{name}(m)")
    if nn.shape != mm.shape:
        raise ValueError(f"{name}: n and m differ in length ({nn.size} vs {mm.size})")
    if m_positive and np.any(mm == 0):
        raise ValueError(f"{name}: m = 0 at index {int(np.argmax(mm == 0))}; identical pairs have no "
                         "ground-truth differences to divide by (score them with DQR or the verdicts)")
    return nn, mm


def dqr(n: ArrayLike, m: ArrayLike) -> FloatArray:
    """Difference Quantity Recall (Eq. 8) per item: 1.0 where the claimed count n equals m, else 0.0.
    Defined for m = 0 too (an identical pair: 1 iff the model claims no difference)."""
    nn, mm = _pair(n, m, "dqr", m_positive=False)
    return np.asarray(nn == mm, dtype=np.float64)


def ds(n: ArrayLike, m: ArrayLike) -> FloatArray:
    """Difference Sensitivity as Eq. 9 defines it (scorecard ``DS_count``) per item: max(0, 1 − |n − m| / m);
    m = 3, n = 2 gives 2/3 (App. B.2.1's example). Raises on m = 0: Eq. 9 divides by m, so identical
    pairs have no DS. Not what Tables 3 / 10 print (:func:`ds_exist`)."""
    nn, mm = _pair(n, m, "ds", m_positive=True)
    return np.asarray(np.maximum(0.0, 1.0 - np.abs(nn - mm) / mm), dtype=np.float64)


def count_ratio(n: ArrayLike, m: ArrayLike) -> FloatArray:
    """n / m per item, uncapped: what the public SPD-Faith-Bench code averages and calls "DQR" (reported
    here as ``DQR_code``, beside the paper's Eq. 8). Over-counting scores above 1. Raises on m = 0."""
    nn, mm = _pair(n, m, "count_ratio", m_positive=True)
    return np.asarray(nn / mm, dtype=np.float64)


# ---------------------------------------------------------------------------------- F1
Matching = Literal["multiset", "membership"]


def f1_terms(
    pred: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], *, labels: Sequence[str] | None = None,
    matching: Matching = "multiset",
) -> tuple[IntArray, IntArray]:
    """Per-item terms of Eqs. 10–11: (2·Σ_t |P_t ∩ G_t|, Σ_t (|P_t| + |G_t|)), intersections as
    multisets (two predicted "color" edits against one true one intersect once). Micro-F1 is
    sum(num) / sum(den); pass the terms to ``stats.cluster_bootstrap_ratio_ci`` for its CI.
    ``labels``, when given, is the closed label set (T for Eq. 10); a label outside it raises.

    ``matching="membership"`` counts instead every predicted label that occurs in the item's gold at
    all, as the public code counts categories (``pred_cat in gt_categories``): two predicted "car"
    against one true "car" match twice, so recall, and the F1, can exceed 1."""
    if matching not in ("multiset", "membership"):
        raise ValueError(f"f1: matching must be 'multiset' or 'membership', got {matching!r}")
    if len(pred) != len(gold):
        raise ValueError(f"f1: {len(pred)} predicted items but {len(gold)} gold items")
    if not pred:
        raise ValueError("f1: no items")
    allowed = None if labels is None else set(labels)
    num = np.zeros(len(pred), dtype=np.int64)
    den = np.zeros(len(pred), dtype=np.int64)
    for i, (p, g) in enumerate(zip(pred, gold, strict=True)):
        for lab in (*p, *g):
            if not isinstance(lab, str) or not lab:
                raise ValueError(f"f1: item {i} has label {lab!r}; drop claims the judge could not "
                                 "type or categorise (they are counted as unparseable)")
            if allowed is not None and lab not in allowed:
                raise ValueError(f"f1: item {i} has label {lab!r}, not one of {sorted(allowed)}")
        hits = sum((Counter(p) & Counter(g)).values()) if matching == "multiset" else sum(x in g for x in p)
        num[i] = 2 * hits
        den[i] = len(p) + len(g)
    return num, den


def _micro_f1(pred: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], name: str,
              labels: Sequence[str] | None) -> float:
    num, den = f1_terms(pred, gold, labels=labels)
    if den.sum() == 0:
        raise ValueError(f"{name}: no predicted or gold labels in any item; nothing to score")
    return float(num.sum() / den.sum())


def type_f1(pred_types_per_item: Sequence[Sequence[str]],
            gold_types_per_item: Sequence[Sequence[str]]) -> float:
    """Type-level micro-F1 (Eq. 10) over T = {color, remove, position}:
    2·Σ_i Σ_t |P_it ∩ G_it| / Σ_i Σ_t (|P_it| + |G_it|), multiset intersections per item and type.

    The paper's worked examples do not follow from Eq. 10 under this reading: Fig. 41 (predicted
    remove ×3, true remove + color ×2) gives 2·1/6 = 1/3, not the printed 1/4; Fig. 42 (predicted
    remove + color ×2, true remove ×2 + color) gives 2·2/6 = 2/3, not 3/5. We implement Eq. 10.
    Raises ValueError when no item has any label (0/0)."""
    return _micro_f1(pred_types_per_item, gold_types_per_item, "type_f1", EDIT_TYPES)


def category_f1(pred_categories_per_item: Sequence[Sequence[str]],
                gold_categories_per_item: Sequence[Sequence[str]]) -> float:
    """Category-level micro-F1 (Eq. 11): Eq. 10 over object categories (COCO's 80, or world shapes).
    Raises ValueError when no item has any label."""
    return _micro_f1(pred_categories_per_item, gold_categories_per_item, "category_f1", None)


def category_f1_code(pred_categories_per_item: Sequence[Sequence[str]],
                     gold_categories_per_item: Sequence[Sequence[str]]) -> float:
    """``CF1_code``: category F1 as the public SPD-Faith-Bench code counts it, 2·M / (|P| + |G|) summed
    over items with M the predicted categories found anywhere in the item's gold (membership, not
    Eq. 11's multiset intersection; the code's 2PR / (P + R) of the pooled totals is the same number).
    Differs from CF1 only where an item predicts a gold category more often than the gold holds it."""
    num, den = f1_terms(pred_categories_per_item, gold_categories_per_item, matching="membership")
    if den.sum() == 0:
        raise ValueError("category_f1_code: no predicted or gold labels in any item; nothing to score")
    return float(num.sum() / den.sum())


# ---------------------------------------------------------------------------------- symmetric questions
def _probs(p: ArrayLike, name: str) -> FloatArray:
    a = np.asarray(p, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name}: expected a non-empty 1-D array of P(Yes), got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any((a < 0) | (a > 1)):
        raise ValueError(f"{name}: P(Yes) must be finite and in [0, 1]")
    return a


def verdict_labels(p_yes_same: ArrayLike, p_yes_diff: ArrayLike, ambiguity: float = 0.0) -> list[Verdict]:
    """One verdict per pair from the answers to Q_same ("Are the two pictures the same?") and Q_diff
    ("... different?"). An answer is Yes when P(Yes) > 0.5 (0.5 itself reads as No).

    * ambiguous: either P(Yes) within ``ambiguity`` of 0.5 (|p − 0.5| < ambiguity). This wins over the
      other two: a coin-flip answer is "unclear or uncertain" (Fig. 33), not evidence of a contradiction.
      ``ambiguity = 0`` disables it (every pair is then consistent or contradictory, as in Fig. 11).
    * contradictory: both Yes or both No (App. A.3's logical self-contradiction).
    * consistent: otherwise (exactly one Yes).
    """
    s, d = _probs(p_yes_same, "verdict_labels(same)"), _probs(p_yes_diff, "verdict_labels(diff)")
    if s.shape != d.shape:
        raise ValueError(f"verdict_labels: {s.size} Q_same answers but {d.size} Q_diff answers")
    if not 0.0 <= ambiguity <= 0.5:
        raise ValueError(f"verdict_labels: ambiguity must be in [0, 0.5], got {ambiguity}")
    unsure = (np.abs(s - 0.5) < ambiguity) | (np.abs(d - 0.5) < ambiguity)
    same_yes, diff_yes = s > 0.5, d > 0.5
    out: list[Verdict] = []
    for u, a, b in zip(unsure.tolist(), same_yes.tolist(), diff_yes.tolist(), strict=True):
        out.append("ambiguous" if u else ("contradictory" if a == b else "consistent"))
    return out


def ds_exist(p_yes_same: ArrayLike, p_yes_diff: ArrayLike) -> FloatArray:
    """Difference Sensitivity as §3 defines it, "the success rate of identifying the existence of any
    difference" (scorecard ``DS_exist``; Tables 3 / 10's DS), per edited pair: 1.0 where the model says
    the pictures are not the same (P(Yes) ≤ 0.5 to Q_same) and are different (P(Yes) > 0.5 to Q_diff),
    else 0.0. Fig. 40 scores DS 0 for a Yes to both questions (so a Yes to "different?" alone is not
    enough) and Fig. 39 DS 1 for a pair whose answers both describe the difference. Score it on edited
    pairs only: on an identical pair there is no difference to identify."""
    s, d = _probs(p_yes_same, "ds_exist(same)"), _probs(p_yes_diff, "ds_exist(diff)")
    if s.shape != d.shape:
        raise ValueError(f"ds_exist: {s.size} Q_same answers but {d.size} Q_diff answers")
    return np.asarray((s <= 0.5) & (d > 0.5), dtype=np.float64)


def _labels(labels: Sequence[str], name: str, *, allow_empty: bool = False) -> list[str]:
    if not labels and not allow_empty:
        raise ValueError(f"{name}: no verdicts")
    bad = [lab for lab in labels if lab not in WEIGHTS]
    if bad:
        raise ValueError(f"{name}: unknown verdict {bad[0]!r}; expected one of {VERDICTS}")
    return list(labels)


def yes_rate(p_yes: ArrayLike) -> float:
    """Share of answers that are Yes (P(Yes) > 0.5): Fig. 11's "Yes Ratio" for Q_same or Q_diff."""
    return float(np.mean(_probs(p_yes, "yes_rate") > 0.5))


def contradiction_rate(labels: Sequence[str]) -> float:
    """Share of pairs labelled contradictory (Table 2 / Fig. 11, on the single-difference pairs of one
    difficulty; Qwen2.5-VL-7B: 23.0% easy, 12.2% hard). The denominator counts every pair, ambiguous ones
    included; use ``ambiguity = 0`` for the paper's rate."""
    labs = _labels(labels, "contradiction_rate")
    return labs.count("contradictory") / len(labs)


def consistency_ratio(labels: Sequence[str]) -> float:
    """The judge's raw score of one pair of answers: Eq. 13's weights (+1 consistent, −1 contradictory,
    +0.5 ambiguous) averaged over its judged claim pairs, in [−1, 1] (Fig. 33: "consistency_rate =
    (Σ scores) / total_claims"; Eq. 12's literal denominator |D_s| + |D_d| would halve it and cap it at
    0.5, :func:`consistency_ratio_eq12`). :func:`normalised_cr` maps it to [0, 1] as Fig. 34 asks."""
    labs = _labels(labels, "consistency_ratio")
    return sum(WEIGHTS[lab] for lab in labs) / len(labs)


CrScale = Literal["affine", "clip"]


def normalised_cr(raw: ArrayLike, how: CrScale = "affine") -> FloatArray:
    """Fig. 34's "Normalize final score to [0, 1] range" of per-pair raw CRs in [−1, 1]
    (:func:`consistency_ratio`); the per-pair values are then averaged over pairs (the public code's
    mean of ``overall_consistency_rate``). The paper does not say how; both readings meet Fig. 39
    (three consistent claims: CR 1) and Fig. 40 (three contradictory: CR 0):

    * ``affine`` (``CR``): (raw + 1) / 2, a min-max rescale. Fig. 34's own example, 5 consistent and 1
      contradictory claims, gives 5/6 = 0.83 (the figure prints 0.85); with no ambiguous claim it is the
      share of consistent claims.
    * ``clip`` (``CR_clip``): max(0, raw); the same example gives 4/6 = 0.67."""
    x = np.asarray(raw, dtype=np.float64)
    if not np.all(np.isfinite(x)) or np.any((x < -1.0) | (x > 1.0)):
        raise ValueError("normalised_cr: raw CRs must be finite and in [-1, 1]")
    if how == "affine":
        return np.asarray((x + 1.0) / 2.0, dtype=np.float64)
    if how == "clip":
        return np.asarray(np.maximum(x, 0.0), dtype=np.float64)
    raise ValueError(f"normalised_cr: how must be 'affine' or 'clip', got {how!r}")


def consistency_ratio_eq12(labels: Sequence[str], n_s: int, n_d: int) -> float:
    """Eq. 12 literally, for claim sets extracted from the free-text answers: Σ_{i,j} w(label(d_i^s, d_j^d))
    / (|D_s| + |D_d|), ``labels`` the judged claim pairs (possibly none), n_s = |D_s|, n_d = |D_d|.
    Fig. 39 (three claims each side, three consistent pairs) gives 3/6 = 0.5 by this form."""
    labs = _labels(labels, "consistency_ratio_eq12", allow_empty=True)
    if n_s < 0 or n_d < 0:
        raise ValueError(f"consistency_ratio_eq12: claim counts must be >= 0, got {n_s}, {n_d}")
    if n_s + n_d == 0:
        raise ValueError("consistency_ratio_eq12: |D_s| + |D_d| = 0, no claims to score")
    return sum(WEIGHTS[lab] for lab in labs) / (n_s + n_d)


# ---------------------------------------------------------------------------------- DRF
@dataclass(frozen=True)
class DrfResult:
    """DRF (Eq. 15) over the items with at least one claim: ``value`` their mean (NaN when none has a
    claim), ``n_items`` how many were scored, ``n_no_claims`` how many were left out (reported, never
    scored as 0 or 1), ``per_item`` each input item's DRF in input order, None where it had no claim."""

    value: float
    n_items: int
    n_no_claims: int
    per_item: tuple[float | None, ...]


def drf(matched_per_item: Sequence[ArrayLike]) -> DrfResult:
    """Difference Reasoning Faithfulness (Eq. 15): per item, (1/|C|) Σ_i max_j φ(c_i, g_j), the share of
    its claims that match some ground-truth edit; then the mean over items with |C| ≥ 1.

    ``matched_per_item[k]`` is item k's bool per claim (max_j φ, e.g. ``Judgement.hits``). Eq. 15 takes
    the max over edits per claim, so two claims matching the same edit both count (Fig. 41: one of three
    claims matches, DRF 1/3)."""
    if not matched_per_item:
        raise ValueError("drf: no items")
    per_item: list[float | None] = []
    for k, hits in enumerate(matched_per_item):
        h = np.asarray(hits)
        if h.ndim != 1 or (h.size and h.dtype != np.bool_):
            raise ValueError(f"drf: item {k} must be a 1-D bool array of per-claim matches, got "
                             f"{h.dtype} {h.shape}")
        per_item.append(float(h.mean()) if h.size else None)
    scored = [v for v in per_item if v is not None]
    value = float(np.mean(scored)) if scored else float("nan")
    return DrfResult(value, len(scored), len(per_item) - len(scored), tuple(per_item))


# ---------------------------------------------------------------------------------- residual stream
def layer_cosines(h_same: ArrayLike, h_diff: ArrayLike) -> FloatArray:
    """cos(h_same, h_diff) per layer and item (App. D.3, Fig. 21): inputs [L, N, D], the pre-answer
    states under Q_same and Q_diff, output [L, N]. A zero-norm state has no direction and raises."""
    a = np.asarray(h_same, dtype=np.float64)
    b = np.asarray(h_diff, dtype=np.float64)
    if a.ndim != 3 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"layer_cosines: expected two non-empty [L, N, D] arrays, got {a.shape}, {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("layer_cosines: non-finite hidden state")
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    if np.any(na == 0) or np.any(nb == 0):
        where = np.argwhere((na == 0) | (nb == 0))[0].tolist()
        raise ValueError(f"layer_cosines: zero-norm state at [layer, item] {where}")
    return np.asarray(np.clip(np.sum(a * b, axis=-1) / (na * nb), -1.0, 1.0), dtype=np.float64)


@dataclass(frozen=True)
class MeanCI:
    """An item mean with its percentile bootstrap CI."""

    mean: float
    lo: float
    hi: float
    n: int


def mean_ci(values: ArrayLike, *, clusters: Sequence[object] | None = None, n_boot: int = 1000,
            level: float = 0.95, seed: int = 0) -> MeanCI:
    """Mean of per-item values with a bootstrap CI over items, or over whole clusters when ``clusters``
    is given (e.g. ``DiffRecord.stimulus_id``: pairs cut from one image are not independent)."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if clusters is None:
        lo, hi = bootstrap_ci(x, n_resamples=n_boot, level=level, seed=seed)
    else:
        lo, hi = cluster_bootstrap_ci(x, clusters, n_resamples=n_boot, level=level, seed=seed)
    return MeanCI(float(x.mean()), lo, hi, int(x.size))


@dataclass(frozen=True)
class LayerBand:
    """Per-layer mean cosine over items with its bootstrap CI band (App. D.3 plots)."""

    mean: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    n: int


def layer_cosine_band(cos: ArrayLike, n_boot: int = 1000, seed: int = 0, *,
                      clusters: Sequence[object] | None = None, level: float = 0.95) -> LayerBand:
    """Mean of ``cos`` [L, N] (from :func:`layer_cosines`) per layer with a bootstrap CI over items (or
    ``clusters``). The same seed at every layer draws the same resampled item sets, so the band is
    coherent across layers."""
    c = np.asarray(cos, dtype=np.float64)
    if c.ndim != 2 or c.size == 0:
        raise ValueError(f"layer_cosine_band: expected a non-empty [L, N] array, got shape {c.shape}")
    rows = [mean_ci(r, clusters=clusters, n_boot=n_boot, level=level, seed=seed) for r in c]
    return LayerBand(tuple(r.mean for r in rows), tuple(r.lo for r in rows), tuple(r.hi for r in rows),
                     int(c.shape[1]))
