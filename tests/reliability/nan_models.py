"""Plug-in models (``py:nan_models:vlm`` / ``py:nan_models:scorer``) that wrap the bundled reference
models and emit NaN for a fixed quarter of their inputs (chosen by a hash of the prompt's images or text,
so every run and every suite breaks the same items). Everything else is the reference model's output,
so the rest of each suite runs as usual: the test is that the broken items fail the checks."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import torch
from PIL import Image

from faithtests.models.interfaces import Decision, Hooks, Prompt
from faithtests.models.registry import load_model


def broken(images: Sequence[Image.Image], text: str) -> bool:
    """Whether an input gets NaN: a quarter of them, by the images alone when there are any (every
    question about one stimulus breaks alike, so one stimulus is one broken item), else by the text."""
    key = 0 if images else zlib.crc32(text.encode())
    for im in images:
        key = zlib.crc32(im.tobytes(), key)
    return key % 4 == 0


def _nan_rows(t: torch.Tensor, rows: Sequence[bool], dim: int = 0) -> torch.Tensor:
    out = t.clone()
    for i, bad in enumerate(rows):
        if bad:
            out.select(dim, i).fill_(float("nan"))
    return out


class NanVLM:
    """The reference VLM, with NaN letter logits and answer log-probabilities for a quarter of the prompts."""

    def __init__(self, spec: str) -> None:
        self.inner: Any = load_model("reference:vlm")
        self.spec = spec
        self.num_layers = int(self.inner.num_layers)

    def __getattr__(self, name: str) -> Any:  # everything else (batch size, stores) is the reference's
        return getattr(self.inner, name)

    @staticmethod
    def _rows(prompts: Sequence[Prompt]) -> list[bool]:
        return [broken(p.images, p.text) for p in prompts]

    def option_logits(self, prompts: Sequence[Prompt], options: Sequence[str],
                      hooks: Hooks | None = None) -> torch.Tensor:
        return _nan_rows(self.inner.option_logits(prompts, options, hooks), self._rows(prompts))

    def states(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        return self.inner.states(prompts, hooks)  # type: ignore[no-any-return]

    def decide(self, prompts: Sequence[Prompt], options: Sequence[str],
               hooks: Hooks | None = None) -> Decision:
        d = self.inner.decide(prompts, options, hooks)
        return Decision(_nan_rows(d.logits, self._rows(prompts)), d.states)

    def answer_logprob(self, prompts: Sequence[Prompt], answers: Sequence[str],
                       hooks: Hooks | None = None) -> torch.Tensor:
        return _nan_rows(self.inner.answer_logprob(prompts, answers, hooks), self._rows(prompts))

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Any:
        return self.inner.attentions(prompts, hooks)

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> list[str]:
        return self.inner.generate(prompts, max_new_tokens, hooks)  # type: ignore[no-any-return]

    def fingerprint(self) -> dict[str, Any]:
        return {**self.inner.fingerprint(), "spec": self.spec}


class NanScorer:
    """The reference CLIP, with a NaN text embedding (so NaN scores) for a quarter of the captions."""

    def __init__(self, spec: str) -> None:
        self.inner: Any = load_model("reference:clip")
        self.spec = spec

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode_images(self, images: Sequence[Image.Image]) -> torch.Tensor:
        return self.inner.encode_images(images)  # type: ignore[no-any-return]

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        return _nan_rows(self.inner.encode_texts(texts), [broken((), t) for t in texts])

    def similarity(self, images: Sequence[Image.Image], texts: Sequence[str]) -> torch.Tensor:
        return (self.encode_images(images) * self.encode_texts(texts)).sum(dim=-1)

    def fingerprint(self) -> dict[str, Any]:
        return {**self.inner.fingerprint(), "spec": self.spec}


class EveryNanVLM(NanVLM):
    """NaN for every prompt (a float16 overflow): no record is left to aggregate."""

    @staticmethod
    def _rows(prompts: Sequence[Prompt]) -> list[bool]:
        return [True] * len(prompts)


def vlm() -> NanVLM:
    return NanVLM("py:nan_models:vlm")


def every_vlm() -> NanVLM:
    return EveryNanVLM("py:nan_models:every_vlm")


def scorer() -> NanScorer:
    return NanScorer("py:nan_models:scorer")
