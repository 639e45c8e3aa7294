"""SAGE, See-Analyze-Generate (SPD-Faith §5.1, App. E, Alg. 1), as model hooks and pure functions.

Stage 1, Dynamic Visual Routing (Eq. 3/4), an attention modifier per decoder layer:
    A' = (1 + α)·A_vis + (1 − α)·A_sys + A_prompt
with vis = image-token keys (``TokenSpans.image_runs``), sys = the real keys before the first image
token (system prompt, template head), prompt = every other key (user text, generated tokens). α is
fixed (``alpha``) for layers ℓ < l_s; for ℓ ≥ l_s, α_t = α0 + f(δ_t), δ_t = (μ_t − μ_{t−1}) / μ_{t−1},
μ_t = the query row's attention over visual keys, mean over those keys and over heads, read from the
unmodified weights. Alg. 1 line 12 applies the same formula with α_t, sys factor included.
  * Not renormalised: the rows then sum to 1 + α(m_vis − m_sys), as Eq. 3 writes it (``renormalize=True``
    divides each row by its sum).
  * f(δ) = clip(κ·max(0, −δ), 0, α_max): only a decay (δ < 0) raises the enhancement (the paper's f is
    unstated; it "maps decay severity to enhancement magnitude").
  * Steps: within one call, consecutive query rows (t − 1 must be a real token of the row, so left
    padding never feeds δ); across single-row (KV-cached generation) calls, μ_{t−1} is kept per (layer,
    batch row) in the modifier and reset by every multi-row (prefill) call. No usable μ_{t−1} (the first
    row, or μ_{t−1} = 0 before any image token) means δ = 0.
  * Rows without image tokens are left unchanged (no visual attention to route).
Stage 2, Information Flow Rectification (Eq. 5/23), an FFN modifier per decoder layer: per position,
D_KL = KL(softmax(Δ_attn) ‖ softmax(Δ_ffn)) over the hidden dimension; where D_KL > τ the FFN update
is scaled, h ← h_{ℓ+½} + β·Δ_ffn (Alg. 1 lines 17-22).
Stage 3, Visual-Anchored Generation (Eq. 6/7/24, Alg. 1 lines 26-30), recomputed at every decoding
step from what the model shows at that step (:class:`SageStep`, :mod:`.sage_mask`): Ω_T = the top-k
cells of the token activation map of the token being generated (App. D.1 Eq. 18: its LM-head logit
read at each image token), Ω_A = the top-k cells of the step's attention to the image, M = Ω_A ∩ Ω_T,
the auxiliary pair = the prompt's pair with M occluded, L_main + η·ReLU(L_main − L_aux). "The token
being generated" is not known before Eq. 7 chooses it: it is the main path's greedy choice at the step
(argmax of L_main; for a decision, the top option), the token the step would emit without stage 3.
Generation passes :func:`sage_contrast` as ``Hooks.contrast`` (the model runs the step rule each step,
``faithtests.models.step_contrast``); a decision is one step, :func:`decision_aux_prompts` (the
protocol combines the two option logits with :func:`contrast_logits`). The rule reads the model's
logits, attention and hidden states only, never the pair's pixels (they are only occluded).
:func:`oracle_aux_prompts` is the ``sage-oracle`` diagnostic: Ω_T from the pair's pixel change, once per
prompt (an upper bound: it is handed the edits' location).

Every choice the paper leaves open is a field of :class:`SageConfig`, with its reason there.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

import numpy as np
from numpy.typing import NDArray

from faithtests.models.interfaces import Hooks, Prompt, TokenSpans, VisionLanguageModel
from faithtests.progress import stage
from faithtests.protocols.spdfaith.sage_mask import (
    FALLBACKS,
    Fallback,
    Grid,
    attention_grid,
    change_grid,
    discrepancy_mask,
    image_cells,
    masked_pair,
    occlude,
    token_activation,
)

if TYPE_CHECKING:
    import torch
    from PIL import Image

    from faithtests.models.step_contrast import StepContrast, StepReading

STAGES: Final[tuple[str, ...]] = ("see", "analyze", "generate")
#: τ of stage 2, measured on ``reference:vlm`` (:class:`SageConfig`): about the 90th percentile of D_KL.
KL_THRESHOLD: Final = 2.5
_TINY: Final = 1e-12


@dataclass(frozen=True)
class SageConfig:
    """SAGE's parameters. Paper values: alpha = 0.1 (§5.1, E.3), beta = 0.9, eta = 0.5 (E.3). Ours:

    * ``alpha0`` (None: ``alpha``): Alg. 1 uses one α0 for both the static and the adaptive branch.
    * ``shallow_layers`` l_s (None: num_layers // 2): the paper gives no value; half splits the
      decoder into the "shallow" and "deep" halves its Figure 7 analyses.
    * ``kappa`` = 1, ``alpha_max`` = 0.5: f(δ) = clip(κ·max(0, −δ), 0, α_max); a 10% drop in visual
      attention adds 0.1 to α, and α never exceeds α0 + α_max = 0.6 (so 1 − α_t > 0: system-prompt
      weights are damped, never negated).
    * ``kl_threshold`` τ = 2.5: Alg. 1 names τ without a value. Measured with :func:`kl_profile` on
      ``reference:vlm`` over the four SPD-Faith prompts of world pairs 0-39 (seed 0; 152 prompts,
      13,088 positions × 6 layers): the 90th percentile of D_KL is 2.7, and τ = 2.5 fires on 11.1% of
      (position, layer) cases — 29% at answer positions, mostly in the last layer, where D_KL is large
      at every answer position (per layer: 7.4, 0, 3.2, 0.2, 5.8, 50%). The KL's scale depends on the
      model's hidden size and update norms: calibrate τ for a real model with :func:`kl_profile`.
    * ``top_k`` = 6 cells for Ω_A and Ω_T: one sixth of the reference VLM's 6×6 grid, enough to hold the
      changed cells of up to five world edits; scale it with the grid for finer-grained models.
    * ``fallback``: see :mod:`.sage_mask` (empty Ω_A ∩ Ω_T → Ω_A).
    * ``stages``: which of "see" (1), "analyze" (2), "generate" (3) are on.
    """

    alpha: float = 0.1
    alpha0: float | None = None
    shallow_layers: int | None = None
    kappa: float = 1.0
    alpha_max: float = 0.5
    renormalize: bool = False
    beta: float = 0.9
    kl_threshold: float = KL_THRESHOLD
    eta: float = 0.5
    top_k: int = 6
    fallback: Fallback = "attention"
    stages: tuple[str, ...] = field(default=STAGES)

    def __post_init__(self) -> None:
        a0 = self.base_alpha
        if not (0.0 <= self.alpha <= 1.0 and 0.0 <= a0 <= 1.0):
            raise ValueError(f"SAGE: alpha={self.alpha}, alpha0={a0} must lie in [0, 1] (1 - alpha >= 0)")
        if not (math.isfinite(self.kappa) and self.kappa >= 0 and self.alpha_max >= 0
                and a0 + self.alpha_max <= 1.0):  # kappa=inf would turn Eq. 4's ramp into a step
            raise ValueError(f"SAGE: need finite kappa >= 0, alpha_max >= 0 and alpha0 + alpha_max <= 1, got "
                             f"kappa={self.kappa}, alpha_max={self.alpha_max}, alpha0={a0}")
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"SAGE: beta must lie in [0, 1] (Eq. 5's suppression), got {self.beta}")
        if math.isnan(self.kl_threshold) or self.kl_threshold < 0:
            raise ValueError(f"SAGE: kl_threshold must be >= 0 (inf: never fires), got {self.kl_threshold}")
        if not (math.isfinite(self.eta) and self.eta >= 0):
            raise ValueError(f"SAGE: eta must be finite and >= 0 (Eq. 7), got {self.eta}")
        if self.top_k < 1 or (self.shallow_layers is not None and self.shallow_layers < 0):
            raise ValueError(f"SAGE: need top_k >= 1 and shallow_layers >= 0, got {self.top_k}, "
                             f"{self.shallow_layers}")
        if self.fallback not in FALLBACKS:
            raise ValueError(f"SAGE: unknown fallback {self.fallback!r}; expected one of {FALLBACKS}")
        unknown = set(self.stages) - set(STAGES)
        if unknown:
            raise ValueError(f"SAGE: unknown stages {sorted(unknown)}; expected some of {STAGES}")

    @property
    def base_alpha(self) -> float:
        return self.alpha if self.alpha0 is None else self.alpha0

    def split(self, num_layers: int) -> int:
        """l_s: layers ℓ < l_s get the static α, the rest the adaptive α_t."""
        return num_layers // 2 if self.shallow_layers is None else self.shallow_layers

    def tag(self, num_layers: int) -> str:
        """Names stages 1-2 and their parameters (``Hooks.tag``: the output cache's key)."""
        parts = []
        if "see" in self.stages:
            parts.append(f"see(alpha={self.alpha},alpha0={self.base_alpha},l_s={self.split(num_layers)},"
                         f"kappa={self.kappa},alpha_max={self.alpha_max},renormalize={self.renormalize})")
        if "analyze" in self.stages:
            parts.append(f"analyze(beta={self.beta},kl_threshold={self.kl_threshold})")
        return "sage-v1[" + ";".join(parts) + "]"

    def mask_tag(self, oracle: bool = False) -> str:
        """Names how stage 3's auxiliary prompts are built (``Contrast.tag``): per step from the model
        (:class:`SageStep`), or for ``sage-oracle`` once per prompt from the pixel change
        (:func:`oracle_aux_prompts`, with the plain model's attention)."""
        if oracle:
            return f"sage-mask-v1(top_k={self.top_k},fallback={self.fallback},fill=mean,omega_t=pixel-change)"
        return (f"sage-mask-v2(top_k={self.top_k},fallback={self.fallback},fill=mean,per-step,"
                f"omega_a=step-attention,omega_t=tam-eq18)")


# ----------------------------------------------------------------------------------------- stage 1
def key_masks(spans: TokenSpans, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(vis, sys) [B, width] bool: image-token keys; real keys before a row's first image token."""
    import torch  # lazy: torch (this module is torch-free at import)

    rows = len(spans.length)
    vis = torch.zeros(rows, width, dtype=torch.bool)
    head = torch.zeros(rows, width, dtype=torch.bool)
    for b in range(rows):
        runs = spans.image_runs[b] if spans.image_runs else [spans.image[b]]
        runs = [(s, e) for s, e in runs if e > s]
        for s, e in runs:
            vis[b, s:e] = True
        if runs:
            head[b, (spans.offset[b] if spans.offset else 0) : min(s for s, _ in runs)] = True
    return vis, head


def modulate(
    weights: torch.Tensor, vis: torch.Tensor, head: torch.Tensor, alpha: torch.Tensor,
    renormalize: bool = False,
) -> torch.Tensor:
    """Eq. 3 on [B, H, Q, K] weights: vis keys × (1 + α), sys keys × (1 − α), the rest unchanged, with α
    per (row, query) [B, Q]; optionally each row divided by its new sum."""
    import torch  # lazy: torch (this module is torch-free at import)

    shift = vis.to(weights.device, torch.float32) - head.to(weights.device, torch.float32)  # [B, K]
    factor = 1.0 + alpha.to(weights.device, torch.float32)[:, None, :, None] * shift[:, None, None, :]
    out = weights.float() * factor
    if renormalize:
        out = out / out.sum(dim=-1, keepdim=True).clamp_min(_TINY)
    return out.to(weights.dtype)


def visual_mean(weights: torch.Tensor, vis: torch.Tensor) -> torch.Tensor:
    """μ per (row, query) [B, Q]: attention over visual keys, mean over those keys and over heads."""
    import torch  # lazy: torch (this module is torch-free at import)

    v = vis.to(weights.device, torch.float32)
    total = (weights.float() * v[:, None, None, :]).sum(dim=-1).mean(dim=1)
    return total / v.sum(dim=-1, keepdim=True).clamp_min(1.0)


def adaptive_alpha(mu: torch.Tensor, prev: torch.Tensor, cfg: SageConfig) -> torch.Tensor:
    """Eq. 4: α0 + f(δ), δ = (μ − μ_prev)/μ_prev, f(δ) = clip(κ·max(0, −δ), 0, α_max); δ = 0 where
    μ_prev is missing (NaN) or 0."""
    import torch  # lazy: torch (this module is torch-free at import)

    ok = torch.isfinite(prev) & (prev > _TINY)
    delta = torch.where(ok, (mu - prev) / torch.where(ok, prev, torch.ones_like(prev)), torch.zeros_like(mu))
    return cfg.base_alpha + (cfg.kappa * torch.relu(-delta)).clamp(0.0, cfg.alpha_max)


class VisualRouting:
    """Stage 1 as an attention modifier (module doc); one instance serves every layer."""

    def __init__(self, num_layers: int, cfg: SageConfig) -> None:
        self.cfg = cfg
        self.split = cfg.split(num_layers)
        self.last_mu: dict[int, torch.Tensor] = {}  # layer -> μ of each batch row's latest query [B]
        self._masks: tuple[TokenSpans, int, torch.Tensor, torch.Tensor] | None = None

    def _key_masks(self, spans: TokenSpans, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self._masks is None or self._masks[0] is not spans or self._masks[1] != width:
            self._masks = (spans, width, *key_masks(spans, width))
        return self._masks[2], self._masks[3]

    def __call__(self, layer: int, weights: torch.Tensor, spans: TokenSpans) -> torch.Tensor:
        import torch  # lazy: torch (this module is torch-free at import)

        rows, _, q, k = weights.shape
        vis, head = self._key_masks(spans, k)
        if layer < self.split:
            alpha = torch.full((rows, q), self.cfg.alpha)
        else:
            alpha = self.alpha_t(layer, weights, vis, spans)
        return modulate(weights, vis, head, alpha, self.cfg.renormalize)

    def alpha_t(
        self, layer: int, weights: torch.Tensor, vis: torch.Tensor, spans: TokenSpans
    ) -> torch.Tensor:
        """α_t per (row, query) for a deep layer; updates the layer's μ state."""
        import torch  # lazy: torch (this module is torch-free at import)

        mu = visual_mean(weights, vis).cpu()
        rows, q = mu.shape
        k = weights.shape[-1]
        prev = torch.full_like(mu, math.nan)
        if q > 1:  # a prefill: consecutive real query rows; the state restarts here
            prev[:, 1:] = mu[:, :-1]
            offsets = torch.tensor(spans.offset if spans.offset else [0] * rows)[:, None]
            before = torch.arange(k - q, k)[None, :] - 1  # absolute position of each row's previous query
            prev = torch.where(before >= offsets, prev, torch.full_like(prev, math.nan))
        else:
            last = self.last_mu.get(layer)
            if last is not None and last.shape[0] == rows:
                prev[:, 0] = last
        self.last_mu[layer] = mu[:, -1].clone()
        return adaptive_alpha(mu, prev, self.cfg)


# ----------------------------------------------------------------------------------------- stage 2
def kl_divergence(delta_attn: torch.Tensor, delta_ffn: torch.Tensor) -> torch.Tensor:
    """Eq. 5 / 23 per position [...]: Σ_d p_d·log(p_d/q_d), p = softmax(Δ_attn), q = softmax(Δ_ffn) over
    the last (hidden) dimension, in float32."""
    import torch  # lazy: torch (this module is torch-free at import)

    lp = torch.log_softmax(delta_attn.float(), dim=-1)
    lq = torch.log_softmax(delta_ffn.float(), dim=-1)
    return (lp.exp() * (lp - lq)).sum(dim=-1)


@dataclass
class KlMonitor:
    """What stage 2 saw: positions examined and fired on (every layer, every call)."""

    positions: int = 0
    fired: int = 0

    @property
    def fraction(self) -> float:
        return self.fired / self.positions if self.positions else math.nan


class FlowRectifier:
    """Stage 2 as an FFN modifier: Δ_ffn ← β·Δ_ffn where D_KL > τ (Eq. 5, Alg. 1 lines 19-20)."""

    def __init__(self, beta: float, threshold: float, monitor: KlMonitor | None = None) -> None:
        self.beta = beta
        self.threshold = threshold
        self.monitor = monitor

    def __call__(self, layer: int, delta_attn: torch.Tensor, delta_ffn: torch.Tensor) -> torch.Tensor:
        import torch  # lazy: torch (this module is torch-free at import)

        fire = kl_divergence(delta_attn, delta_ffn) > self.threshold
        if self.monitor is not None:
            self.monitor.positions += fire.numel()
            self.monitor.fired += int(fire.sum())
        if self.beta == 1.0 or not bool(fire.any()):
            return delta_ffn
        return torch.where(fire[..., None], delta_ffn * self.beta, delta_ffn)


def sage_hooks(num_layers: int, cfg: SageConfig | None = None, monitor: KlMonitor | None = None) -> Hooks:
    """Stages 1 ("see") and 2 ("analyze") on every decoder layer, tagged ``cfg.tag(num_layers)``; empty
    hooks when neither stage is on. Stage 3 is the protocol's (:func:`contrast_logits`, ``Contrast``)."""
    cfg = cfg or SageConfig()
    # A monitored call must run: a stored output would skip the counts (no tag: never stored).
    hooks = Hooks(tag=None if monitor is not None else cfg.tag(num_layers))
    if "see" in cfg.stages:
        routing = VisualRouting(num_layers, cfg)
        hooks.attention = {layer: routing for layer in range(num_layers)}
    if "analyze" in cfg.stages:
        rectifier = FlowRectifier(cfg.beta, cfg.kl_threshold, monitor)
        hooks.ffn = {layer: rectifier for layer in range(num_layers)}
    return hooks


def kl_profile(vlm: VisionLanguageModel, prompts: Sequence[Prompt]) -> NDArray[np.float64]:
    """Eq. 5's D_KL at every real position of each prompt, per layer [layers, positions] (the prompts
    one at a time, so no padding is measured; the recording hooks carry no tag, so no output cache
    answers in their place). ``np.quantile(kl_profile(...), 1 - f)`` is a τ firing on a fraction f."""
    layers: list[list[float]] = [[] for _ in range(vlm.num_layers)]

    def record(layer: int, delta_attn: torch.Tensor, delta_ffn: torch.Tensor) -> torch.Tensor:
        layers[layer].extend(kl_divergence(delta_attn, delta_ffn).flatten().tolist())
        return delta_ffn

    hooks = Hooks(ffn={layer: record for layer in range(vlm.num_layers)})
    with stage("SAGE KL profile", total=len(prompts), model=vlm.spec) as progress:
        for p in prompts:
            vlm.states([p], hooks)
            progress.advance()
    return np.asarray(layers, dtype=np.float64)


# ----------------------------------------------------------------------------------------- stage 3
T = TypeVar("T")


def contrast_logits(main: T, aux: T, eta: float) -> T:
    """Eq. 7 / 24: L_main + η·ReLU(L_main − L_aux), on torch tensors or numpy arrays (float64)."""
    if not (math.isfinite(eta) and eta >= 0):
        raise ValueError(f"contrast_logits: eta must be finite and >= 0, got {eta}")
    torch_mod: Any = sys.modules.get("torch")
    if torch_mod is not None and isinstance(main, torch_mod.Tensor):
        out: Any = main + eta * torch_mod.relu(main - aux)
        return out  # type: ignore[no-any-return]
    m, a = np.asarray(main, dtype=np.float64), np.asarray(aux, dtype=np.float64)
    result: Any = m + eta * np.maximum(m - a, 0.0)
    return result  # type: ignore[no-any-return]


def oracle_aux_prompts(
    vlm: VisionLanguageModel,
    prompts: Sequence[Prompt],
    pairs: Sequence[tuple[Image.Image, Image.Image]],
    cfg: SageConfig | None = None,
    *,
    hooks: Hooks | None = None,
    grid: Grid | None = None,
) -> list[Prompt]:
    """``sage-oracle``'s auxiliary prompts (not the paper's method): each prompt with its pair masked,
    Ω_A from ``vlm.attentions(prompts, hooks)`` (the plain model by default), Ω_T from the pair's pixel
    change, both at the model's patch grid (``grid`` overrides the square-root rule), once per prompt."""
    cfg = cfg or SageConfig()
    if len(pairs) != len(prompts):
        raise ValueError(f"oracle_aux_prompts: {len(pairs)} pairs for {len(prompts)} prompts")
    att = vlm.attentions(prompts, hooks)
    out: list[Prompt] = []
    for i, (p, (a, b)) in enumerate(zip(prompts, pairs, strict=True)):
        omega_a = attention_grid(att, i, len(p.images), grid)
        change = change_grid(a, b, (omega_a.shape[0], omega_a.shape[1]))
        mask = discrepancy_mask(omega_a, change, cfg.top_k, cfg.fallback, positive_activation=True)
        out.append(Prompt(images=masked_pair(a, b, mask), text=p.text, description=p.description))
    return out


@dataclass(frozen=True)
class SageStep:
    """Stage 3's rule at one decoding step (module doc; Eq. 6, Alg. 1 lines 26-29): the mask from the
    step's reading, then the base prompt's images with it occluded (the base prompt itself when the mask
    is empty). Picklable, so a process pool can ship it with the hooks."""

    top_k: int = 6
    fallback: Fallback = "attention"
    grid: Grid | None = None

    def token(self, reading: StepReading) -> int:
        """y_t: the main path's greedy choice (argmax of L_main; among ``reading.candidates`` if set)."""
        logits = reading.logits.float()
        if reading.candidates is None:
            return int(logits.argmax())
        cand = list(reading.candidates)
        return cand[int(logits[cand].argmax())]

    def mask(self, reading: StepReading, n_images: int) -> NDArray[np.bool_]:
        """M = top-k(Ω_A) ∩ top-k(Ω_T) from the model's reading alone (no image is an argument)."""
        pos = list(reading.image_positions)
        per_key = reading.attention.double().mean(dim=(0, 1)).numpy()
        omega_a = image_cells(per_key[pos], n_images, self.grid)
        # the unembedding is the LM head itself, on the model's device (CUDA too): one row comes to the host
        head = reading.unembedding[self.token(reading)].double().cpu().numpy()
        tam = token_activation(reading.image_states.double().numpy(), head)
        omega_t = image_cells(tam, n_images, self.grid)
        return discrepancy_mask(omega_a, omega_t, self.top_k, self.fallback)

    def choice(self, base: Prompt, reading: StepReading) -> NDArray[np.bool_]:
        """The step's mask (stored as a decision's step-0 choice with ``--faith-cache``)."""
        return self.mask(reading, len(base.images))

    def apply(self, base: Prompt, choice: NDArray[np.bool_]) -> Prompt:
        """``base`` with the cells of mask ``choice`` occluded (``base`` itself when none is)."""
        if not choice.any():
            return base
        return Prompt(images=tuple(occlude(im, choice) for im in base.images), text=base.text,
                      description=base.description)

    def __call__(self, base: Prompt, reading: StepReading) -> Prompt:
        return self.apply(base, self.choice(base, reading))


def sage_contrast(prompts: Sequence[Prompt], cfg: SageConfig | None = None, grid: Grid | None = None
                  ) -> StepContrast:
    """``Hooks.contrast`` for generation: the step rule on each prompt, η of ``cfg``."""
    # lazy: torch (the models modules import it; this module is torch-free at import)
    from faithtests.models.step_contrast import StepContrast

    cfg = cfg or SageConfig()
    return StepContrast(tuple(prompts), cfg.eta, cfg.mask_tag(), step=SageStep(cfg.top_k, cfg.fallback, grid))


def decision_aux_prompts(
    vlm: VisionLanguageModel, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None,
    cfg: SageConfig | None = None, grid: Grid | None = None,
) -> list[Prompt]:
    """A decision's auxiliary prompts: the answer step of generation (step 0) read from the main path
    (``hooks`` on), y_t = the top option, the step rule's masked prompts."""
    from faithtests.models.step_contrast import decision_aux  # lazy: torch

    # the step's masks are stored with --faith-cache (SageStep is a SplitStep): a warm run loads no model
    return decision_aux(vlm, prompts, options, hooks, sage_contrast(prompts, cfg, grid),
                        "SAGE stage 3 reads the answer step's hidden states and attention", "SAGE masks")
