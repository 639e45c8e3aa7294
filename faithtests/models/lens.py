"""The logit lens: a decoder layer's hidden state read through the model's own final norm and
unembedding (IMAVB Eqs. 3–4; nostalgebraist's logit lens as in Belrose et al. 2023).

z_l = W_U · norm(h_l) (Eq. 3) and P_l(token) = softmax(z_l)[token] (Eq. 4). ``h_l`` is the raw residual
stream at the output of decoder layer ``l`` as :meth:`VisionLanguageModel.states` returns it (the last
entry is taken before the final norm), so the lens of the last layer reproduces the model's own next-token
distribution. Functions take the HF ``...ForConditionalGeneration`` object (``vlm.model``); a final-logit
soft-cap (Gemma) is applied as the model does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from faithtests.progress import call_share


class LensUnsupported(TypeError):
    """The model exposes no final norm or unembedding the lens can use."""


def final_norm(model: Any) -> nn.Module:
    """The decoder's final norm (``norm``, ``final_layernorm`` or ``ln_f``; LFM2 names the norm it applies
    after its last layer ``embedding_norm``)."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    for name in ("norm", "final_layernorm", "ln_f", "embedding_norm"):
        mod = getattr(decoder, name, None)
        if isinstance(mod, nn.Module):
            return mod
    raise LensUnsupported(f"{type(model).__name__}: no final norm found on {type(decoder).__name__}")


def unembedding(model: Any) -> nn.Module:
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if not isinstance(head, nn.Module):
        raise LensUnsupported(f"{type(model).__name__}: no output embeddings (lm_head)")
    return head


def lens_support(model: Any) -> str:
    """"" when the lens can read through ``model``, else why not: the adapter stores it in its
    description, so a warm run knows a model is unsupported without loading it. Runs at every load, so
    a model whose accessors raise (``get_output_embeddings`` not implemented) is described, not refused."""
    try:
        final_norm(model)
        unembedding(model)
    except (LensUnsupported, NotImplementedError, AttributeError) as e:
        return str(e) or type(e).__name__
    return ""


def _softcap(model: Any) -> float | None:
    cfg = getattr(model, "config", None)
    text = getattr(cfg, "text_config", None) or cfg
    cap = getattr(text, "final_logit_softcapping", None)
    return float(cap) if cap else None


def _chunks(model: Any, states: torch.Tensor, chunk: int) -> Any:
    norm, head = final_norm(model), unembedding(model)
    param = next(head.parameters())
    cap = _softcap(model)
    flat = states.reshape(-1, states.shape[-1])
    for s in range(0, flat.shape[0], chunk):
        h = flat[s : s + chunk].to(param.device, dtype=param.dtype)
        z = head(norm(h)).float()
        if cap is not None:
            z = torch.tanh(z / cap) * cap
        yield z


@torch.inference_mode()
def lens_logits(model: Any, states: torch.Tensor, *, chunk: int = 256) -> torch.Tensor:
    """z_l = W_U norm(h_l) (Eq. 3) for states [L, N, D] → [L, N, V], float32 on the CPU."""
    outs = [z.cpu() for z in _chunks(model, states, chunk)]
    return torch.cat(outs).reshape(*states.shape[:-1], -1)


@torch.inference_mode()
def lens_probs(
    model: Any, states: torch.Tensor, token_ids: Sequence[int], *, chunk: int = 256
) -> torch.Tensor:
    """P_l(token) = softmax(z_l)[token] (Eq. 4) over the full vocabulary, for each id in ``token_ids``:
    states [L, N, D] → [L, N, len(token_ids)] (chunked: never the whole [L, N, V] at once)."""
    ids = torch.tensor(list(token_ids), dtype=torch.long)
    outs: list[torch.Tensor] = []
    for z in _chunks(model, states, chunk):
        outs.append(torch.softmax(z, dim=-1)[:, ids.to(z.device)].cpu())
        call_share(len(outs) * chunk, states[..., 0].numel())  # progress of the caller's model_call
    return torch.cat(outs).reshape(*states.shape[:-1], len(ids))
