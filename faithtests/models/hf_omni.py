"""Omni models (vision + audio) behind :class:`~faithtests.models.interfaces.VisionLanguageModel`.

The families (``hf:`` picks this adapter from ``config.json``'s ``model_type``): Qwen2.5-Omni and
Qwen3-Omni-MoE as their *thinker* (the text-generating half; the talker that speaks is not loaded),
and Gemma 3n. Everything else is :class:`~faithtests.models.hf_vlm.HFVisionLanguageModel`:
- a prompt's ``audio`` (a :class:`~faithtests.models.interfaces.Audio` at the feature extractor's rate)
  and ``video`` frames go through the family's own processor (:mod:`.prompting`): Qwen-Omni interleaves
  a video's soundtrack with its frames in 2-second chunks (``use_audio_in_video``); Gemma 3n takes no
  video, so a clip's frames are given as images (after the prompt's own, in time order) and its
  soundtrack as one audio item of at most 30 s (longer audio is refused: its processor would cut it);
- Gemma 3n's decoder layers carry an AltUp stack of residual streams: the per-layer state is the active
  stream (:class:`ActiveStream`), which the lens reads through the final norm;
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
from faithtests.models.interfaces import Attentions, Decision, Hooks, Prompt
from faithtests.models.omni_loading import THINKERS
from faithtests.models.prefix import ForwardRunner, Reduce, common_prefix_length
from faithtests.models.prompt_keys import check_prompts, prompt_keys
from faithtests.models.prompting import EncodedBatch, PromptRenderError, image_token_id, media_token_ids
from faithtests.models.store import TEXT_CODEC

#: ``model_type`` values this adapter serves: the thinkers as transformers names their configs, the
#: released checkpoints that hold one (:mod:`.omni_loading`), and Gemma 3n.
OMNI_MODEL_TYPES = frozenset({"qwen2_5_omni_thinker", "qwen3_omni_moe_thinker", *THINKERS, "gemma3n"})
#: Families without a video input: a clip's frames go in as images.
FRAMES_AS_IMAGES = frozenset({"gemma3n"})
#: Longest audio a family hears whole, in seconds, where its processor does not say (Gemma 3n's feature
#: extractor cuts at 480,000 samples); the others' window is found at load (:mod:`.audio_window`).
AUDIO_WINDOW_S = {"gemma3n": 30.0}


def as_family_input(prompt: Prompt, model_type: str, window: float | None = None) -> Prompt:
    """``prompt`` as ``model_type`` takes it: frames as images where it has no video input; audio longer
    than its window (``window``, else the family's known one) refused: never cut silently."""
    window = window or AUDIO_WINDOW_S.get(model_type)
    if window is not None and prompt.audio is not None:
        seconds = prompt.audio.samples.size / prompt.audio.sampling_rate
        if seconds > window:
            raise PromptRenderError(f"{model_type} hears at most {window:g} s of audio; this prompt has "
                                    f"{seconds:.1f} s (cut the clip, or split it into prompts)")
    if prompt.video and model_type in FRAMES_AS_IMAGES:
        return dataclasses.replace(prompt, images=(*prompt.images, *prompt.video), video=(), video_fps=None)
    return prompt


class FixedAudioWindow:
    """A processor whose waveforms are all padded to the family's full audio window (Gemma 3n: 30 s; its
    processor writes the same 188 audio tokens for any clip). Padded to the longest in the batch, as the
    processor does by default, a row's features (and logits) would depend on its batch-mates' lengths;
    at a fixed window every row computes what it computes alone. Everything else is the processor's."""

    def __init__(self, inner: Any, samples: int) -> None:
        self.inner = inner
        self.samples = samples

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("audio") is not None:  # the text's padding moves to text_kwargs (one per modality)
            names = ("padding", "padding_side", "truncation", "max_length")
            text = {k: kwargs.pop(k) for k in names if k in kwargs}
            kwargs["text_kwargs"] = {**kwargs.get("text_kwargs", {}), **text}
            kwargs["audio_kwargs"] = {"padding": "max_length", "max_length": self.samples, "truncation": True}
        return self.inner(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if "inner" not in self.__dict__:  # mid-copy/unpickling: no processor yet
            raise AttributeError(name)
        return getattr(self.__dict__["inner"], name)


class ActiveStream(nn.Module):
    """A Gemma 3n decoder layer seen through its AltUp *active* stream: the layer's output is a stack
    [streams, B, T, D] and only stream ``index`` is computed by its attention and FFN. Hooks registered
    on this module (the state capture) see that stream as [B, T, D]; a hook's replacement is written
    back into the stack. Attributes (``self_attn``, ``mlp``, norms) are the layer's."""

    def __init__(self, layer: nn.Module, index: int) -> None:
        super().__init__()
        self.layer = layer
        self.index = index
        layer.register_forward_hook(self._relay)

    def forward(self, stream: torch.Tensor) -> torch.Tensor:
        return stream

    def _relay(self, _module: nn.Module, _inputs: Any, output: torch.Tensor) -> torch.Tensor | None:
        active = output[self.index]
        seen = self(active)
        if seen is active:
            return None
        out = output.clone()
        out[self.index] = seen
        return out

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("layer"), name)


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
            active = getattr(config.get_text_config(), "altup_active_idx", None)
            if active is not None:
                heavy.layers = nn.ModuleList(ActiveStream(layer, int(active)) for layer in heavy.layers)
                heavy.runner.layers = heavy.layers
            heavy.runner = MediaSafeRunner(heavy.runner, media)
            window = AUDIO_WINDOW_S.get(str(config.model_type))
            if window is not None:
                rate = int(heavy.processor.feature_extractor.sampling_rate)
                heavy.processor = FixedAudioWindow(heavy.processor, int(window * rate))
        return heavy

    @property
    def audio_window_s(self) -> float | None:
        """The longest audio this model hears whole (seconds), None when it hears longer: found at load
        (:mod:`.audio_window`), or the family's known window. Suites leave longer clips out, counted."""
        found = self.meta.get("audio_window_s")
        return float(found) if found else AUDIO_WINDOW_S.get(str(self.meta.get("model_type", "")))

    def _adapt(self, prompts: Sequence[Prompt]) -> list[Prompt]:
        model_type = str(self.meta.get("model_type", ""))
        return [as_family_input(p, model_type, self.audio_window_s) for p in prompts]

    def _adapt_hooks(self, hooks: Hooks | None) -> Hooks | None:
        """``hooks`` with a contrast's auxiliary prompts in the family's form too (they run in the same
        processor call as the main rows; a step rule's base prompts likewise)."""
        if hooks is None or hooks.contrast is None:
            return hooks
        aux = tuple(self._adapt(hooks.contrast.aux))
        return dataclasses.replace(hooks, contrast=dataclasses.replace(hooks.contrast, aux=aux))

    # Every entry point takes the family's form of its prompts (cache keys included).
    def encode(self, prompts: Sequence[Prompt], padding_side: str = "right") -> EncodedBatch:
        return super().encode(self._adapt(prompts), padding_side)

    def decide(self, prompts: Sequence[Prompt], *args: Any, **kwargs: Any) -> Decision:
        return super().decide(self._adapt(prompts), *args, **kwargs)

    def states(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        return super().states(self._adapt(prompts), hooks)

    def next_token_logits(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        return super().next_token_logits(self._adapt(prompts), hooks)

    def answer_logprob(self, prompts: Sequence[Prompt], *args: Any, **kwargs: Any) -> torch.Tensor:
        return super().answer_logprob(self._adapt(prompts), *args, **kwargs)

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32, hooks: Hooks | None = None
                 ) -> list[str]:
        return super().generate(self._adapt(prompts), max_new_tokens, self._adapt_hooks(hooks))

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Attentions:
        """As :meth:`HFVisionLanguageModel.attentions`, with each row's audio runs in the spans (stored
        per row, so a warm run needs no processor for them)."""
        prompts = self._adapt(prompts)
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

