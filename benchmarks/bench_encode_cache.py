"""Benchmark (a): the content-hash encode cache on an LGIP-shaped workload.

Workload: I images x 5 captions x (1 original + K variants) pairs, as LGIP's E_inv/E_sens loops produce
(every pair needs s(I, c) for the caption and each variant). Two ways to score every pair:
- cached: ``scorer.similarity(images, texts)`` once over all pairs: each unique image and text encoded
  once, in batches (the adapter's :class:`EncodeCache`);
- per-pair loop: for each pair, encode its image and its text alone (batch 1, no reuse), the naive loop.
Checked in the same run: encoder items == unique inputs, and both give the same similarities.

The model is a randomly initialised open_clip ViT of moderate size (weights do not change the cost),
saved as an open_clip local-dir and loaded through ``load_model`` like a user's checkpoint.

    python benchmarks/bench_encode_cache.py [--device cpu] [--images 24]
        [--out benchmarks/results/encode_cache.json]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import environment, write_result
from PIL import Image

from faithtests.models.cache import image_key
from faithtests.models.registry import load_model
from faithtests.testing.tiny_duals import build_tiny_open_clip

MODEL_CFG: dict[str, Any] = {
    "embed_dim": 256,
    "vision_cfg": {"image_size": 128, "layers": 6, "width": 256, "head_width": 64, "patch_size": 16},
    "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 256, "heads": 4, "layers": 6},
}
WORDS = ["red", "blue", "green", "dog", "cat", "horse", "car", "bus", "two", "three", "small", "large"]
TEMPLATES = ["a photo of {}", "an image of {}", "{} in the scene", "a picture of {}", "This image shows {}",
             "In this image, {}"]


def workload(n_images: int, seed: int) -> tuple[list[Image.Image], list[str]]:
    rng = np.random.default_rng(seed)
    images = [Image.fromarray(rng.integers(0, 256, (160, 200, 3), dtype=np.uint8)) for _ in range(n_images)]
    pair_images: list[Image.Image] = []
    pair_texts: list[str] = []
    for i, image in enumerate(images):
        for c in range(5):
            words = rng.choice(WORDS, size=3, replace=False)
            caption = f"a {words[0]} {words[1]} next to a {words[2]} ({i}.{c})"
            for text in [caption, *(t.format(caption) for t in TEMPLATES)]:
                pair_images.append(image)
                pair_texts.append(text)
    return pair_images, pair_texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--images", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "encode_cache.json"))
    args = parser.parse_args()

    pair_images, pair_texts = workload(args.images, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        build_tiny_open_clip(Path(tmp) / "oc", model_cfg=MODEL_CFG, seed=args.seed)
        spec = f"open_clip:local-dir:{Path(tmp) / 'oc'}"
        scorer: Any = load_model(spec, device=args.device, batch_size=args.batch_size)
        naive: Any = load_model(spec, device=args.device, batch_size=args.batch_size)

    scorer.similarity(pair_images[:2], pair_texts[:2])  # warm-up (first-call allocations)
    naive._encode_images_normalised(pair_images[:1])
    scorer.image_cache.clear()
    scorer.text_cache.clear()

    start = time.perf_counter()
    cached = scorer.similarity(pair_images, pair_texts)
    t_cached = time.perf_counter() - start

    start = time.perf_counter()
    looped = []
    for image, text in zip(pair_images, pair_texts, strict=True):
        e_i = naive._encode_images_normalised([image])  # bypasses the cache: encoded every time
        e_t = naive._encode_texts_normalised([text])
        looped.append(float((e_i * e_t).sum()))
    t_loop = time.perf_counter() - start

    stats = scorer.cache_stats()
    unique_images = len({image_key(im) for im in pair_images})
    unique_texts = len(set(pair_texts))
    result = {
        "benchmark": "encode_cache",
        "workload": {"pairs": len(pair_texts), "images": args.images, "captions_per_image": 5,
                     "variants_per_caption": len(TEMPLATES), "unique_images": unique_images,
                     "unique_texts": unique_texts},
        "model": {"kind": "open_clip (random init)", **MODEL_CFG},
        "batch_size": args.batch_size,
        "encoder_items": {"images": stats["images_encoded"], "texts": stats["texts_encoded"],
                          "image_batches": stats["image_calls"], "text_batches": stats["text_calls"]},
        "encoder_items_equal_unique_inputs": stats["images_encoded"] == unique_images
        and stats["texts_encoded"] == unique_texts,
        "per_pair_loop_encoder_items": {"images": len(pair_images), "texts": len(pair_texts)},
        "seconds": {"cached_batched": round(t_cached, 3), "per_pair_loop": round(t_loop, 3)},
        "speedup": round(t_loop / t_cached, 2),
        "timing": "one run per mode, after a warm-up",
        "max_abs_diff": float((cached - torch.tensor(looped)).abs().max()),
        "device": args.device,
        **environment(),
    }
    write_result(result, args.out)
    if not result["encoder_items_equal_unique_inputs"] or result["max_abs_diff"] > 1e-4:
        raise SystemExit("encode cache benchmark: correctness check failed")


if __name__ == "__main__":
    main()
