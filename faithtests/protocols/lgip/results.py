"""Each LGIP test's numbers from its scored pairs: the subsets, slices, per-item values, plot bars and
exemplar picks that ``suites/test_invariance.py`` and ``suites/test_flip_sensitivity.py`` record.

Pure numpy over :mod:`~faithtests.protocols.lgip.metrics` (the equations) and
:mod:`~faithtests.protocols.lgip.separation` (E_inv_rel); the model work is in
:mod:`~faithtests.protocols.lgip.run`. Inputs are a workload's pairs, ``base[i] = s(I, c)`` and
``perturbed[i] = s(I, c')`` of every pair, and ``idx``: the workload indices of the pairs to aggregate
(the finite ones of a test's family). Item ids are :func:`perturb.pair_keys` over the whole workload,
then picked, so dropping a non-finite pair never renumbers its repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.protocols.lgip.flips import count_change
from faithtests.protocols.lgip.metrics import (
    Estimate,
    FlipStats,
    FlipSummary,
    InvarianceSummary,
    flip_summary,
    invariance_summary,
)
from faithtests.protocols.lgip.paraphrase import ParaphraseLabels, paraphrase_kinds
from faithtests.protocols.lgip.perturb import PerturbationPair, pair_id, pair_keys
from faithtests.protocols.lgip.separation import RelativeInvariance, relative_invariance_summary
from faithtests.protocols.lgip.strength import (
    STRENGTH_BINS,
    BinScheme,
    bin_flips,
    flip_strength,
    text_cosines_from_texts,
)
from faithtests.scorecard.model import ItemValues
from faithtests.scorecard.model import MetricRow as Row  # one result row of a pure function

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int_]
#: Exemplars shown per test (the worst pairs).
N_EXEMPLARS = 4


def ci_bars(estimates: Sequence[Estimate | None]) -> tuple[list[float], list[float], list[float]]:
    """(values, CI lows, CI highs) of a bar or line plot; NaN where an estimate or its CI is missing."""
    cis = [e.ci if e is not None and e.ci else None for e in estimates]
    return ([e.value if e is not None else float("nan") for e in estimates],
            [c[0] if c else float("nan") for c in cis], [c[1] if c else float("nan") for c in cis])


def worst_flips(idx: IntArray, base: FloatArray, perturbed: FloatArray, k: int = N_EXEMPLARS) -> IntArray:
    """The pairs of ``idx`` whose flip scored at or above its original (Eq. 5's failures), furthest above
    first, at most ``k``."""
    wrong = idx[perturbed[idx] >= base[idx]]
    order = np.argsort(-(perturbed[wrong] - base[wrong]))[:k]
    return wrong[order]


# ----------------------------------------------------------------------------------------------
# Suite 1: paraphrase invariance


@dataclass(frozen=True)
class ParaphraseResult:
    """E_inv of one subset (all / simple / advanced) with what the suite records beside it."""

    summary: InvarianceSummary  # E_inv overall and per kind, relative increase (Eq. 2, Table 4)
    estimate: Estimate  # E_inv of the subset
    per_pair: ItemValues  # |s(I, c) − s(I, c')| per pair of the subset, clustered by image
    relative: RelativeInvariance  # Δ_u and E_inv_rel of the subset (separation.py)
    worst: IntArray  # workload indices of the subset's pairs the paraphrase moved most

    def rows(self, subset: str, slice_: str | None, labels: ParaphraseLabels) -> list[Row]:
        """What the suite records for the subset, in the slice ``slice_``: E_inv (Eq. 2, per pair) and
        E_inv_rel (Eq. 2 over Eq. 4), both gated (Table 2's E_inv; the floor a scorer with no separation
        fails); over all pairs also the relative increase of advanced over simple paraphrases (§4.2, in
        the labels' slice) and Δ_u (Eq. 4, in the scorer's units), recorded, not gated."""
        est, rel_inv = self.estimate, self.relative.relative
        out = [Row("E_inv", est.value, est.n_pairs, est.ci, slice_, per_item=self.per_pair, gated=True)]
        if subset == "all":
            inc = self.summary.relative_increase_pct
            if inc is not None:
                out.append(Row("E_inv_rel_increase_pct", inc.value, inc.n_pairs, inc.ci,
                               None if labels == "markers" else labels))
            sep = self.relative.separation
            out.append(Row("Delta_unrelated", sep.value, sep.n_pairs, sep.ci))
        out.append(Row("E_inv_rel", rel_inv.value, est.n_pairs, rel_inv.ci, slice_, gated=True))
        return out


def paraphrase_indices(pairs: Sequence[PerturbationPair]) -> list[int]:
    """Workload indices of the paraphrase pairs."""
    return [i for i, p in enumerate(pairs) if p.family == "paraphrase"]


def paraphrase_invariance(
    pairs: Sequence[PerturbationPair],
    base: FloatArray,
    perturbed: FloatArray,
    idx: IntArray,
    subset: str,
    unrelated: tuple[ArrayLike, ArrayLike, Sequence[Hashable]],
    *,
    labels: ParaphraseLabels,
    seed: int,
) -> ParaphraseResult | None:
    """E_inv (LGIP Eq. 2) of the paraphrase pairs ``idx`` in ``subset``, and E_inv_rel (Eq. 2 over Eq. 4)
    against ``unrelated`` = (s(I, c), s(I, c_u), image id) of the unrelated-caption pairs. None when no
    paraphrase of the subset's kind is among ``idx``. Kinds by ``labels`` (``paraphrase.paraphrase_kinds``).
    """
    chosen_pairs = [pairs[i] for i in idx]
    b, p = base[idx], perturbed[idx]
    kinds = paraphrase_kinds([q.perturbed for q in chosen_pairs], [q.label for q in chosen_pairs], labels)
    summary = invariance_summary(b, p, [q.image_id for q in chosen_pairs], kinds=kinds, seed=seed)
    est = {"all": summary.overall, "simple": summary.simple, "advanced": summary.advanced}[subset]
    if est is None:
        return None
    chosen = np.array([subset in ("all", k) for k in kinds])
    all_keys = pair_keys(pairs)
    keys = [all_keys[i] for i in idx]
    moved = np.abs(b - p)
    rows = [(k, d, q.image_id) for k, d, q, c in zip(keys, moved, chosen_pairs, chosen, strict=True) if c]
    per_pair = ItemValues.make({k: d for k, d, _ in rows}, {k: image for k, _, image in rows})
    rel = relative_invariance_summary(
        b[chosen], p[chosen], [q.image_id for q, c in zip(chosen_pairs, chosen, strict=True) if c],
        *unrelated, seed=seed)
    worst = idx[np.argsort(-np.where(chosen, moved, -1.0))[:N_EXEMPLARS]]
    return ParaphraseResult(summary, est, per_pair, rel, worst)


# ----------------------------------------------------------------------------------------------
# Suite 2a: flip sensitivity


def flip_rows(stats: FlipStats, slice_: str | None, per_item: ItemValues | None = None, *,
              gated: bool = False, weighted: bool = True) -> list[Row]:
    """PR (Eq. 5; ``per_item``: its per-flip values) and E_sens (Eq. 4) of ``stats`` in ``slice_``, then
    the strength-weighted forms where computed (with ``weighted``); PR is a gate with ``gated``."""
    out = [Row("PR", stats.pr.value, stats.pr.n_pairs, stats.pr.ci, slice_, per_item=per_item, gated=gated),
           Row("E_sens", stats.gap.value, stats.gap.n_pairs, stats.gap.ci, slice_)]
    for name, est in (("PR_weighted", stats.weighted_pr), ("E_sens_weighted", stats.weighted_gap)):
        if weighted and est is not None:
            out.append(Row(name, est.value, est.n_pairs, est.ci, slice_))
    return out


def flip_indices(pairs: Sequence[PerturbationPair], family: str, case: str) -> IntArray:
    """Workload indices of a flip case's pairs: every pair of ``family`` for "all" and "combined", else
    those of the flip type ``case``."""
    return np.array([i for i, p in enumerate(pairs)
                     if p.family == family and case in ("all", "combined", p.label)], dtype=int)


def flip_types(pairs: Sequence[PerturbationPair], idx: IntArray) -> list[str]:
    """The flip type of each pair of ``idx`` ("untyped" when its source gives none)."""
    return [pairs[i].label or "untyped" for i in idx]


@dataclass(frozen=True)
class FlipRate:
    """PR and E_sens of the flips ``idx`` (LGIP Eqs. 4–5) with per-item values for the paired gate."""

    summary: FlipSummary  # overall and per flip type
    won: ItemValues  # 1{s(I, c) > s(I, c†)} per flip, clustered by image
    won_by_type: Mapping[str, ItemValues]  # the same per flip type
    preferred_original: dict[str, bool]  # pair id -> the original scored above its flip
    worst: IntArray  # workload indices of the flips scored furthest at or above their original

    def rows(self, slice_: str | None, *, by_type: bool) -> list[Row]:
        """The flip case's PR (gated: Table 2 over all flips, Table 7 per flip type, Table 3 combined) and
        E_sens in ``slice_``; with ``by_type`` each flip type's too (slices ``type=...``), recorded."""
        out = flip_rows(self.summary.overall, slice_, self.won, gated=True)
        for t in sorted(self.summary.by_type) if by_type else ():
            out += flip_rows(self.summary.by_type[t], f"type={t}", self.won_by_type[t])
        return out


def flip_rate(pairs: Sequence[PerturbationPair], base: FloatArray, perturbed: FloatArray, idx: IntArray,
              *, seed: int) -> FlipRate:
    """:class:`FlipRate` of the flip pairs ``idx``, per flip type as well."""
    chosen = [pairs[i] for i in idx]
    types = flip_types(pairs, idx)
    summary = flip_summary(base[idx], perturbed[idx], [p.image_id for p in chosen], flip_types=types,
                           seed=seed)
    all_keys = pair_keys(pairs)
    keys, won = [all_keys[i] for i in idx], base[idx] > perturbed[idx]

    def flips_won(t: str | None) -> ItemValues:
        rows = [i for i, x in enumerate(types) if t in (None, x)]
        return ItemValues({keys[i]: float(won[i]) for i in rows}, {keys[i]: chosen[i].image_id for i in rows})

    return FlipRate(summary, flips_won(None), {t: flips_won(t) for t in sorted(summary.by_type)},
                    {pair_id(p): bool(base[i] > perturbed[i]) for p, i in zip(chosen, idx, strict=True)},
                    worst_flips(idx, base, perturbed))


@dataclass(frozen=True)
class CountPairs:
    """Number flips by (true -> flipped) count ("2->3") and by direction ("more" / "fewer")."""

    by_pair: Mapping[str, FlipStats]
    by_direction: Mapping[str, FlipStats]
    worst: str  # the count pair of the lowest PR
    worst_flips: IntArray  # its flips scored furthest at or above their original

    def rows(self) -> list[Row]:
        """Per count pair (slices ``number,count=2->3``) and direction (``number,direction=more``),
        recorded, not gated: a diagnosis of PR[number]."""
        parts = [(f"number,count={k}", v) for k, v in sorted(self.by_pair.items())]
        parts += [(f"number,direction={k}", v) for k, v in sorted(self.by_direction.items())]
        return [r for where, stats in parts for r in flip_rows(stats, where)]


def count_pairs(pairs: Sequence[PerturbationPair], base: FloatArray, perturbed: FloatArray, idx: IntArray,
                *, seed: int) -> CountPairs | None:
    """PR and E_sens (LGIP Eqs. 4–5) of the number flips of ``idx`` per count pair and per direction; a
    scorer can pass PR[number] on mostly singles while it cannot tell three from two. None when no flip
    of ``idx`` swaps two count words (``flips.count_change``)."""
    changes = {int(i): count_change(pairs[int(i)].rule) for i in idx}
    counted = np.array([i for i in idx if changes[int(i)] is not None], dtype=int)
    if not counted.size:
        return None
    image_ids = [pairs[i].image_id for i in counted]
    moves = [changes[int(i)] or (0, 0) for i in counted]
    names = [f"{a}->{b}" for a, b in moves]
    directions = ["more" if b > a else "fewer" for a, b in moves]
    by_pair = flip_summary(base[counted], perturbed[counted], image_ids, flip_types=names, seed=seed).by_type
    by_direction = flip_summary(base[counted], perturbed[counted], image_ids, flip_types=directions,
                                seed=seed).by_type
    worst = min(sorted(by_pair), key=lambda k: by_pair[k].pr.value)
    members = counted[[n == worst for n in names]]
    return CountPairs(by_pair, by_direction, worst, worst_flips(members, base, perturbed))


@dataclass(frozen=True)
class StrengthBins:
    """Flip sensitivity per strength bin (LGIP §4.3, Table 5) and the bins' strength cut points."""

    summary: FlipSummary  # by_bin, by_type_bin; strength-weighted forms too
    cuts: str  # "color 0.123/0.456, ..." (q25/q75 of each binning group)

    def present(self) -> list[str]:
        """The strength bins holding at least one flip, weak to strong."""
        return [b for b in STRENGTH_BINS if b in self.summary.by_bin]

    def rows(self, strength_bin: str, slice_: str) -> list[Row]:
        """The bin's PR (gated: Table 5 per strength bin; a floor for the within-type bins) and E_sens in
        ``slice_``, then its make-up: PR and E_sens of each flip type in it (``slice_,type=...``),
        recorded."""
        out = flip_rows(self.summary.by_bin[strength_bin], slice_, gated=True)
        for t, stats in self.makeup(strength_bin):
            out += flip_rows(stats, f"{slice_},type={t}", weighted=False)
        return out

    def makeup(self, strength_bin: str) -> list[tuple[str, FlipStats]]:
        """(flip type, its stats) of each flip type in ``strength_bin``."""
        cells = self.summary.by_type_bin
        return [(t, cells[(t, strength_bin)]) for t in self.summary.by_type if (t, strength_bin) in cells]


def strength_bins(pairs: Sequence[PerturbationPair], base: FloatArray, perturbed: FloatArray, idx: IntArray,
                  encode_texts: Callable[[list[str]], ArrayLike], scheme: BinScheme, *,
                  seed: int) -> StrengthBins:
    """Flips ``idx`` weighted by strength (``strength.flip_strength``, text cosines from
    ``encode_texts``) and cut into weak / medium / strong by ``scheme`` (``strength.bin_flips``)."""
    chosen = [pairs[i] for i in idx]
    types = flip_types(pairs, idx)
    cos = text_cosines_from_texts([p.caption for p in chosen], [p.perturbed for p in chosen], encode_texts)
    bins = bin_flips(types, cos, scheme)
    summary = flip_summary(base[idx], perturbed[idx], [p.image_id for p in chosen], flip_types=types,
                           strengths=flip_strength(types, cos), bins=bins.labels, seed=seed)
    cuts = ", ".join(f"{t} {lo:.3f}/{hi:.3f}" for t, (lo, hi) in bins.thresholds.items())
    return StrengthBins(summary, cuts)


def pair_outputs(pairs: Sequence[PerturbationPair], base: FloatArray, perturbed: FloatArray,
                 outcomes: Mapping[str, bool | float]) -> dict[str, dict[str, object]]:
    """Item-log rows (``Faith.outputs``) of the pairs named by ``outcomes`` (pair key -> outcome): the
    image ref and both captions, and both scores the model gave."""
    index = {k: i for i, k in enumerate(pair_keys(pairs))}
    rows: dict[str, dict[str, object]] = {}
    for key, outcome in outcomes.items():
        i = index[key]
        p = pairs[i]
        rows[key] = {"inputs": {"image": p.image_id, "caption": p.caption, "perturbed": p.perturbed,
                                "rule": p.rule},
                     "output": {"s(I,c)": float(base[i]), "s(I,c')": float(perturbed[i])},
                     "outcome": outcome}
    return rows
