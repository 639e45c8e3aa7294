"""A generative VLM used as an :class:`~faithtests.models.interfaces.ImageTextScorer` (scorer suites on
VLMs).

``similarity(I, c)`` is the mean log-probability of the caption's tokens as the assistant's answer to
"Describe the image." about ``I`` (the extension to generative models that LGIP §5, "Future work",
proposes). It is a log-likelihood, not a cosine: values are <= 0 and gaps between captions are in nats
per token. Every unique (image, caption) pair is scored once per session; captions of one image share a
prefix forward.

``encode_texts``/``encode_images`` give real, if simple, embeddings for the parts of a protocol that need
one (e.g. the text-text cosine of a flip's strength, LGIP §4.3): the mean of the language model's last
hidden state over the text's tokens (text alone, no template), resp. over the image tokens of the scoring
prompt. Both are L2-normalised.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from faithtests.models.cache import EncodeCache, PairScores, image_key, text_key
from faithtests.models.hf_vlm import DEFAULT_INSTRUCTION, HFVisionLanguageModel
from faithtests.models.interfaces import Prompt
from faithtests.models.scorer_base import check_images, check_texts
from faithtests.models.store import OutputStore, digest

if TYPE_CHECKING:
    from PIL import Image


class VLMScorer:
    score_kind = "caption_mean_logprob"

    def __init__(self, vlm: HFVisionLanguageModel, spec: str | None = None,
                 instruction: str = DEFAULT_INSTRUCTION) -> None:
        self.vlm = vlm
        self.spec = spec or f"vlm-scorer:{vlm.spec}"
        self.instruction = instruction
        ns = f"{self.spec}|{vlm.fingerprint()['checkpoint_sha256']}|{vlm.dtype}"
        self.pairs = PairScores()
        self.text_cache: EncodeCache[str] = EncodeCache(
            f"{ns}|text", text_key, self._embed_texts, vlm.batch_size
        )
        self.image_cache: EncodeCache[Image.Image] = EncodeCache(
            f"{ns}|image", image_key, self._embed_images, vlm.batch_size
        )

    def use_store(self, store: OutputStore) -> None:
        """Persistent outputs (``--faith-cache``): pair scores through the VLM's store, embeddings here."""
        self.vlm.use_store(store)
        ns = self.vlm.store_namespace
        self.text_cache.attach(store, ns, "scorer-text")
        self.image_cache.attach(store, ns, f"scorer-image|{digest(self.instruction)}")

    @property
    def store_namespace(self) -> str | None:
        return self.vlm.store_namespace

    def similarity(self, images: Sequence[Image.Image], texts: Sequence[str]) -> torch.Tensor:
        """Mean caption log-prob per pair [N] (higher = better match)."""
        if len(images) != len(texts):
            raise ValueError(f"similarity: {len(images)} images but {len(texts)} texts")
        check_images(images)
        check_texts(texts)
        self.vlm.caption_truncation.observe(texts, self.vlm.caption_lengths)
        return self.pairs.get(images, texts, lambda rows: self.vlm.caption_logprob(
            [images[i] for i in rows], [texts[i] for i in rows], self.instruction).tolist())

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        check_texts(texts)
        return self.text_cache.get(list(texts))

    def encode_images(self, images: Sequence[Image.Image]) -> torch.Tensor:
        check_images(images)
        return self.image_cache.get(list(images))

    @torch.inference_mode()
    def _embed_texts(self, texts: list[str]) -> torch.Tensor:
        tok = self.vlm.processor.tokenizer
        enc = tok(texts, padding=True, padding_side="right", return_tensors="pt", add_special_tokens=False)
        ids = enc["input_ids"].to(self.vlm.device)
        mask = enc["attention_mask"].to(self.vlm.device)
        hidden = self.vlm.model.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state.float()
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return torch.nn.functional.normalize(pooled, dim=-1)

    @torch.inference_mode()
    def _embed_images(self, images: list[Image.Image]) -> torch.Tensor:
        enc = self.vlm.encode([Prompt(images=(im,), text=self.instruction) for im in images])
        inputs = self.vlm.runner.to_device(enc.inputs)
        out = self.vlm.model(**inputs, output_hidden_states=True, use_cache=False)
        hidden = out.hidden_states[-1].float()
        is_image = (enc.inputs["input_ids"] == self.vlm.image_token).to(hidden.device)[..., None]
        pooled = (hidden * is_image).sum(1) / is_image.sum(1)
        return torch.nn.functional.normalize(pooled, dim=-1)

    def cache_stats(self) -> dict[str, int]:
        return {
            "pairs_scored": self.pairs.stats.encoded,
            "pair_hits": self.pairs.stats.hits,
            "texts_encoded": self.text_cache.stats.encoded,
            "images_encoded": self.image_cache.stats.encoded,
        }

    def truncation_info(self) -> dict[str, dict[str, Any]]:
        return self.vlm.truncation_info()

    def fingerprint(self) -> dict[str, Any]:
        return {**self.vlm.fingerprint(), "spec": self.spec, "kind": "scorer", "score": self.score_kind,
                "instruction": self.instruction, "truncated_inputs": self.truncation_info()}
