"""CECS, Conflict-aware Evidence Consistency Steering (§5.1, App. D): pure functions, numpy or torch.

Phase I (Eq. 5): the conflict score s = exp(z_no) / (exp(z_yes) + exp(z_no)) from the first-token
"Yes"/"No" logits of the probe prompt (``prompts.probe_prompt``: "No" = image and description disagree).

Phase II, per head h and answer query q in the intervention window, with S_V / S_T the attention mass on
image / description tokens (Eq. 11):

    r_now = S_V / (S_V + S_T)                                    (Eq. 6)
    r_target = r_min + s·(r_max − r_min)                         (Eq. 7)
    w = σ((s − τ)/T),  r_eff = (1 − w)·r_now + w·r_target        (Eq. 8)
    1 + α = r_eff·(S_V + S_T)/S_V,  1 − β = (1 − r_eff)·(S_V + S_T)/S_T   (Eqs. 17, 21)
    image weights × (1 + α), description weights × (1 − β), every other weight unchanged (Eq. 10).

Choices where the paper leaves room (each in the function that makes it):

* α is App. D.1's exact solution (Eq. 17), the form App. D.1 derives. Eq. 9's odds form,
  α = r_eff/(1 − r_eff)·S_T/S_V − 1, is *not* equivalent (it reaches share r_eff only when r_eff = r_now;
  S_V = S_T = ½, r_eff = ¾ gives 1 − β = −1, negative weights), so it is not used.
* Mass (Eq. 13) is preserved exactly: S_V(1 + α) + S_T(1 − β) = r_eff·S + (1 − r_eff)·S = S. Both factors
  are ≥ 0 whenever r_eff ∈ [0, 1], which holds when s, r_min, r_max ∈ [0, 1] (r_eff is then a convex
  combination of shares); those are validated (ValueError), and r_eff is clipped to [0, 1] against
  rounding, so no weight can go negative (a β > 1 would need r_eff > 1).
* Rows with S_V = 0 or S_T = 0 are left unchanged: a multiplicative update cannot put mass on image
  tokens that have none (α would be infinite), and with S_T = 0 there is no description mass to move
  (β = 0/0). Eq. 6's ε is therefore unnecessary and omitted (with it r_eff would miss its target).
* Gate: the paper keeps the model in "Default Mode" for s < τ (§5.1; §5.2 "On Emotion Alignment samples
  (s < τ) ... keeping the model in Default Mode"), i.e. τ is an activation threshold; Eq. 8's sigmoid
  alone would still move a row at s < τ (w(0.5) = σ(−1) ≈ 0.27). ``gate="hard"`` (default) leaves every
  row unchanged for s < τ and applies Eq. 8 above it; ``gate="soft"`` applies Eq. 8 for every s.
* The update is two-sided as written: if r_now > r_eff the image share is lowered to r_eff.
* Layers are 0-based (transformers' ``layer_idx``, ``Hooks.attention`` keys): App. D.3 splits
  Qwen3-VL-8B's 36 decoder layers into "Layers 0–16", "17–24" and "25–35", so its window is (17, 24),
  both ends included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.models.interfaces import Hooks
from faithtests.protocols.acbench.metrics import masks_from_spans

if TYPE_CHECKING:
    import torch

    from faithtests.models.interfaces import AttentionModifier, TokenSpans

Gate = Literal["hard", "soft"]
#: §5.2: τ = 0.6, r ∈ [0.5, 0.9], T = 0.1 (grid-searched on a development set for Qwen3-VL-8B).
R_MIN: Final = 0.5
R_MAX: Final = 0.9
TAU: Final = 0.6
TEMP: Final = 0.1
#: The paper's intervention windows, 0-based inclusive decoder-layer indices (App. D.3).
PAPER_WINDOWS: Final[dict[str, tuple[int, int]]] = {"Qwen/Qwen3-VL-8B-Instruct": (17, 24)}


def _sigmoid(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """σ(x) without overflow for any finite x."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@overload
def conflict_score(yes_logit: float, no_logit: float) -> float: ...
@overload
def conflict_score(yes_logit: ArrayLike, no_logit: ArrayLike) -> NDArray[np.float64]: ...
def conflict_score(yes_logit: ArrayLike, no_logit: ArrayLike) -> float | NDArray[np.float64]:
    """Eq. 5: s = exp(z_no) / (exp(z_yes) + exp(z_no)) = σ(z_no − z_yes), the probe's probability of
    "No" renormalised over {Yes, No} (so the rest of the vocabulary does not dilute it)."""
    d = np.asarray(no_logit, dtype=np.float64) - np.asarray(yes_logit, dtype=np.float64)
    if not np.isfinite(d).all():
        raise ValueError("conflict_score: non-finite logits")
    s = _sigmoid(d)
    return float(s) if isinstance(yes_logit, float | int) and isinstance(no_logit, float | int) else s


