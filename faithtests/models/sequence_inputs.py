"""The model inputs aligned with ``input_ids`` along (batch, sequence), declared once.

Every path that changes a prompt's token sequence after the processor made it goes through here, so
no input is extended or cut while its neighbour is not (issue 43: SAGE's auxiliary stream extended
``input_ids`` and ``attention_mask`` but not Qwen-VL's ``mm_token_type_ids``, and the shared-prefix
path dropped Mllama's ``cross_attention_mask`` from its suffix call, silently moving logits by 1e-3):

* :func:`extended`: the prompt continued with text tokens (SAGE's auxiliary forward with the tokens
  generated so far), each input filled as ``generate`` fills it for a new text token;
* :func:`prefix_inputs`: the first ``cut`` positions (the shared prefix call, with the image data);
* :func:`suffix_inputs`: positions ``[cut, width)`` of what a call continuing the prefix's cache takes.

Anything the processor returns that is not listed is image, video or audio data: passed whole with
the prefix (or the full prompt), never to a call that continues a cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import torch

#: How appended text positions are filled: the tokens themselves, ones, zeros, or the last position
#: repeated (as ``generate`` extends Mllama's cross-attention mask).
Fill = Literal["tokens", "ones", "zeros", "last"]


@dataclass(frozen=True)
class SequenceInput:
    name: str
    fill: Fill
    #: passed (sliced to the suffix) to a call that continues a shared prefix's cache
    in_suffix: bool
    why: str


SEQUENCE_INPUTS: tuple[SequenceInput, ...] = (
    SequenceInput("input_ids", "tokens", True, "the tokens"),
    # the suffix call runs without a mask: right padding keeps pads right of every real token
    SequenceInput("attention_mask", "ones", False, "padding mask"),
    # 1 marks image tokens (Gemma 3, PaliGemma: bidirectional image attention); text is 0
    SequenceInput("token_type_ids", "zeros", False, "image-token marks"),
    # M-RoPE families (Qwen2/2.5/3-VL, GLM-4.1V, Qwen3.5): modality per token, text 0; the suffix call's
    # positions continue from the prefix call's rope deltas
    SequenceInput("mm_token_type_ids", "zeros", False, "modality per token"),
    # Mllama [B, S, images, tiles]: which image tiles each text position cross-attends to
    SequenceInput("cross_attention_mask", "last", True, "cross-attention mask"),
)
SEQUENCE_KEYS: frozenset[str] = frozenset(s.name for s in SEQUENCE_INPUTS)


def _fill(spec: SequenceInput, value: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
    width = tail.shape[1]
    if spec.fill == "tokens":
        return tail.to(value.dtype)
    if spec.fill == "last":
        return value[:, -1:].expand(value.shape[0], width, *value.shape[2:])
    shape = (value.shape[0], width, *value.shape[2:])
    fill = torch.ones if spec.fill == "ones" else torch.zeros
    return fill(shape, dtype=value.dtype, device=value.device)


def extended(inputs: Mapping[str, torch.Tensor], tail: torch.Tensor) -> dict[str, torch.Tensor]:
    """``inputs`` (a left-padded batch) continued by the text tokens ``tail`` [B, T], every sequence
    input filled as a generated token fills it; media data unchanged."""
    out = dict(inputs)
    if tail.shape[1] == 0:
        return out
    for spec in SEQUENCE_INPUTS:
        value = inputs.get(spec.name)
        if isinstance(value, torch.Tensor):
            out[spec.name] = torch.cat([value, _fill(spec, value, tail.to(value.device))], dim=1)
    return out


def prefix_inputs(inputs: Mapping[str, torch.Tensor], cut: int) -> dict[str, torch.Tensor]:
    """The first ``cut`` positions of every sequence input, media data whole (the shared prefix call)."""
    return {k: (v[:, :cut] if k in SEQUENCE_KEYS else v) for k, v in inputs.items()}


def suffix_inputs(inputs: Mapping[str, torch.Tensor], cut: int, width: int) -> dict[str, torch.Tensor]:
    """Positions ``[cut, width)`` of the sequence inputs a cache-continuing call takes."""
    return {s.name: inputs[s.name][:, cut:width] for s in SEQUENCE_INPUTS
            if s.in_suffix and isinstance(inputs.get(s.name), torch.Tensor)}
