"""What each affective-conflict suite test records, computed from one variant's answers.

Pure functions over :class:`~faithtests.protocols.acbench.run.Answers` and the described records: they
pick the conflict / aligned rows, cut Q_conf into its subsets (:func:`groups`) and compute every value
with its percentile bootstrap CI over images (an image's six records resampled together, AC-Bench §4).
The suite records the :class:`Row` values and checks the gates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faithtests.protocols.acbench.metrics import LssCurve, Shares, answer_category, answer_shares
from faithtests.protocols.acbench.records import CONFLICT_SUBSETS, AcRecord
from faithtests.protocols.acbench.run import Answers
from faithtests.protocols.acbench.steering import active_rows
from faithtests.scorecard.model import MetricRow as Row  # one result row of a pure function
from faithtests.stats import Boot

FloatArray = NDArray[np.float64]
Groups = list[tuple[str | None, list[int]]]
#: The §4.1 categories, in the order of :func:`categories`' columns, and their share names (Eqs. 1–3).
CATEGORIES = ("image", "text", "other")
SHARES = (("P_img", True), ("P_txt", False), ("P_oth", False))  # (name, higher is better)



def where(subset: str | None, mode: str) -> str | None:
    """The slice of a result: the subset, and the answer mode unless it is the paper's (generation)."""
    parts = [p for p in (subset, None if mode == "generation" else f"mode={mode}") if p]
    return ", ".join(parts) or None


def categories(recs: Sequence[AcRecord], ans: Answers) -> tuple[list[int], FloatArray]:
    """Conflict rows and their §4.1 category one-hot [n, 3] (image, text, other)."""
    rows = [i for i, r in enumerate(recs) if r.conflict]
    cats = [answer_category(ans.pred[i], recs[i].image_emotion, recs[i].text_emotion or "") for i in rows]
    onehot = np.array([[c == k for k in CATEGORIES] for c in cats], dtype=np.float64)
    return rows, onehot.reshape(len(rows), 3)


def shares(recs: Sequence[AcRecord], ans: Answers, rows: Sequence[int]) -> Shares:
    """Eqs. 1–4 on ``rows`` (``metrics.answer_shares``)."""
    return answer_shares(
        [ans.pred[i] for i in rows],
        [recs[i].image_emotion for i in rows],
        [recs[i].text_emotion for i in rows],
    )


def groups(recs: Sequence[AcRecord], rows: Sequence[int]) -> Groups:
    """(subset or None for all, positions within ``rows``) for Q_conf and each conflict subset present."""
    out: Groups = [(None, list(range(len(rows))))]
    for s in CONFLICT_SUBSETS:
        pos = [j for j, i in enumerate(rows) if recs[i].subset == s]
        if pos:
            out.append((s, pos))
    return out


def _values(sh: Shares) -> tuple[float, float, float]:
    return sh.p_img, sh.p_txt, sh.p_oth


def share_rows(recs: Sequence[AcRecord], ans: Answers, mode: str, boot: Boot) -> list[Row]:
    """P_img, P_txt, P_oth (Eqs. 1–3) on Q_conf and per subset; the per-record indicators are the
    bootstrap's unit."""
    rows, onehot = categories(recs, ans)
    stim = [recs[i].stimulus_id for i in rows]
    out: list[Row] = []
    for subset, pos in groups(recs, rows):
        cl = [stim[j] for j in pos]
        values = _values(shares(recs, ans, [rows[j] for j in pos]))
        # Tables 5 / 6 print P_img ("/=image") per conflict subset: those rows are the gates
        out += [Row(name, values[k], len(pos), boot.ci(onehot[pos, k], cl), where(subset, mode), better,
                    gated=name == "P_img" and subset in CONFLICT_SUBSETS)
                for k, (name, better) in enumerate(SHARES)]
    return out


def subset_shares(recs: Sequence[AcRecord], ans: Answers) -> dict[str, FloatArray]:
    """The mean category one-hot (image, text, other) of each conflict subset present, for the plot."""
    rows, onehot = categories(recs, ans)
    return {s: onehot[pos].mean(axis=0) for s, pos in groups(recs, rows)[1:] if s}


def normalised_share_rows(recs: Sequence[AcRecord], norm: Answers, boot: Boot, slice: str) -> list[Row]:
    """P_img, P_txt, P_oth on Q_conf of the length-normalised answers, in the slice ``slice``."""
    rows, onehot = categories(recs, norm)
    stim = [recs[i].stimulus_id for i in rows]
    values = _values(shares(recs, norm, rows))
    return [Row(name, values[k], len(rows), boot.ci(onehot[:, k], stim), slice, k == 0)
            for k, (name, _) in enumerate(SHARES)]


