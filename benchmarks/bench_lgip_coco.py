"""Benchmark (issue 5): a full LGIP run on COCO-MINI, deduplicated vs per-pair scoring.

Workload: every COCO-MINI caption with its paraphrases, flips and combined flips (exactly the pairs
`suites/` scores, built by :func:`faithtests.protocols.lgip.sources.coco_workload`). Two ways to get
s(I, c) and s(I, c') for every pair:
- deduplicated: :func:`faithtests.protocols.lgip.run.score_pairs` — each unique image decoded and
  encoded once, each unique text encoded once, in batches;
- per-pair loop (the naive baseline, as a user writes it with open_clip's own API): for each pair, open
  the image file, ``model.encode_image(preprocess(image))``, ``model.encode_text(tokenizer([c]))`` for the
  caption and the variant, batch size 1, no reuse.
Checked in the same run: encoder items == unique inputs, and both give the same similarities.
The model is a randomly initialised open_clip ViT at CLIP's 224 px input (weights do not change the
cost), loaded through ``load_model`` like a user's checkpoint.

    python benchmarks/bench_lgip_coco.py [--coco ../shared/data/coco-mini]
        [--out benchmarks/results/lgip_coco.json]
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

from faithtests.models.registry import load_model
from faithtests.protocols.lgip.run import score_pairs
from faithtests.protocols.lgip.sources import coco_workload
from faithtests.testing.tiny_duals import build_tiny_open_clip

MODEL_CFG: dict[str, Any] = {
    "embed_dim": 256,
    "vision_cfg": {"image_size": 224, "layers": 6, "width": 256, "head_width": 64, "patch_size": 32},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 256, "heads": 4, "layers": 6},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = Path(__file__).resolve().parents[2] / "shared"
    parser.add_argument("--coco", default=str(shared / "data" / "coco-mini"))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: timings not skewed by "
                        "other processes on a 2-core machine)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "lgip_coco.json"))
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    wl = coco_workload(args.coco)
    with tempfile.TemporaryDirectory() as tmp:
        build_tiny_open_clip(Path(tmp) / "oc", model_cfg=MODEL_CFG, seed=0)
        spec = f"open_clip:local-dir:{Path(tmp) / 'oc'}"
        scorer: Any = load_model(spec, device="cpu", batch_size=args.batch_size)
        naive: Any = load_model(spec, device="cpu", batch_size=1)

    first = wl.pairs[0]
    scorer.similarity([wl.images[first.image_id]()], [first.caption])  # warm-up
    with torch.inference_mode():
        naive.model.encode_image(naive.preprocess(wl.images[first.image_id]()).unsqueeze(0))
    scorer.image_cache.clear()
    scorer.text_cache.clear()

    start = time.perf_counter()
    fast = score_pairs(scorer, wl.images, wl.pairs)
    t_fast = time.perf_counter() - start

    start = time.perf_counter()
    base, variant = np.empty(len(wl.pairs)), np.empty(len(wl.pairs))
    for n, p in enumerate(wl.pairs):
        with torch.inference_mode():  # decoded and encoded every time
            pixels = naive.preprocess(wl.images[p.image_id]()).unsqueeze(0)
            e_i = torch.nn.functional.normalize(naive.model.encode_image(pixels), dim=-1)
            e_c = torch.nn.functional.normalize(naive.model.encode_text(naive.tokenizer([p.caption])), dim=-1)
            tokens = naive.tokenizer([p.perturbed])
            e_v = torch.nn.functional.normalize(naive.model.encode_text(tokens), dim=-1)
        base[n], variant[n] = float((e_i * e_c).sum()), float((e_i * e_v).sum())
        if n % 500 == 0:
            print(f"per-pair loop: {n}/{len(wl.pairs)}, {time.perf_counter() - start:.0f} s", flush=True)
    t_loop = time.perf_counter() - start

    stats = scorer.cache_stats()
    unique_images = len({p.image_id for p in wl.pairs})
    unique_texts = len({t for p in wl.pairs for t in (p.caption, p.perturbed)})
    result = {
        "benchmark": "lgip_coco_mini",
        "workload": {"pairs": len(wl.pairs), "captions": wl.n_captions, "unique_images": unique_images,
                     "unique_texts": unique_texts,
                     "families": {f: len(wl.of_family(f)) for f in ("paraphrase", "flip", "combined")}},
        "model": {"kind": "open_clip ViT (random init)", **MODEL_CFG},
        "encoder_items": {"images": stats["images_encoded"], "texts": stats["texts_encoded"]},
        "encoder_items_equal_unique_inputs": stats["images_encoded"] == unique_images
        and stats["texts_encoded"] == unique_texts,
        "per_pair_loop_encoder_items": {"images": len(wl.pairs), "texts": 2 * len(wl.pairs)},
        "seconds": {"deduplicated": round(t_fast, 3), "per_pair_loop": round(t_loop, 3)},
        "speedup": round(t_loop / t_fast, 2),
        "max_abs_diff": float(max(np.abs(fast.base - base).max(), np.abs(fast.perturbed - variant).max())),
        "timing": "one run per mode, after a warm-up, same process",
        **environment(),
    }
    write_result(result, args.out)
    if not result["encoder_items_equal_unique_inputs"] or result["max_abs_diff"] > 1e-4:
        raise SystemExit("LGIP COCO benchmark: correctness check failed")


if __name__ == "__main__":
    main()
