"""What a loaded model can and cannot do, found once at load and read by every call that needs it.

A family may lack something a white-box check needs: no chat template (PaliGemma as released), decoder
layers without softmax self-attention (linear attention in Qwen3.5, LFM2's convolutions, Mllama's
cross-attention), layers whose residual updates are gated (Mllama), image tokens that are no square
patch grid (tiled images: LLaVA-NeXT, OneVision). The adapter describes that at load
(:func:`describe_layers`, :func:`patch_grid_support`), stores it with its description (so a warm run
knows without loading), and a call that needs what the model lacks raises :class:`NotApplicable`
before touching a prompt: the plugin turns it into a *not applicable* outcome with the reason, never
an exception per prompt nor a silent cut.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from faithtests.models.errors import NotApplicable
from faithtests.models.interfaces import Hooks

if TYPE_CHECKING:
    from torch import nn

#: Submodules of a decoder layer that mix positions, by kind; the first present names the layer's kind.
MIXERS: tuple[tuple[str, str], ...] = (
    ("self_attn", "self-attention"),
    ("cross_attn", "cross-attention"),
    ("linear_attn", "linear attention"),
    ("conv", "convolution"),
    ("mamba", "state space"),
    ("mixer", "state space"),
)


def mixer(layer: nn.Module) -> tuple[str, nn.Module] | None:
    """(kind, module) of the decoder layer's position mixer, or None when none is recognised."""
    from torch import nn  # lazy: the plugin imports this module (through the Ray pool) without torch

    for name, kind in MIXERS:
        module = getattr(layer, name, None)
        if isinstance(module, nn.Module):
            return kind, module
    return None


def _gated(layer: nn.Module) -> bool:
    """A layer that scales its sub-layer updates by learnt gates before adding them (Mllama's
    ``cross_attn_attn_gate`` / ``cross_attn_mlp_gate``): hooks on the sub-modules see pre-gate outputs."""
    return any("gate" in name and p.dim() <= 1 for name, p in layer.named_parameters(recurse=False))


def _listed(layers: list[tuple[int, str]]) -> str:
    """'layers 0, 2 (linear attention, Qwen3_5GatedDeltaNet)' grouped by kind and class, in order."""
    groups: dict[str, list[int]] = {}
    for index, what in layers:
        groups.setdefault(what, []).append(index)
    return "; ".join(f"layer{'s' if len(ix) > 1 else ''} {', '.join(map(str, ix))} ({what})"
                     for what, ix in groups.items())


def describe_layers(layers: nn.ModuleList) -> dict[str, str]:
    """feature -> reason for what the decoder layers cannot give (attention, residual hooks)."""
    no_attention: list[tuple[int, str]] = []
    no_residual: list[tuple[int, str]] = []
    for index, layer in enumerate(layers):
        found = mixer(layer)
        if found is None:
            no_attention.append((index, f"no recognised mixer in {type(layer).__name__}"))
            no_residual.append((index, f"no recognised mixer in {type(layer).__name__}"))
            continue
        kind, module = found
        if kind != "self-attention":
            what = f"{kind}, {type(module).__name__}: no attention weights over the prompt"
            no_attention.append((index, what))
        if _gated(layer):
            no_residual.append((index, f"{type(layer).__name__} gates its updates"))
        elif getattr(layer, "mlp", None) is None and getattr(layer, "feed_forward", None) is None:
            no_residual.append((index, f"{type(layer).__name__} has no mlp"))
    out: dict[str, str] = {}
    if no_attention:
        out["attention"] = f"decoder {_listed(no_attention)}"
    if no_residual:
        out["residual_hooks"] = f"decoder {_listed(no_residual)}"
    return out


def patch_grid_support(tokens_per_image: int, size: tuple[int, int]) -> str:
    """"" when one image of ``size`` becomes a square number of image tokens, else why not."""
    side = math.isqrt(tokens_per_image)
    if tokens_per_image > 0 and side * side == tokens_per_image:
        return ""
    return (f"a {size[0]}x{size[1]} image becomes {tokens_per_image} image tokens, not one square patch grid "
            "(tiled images, or tokens beside the patches)")


def lacks(model: object, feature: str) -> str:
    """Why ``model`` lacks ``feature`` ("" when it has it, or does not say: a plug-in model)."""
    said = getattr(model, "lacks", None)
    return str(said(feature)) if callable(said) else ""


def require(model: object, *features: str) -> None:
    """Raise :class:`NotApplicable` for the first of ``features`` the model lacks."""
    for feature in features:
        if why := lacks(model, feature):
            raise NotApplicable(str(getattr(model, "spec", type(model).__name__)), feature, why)


def hook_features(hooks: Hooks | None) -> tuple[str, ...]:
    """What a call with ``hooks`` needs beyond plain forwards."""
    if hooks is None:
        return ()
    needs: list[str] = []
    stepped = hooks.contrast is not None and getattr(hooks.contrast, "step", None) is not None
    if hooks.attention or stepped:
        needs.append("attention")
    if hooks.ffn or hooks.mlp_scale:
        needs.append("residual_hooks")
    if hooks.contrast is not None:
        needs.append("logits_processors")
    return tuple(needs)


def require_call(model: object, kind: str, hooks: Hooks | None) -> None:
    """What every call of an adapter checks first: the chat template, attention for captures, and what
    its hooks need."""
    require(model, "chat_template", *(("attention",) if kind == "attentions" else ()), *hook_features(hooks))


def stored_lacks(meta: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in dict(meta.get("lacks") or {}).items() if v}
