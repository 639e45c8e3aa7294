"""Benchmark (b): shared-prefix (KV cache) option scoring vs full-prompt forwards, measured in one run.

Two workloads on the same model: (1) A/B decisions (``decide``) and (2) the VLM as a scorer
(``caption_logprob``, LGIP on VLMs): every image with 8 captions, each pair a full forward vs one prefix
forward per image whose KV cache serves the 8 caption suffixes.

Workload: S3E-shaped records: each image comes with 10 two-option prompts (5 candidate captions x 2
orders, App. A prompt), all sharing the image + question prefix. The model is a LLaVA-layout VLM
(random init, weights do not change the cost) with 64 px images in 4 px patches = 256 image tokens per
prompt, loaded through ``load_model`` like a user's checkpoint. Both modes score the same prompts; the
run also reports the largest logit/state difference between them (must be < 1e-4 in fp32).

    python benchmarks/bench_prefix_cache.py [--device cpu] [--records 4]
        [--out benchmarks/results/prefix_cache.json]
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

from faithtests.models.interfaces import Prompt
from faithtests.models.registry import load_model
from faithtests.testing.tiny import build_tiny_llava

CAPTIONS = ["a red circle above a blue square", "two green triangle on the left", "a white dog next to a cat",
            "three yellow circle in a row", "one black square below a red triangle",
            "a blue circle and a green square"]
EXTRA = ["two red square above a circle", "a green triangle on the right"]


def records(n: int, seed: int) -> list[Prompt]:
    rng = np.random.default_rng(seed)
    prompts = []
    for _ in range(n):
        image = Image.fromarray(rng.integers(0, 256, (96, 128, 3), dtype=np.uint8))
        positive, *candidates = rng.permutation(len(CAPTIONS))[:6]
        for k in candidates:
            for a, b in ((positive, k), (k, positive)):
                text = ("Which caption better matches the image? Answer only A or B.\n"
                        f'A: "{CAPTIONS[a]}"\nB: "{CAPTIONS[b]}"')
                prompts.append(Prompt((image,), text))
    return prompts


def caption_pairs(n_images: int, seed: int) -> tuple[list[Any], list[str]]:
    """(image, caption) pairs: every image with 8 captions (an original and its perturbations)."""
    rng = np.random.default_rng(seed + 1)
    images, captions = [], []
    for _ in range(n_images):
        image = Image.fromarray(rng.integers(0, 256, (96, 128, 3), dtype=np.uint8))
        for k in rng.permutation(len(CAPTIONS + EXTRA))[:8]:
            images.append(image)
            captions.append((CAPTIONS + EXTRA)[k])
    return images, captions


def best_of(fn: Any, repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def timed(model: Any, prompts: list[Prompt], repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = model.decide(prompts, ["A", "B"])
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--records", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vision-hidden", type=int, default=128)
    parser.add_argument("--vision-layers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (set explicitly)")
    parser.add_argument("--caption-images", type=int, default=6)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "prefix_cache.json"))
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    words = sorted({w for c in CAPTIONS + EXTRA for w in c.split()})
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_llava(Path(tmp) / "vlm", words=words, image_size=64, patch_size=4,
                                hidden_size=args.hidden, num_layers=args.layers,
                                vision_hidden_size=args.vision_hidden, vision_layers=args.vision_layers,
                                seed=args.seed)
        shared: Any = load_model(f"hf:{path}", device=args.device, batch_size=args.batch_size)
        full: Any = load_model(
            f"hf:{path}", device=args.device, batch_size=args.batch_size, prefix_cache=False
        )

    prompts = records(args.records, args.seed)
    enc = shared.encode(prompts[:2])
    image_tokens = int((enc.inputs["input_ids"][0] == shared.image_token).sum())
    ids = enc.inputs["input_ids"]
    prefix_len = int((ids[0] != ids[1]).nonzero()[0, 0])
    shared.decide(prompts[:2], ["A", "B"])  # warm-up both paths
    full.decide(prompts[:2], ["A", "B"])

    t_full, out_full = timed(full, prompts, args.repeats)
    t_shared, out_shared = timed(shared, prompts, args.repeats)
    ims, caps = caption_pairs(args.caption_images, args.seed)
    shared.caption_logprob(ims[:2], caps[:2])  # warm-up both paths
    full.caption_logprob(ims[:2], caps[:2])
    calls_before = {"shared": shared.cache_stats(), "full": full.cache_stats()}
    c_full, lp_full = best_of(lambda: full.caption_logprob(ims, caps), args.repeats)
    c_shared, lp_shared = best_of(lambda: shared.caption_logprob(ims, caps), args.repeats)
    scoring = {
        "workload": {"images": args.caption_images, "captions_per_image": 8, "pairs": len(caps)},
        "seconds": {"per_pair_full": round(c_full, 3), "prefix_shared": round(c_shared, 3)},
        "speedup": round(c_full / c_shared, 2),
        "max_abs_diff_logprob": float((lp_full - lp_shared).abs().max()),
        "calls_per_run": {k: {n: (m.cache_stats()[n] - calls_before[k][n]) // args.repeats
                              for n in calls_before[k]} for k, m in (("shared", shared), ("full", full))},
    }
    result = {
        "benchmark": "prefix_cache",
        "workload": {"records": args.records, "prompts": len(prompts), "prompts_per_image": 10,
                     "image_tokens_per_prompt": image_tokens, "prompt_tokens": enc.lengths[0],
                     "shared_prefix_tokens": prefix_len},
        "model": {"layout": "llava (random init)", "text_hidden": args.hidden, "text_layers": args.layers,
                  "vision": f"CLIP ViT {args.vision_layers} layers x {args.vision_hidden}, "
                            "64px images / 4px patches"},
        "batch_size": args.batch_size,
        "seconds": {"full_prompt": round(t_full, 3), "shared_prefix": round(t_shared, 3)},
        "timing": f"best of {args.repeats} runs per mode, after one warm-up",
        "speedup": round(t_full / t_shared, 2),
        "max_abs_diff": {"logits": float((out_full.logits - out_shared.logits).abs().max()),
                         "states": float((out_full.states - out_shared.states).abs().max())},
        "calls": {"shared": calls_before["shared"], "full": calls_before["full"]},
        "vlm_scoring": scoring,
        "device": args.device,
        "dtype": "float32",
        **environment(),
    }
    write_result(result, args.out)
    if max(*result["max_abs_diff"].values(), scoring["max_abs_diff_logprob"]) > 1e-4:
        raise SystemExit("prefix cache benchmark: cached and full results differ by more than 1e-4")


if __name__ == "__main__":
    main()
