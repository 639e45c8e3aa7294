"""Dual-encoder scorers (open_clip and every HF dual family: CLIP, SigLIP, SigLIP2, MetaCLIP 2) and the
VLM-as-scorer, on tiny models."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from faithtests.models.interfaces import ImageTextScorer
from faithtests.models.registry import load_model
from faithtests.models.vlm_scorer import VLMScorer
from faithtests.testing.families import FAMILIES

#: open_clip and every HF dual-encoder family of faithtests.testing.families
DUALS = ["open_clip", *(f.model_type for f in FAMILIES if f.kind == "dual")]
TEXTS = ["a red circle", "two dog", "a blue square", "one cat", "a photo of a white triangle", "yes"]


def raw_embeddings(scorer: Any, images: list[Any], texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings straight from the underlying library (no adapter cache), L2-normalised."""
    with torch.inference_mode():
        if hasattr(scorer, "preprocess"):  # open_clip
            im = scorer.model.encode_image(torch.stack([scorer.preprocess(i.convert("RGB")) for i in images]))
            tx = scorer.model.encode_text(scorer.tokenizer(texts))
        else:
            # every image input the processor gives (SigLIP2's NaFlex patch mask and spatial shapes too)
            pix = scorer.processor(images=images, return_tensors="pt")
            im = scorer.model.get_image_features(**pix).pooler_output
            txt = scorer.processor(text=texts, return_tensors="pt", **scorer._text_padding())
            names = set(scorer.processor.tokenizer.model_input_names) & {"input_ids", "attention_mask"}
            tx = scorer.model.get_text_features(**{k: v for k, v in txt.items() if k in names}).pooler_output
    return torch.nn.functional.normalize(im, dim=-1), torch.nn.functional.normalize(tx, dim=-1)


@pytest.mark.parametrize("name", DUALS)
def test_similarity_is_cosine_of_library_embeddings(
    name: str, load_tiny: Callable[..., Any], images: list[Any]
) -> None:
    scorer = load_tiny(name)
    assert isinstance(scorer, ImageTextScorer)
    sims = scorer.similarity(images, TEXTS)
    im, tx = raw_embeddings(scorer, images, TEXTS)
    assert sims.shape == (6,)
    assert torch.allclose(sims, (im * tx).sum(-1), atol=1e-5)
    assert torch.allclose(scorer.encode_images(images).norm(dim=-1), torch.ones(6), atol=1e-5)
    assert torch.allclose(scorer.similarity_matrix(images, TEXTS).diagonal(), sims, atol=1e-6)
    fp = scorer.fingerprint()
    assert fp["score"] == "cosine" and fp["dtype"] == "float32" and len(fp["checkpoint_sha256"]) == 1


@pytest.mark.parametrize("name", DUALS)
def test_batch_1_equals_batch_16(name: str, load_tiny: Callable[..., Any], images: list[Any]) -> None:
    many_images = images * 3  # 18 images: two batches at 16
    texts = [f"{t} {i}" for i in range(3) for t in TEXTS]
    one, sixteen = load_tiny(name, batch_size=1), load_tiny(name, batch_size=16)
    assert (one.encode_images(many_images) - sixteen.encode_images(many_images)).abs().max() < 1e-5
    assert (one.encode_texts(texts) - sixteen.encode_texts(texts)).abs().max() < 1e-5


@pytest.mark.parametrize("name", DUALS)
def test_each_unique_input_encoded_once(
    name: str, tiny_dir: Callable[[str], Path], images: list[Any]
) -> None:
    from PIL import Image

    prefix = "open_clip:local-dir:" if name == "open_clip" else "hf:"
    scorer = load_model(f"{prefix}{tiny_dir(name)}", device="cpu", batch_size=4)
    # 30 pairs over 6 unique images (copies: equal pixels, different objects) and 5 unique captions
    pair_images = [Image.frombytes(im.mode, im.size, im.tobytes()) for im in images for _ in range(5)]
    pair_texts = [TEXTS[j % 5] for j in range(30)]
    first = scorer.similarity(pair_images, pair_texts)
    stats = scorer.cache_stats()
    assert stats["images_encoded"] == 6 and stats["texts_encoded"] == 5
    assert stats["image_calls"] == math.ceil(6 / 4) and stats["text_calls"] == math.ceil(5 / 4)
    again = scorer.similarity(pair_images[::-1], pair_texts[::-1])
    assert scorer.cache_stats()["images_encoded"] == 6 and scorer.cache_stats()["texts_encoded"] == 5
    assert torch.equal(again, first.flip(0))


@pytest.mark.parametrize("name", DUALS)
def test_bad_inputs_are_named(name: str, load_tiny: Callable[..., Any], images: list[Any]) -> None:
    scorer = load_tiny(name)
    with pytest.raises(ValueError, match="text 1 is empty"):
        scorer.encode_texts(["a cat", "  "])
    with pytest.raises(TypeError, match="image 0"):
        scorer.encode_images(["not an image"])
    with pytest.raises(ValueError, match="2 images but 1 texts"):
        scorer.similarity(images[:2], ["a cat"])


def test_open_clip_config_file_with_weights(tiny_dir: Callable[[str], Path], images: list[Any]) -> None:
    """``open_clip:CONFIG.json@WEIGHTS`` gives the same model as the local-dir it came from."""
    d = tiny_dir("open_clip")
    bare = d.parent / "bare_cfg.json"
    bare.write_text(json.dumps(json.loads((d / "open_clip_config.json").read_text())["model_cfg"]))
    a = load_model(f"open_clip:{bare}@{d / 'open_clip_model.safetensors'}", device="cpu")
    b = load_model(f"open_clip:local-dir:{d}", device="cpu")
    # The bare config has no preprocess_cfg, so compare the text side (image preprocessing may differ).
    assert torch.allclose(a.encode_texts(TEXTS), b.encode_texts(TEXTS), atol=1e-6)
    assert a.fingerprint()["checkpoint_sha256"] == b.fingerprint()["checkpoint_sha256"]


def test_vlm_scorer(tiny_dir: Callable[[str], Path], images: list[Any]) -> None:
    scorer = load_model(f"vlm-scorer:hf:{tiny_dir('llava')}", device="cpu")
    assert isinstance(scorer, VLMScorer) and isinstance(scorer, ImageTextScorer)
    pair_images = [images[0], images[0], images[1], images[0]]
    caps = ["a red circle", "two dog", "a red circle", "a red circle"]
    sims = scorer.similarity(pair_images, caps)
    direct = scorer.vlm.caption_logprob(pair_images, caps)
    assert torch.allclose(sims, direct, atol=1e-5) and bool((sims < 0).all())
    assert scorer.cache_stats()["pairs_scored"] == 3  # the repeated pair is scored once
    scorer.similarity(pair_images, caps)
    assert scorer.cache_stats()["pairs_scored"] == 3
    emb = scorer.encode_texts(caps)
    assert emb.shape[0] == 4 and torch.allclose(emb.norm(dim=-1), torch.ones(4), atol=1e-5)
    assert torch.allclose(emb[0], emb[2]) and not torch.allclose(emb[0], emb[1])
    img = scorer.encode_images(images[:2])
    assert img.shape == (2, emb.shape[1]) and not torch.allclose(img[0], img[1])
    assert scorer.fingerprint()["score"] == "caption_mean_logprob"
