"""Omni models (vision + audio) behind :class:`~faithtests.models.interfaces.VisionLanguageModel`.

The families (``hf:`` picks this adapter from ``config.json``'s ``model_type``): Qwen2.5-Omni and
Qwen3-Omni-MoE as their *thinker* (the text-generating half; the talker that speaks is not loaded),
and Gemma 3n. Everything else is :class:`~faithtests.models.hf_vlm.HFVisionLanguageModel`:
- a prompt's ``audio`` (a :class:`~faithtests.models.interfaces.Audio` at the feature extractor's rate)
  and ``video`` frames go through the family's own processor (:mod:`.prompting`): Qwen-Omni interleaves
  a video's soundtrack with its frames in 2-second chunks (``use_audio_in_video``), other families take
  the waveform as its own item;
- ``TokenSpans.audio_runs`` locates the audio tokens exactly (the config's audio token id), beside the
  image (video frames count as image tokens) and description spans; ``attentions`` carries them;
- the shared prefix (KV cache) applies only when every image, video and audio token lies in the prefix
  (rows sharing a prefix have identical images, frames and audio: :func:`~.prompt_keys.image_groups`).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from faithtests.models.hf_loading import LoadedVLM
from faithtests.models.hf_vlm import HFVisionLanguageModel
from faithtests.models.interfaces import Attentions, Hooks, Prompt
from faithtests.models.omni_loading import THINKERS
from faithtests.models.prefix import ForwardRunner, Reduce, common_prefix_length
from faithtests.models.prompt_keys import check_prompts, prompt_keys
from faithtests.models.prompting import EncodedBatch, image_token_id, media_token_ids
from faithtests.models.store import TEXT_CODEC

#: ``model_type`` values this adapter serves: the thinkers as transformers names their configs, the
#: released checkpoints that hold one (:mod:`.omni_loading`), and Gemma 3n (untested: see docs/models.md).
OMNI_MODEL_TYPES = frozenset({"qwen2_5_omni_thinker", "qwen3_omni_moe_thinker", *THINKERS, "gemma3n"})


class KeepLogits(nn.Module):
    """Gives ``logits_to_keep`` to a model whose forward lacks it (the Qwen-Omni thinkers swallow it and
    return logits at every position): the wanted positions are picked before the LM head, as
    transformers' own heads do, so the runner's positions mean what they mean for every other family."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner: Any = inner  # a transformers model (untyped accessors)

    def forward(self, *args: Any, logits_to_keep: int | torch.Tensor = 0, **kwargs: Any) -> Any:
        from transformers.modeling_utils import slice_logits_to_keep  # local: a warm run imports none

        def pick(_module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
            return (slice_logits_to_keep(inputs[0], logits_to_keep), *inputs[1:])

        handle = self.inner.get_output_embeddings().register_forward_pre_hook(pick)
        try:
            return self.inner(*args, **kwargs)
        finally:
            handle.remove()


def keeps_logits(model: nn.Module) -> bool:
    """Whether ``model.forward`` takes ``logits_to_keep`` itself."""
    return "logits_to_keep" in inspect.signature(model.forward).parameters


class MediaSafeRunner(ForwardRunner):
    """A :class:`ForwardRunner` whose shared prefix must hold every image, video and audio token: a
    suffix call carries no media inputs, so a media token after the cut would be embedded as text.
    Its model honours ``logits_to_keep`` (:class:`KeepLogits` where the family's forward does not)."""

    def __init__(self, base: ForwardRunner, media: Sequence[int]) -> None:
        model = base.model if keeps_logits(base.model) else KeepLogits(base.model)
        super().__init__(model, base.layers, base.device, base.dtype)
        self.media = torch.tensor(sorted(set(media)), dtype=torch.long)

    def shared(self, enc: EncodedBatch, single: EncodedBatch, image_token: int,
               positions: Sequence[Sequence[int]], reduce: Reduce, state_rows: Sequence[int] | None,
               hooks: Hooks | None) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        ids = enc.inputs["input_ids"]
        needed = min(min(p) for p in positions)
        if state_rows is not None:
            needed = min(needed, min(state_rows))
        cut = min(common_prefix_length(ids, enc.lengths), needed)  # the cut the base path makes
        if bool(torch.isin(ids[:, cut:], self.media).any()):
            return None
        return super().shared(enc, single, image_token, positions, reduce, state_rows, hooks)


class HFOmniModel(HFVisionLanguageModel):
    """A loaded omni model; construct through :func:`faithtests.models.registry.load_model` (``hf:``)."""

    #: Prompts may carry ``audio`` and ``video`` (suites may ask before sending them).
    accepts_audio = True

    def _load(self) -> LoadedVLM:
        fresh = self._heavy is None
        heavy = super()._load()
        if fresh:
            config = heavy.model.config
            media = [image_token_id(config), *(t for t in media_token_ids(config) if t is not None)]
            heavy.runner = MediaSafeRunner(heavy.runner, media)
        return heavy

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Attentions:
        """As :meth:`HFVisionLanguageModel.attentions`, with each row's audio runs in the spans (stored
        per row, so a warm run needs no processor for them)."""
        att = super().attentions(prompts, hooks)
        if all(p.audio is None for p in prompts):
            return att

        def compute(rows: list[int]) -> list[str]:  # one row per call: rows of any kind, offsets 0
            spans = [self.encode([prompts[r]]).spans for r in rows]
            return [json.dumps(s.audio_runs[0] if s.audio_runs else []) for s in spans]

        check_prompts(prompts)
        stored = self._stored("audio_spans", None, len(prompts), prompt_keys(prompts), compute, TEXT_CODEC)
        runs = [[(int(a), int(b)) for a, b in json.loads(s)] for s in stored]
        return Attentions(weights=att.weights, spans=dataclasses.replace(att.spans, audio_runs=runs))