def _check_params(r_min: float, r_max: float, tau: float, temp: float) -> None:
    if not (0.0 <= r_min <= 1.0 and 0.0 <= r_max <= 1.0):
        raise ValueError(f"CECS: r_min={r_min}, r_max={r_max} must lie in [0, 1] (they are visual shares)")
    if not temp > 0.0:
        raise ValueError(f"CECS: the gate temperature T must be > 0, got {temp}")
    if not np.isfinite(tau):
        raise ValueError(f"CECS: tau must be finite, got {tau}")


def _scores(s: float | ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(s, dtype=np.float64)
    if not (np.isfinite(arr).all() and (arr >= 0).all() and (arr <= 1).all()):
        raise ValueError("CECS: conflict scores must lie in [0, 1] (Eq. 5)")
    return arr


def gate_terms(
    s: float | ArrayLike,
    *,
    r_min: float = R_MIN,
    r_max: float = R_MAX,
    tau: float = TAU,
    temp: float = TEMP,
    gate: Gate = "hard",
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """(r_target (Eq. 7), w (Eq. 8), active) per score; ``active`` is False where the hard gate keeps
    the Default Mode (s < τ), always True for ``gate="soft"``."""
    _check_params(r_min, r_max, tau, temp)
    if gate not in ("hard", "soft"):
        raise ValueError(f"CECS: gate must be 'hard' or 'soft', got {gate!r}")
    arr = _scores(s)
    r_target = r_min + arr * (r_max - r_min)
    w = _sigmoid((arr - tau) / temp)
    active = arr >= tau if gate == "hard" else np.ones_like(arr, dtype=np.bool_)
    return r_target, w, np.asarray(active, dtype=np.bool_)


def _core(xp: Any, w: Any, img: Any, txt: Any, r_target: Any, gw: Any, active: Any, tiny: float) -> Any:
    """Eqs. 6–10, 17, 21 on float rows ``w`` [..., K] in namespace ``xp`` (numpy or torch); the other
    arguments broadcast against ``w`` (masks) or ``w[..., 0]`` (per-row terms)."""
    s_v = (w * img).sum(-1)
    s_t = (w * txt).sum(-1)
    total = s_v + s_t
    # below the dtype's smallest normal, S/S_V could overflow: such a row is treated as S_V = 0
    ok = (s_v > tiny) & (s_t > tiny) & active
    r_now = s_v / xp.where(ok, total, 1.0)
    r_eff = xp.clip((1.0 - gw) * r_now + gw * r_target, 0.0, 1.0)
    up = xp.where(ok, r_eff * total / xp.where(ok, s_v, 1.0), 1.0)  # 1 + α (Eq. 17)
    down = xp.where(ok, (1.0 - r_eff) * total / xp.where(ok, s_t, 1.0), 1.0)  # 1 − β (Eq. 21)
    return xp.where(img, w * up[..., None], xp.where(txt, w * down[..., None], w))


@overload
def reallocate(
    weights: torch.Tensor,
    image_mask: Any,
    text_mask: Any,
    s: float | ArrayLike,
    *,
    r_min: float = ...,
    r_max: float = ...,
    tau: float = ...,
    temp: float = ...,
    gate: Gate = ...,
) -> torch.Tensor: ...
@overload
def reallocate(
    weights: NDArray[Any],
    image_mask: ArrayLike,
    text_mask: ArrayLike,
    s: float | ArrayLike,
    *,
    r_min: float = ...,
    r_max: float = ...,
    tau: float = ...,
    temp: float = ...,
    gate: Gate = ...,
) -> NDArray[Any]: ...
def reallocate(
    weights: Any,
    image_mask: Any,
    text_mask: Any,
    s: float | ArrayLike,
    *,
    r_min: float = R_MIN,
    r_max: float = R_MAX,
    tau: float = TAU,
    temp: float = TEMP,
    gate: Gate = "hard",
) -> Any:
    """Attention rows ``weights`` [..., keys] (numpy array or torch tensor, post-softmax) after CECS
    Phase II (module doc). Masks are boolean, broadcastable to ``weights``; ``s`` is a scalar or
    broadcastable to ``weights.shape[:-1]`` (one score per row). Returns the same kind, dtype and
    shape; rows below the hard gate, or with S_V = 0 or S_T = 0, come back unchanged. The update is
    computed in float64 (numpy) or float32 (torch half types) and cast back, so a bfloat16 row keeps its
    mass only to bfloat16 precision."""
    r_target, gw, active = gate_terms(s, r_min=r_min, r_max=r_max, tau=tau, temp=temp, gate=gate)
    if isinstance(weights, np.ndarray):
        w = weights.astype(np.float64)
        img = np.asarray(image_mask, dtype=np.bool_)
        txt = np.asarray(text_mask, dtype=np.bool_)
        if (img & txt).any():
            raise ValueError("reallocate: a key is marked both image and description")
        out = _core(np, w, img, txt, r_target, gw, active, float(np.finfo(np.float64).tiny))
        return np.asarray(out).astype(weights.dtype if weights.dtype.kind == "f" else np.float64)
    import torch  # lazy: torch (a numpy caller never needs it; the module is torch-free at import)

    if not isinstance(weights, torch.Tensor):
        raise TypeError(f"reallocate: weights must be a numpy array or a torch tensor, got {type(weights)}")
    dtype = weights.dtype if weights.dtype in (torch.float32, torch.float64) else torch.float32
    dev = weights.device
    img_t = torch.as_tensor(image_mask, dtype=torch.bool, device=dev)
    txt_t = torch.as_tensor(text_mask, dtype=torch.bool, device=dev)
    if bool((img_t & txt_t).any()):
        raise ValueError("reallocate: a key is marked both image and description")
    out = _core(
        torch,
        weights.to(dtype),
        img_t,
        txt_t,
        torch.as_tensor(r_target, dtype=dtype, device=dev),
        torch.as_tensor(gw, dtype=dtype, device=dev),
        torch.as_tensor(active, device=dev),
        float(torch.finfo(dtype).tiny),
    )
    return out.to(weights.dtype)


# ------------------------------------------------------------------------------------------ window
def window_from_lss(lss_by_layer: ArrayLike) -> tuple[int, int]:
    """Default intervention window from a model's own LSS curve (App. D.3's "plateau"), 0-based inclusive.

    Rule: median-filter the curve over 3 layers (App. D.3 discards "erratic spikes in shallow layers";
    a one-layer spike does not survive a 3-layer median), take the curve's median as its baseline, and
    return the contiguous run of layers around the filtered peak whose filtered LSS is at least half way
    from the baseline to the peak (the peak's full width at half height). On a curve shaped like Fig. 8
    (≈1.5 with spikes at layers 1 and 5, a 17–24 plateau peaking near 6.3, < 1 after 24) this gives
    (17, 24). NaN layers (undefined LSS) never join the window; a curve without a peak above its
    baseline is a ValueError (no sink to steer)."""
    x = np.asarray(lss_by_layer, dtype=np.float64)
    if x.ndim != 1 or not np.isfinite(x).any():
        raise ValueError("window_from_lss: need a 1-D LSS curve with at least one finite value")
    padded = np.concatenate([x[:1], x, x[-1:]])
    windows = np.stack([padded[:-2], padded[1:-1], padded[2:]])
    finite = np.isfinite(windows)
    filt = np.full(x.shape, np.nan)
    for i in range(x.size):  # nan-aware median of each 3-layer window (np.nanmedian warns on all-NaN)
        vals = windows[finite[:, i], i]
        if vals.size and np.isfinite(x[i]):
            filt[i] = float(np.median(vals))
    base = float(np.nanmedian(filt))
    peak = int(np.nanargmax(filt))
    if not filt[peak] > base:
        raise ValueError("window_from_lss: the LSS curve has no peak above its median (no sink window)")
    threshold = base + 0.5 * (filt[peak] - base)
    lo = hi = peak
    while lo > 0 and filt[lo - 1] >= threshold:
        lo -= 1
    while hi < x.size - 1 and filt[hi + 1] >= threshold:
        hi += 1
    return lo, hi


# ------------------------------------------------------------------------------------------ hooks
def _row_scores(s: float | Sequence[float], batch: int) -> NDArray[np.float64]:
    arr = np.asarray(s, dtype=np.float64)
    if arr.ndim == 0:
        return np.full(batch, float(arr))
    if arr.shape != (batch,):
        raise ValueError(f"CECS modifier: {arr.size} conflict scores for a batch of {batch} rows")
    return arr


def make_modifier(
    s: float | Sequence[float],
    window: tuple[int, int],
    *,
    r_min: float = R_MIN,
    r_max: float = R_MAX,
    tau: float = TAU,
    temp: float = TEMP,
    gate: Gate = "hard",
) -> AttentionModifier:
    """An ``AttentionModifier`` applying :func:`reallocate` in layers ``window`` (inclusive) to the
    answer query of each batch row, and to every later query (the tokens generated after it).

    ``s`` is one score for every row, or one per batch row of each call the modifier will see (the
    caller batches prompts so; a mismatch is a ValueError). The answer query of row b is its last real
    prompt token, key position ``offset[b] + length[b] − 1``; query j of a call with Q queries over K
    keys sits at key position K − Q + j (prefill: all prompt positions; cached decoding: the new token).
    Image keys are ``TokenSpans.image_runs`` (exact image tokens) or ``image``; description keys
    ``description``. Outside the window, or when every row is below the hard gate, the input tensor is
    returned as is (the model's outputs are then unchanged)."""
    _check_params(r_min, r_max, tau, temp)
    first, last = window
    if not 0 <= first <= last:
        raise ValueError(f"CECS window {window}: need 0 <= first <= last (0-based, inclusive)")
    _scores(s)

    def modifier(layer: int, weights: torch.Tensor, spans: TokenSpans) -> torch.Tensor:
        import torch  # lazy: torch (the module is torch-free at import)

        if not first <= layer <= last:
            return weights
        batch, _, q_len, k_len = weights.shape
        if len(spans.length) != batch:
            raise ValueError(f"CECS modifier: spans of {len(spans.length)} rows for a batch of {batch}")
        scores = _row_scores(s, batch)
        if gate == "hard" and bool((scores < tau).all()):
            return weights
        offsets = spans.offset if spans.offset else [0] * batch
        answer = np.asarray([o + n - 1 for o, n in zip(offsets, spans.length, strict=True)])
        start = max(0, int(answer.min()) - (k_len - q_len))  # first query row any batch row modifies
        if start >= q_len:
            return weights
        img, txt = masks_from_spans(spans, k_len)
        part = weights[:, :, start:, :]
        new = reallocate(
            part,
            img[:, None, None, :],
            txt[:, None, None, :],
            scores[:, None, None],
            r_min=r_min,
            r_max=r_max,
            tau=tau,
            temp=temp,
            gate=gate,
        )
        q_pos = np.arange(k_len - q_len + start, k_len)
        rows = torch.as_tensor(q_pos[None, :] >= answer[:, None], device=weights.device)
        new = torch.where(rows[:, None, :, None], new, part)
        return torch.cat([weights[:, :, :start, :], new], dim=2)

    return modifier


def cecs_hooks(
    s: float | Sequence[float],
    window: tuple[int, int],
    *,
    r_min: float = R_MIN,
    r_max: float = R_MAX,
    tau: float = TAU,
    temp: float = TEMP,
    gate: Gate = "hard",
) -> Hooks:
    """``Hooks`` running :func:`make_modifier` in every layer of ``window``, tagged with every parameter
    (scores included, to 6 decimals) so the output cache never mixes two settings."""
    fn = make_modifier(s, window, r_min=r_min, r_max=r_max, tau=tau, temp=temp, gate=gate)
    scores = ",".join(f"{v:.6f}" for v in np.atleast_1d(np.asarray(s, dtype=np.float64)))
    tag = (
        f"cecs(s=[{scores}],layers={window[0]}-{window[1]},r=[{r_min},{r_max}],tau={tau},T={temp},"
        f"gate={gate})"
    )
    return Hooks(attention={layer: fn for layer in range(window[0], window[1] + 1)}, tag=tag)