def tbr_rows(recs: Sequence[AcRecord], ans: Answers, mode: str,
             boot: Boot) -> list[tuple[str | None, Row]]:
    """(subset or None for Q_conf, its TBR = P_txt / (P_txt + P_img), Eq. 4), the CI the ratio of the
    resampled sums; NaN (undefined) where no answer matched either label."""
    rows, onehot = categories(recs, ans)
    stim = [recs[i].stimulus_id for i in rows]
    out: list[tuple[str | None, Row]] = []
    for subset, pos in groups(recs, rows):
        img, txt = onehot[pos, 0], onehot[pos, 1]
        out.append((subset, Row("TBR", shares(recs, ans, [rows[j] for j in pos]).tbr, len(pos),
                                boot.ratio_ci(txt, img + txt, [stim[j] for j in pos]), where(subset, mode),
                                False, gated=subset in CONFLICT_SUBSETS)))  # Table 7: TBR per subset
    return out


def normalised_tbr_row(recs: Sequence[AcRecord], norm: Answers, boot: Boot, slice: str) -> Row:
    """TBR (Eq. 4) on Q_conf of the length-normalised answers, in the slice ``slice``."""
    rows, onehot = categories(recs, norm)
    stim = [recs[i].stimulus_id for i in rows]
    img, txt = onehot[:, 0], onehot[:, 1]
    return Row("TBR", shares(recs, norm, rows).tbr, len(rows), boot.ratio_ci(txt, img + txt, stim), slice,
               False)


def hits(pred: Sequence[str | None], gold: Sequence[str | None]) -> FloatArray:
    """1 where the answer is the gold label (an unparseable answer, None, is wrong)."""
    return np.array([p == g for p, g in zip(pred, gold, strict=True)], dtype=np.float64)


def accuracy_rows(name: str, hit: FloatArray, recs: Sequence[AcRecord], mode: str, boot: Boot,
                  subsets: Sequence[str] = ()) -> list[Row]:
    """Accuracy of per-record ``hit`` over all ``recs`` (the gate: "Align acc" of Tables 1, 2, 5; the
    unimodal baselines of Tables 3-4), then per subset of ``subsets`` present."""
    stim = [r.stimulus_id for r in recs]
    out = [Row(name, float(hit.mean()), len(hit), boot.ci(hit, stim), where(None, mode), gated=True)]
    for subset in subsets:
        rows = [i for i, r in enumerate(recs) if r.subset == subset]
        if rows:
            out.append(Row(name, float(hit[rows].mean()), len(rows),
                           boot.ci(hit[rows], [stim[i] for i in rows]), where(subset, mode)))
    return out


def aligned(recs: Sequence[AcRecord]) -> list[int]:
    """The aligned rows (y_txt = y_img)."""
    return [i for i, r in enumerate(recs) if r.subset == "aligned"]


@dataclass(frozen=True)
class Band:
    """A per-layer LSS curve's 95% CI band over images (NaN where no item is defined at a layer)."""

    lo: list[float]
    hi: list[float]


def lss_band(curve: LssCurve, stim: Sequence[str], boot: Boot) -> Band:
    """Each layer's CI of the mean LSS (Eq. 22) over the items where it is defined."""
    lo, hi = [], []
    for x in curve.per_item:
        ok = np.isfinite(x)
        band = boot.ci(x[ok], [c for c, k in zip(stim, ok, strict=True) if k]) if ok.any() else None
        lo.append(band[0] if band else float("nan"))
        hi.append(band[1] if band else float("nan"))
    return Band(lo, hi)


def conflict_score_rows(recs: Sequence[AcRecord], s: FloatArray) -> list[Row]:
    """The conflict score's mean (Eq. 5) and the share of rows the hard gate steers (s ≥ τ), over the
    aligned and over the conflict records."""
    steered = np.zeros(len(recs), dtype=bool)
    steered[active_rows(s)] = True
    out: list[Row] = []
    for label, rows in (
        ("aligned", [i for i, r in enumerate(recs) if not r.conflict]),
        ("conflict", [i for i, r in enumerate(recs) if r.conflict]),
    ):
        if rows:
            out.append(Row("conflict_score_mean", float(np.nanmean(s[rows])), len(rows), slice=label,
                           higher_is_better=label == "conflict"))
            out.append(Row("cecs_steered_rate", float(steered[rows].mean()), len(rows), slice=label,
                           higher_is_better=label == "conflict"))
    return out


def cecs_delta_rows(recs: Sequence[AcRecord], base: Answers, cecs: Answers, boot: Boot) -> list[Row]:
    """CECS − base on the same records (paired, CIs over images): P_img on Q_conf and per subset, and
    the aligned accuracy."""
    rows, b = categories(recs, base)
    _, c = categories(recs, cecs)
    stim = [recs[i].stimulus_id for i in rows]
    out: list[Row] = []
    for subset, pos in groups(recs, rows):
        d = c[pos, 0] - b[pos, 0]
        out.append(Row("delta_P_img", float(d.mean()), len(pos), boot.ci(d, [stim[j] for j in pos]), subset))
    on = aligned(recs)
    if on:
        y = [recs[i].image_emotion for i in on]
        d = np.array([float(cecs.pred[i] == g) - float(base.pred[i] == g)
                      for i, g in zip(on, y, strict=True)])
        out.append(Row("delta_aligned_acc", float(d.mean()), len(on),
                       boot.ci(d, [recs[i].stimulus_id for i in on])))
    return out
