"""Hook machinery for HF decoders: attention-weight modifiers, attention capture, MLP scales, FFN-update
modifiers, state capture.

One attention function is registered with transformers under :data:`ATTENTION_NAME` and set on the text
model only (``set_attn_implementation({"text_config": ATTENTION_NAME})``; the vision tower keeps its own).
It must be registered with *both* ``AttentionInterface`` and ``AttentionMaskInterface``: a name unknown to
the mask interface makes transformers build no mask at all, silently dropping the causal mask
(docs/architecture.md, "Mechanisms measured to work"). The mask registered is transformers' ``eager_mask`` (an
additive float mask), which SDPA accepts as well.

The function reads what to do from a context variable, so a model call needs no extra arguments:
- no active context, or a layer without modifier and nothing to capture: SDPA (fast path);
- a layer with a modifier: eager attention, softmaxed weights passed through the modifier, then ``@ V``;
- capture requested: the weights of the requested query rows (or of each row's last query,
  ``capture_last``: generation's current step) are stored per layer ([N, heads, keys]).

The residual-stream hooks (MLP scales, FFN modifiers: :func:`residual_hooks`) are plain forward hooks on
the modules whose outputs are the sub-layers' residual updates (:func:`residual_ffn_module`,
:func:`residual_attention_module`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from faithtests.models.capabilities import mixer
from faithtests.models.interfaces import AttentionModifier, FfnModifier, Hooks, TokenSpans

ATTENTION_NAME = "faithtests_hookable"


@dataclass
class AttentionContext:
    """What the registered attention function does during one model call."""

    modifiers: Mapping[int, AttentionModifier] = field(default_factory=dict)
    spans: TokenSpans | None = None
    #: per batch row, the query index (in this call's query axis) whose weights are stored; None: no capture
    capture_rows: torch.Tensor | None = None
    captured: dict[int, torch.Tensor] = field(default_factory=dict)
    #: capture every row's last query of each call (its latest token: the prefill's last prompt position,
    #: then each decoding step's one query), overwriting the layer's entry call by call (SAGE, per step)
    capture_last: bool = False

    def rows_to_capture(self, batch: int, queries: int) -> torch.Tensor | None:
        if self.capture_rows is not None:
            return self.capture_rows
        return torch.full((batch,), queries - 1, dtype=torch.long) if self.capture_last else None


_ACTIVE: ContextVar[AttentionContext | None] = ContextVar("faithtests_attention", default=None)


@contextlib.contextmanager
def attention_context(ctx: AttentionContext) -> Iterator[AttentionContext]:
    token = _ACTIVE.set(ctx)
    try:
        yield ctx
    finally:
        _ACTIVE.reset(token)


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    if groups == 1:
        return x
    b, h, s, d = x.shape
    return x[:, :, None].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)


def _scores(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    mask: torch.Tensor | None,
    scaling: float | None,
    softcap: float | None,
) -> torch.Tensor:
    """Softmaxed attention weights [B, H, Q, K] exactly as transformers' eager attention computes them."""
    if scaling is None:
        scaling = float(query.shape[-1]) ** -0.5
    key = _repeat_kv(key, int(getattr(module, "num_key_value_groups", 1)))
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if mask is not None:
        scores = scores + mask[:, :, :, : key.shape[-2]]
    return nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)


def _full_mask(
    module: nn.Module, mask: torch.Tensor | None, query: torch.Tensor, key: torch.Tensor
) -> torch.Tensor | None:
    """The additive mask, made explicit: transformers may pass None for a plain causal layout (SDPA then
    uses ``is_causal``); the eager path and the captures need the causal mask written out."""
    q_len, kv_len = query.shape[2], key.shape[2]
    if mask is not None or q_len == 1 or not getattr(module, "is_causal", True):
        return mask
    q_pos = torch.arange(kv_len - q_len, kv_len, device=query.device)[:, None]
    k_pos = torch.arange(kv_len, device=query.device)[None, :]
    causal = torch.zeros(q_len, kv_len, dtype=query.dtype, device=query.device)
    causal = causal.masked_fill(k_pos > q_pos, torch.finfo(query.dtype).min)
    return causal[None, None].expand(query.shape[0], 1, q_len, kv_len)


