"""Hugging Face dual encoders (CLIP, SigLIP and kin) as
:class:`~faithtests.models.interfaces.ImageTextScorer`.

Embeddings are ``get_image_features(...).pooler_output`` / ``get_text_features(...).pooler_output`` (the
projected pooled outputs), L2-normalised by the base class. SigLIP-family text is padded to
``max_length`` because that is how those models were trained (a shorter padding changes the embedding).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from faithtests.models.cache import checkpoint_sha256
from faithtests.models.scorer_base import CachedDualEncoder
from faithtests.models.truncation import hf_lengths, known_limit

if TYPE_CHECKING:
    from PIL import Image

#: ``model_type`` values loaded as dual encoders (text padding rule in brackets): see ``_text_padding``.
DUAL_MODEL_TYPES = frozenset({"clip", "siglip", "siglip2", "chinese_clip", "altclip", "metaclip_2"})
_MAX_LENGTH_PADDING = frozenset({"siglip", "siglip2"})


def _pooled(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    pooled = getattr(output, "pooler_output", None)
    if isinstance(pooled, torch.Tensor):
        return pooled
    raise TypeError(f"unexpected feature output {type(output).__name__}")


class HFDualEncoder(CachedDualEncoder):
    def __init__(
        self,
        spec: str,
        path: str,
        *,
        device: torch.device,
        dtype: torch.dtype,
        batch_size: int = 16,
        local_files_only: bool = True,
    ) -> None:
        # lazy: the registry imports this module on a warm run too, which imports no transformers
        from transformers import AutoModel, AutoProcessor

        self.model = AutoModel.from_pretrained(path, dtype=dtype, local_files_only=local_files_only)
        self.model = self.model.to(device).eval()
        auto_processor: Any = AutoProcessor  # transformers' loaders are untyped
        self.processor = auto_processor.from_pretrained(path, local_files_only=local_files_only)
        self.model_type = str(self.model.config.model_type)
        files = [Path(path)] if Path(path).is_dir() else []
        # siglip and siglip2 share the sigmoid-loss similarity scale (the thresholds' "siglip" family)
        family = "siglip" if self.model_type.startswith("siglip") else self.model_type
        meta = {"family": family, "architecture": self.model_type,
                "checkpoint_sha256": checkpoint_sha256(files)}
        super().__init__(spec, device=device, dtype=dtype, batch_size=batch_size, meta=meta)
        self._files = files
        self.truncation.limit = known_limit(getattr(self.processor.tokenizer, "model_max_length", None))

    def _token_lengths(self, texts: list[str]) -> list[int]:
        return hf_lengths(self.processor.tokenizer)(texts)

    def _text_padding(self) -> dict[str, Any]:
        if self.model_type in _MAX_LENGTH_PADDING:
            return {"padding": "max_length", "truncation": True}
        return {"padding": True, "truncation": True}

    def _encode_image_batch(self, images: list[Image.Image]) -> torch.Tensor:
        inputs = self.processor(images=[im.convert("RGB") for im in images], return_tensors="pt")
        # every tensor the image processor returns: NaFlex towers (SigLIP2) need their patch mask and
        # spatial shapes beside the pixels; floating inputs take the model's dtype, the rest keep theirs
        given = {k: (v.to(self.device, dtype=self.dtype) if v.is_floating_point() else v.to(self.device))
                 for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        return _pooled(self.model.get_image_features(**given))

    def _encode_text_batch(self, texts: list[str]) -> torch.Tensor:
        inputs = self.processor(text=texts, return_tensors="pt", **self._text_padding())
        # Only what the tokenizer declares: SigLIP tokenizers emit no attention mask (trained without one).
        names = set(getattr(self.processor.tokenizer, "model_input_names", ["input_ids", "attention_mask"]))
        wanted = names & {"input_ids", "attention_mask"}
        keep = {k: v.to(self.device) for k, v in inputs.items() if k in wanted}
        return _pooled(self.model.get_text_features(**keep))
