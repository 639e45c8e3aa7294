"""Shared machinery of the dual-encoder scorers (open_clip, HF CLIP/SigLIP): caches, similarity, fingerprint.

``encode_images``/``encode_texts`` return L2-normalised embeddings (float32, CPU), so
``similarity(images, texts)[i]`` is the cosine s(I_i, c_i) of LGIP §3. Both go through content-hash
caches (:mod:`faithtests.models.cache`), so a suite may ask for the same image or caption any number of
times and the encoder still sees it once per session.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from faithtests.models.cache import EncodeCache, content_sha256, image_key, text_key
from faithtests.models.store import TEXT_CODEC, OutputStore, model_namespace
from faithtests.models.truncation import TruncationCounter


def check_texts(texts: Sequence[str]) -> None:
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is {type(text).__name__}, expected str")
        if not text.strip():
            raise ValueError(f"text {i} is empty; an empty caption cannot be scored")


def check_images(images: Sequence[Image.Image]) -> None:
    for i, image in enumerate(images):
        if not isinstance(image, Image.Image):
            raise TypeError(f"image {i} is {type(image).__name__}, expected PIL.Image.Image")
        if image.size[0] == 0 or image.size[1] == 0:
            raise ValueError(f"image {i} has size {image.size}")


class CachedDualEncoder(ABC):
    """Base class: subclasses implement ``_encode_image_batch`` / ``_encode_text_batch`` (raw embeddings)."""

    score_kind = "cosine"

    def __init__(
        self,
        spec: str,
        *,
        device: torch.device,
        dtype: torch.dtype,
        batch_size: int,
        meta: dict[str, Any],
    ) -> None:
        self.spec = spec
        self.device = device
        self.dtype = dtype
        self.batch_size = batch_size
        self._meta = dict(meta)
        self._files: list[Path] = []  # set by subclasses: what the persistent cache's namespace hashes
        self.store_namespace: str | None = None  # set by use_store
        self._store: OutputStore | None = None
        # captions longer than the text context (subclasses set the limit and _token_lengths)
        self.truncation = TruncationCounter("caption")
        ns = f"{spec}|{self._meta.get('checkpoint_sha256')}|{dtype}"
        self.image_cache: EncodeCache[Image.Image] = EncodeCache(
            f"{ns}|image", image_key, self._encode_images_normalised, batch_size
        )
        self.text_cache: EncodeCache[str] = EncodeCache(
            f"{ns}|text", text_key, self._encode_texts_normalised, batch_size
        )

    # -- subclass hooks ------------------------------------------------------------------------------
    @abstractmethod
    def _encode_image_batch(self, images: list[Image.Image]) -> torch.Tensor:
        """Raw (unnormalised) image embeddings [n, D] for one batch."""

    @abstractmethod
    def _encode_text_batch(self, texts: list[str]) -> torch.Tensor:
        """Raw (unnormalised) text embeddings [n, D] for one batch."""

    def _token_lengths(self, texts: list[str]) -> list[int]:
        """Token counts of ``texts`` before the tokenizer cuts them (only called once a limit is set)."""
        raise NotImplementedError

    # -- protocol ------------------------------------------------------------------------------------
    @torch.inference_mode()
    def _encode_images_normalised(self, images: list[Image.Image]) -> torch.Tensor:
        return torch.nn.functional.normalize(self._encode_image_batch(images).float(), dim=-1)

    @torch.inference_mode()
    def _encode_texts_normalised(self, texts: list[str]) -> torch.Tensor:
        return torch.nn.functional.normalize(self._encode_text_batch(texts).float(), dim=-1)

    def encode_images(self, images: Sequence[Image.Image]) -> torch.Tensor:
        """L2-normalised image embeddings [N, D] (float32, CPU), each unique image encoded once."""
        check_images(images)
        return self.image_cache.get(list(images))

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """L2-normalised text embeddings [N, D] (float32, CPU), each unique text encoded once."""
        check_texts(texts)
        self.truncation.observe(texts, self._stored_lengths)
        return self.text_cache.get(list(texts))

    def similarity(self, images: Sequence[Image.Image], texts: Sequence[str]) -> torch.Tensor:
        """Row-wise cosine: ``similarity(images, texts)[i] = cos(e(images[i]), e(texts[i]))`` [N]."""
        if len(images) != len(texts):
            raise ValueError(f"similarity: {len(images)} images but {len(texts)} texts")
        return (self.encode_images(images) * self.encode_texts(texts)).sum(dim=-1)

    def similarity_matrix(self, images: Sequence[Image.Image], texts: Sequence[str]) -> torch.Tensor:
        """All pairs: [len(images), len(texts)] cosines."""
        return self.encode_images(images) @ self.encode_texts(texts).T

    def namespace_for(self, files: list[Path], dtype: torch.dtype, device: torch.device,
                      options: dict[str, Any] | None = None) -> str | None:
        """The store namespace of this adapter's outputs for ``files`` (see :func:`model_namespace`)."""
        return model_namespace(content_sha256(files), type(self).__name__, dtype, device,
                               {"identity": self._store_identity(), **(options or {})})

    def use_store(self, store: OutputStore, options: dict[str, Any] | None = None) -> None:
        """Read and write embeddings (and the token counts of the truncation check) through a persistent
        :class:`OutputStore` (``--faith-cache``)."""
        self.store_namespace = self.namespace_for(self._files, self.dtype, self.device, options)
        self._store = store
        self.image_cache.attach(store, self.store_namespace, "image")
        self.text_cache.attach(store, self.store_namespace, "text")

    def _stored_lengths(self, texts: list[str]) -> list[int]:
        """:meth:`_token_lengths` through the store, so a warm run counts truncations without a tokenizer."""
        ns = self.store_namespace
        if self._store is None or ns is None:
            return self._token_lengths(texts)

        def compute(rows: list[int]) -> list[str]:
            return [str(n) for n in self._token_lengths([texts[r] for r in rows])]

        return [int(v) for v in self._store.rows(ns, f"{ns}|tokens", [text_key(t) for t in texts], compute,
                                                 TEXT_CODEC)]

    def _store_identity(self) -> str:
        """What besides the files names the model (open_clip's architecture name for a hub checkpoint)."""
        return ""

    def cache_stats(self) -> dict[str, int]:
        return {
            "images_encoded": self.image_cache.stats.encoded,
            "texts_encoded": self.text_cache.stats.encoded,
            "image_hits": self.image_cache.stats.hits,
            "text_hits": self.text_cache.stats.hits,
            "image_calls": self.image_cache.stats.calls,
            "text_calls": self.text_cache.stats.calls,
        }

    def truncation_info(self) -> dict[str, dict[str, Any]]:
        """Inputs longer than the model's context, by kind (:mod:`.truncation`)."""
        return {self.truncation.kind: self.truncation.as_info()}

    def fingerprint(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "kind": "scorer",
            "score": self.score_kind,
            "dtype": str(self.dtype).removeprefix("torch."),
            "device": str(self.device),
            **self._meta,
            "truncated_inputs": self.truncation_info(),
        }
