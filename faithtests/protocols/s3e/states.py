"""S3E decision-state scores: Eq. 2 distances, Eqs. 3–5 paired excess, Eq. 7 band, layer selection.

Arrays follow ``layout``: states ``[layers, items, orders, roles, D]`` (roles = pos, pres, lex,
stress, rand), scores ``S`` ``[layers, items, orders, roles]``. All functions work on any subset of
items, so a protocol can turn states into ``S`` chunk by chunk and never hold every state at once.

Reference state (Eq. 2). S3E §3.4 defines h_{i,o,+} as "the matched positive-caption reference state";
we take the positive-vs-positive prompt ``[c+, c+]`` (role ``pos``) — ``reference="pos"``, the default.
The paper also calls its scores "preserve-anchored" (Table 6 caption, Eq. 7, App. B/F), which reads as
if the preserve prompt ``[c+, c_pres]`` served as the anchor; ``reference="pres"`` implements that reading
(then S_pres ≡ 0 and Δpres = S_stress). Cosines are taken on raw states, without
centering, whitening or pooling (App. M.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.protocols.s3e.layout import PRES, ROLE_INDEX, ROLES, STRESS, Control

FloatArray = NDArray[np.float64]
Reference = Literal["pos", "pres"]
Criterion = Literal["delta_pres", "s_stress", "pc1_gap"]


def _finite(x: ArrayLike, name: str) -> FloatArray:
    a = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        where = np.argwhere(~np.isfinite(a))[0].tolist()
        raise ValueError(f"{name}: non-finite value at index {where}")
    return a


def cosine_distance(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """1 − cos(a, b) along the last axis, in [0, 2] (the form of S3E Eq. 2 and Eq. 7).

    Computed as ½‖â − b̂‖² on unit vectors (equal to 1 − cos), which keeps tiny distances accurate
    (Gemma3-4B's S_lex is 0.0003, Table 6) and gives exactly 0 for identical vectors. A zero vector has
    no direction: that raises instead of returning NaN.
    """
    x, y = np.broadcast_arrays(_finite(a, "cosine_distance(a)"), _finite(b, "cosine_distance(b)"))
    nx = np.linalg.norm(x, axis=-1, keepdims=True)
    ny = np.linalg.norm(y, axis=-1, keepdims=True)
    if np.any(nx == 0) or np.any(ny == 0):
        bad = np.argwhere((nx[..., 0] == 0) | (ny[..., 0] == 0))[0].tolist()
        raise ValueError(f"cosine_distance: zero-norm state at index {bad}")
    d = 0.5 * np.sum((x / nx - y / ny) ** 2, axis=-1)
    return np.asarray(np.clip(d, 0.0, 2.0), dtype=np.float64)


def _states(states: ArrayLike) -> FloatArray:
    h = _finite(states, "states")
    if h.ndim != 5 or h.shape[2] != 2 or h.shape[3] != len(ROLES):
        raise ValueError(f"states: expected [layers, items, orders=2, roles={len(ROLES)}, D], got {h.shape}")
    return h


def s_scores(states: ArrayLike, *, reference: Reference = "pos") -> FloatArray:
    """S_{i,o,k} = 1 − cos(h_{i,o,k}, h_{i,o,ref}) per layer (S3E Eq. 2).

    ``states``: ``[layers, items, orders, roles, D]`` → ``S``: ``[layers, items, orders, roles]``; the
    reference role's own column is 0. The reference is matched: same layer, item (image) and order.
    """
    if reference not in ("pos", "pres"):
        raise ValueError(f"s_scores: reference must be 'pos' or 'pres', got {reference!r}")
    h = _states(states)
    ref = ROLE_INDEX[reference]
    return cosine_distance(h, h[:, :, :, ref : ref + 1, :])


def stress_pres_distance(states: ArrayLike) -> FloatArray:
    """1 − cos(h_stress, h_pres) per layer, item and order: the summand of S3E Eq. 7 → ``[L, N, 2]``."""
    h = _states(states)
    return cosine_distance(h[:, :, :, STRESS, :], h[:, :, :, PRES, :])


def _scores(S: ArrayLike, strict: ArrayLike | None) -> FloatArray:
    s = _finite(S, "S")
    if s.ndim != 4 or s.shape[2] != 2 or s.shape[3] != len(ROLES):
        raise ValueError(f"S: expected [layers, items, orders=2, roles={len(ROLES)}], got {s.shape}")
    if strict is None:
        return s
    m = np.asarray(strict)
    if m.dtype != np.bool_ or m.shape != (s.shape[1],):
        raise ValueError(f"strict: expected a bool mask of shape ({s.shape[1]},), got {m.dtype} {m.shape}")
    return s[:, m]


def order_averaged_scores(S: ArrayLike, role: str, strict: ArrayLike | None = None) -> FloatArray:
    """½ Σ_o S_{i,o,role} (order averaging of §3.4) → ``[layers, n]`` (Table 6 S_lex, S_stress columns)."""
    if role not in ROLE_INDEX:
        raise ValueError(f"order_averaged_scores: unknown role {role!r}, expected one of {ROLES}")
    s = _scores(S, strict)
    return np.asarray(s[:, :, :, ROLE_INDEX[role]].mean(axis=2), dtype=np.float64)


def paired_excess(S: ArrayLike, control: Control, strict: ArrayLike | None = None) -> FloatArray:
    """Δ^k_i = ½ Σ_{o∈{orig,swap}} [S_{i,o,stress} − S_{i,o,k}] per layer (S3E Eqs. 3, 4, 5).

    ``control`` ∈ {pres (Eq. 3), lex (Eq. 4), rand (Eq. 5)}; ``strict``: bool ``[items]`` mask of
    stress-trial strict-correct items (the paper computes Δ only on those) → ``[layers, n_strict]``.
    """
    if control not in ("pres", "lex", "rand"):
        raise ValueError(f"paired_excess: control must be pres, lex or rand, got {control!r}")
    s = _scores(S, strict)
    diff = s[:, :, :, STRESS] - s[:, :, :, ROLE_INDEX[control]]
    return np.asarray(diff.mean(axis=2), dtype=np.float64)


def top_half_layers(n_layers: int) -> range:
    """The top half of decoder layers for Eq. 7: ``range(n_layers // 2, n_layers)``.

    Matches Table 7 (28 layers → 14–27, 36 → 18–35, 34 → 17–33). For odd counts the paper is silent;
    this rule keeps the middle layer (ceil(L/2) layers).
    """
    if n_layers < 1:
        raise ValueError(f"top_half_layers: need at least one layer, got {n_layers}")
    return range(n_layers // 2, n_layers)


def top_half_band(dist: ArrayLike, strict: ArrayLike | None = None) -> FloatArray:
    """S̄^stress_{i,top} = mean over ℓ ∈ top half of (1 − cos(h^stress_{i,ℓ}, h^pres_{i,ℓ})) (S3E Eq. 7).

    ``dist``: ``[layers, items, orders]`` from ``stress_pres_distance``. Eq. 7 has no order index; as
    for every other S3E item score the two orders are averaged, within item, before bootstrapping
    (Table 7 caption) → ``[n]`` per item.
    """
    d = _finite(dist, "dist")
    if d.ndim != 3 or d.shape[2] != 2:
        raise ValueError(f"top_half_band: expected [layers, items, orders=2], got {d.shape}")
    if strict is not None:
        m = np.asarray(strict)
        if m.dtype != np.bool_ or m.shape != (d.shape[1],):
            raise ValueError(f"strict: expected a bool mask of shape ({d.shape[1]},), got {m.shape}")
        d = d[:, m]
    top = top_half_layers(d.shape[0])
    return np.asarray(d[top.start : top.stop].mean(axis=(0, 2)), dtype=np.float64)


# ---- frozen layer selection (S3E §5.2) -----------------------------------------------------------


@dataclass(frozen=True)
class LayerSelection:
    """The diagnostic layer, chosen once by a fixed rule and then reused unchanged (S3E §5.2, App. M.2).

    Persist it with ``to_json`` and pass the same object to every later contrast (Δlex, Δrand, breakdowns,
    intervention variants) so the layer is never reselected to maximise a reported number.
    """

    layer: int
    criterion: str
    reference: str
    profile: tuple[float, ...]  # the per-layer criterion the argmax was taken over
    n_items: int  # strict-correct items of the selection set

    def to_json(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "criterion": self.criterion,
            "reference": self.reference,
            "profile": list(self.profile),
            "n_items": self.n_items,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LayerSelection:
        return cls(
            layer=int(d["layer"]),
            criterion=str(d["criterion"]),
            reference=str(d["reference"]),
            profile=tuple(float(v) for v in d["profile"]),
            n_items=int(d["n_items"]),
        )


def stress_specificity_profile(
    S: ArrayLike, strict: ArrayLike | None, *, criterion: Criterion = "delta_pres"
) -> FloatArray:
    """Per-layer "stress-to-anchor decision-state signal" on strict-correct items (S3E §5.2) → ``[L]``.

    ``delta_pres`` (default): mean Δpres (Eq. 3): stress displacement in excess of the meaning-preserving
    control; under ``reference="pres"`` it equals the paper's preserve-anchored S_stress. ``s_stress``:
    mean order-averaged S_stress alone. Neither uses lex or rand, so the layer is never chosen to
    maximise Δlex or Δrand (§5.2).
    """
    if criterion == "delta_pres":
        return np.asarray(paired_excess(S, "pres", strict).mean(axis=1), dtype=np.float64)
    if criterion == "s_stress":
        return np.asarray(order_averaged_scores(S, "stress", strict).mean(axis=1), dtype=np.float64)
    raise ValueError(f"stress_specificity_profile: criterion {criterion!r} needs states (pc1_gap_profile)")


def _pc1_ratio(x: FloatArray) -> float:
    c = x - x.mean(axis=0, keepdims=True)
    sv = np.linalg.svd(c, compute_uv=False)
    total = float(np.sum(sv**2))
    return float(sv[0] ** 2 / total) if total > 0 else 0.0


def pc1_gap_profile(stress_states: ArrayLike, pres_states: ArrayLike) -> FloatArray:
    """E3 "stress-pres PC1 gap" per layer (S3E Table 20): PC1(stress) − PC1(pres) → ``[L]``.

    PC1(k) = share of variance on the first principal component of the condition's states, items and
    orders pooled (``[layers, n, orders, D]`` each, strict-correct items). An alternative reading of the
    E3 peak layer, offered as ``criterion="pc1_gap"``.
    """
    hs = _finite(stress_states, "stress_states")
    hp = _finite(pres_states, "pres_states")
    if hs.shape != hp.shape or hs.ndim != 4 or hs.shape[1] * hs.shape[2] < 2:
        raise ValueError(f"pc1_gap_profile: need equal [layers, n, orders, D] with n*orders >= 2, {hs.shape}")
    flat_s = hs.reshape(hs.shape[0], -1, hs.shape[-1])
    flat_p = hp.reshape(hp.shape[0], -1, hp.shape[-1])
    return np.array([_pc1_ratio(flat_s[i]) - _pc1_ratio(flat_p[i]) for i in range(hs.shape[0])])


def layer_selection_from_profile(
    profile: ArrayLike, *, criterion: str, reference: str, n_items: int
) -> LayerSelection:
    """Freeze the argmax layer of a per-layer profile; ties go to the lowest layer."""
    p = _finite(profile, "profile")
    if p.ndim != 1 or p.size == 0:
        raise ValueError(
            f"layer_selection_from_profile: expected a non-empty [layers] profile, got {p.shape}"
        )
    return LayerSelection(
        layer=int(np.argmax(p)),
        criterion=criterion,
        reference=reference,
        profile=tuple(float(v) for v in p),
        n_items=n_items,
    )


def select_layer(
    S: ArrayLike,
    strict: ArrayLike | None,
    *,
    criterion: Literal["delta_pres", "s_stress"] = "delta_pres",
    reference: Reference = "pos",
) -> LayerSelection:
    """Peak stress-specificity layer (S3E §5.2) on a selection set; ``reference`` records how S was made.

    Call once (on the base model, ideally on ``selection_split``'s selection items) and reuse the
    returned ``LayerSelection`` for every contrast and variant. The paper selects on the same items it
    reports, and says so (§5.2); a held-out selection split removes that bias.
    """
    s = _scores(S, strict)
    if s.shape[1] == 0:
        raise ValueError("select_layer: no strict-correct items in the selection set")
    profile = stress_specificity_profile(s, None, criterion=criterion)
    return layer_selection_from_profile(profile, criterion=criterion, reference=reference, n_items=s.shape[1])


def selection_split(
    n_items: int, *, fraction: float = 0.5, seed: int
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Seeded disjoint (selection, evaluation) item indices for choosing the layer on held-out items."""
    if not 0.0 < fraction < 1.0 or n_items < 2:
        raise ValueError(
            f"selection_split: need 0 < fraction < 1 and n_items >= 2, got {fraction}, {n_items}"
        )
    perm = np.random.default_rng(seed).permutation(n_items)
    k = min(max(1, round(fraction * n_items)), n_items - 1)
    return np.sort(perm[:k]), np.sort(perm[k:])
