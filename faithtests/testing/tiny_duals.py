"""Tiny, randomly initialised dual encoders built offline: open_clip (local-dir layout), HF CLIP, HF SigLIP.

Companions of :mod:`faithtests.testing.tiny` for the scorer adapters; each writes exactly what a user's
checkpoint directory holds, so tests load them through ``load_model`` like a real model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import open_clip
import torch
from safetensors.torch import load_file, save_file
from transformers import (
    CLIPConfig,
    CLIPImageProcessor,
    CLIPModel,
    CLIPProcessor,
    SiglipConfig,
    SiglipImageProcessor,
    SiglipModel,
    SiglipProcessor,
)

from faithtests.testing.tiny import _seeded, _untyped, tiny_tokenizer

#: A tiny open_clip architecture (ViT tower, causal text transformer with open_clip's BPE vocabulary).
TINY_OPEN_CLIP_CFG: dict[str, Any] = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "head_width": 16, "patch_size": 8},
    "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
}


def build_tiny_open_clip(
    out_dir: str | Path, *, seed: int = 0, model_cfg: dict[str, Any] | None = None
) -> Path:
    """An open_clip local-dir: ``open_clip_config.json`` (model_cfg + preprocess_cfg) and
    ``open_clip_model.safetensors``; load with ``open_clip:local-dir:PATH``."""
    _seeded(seed)
    cfg = dict(model_cfg or TINY_OPEN_CLIP_CFG)
    model = open_clip.CLIP(**cfg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    preprocess = {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711],
                  "interpolation": "bicubic", "resize_mode": "shortest"}
    (out / "open_clip_config.json").write_text(
        json.dumps({"model_cfg": cfg, "preprocess_cfg": preprocess}, indent=2), encoding="utf-8"
    )
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / "open_clip_model.safetensors"))
    return out


def build_constant_open_clip(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A scorer that ignores its inputs: :func:`build_tiny_open_clip` with both towers' final LayerNorm
    scales zeroed (their biases seeded), so every image and every text gets one fixed embedding and every
    s(I, c) is the same number, bit for bit."""
    out = build_tiny_open_clip(out_dir, seed=seed)
    weights = out / "open_clip_model.safetensors"
    state = load_file(str(weights))
    gen = torch.Generator().manual_seed(seed)
    for name in ("ln_final", "visual.ln_post"):
        state[f"{name}.weight"] = torch.zeros_like(state[f"{name}.weight"])
        state[f"{name}.bias"] = torch.randn(state[f"{name}.bias"].shape, generator=gen)
    save_file(state, str(weights))
    return out


def build_tiny_clip_hf(out_dir: str | Path, *, words: Iterable[str] = (), seed: int = 0) -> Path:
    """HF ``CLIPModel`` + ``CLIPProcessor`` (WordLevel tokenizer that wraps texts in BOS/EOS)."""
    return build_clip_like(CLIPModel, CLIPConfig, out_dir, words=words, seed=seed)


def build_clip_like(model_cls: Any, config_cls: Any, out_dir: str | Path, *, words: Iterable[str] = (),
                    seed: int = 0) -> Path:
    """A CLIP-layout dual encoder of ``model_cls`` (CLIP, MetaCLIP 2: the same towers and processor)."""
    _seeded(seed)
    tok = tiny_tokenizer([], words=words, wrap=True)
    tok.model_max_length = 32  # = max_position_embeddings, so truncation=True bounds long captions
    text = {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "max_position_embeddings": 32, "pad_token_id": tok.pad_token_id,
            "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
              "image_size": 32, "patch_size": 8}
    model: Any = model_cls(config_cls(text_config=text, vision_config=vision, projection_dim=16))
    model.eval()
    image_processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = _untyped(CLIPProcessor)(image_processor=image_processor, tokenizer=tok)
    out = Path(out_dir)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def build_tiny_siglip_hf(out_dir: str | Path, *, words: Iterable[str] = (), seed: int = 0) -> Path:
    """HF ``SiglipModel`` + ``SiglipProcessor``; text padded to ``max_length`` 16 as SigLIP is trained."""
    _seeded(seed)
    tok = tiny_tokenizer([], words=words, bos=None, eos="</s>", wrap=True)
    tok.model_max_length = 16
    tok.model_input_names = ["input_ids"]
    text = {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "max_position_embeddings": 16, "pad_token_id": tok.pad_token_id,
            "eos_token_id": tok.eos_token_id}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
              "image_size": 32, "patch_size": 8}
    model: Any = SiglipModel(SiglipConfig(text_config=text, vision_config=vision))
    model.eval()
    image_processor = SiglipImageProcessor(size={"height": 32, "width": 32})
    processor = _untyped(SiglipProcessor)(image_processor=image_processor, tokenizer=tok)
    out = Path(out_dir)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out
