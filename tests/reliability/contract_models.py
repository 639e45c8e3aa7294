"""Plug-in models that break their protocol's contract, for ``test_plugin_contracts.py``: each is the
well-behaved :class:`custom_scorer.GreyScorer` or :class:`TinyVLM` with one output made wrong."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from custom_scorer import GreyScorer
from PIL import Image

from faithtests.models.interfaces import Attentions, Decision, Hooks, Prompt, TokenSpans


class ListScorer(GreyScorer):
    def similarity(self, images: Sequence[Image.Image], texts: Sequence[str]) -> Any:
        return super().similarity(images, texts).tolist()


class ShortScorer(GreyScorer):
    """One row too few from ``encode_texts``."""

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        return super().encode_texts(texts)[:-1]


class MatrixScorer(GreyScorer):
    """The full [N, N] similarity matrix where the protocol asks for the N pairs."""

    def similarity(self, images: Sequence[Image.Image], texts: Sequence[str]) -> torch.Tensor:
        return self.encode_images(images) @ self.encode_texts(texts).T


class TinyNormScorer(GreyScorer):
    """Unnormalised embeddings (norm ~1e-3): every score is ~1e-6, so E_inv is ~1e-6 and passes."""

    def encode_images(self, images: Sequence[Image.Image]) -> torch.Tensor:
        return super().encode_images(images) * 1e-3

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        return super().encode_texts(texts) * 1e-3


class DotScorer(TinyNormScorer):
    """The same embeddings, with a declared score that is not a cosine."""

    score_kind = "dot"


class NanRowScorer(GreyScorer):
    """A NaN text row: the non-finite rule's to count, not a contract breach."""

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        out = super().encode_texts(texts).clone()
        out[0] = float("nan")
        return out


class TinyVLM:
    """A protocol-abiding VLM of two layers that answers from the prompt text alone."""

    num_layers = 2

    def __init__(self, spec: str) -> None:
        self.spec = spec

    def option_logits(self, prompts: Sequence[Prompt], options: Sequence[str],
                      hooks: Hooks | None = None) -> torch.Tensor:
        return torch.tensor([[float(len(p.text) % (i + 2)) for i in range(len(options))] for p in prompts])

    def states(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        return torch.ones(self.num_layers, len(prompts), 4)

    def decide(self, prompts: Sequence[Prompt], options: Sequence[str],
               hooks: Hooks | None = None) -> Decision:
        return Decision(self.option_logits(prompts, options, hooks), self.states(prompts, hooks))

    def answer_logprob(self, prompts: Sequence[Prompt], answers: Sequence[str],
                       hooks: Hooks | None = None) -> torch.Tensor:
        return -torch.ones(len(prompts), len(answers))

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Attentions:
        n = len(prompts)
        spans = TokenSpans(image=[(0, 1)] * n, description=[(0, 0)] * n, length=[3] * n)
        return Attentions([torch.full((n, 1, 3), 1 / 3) for _ in range(self.num_layers)], spans)

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> list[str]:
        return [p.text[:max_new_tokens] for p in prompts]

    def fingerprint(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": "vlm", "family": "tiny"}


class NoneVLM(TinyVLM):
    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> Any:
        return None


class BytesVLM(TinyVLM):
    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> Any:
        return [p.text.encode() for p in prompts]


class FewStatesVLM(TinyVLM):
    """``decide`` drops a layer of states and a row of logits."""

    def decide(self, prompts: Sequence[Prompt], options: Sequence[str],
               hooks: Hooks | None = None) -> Decision:
        d = super().decide(prompts, options, hooks)
        return Decision(d.logits[:-1], d.states[:1])


def _make(cls: type) -> Any:
    return lambda: cls(f"py:contract_models:{cls.__name__}")


list_scorer, short_scorer, matrix_scorer = _make(ListScorer), _make(ShortScorer), _make(MatrixScorer)
tiny_norm_scorer, dot_scorer, nan_row_scorer = _make(TinyNormScorer), _make(DotScorer), _make(NanRowScorer)
tiny_vlm, none_vlm, bytes_vlm = _make(TinyVLM), _make(NoneVLM), _make(BytesVLM)
few_states_vlm = _make(FewStatesVLM)