def hookable_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention function registered under :data:`ATTENTION_NAME` (signature of transformers' interface)."""
    # lazy: a warm run imports no transformers
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    ctx = _ACTIVE.get()
    layer = getattr(module, "layer_idx", None)
    modifier = ctx.modifiers.get(layer) if ctx is not None and layer is not None else None
    wanted = ctx.rows_to_capture(query.shape[0], query.shape[2]) if ctx is not None else None
    capture = wanted is not None and layer is not None
    if modifier is None and softcap is None:
        out, _ = sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
        if capture:
            assert ctx is not None and wanted is not None and layer is not None
            rows = wanted.to(query.device)
            batch = torch.arange(query.shape[0], device=query.device)
            q = query[batch, :, rows].unsqueeze(2)
            full = _full_mask(module, attention_mask, query, key)
            m = None if full is None else full[batch, :, rows].unsqueeze(2)
            ctx.captured[layer] = _scores(module, q, key, m, scaling, softcap)[:, :, 0].float().cpu()
        return out, None

    weights = _scores(module, query, key, _full_mask(module, attention_mask, query, key), scaling, softcap)
    if modifier is not None:
        assert ctx is not None and ctx.spans is not None and layer is not None
        weights = modifier(layer, weights, ctx.spans)
    if capture:
        assert ctx is not None and wanted is not None and layer is not None
        rows = wanted.to(query.device)
        batch = torch.arange(weights.shape[0], device=weights.device)
        ctx.captured[layer] = weights[batch, :, rows].float().cpu()
    value = _repeat_kv(value, int(getattr(module, "num_key_value_groups", 1)))
    out = torch.matmul(weights.to(value.dtype), value).transpose(1, 2).contiguous()
    return out, weights


def register_attention() -> str:
    """Register the hookable attention with both interfaces and return its name.

    Checked against the live registries on every call (cheap dict lookups), not a module flag: if
    transformers' modules were re-imported (e.g. by an in-process test runner), a stale flag would leave
    the new mask registry without the name, and transformers would silently drop the causal mask."""
    from transformers import AttentionInterface  # lazy: the live registries (docstring); not on a warm run
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    if AttentionInterface._global_mapping.get(ATTENTION_NAME) is not hookable_attention:
        AttentionInterface.register(ATTENTION_NAME, hookable_attention)
    if AttentionMaskInterface._global_mapping.get(ATTENTION_NAME) is not eager_mask:
        AttentionMaskInterface.register(ATTENTION_NAME, eager_mask)
    return ATTENTION_NAME


def residual_ffn_module(layer: nn.Module) -> nn.Module:
    """The module whose output is the FFN's contribution to the residual stream.

    Families with a post-FFN norm (Gemma 2/3) add ``post_feedforward_layernorm(mlp(x))``; scaling ``mlp``
    there would be undone by the RMSNorm, so the norm's output is the one scaled. The FFN itself is
    ``mlp`` (most families) or ``feed_forward`` (Llama 4).
    """
    for name in ("post_feedforward_layernorm", "mlp", "feed_forward"):
        module = getattr(layer, name, None)
        if isinstance(module, nn.Module):
            return module
    raise AttributeError(f"decoder layer {type(layer).__name__} has no `mlp` submodule to scale")


def residual_attention_module(layer: nn.Module) -> nn.Module:
    """The module whose output is the mixing sub-layer's update of the residual stream.

    Families with post-sub-layer norms (Gemma 2/3, OLMo 2: recognised by ``post_feedforward_layernorm``,
    as in :func:`residual_ffn_module`) add ``post_attention_layernorm(self_attn(x))``; elsewhere (Llama,
    Qwen) ``post_attention_layernorm`` is the FFN's *pre*-norm and the mixer's output is the update. The
    mixer is found by the layer's kind (:func:`~.capabilities.mixer`: self-attention, linear attention,
    convolution...), so a hybrid model's every layer has one.
    """
    post = getattr(layer, "post_attention_layernorm", None)
    sandwich = isinstance(getattr(layer, "post_feedforward_layernorm", None), nn.Module)
    if sandwich and isinstance(post, nn.Module):
        return post
    found = mixer(layer)
    if found is not None:
        return found[1]
    raise AttributeError(f"decoder layer {type(layer).__name__} has no `self_attn` submodule")


def _first(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, tuple | list) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise TypeError(f"unexpected module output type {type(output).__name__}")


@contextlib.contextmanager
def mlp_scales(layers: nn.ModuleList, scales: Mapping[int, float]) -> Iterator[None]:
    """Multiply the FFN residual contribution of layer ``l`` by ``scales[l]`` while the context is open."""
    handles = []
    for index, factor in scales.items():
        if not 0 <= index < len(layers):
            raise IndexError(f"mlp_scale layer {index} out of range (model has {len(layers)} decoder layers)")

        def hook(_m: nn.Module, _i: Any, output: Any, factor: float = float(factor)) -> Any:
            if isinstance(output, torch.Tensor):
                return output * factor
            return (output[0] * factor, *output[1:])

        handles.append(residual_ffn_module(layers[index]).register_forward_hook(hook))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _replace_first(output: Any, value: torch.Tensor) -> Any:
    return value if isinstance(output, torch.Tensor) else (value, *output[1:])


@contextlib.contextmanager
def ffn_modifiers(layers: nn.ModuleList, modifiers: Mapping[int, FfnModifier]) -> Iterator[None]:
    """Replace the FFN residual update of layer ``l`` by ``modifiers[l](l, delta_attn, delta_ffn)`` while
    the context is open; ``delta_attn`` is the same layer's attention update of the same forward call.

    Modifiers run at every position a call computes, so they must act per position: with a KV cache
    (generation steps, shared prefixes) each call presents only its new positions."""
    handles = []
    for index, fn in modifiers.items():
        if not 0 <= index < len(layers):
            raise IndexError(f"ffn modifier layer {index} out of range ({len(layers)} decoder layers)")
        seen: dict[str, torch.Tensor] = {}

        def grab(_m: nn.Module, _i: Any, output: Any, seen: dict[str, torch.Tensor] = seen) -> None:
            seen["attn"] = _first(output)

        def rewrite(
            _m: nn.Module, _i: Any, output: Any, index: int = index, fn: FfnModifier = fn,
            seen: dict[str, torch.Tensor] = seen,
        ) -> Any:
            delta_ffn = _first(output)
            delta_attn = seen.pop("attn", None)  # popped: a stale update can never pair with a later call
            if delta_attn is None or delta_attn.shape != delta_ffn.shape:
                raise RuntimeError(f"layer {index}: no attention update of shape {tuple(delta_ffn.shape)} "
                                   "was captured before its FFN ran")
            new = fn(index, delta_attn, delta_ffn)
            if new is delta_ffn:
                return None  # unchanged: keep the module's own output object
            return _replace_first(output, new.to(delta_ffn.dtype))

        layer = layers[index]
        handles.append(residual_attention_module(layer).register_forward_hook(grab))
        handles.append(residual_ffn_module(layer).register_forward_hook(rewrite))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def residual_hooks(layers: nn.ModuleList, hooks: Hooks | None) -> Iterator[None]:
    """``hooks.mlp_scale`` then ``hooks.ffn`` (an FFN modifier sees the scaled update) for one call."""
    with contextlib.ExitStack() as stack:
        if hooks is not None and hooks.mlp_scale:
            stack.enter_context(mlp_scales(layers, hooks.mlp_scale))
        if hooks is not None and hooks.ffn:
            stack.enter_context(ffn_modifiers(layers, hooks.ffn))
        yield


def refuse_contrast(hooks: Hooks | None, method: str) -> None:
    """``Hooks.contrast`` steers free generation only: a scoring call refuses it rather than ignore it."""
    if hooks is not None and hooks.contrast is not None:
        raise ValueError(
            f"{method}: Hooks.contrast applies to generate() only; call {method} on the prompts and on "
            "contrast.aux separately (hooks without contrast) and combine the two logits in the protocol "
            "(SPD-Faith Eq. 7: L_main + eta * ReLU(L_main - L_aux))"
        )


@contextlib.contextmanager
def capture_states(
    layers: nn.ModuleList, rows: torch.Tensor, store: list[torch.Tensor | None]
) -> Iterator[None]:
    """Store each decoder layer's output at position ``rows[b]`` of batch row ``b`` into ``store[layer]``
    ([B, D], float32, CPU). Only those positions are copied, so long prompts cost no extra memory."""
    handles = []
    for index, layer in enumerate(layers):

        def hook(_m: nn.Module, _i: Any, output: Any, index: int = index) -> None:
            hidden = _first(output)
            r = rows.to(hidden.device)
            store[index] = hidden[torch.arange(hidden.shape[0], device=hidden.device), r].float().cpu()

        handles.append(layer.register_forward_hook(hook))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
