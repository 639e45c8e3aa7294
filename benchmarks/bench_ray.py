"""Benchmark: pair scoring in-process vs a pool of 1 and 2 Ray actors (``--faith-ray``).

Workload: reference-world (image, caption) pairs (``caption_items``: five true captions per scene), all
scored with one ``similarity(images, texts)`` call, as LGIP's loops do:
- ``reference:clip`` on ``--pairs`` pairs (default 2,000: 400 scenes x 5 captions), each unique image
  and caption encoded once;
- ``reference:vlm`` used as a scorer (mean caption log-likelihood, one VLM forward per pair) on
  ``--vlm-pairs`` pairs (default 200).
Every configuration starts from a fresh model (empty caches); model loading is timed separately from
scoring. Threads are explicit: ``torch.set_num_threads(1)`` in the driver and in every actor. Checked in
the same run: the pooled scores equal the in-process ones within 1e-6.

    python benchmarks/bench_ray.py [--pairs 2000] [--vlm-pairs 200] [--out benchmarks/results/ray.json]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import torch
from _common import environment, write_result

import faithtests
from faithtests.models.ray_actors import RaySettings, start_pool, stop
from faithtests.world import caption_items


def _pairs(n: int) -> tuple[list[Any], list[str]]:
    items = caption_items((n + 4) // 5, seed=0)
    rendered = {it.item_id: it.image() for it in items}
    images = [rendered[it.item_id] for it in items for _ in it.captions][:n]
    texts = [c for it in items for c in it.captions][:n]
    return images, texts


def _score(model: Any, images: list[Any], texts: list[str]) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    out = model.similarity(images, texts)
    return time.perf_counter() - start, out


def bench(spec: str, n: int, as_scorer: bool) -> dict[str, Any]:
    images, texts = _pairs(n)
    start = time.perf_counter()
    model: Any = faithtests.load_model(spec, device="cpu", dtype="float32")
    if as_scorer:
        from faithtests.models.vlm_scorer import VLMScorer

        model = VLMScorer(model)
    load = time.perf_counter() - start
    seconds, want = _score(model, images, texts)
    rows: dict[str, Any] = {"in_process": {"load_s": round(load, 2), "score_s": round(seconds, 3),
                                           "pairs_per_s": round(n / seconds, 1)}}
    for actors in (1, 2):
        start = time.perf_counter()
        pooled, hosts = start_pool(spec, RaySettings("local", actors=actors, threads=1), device="cpu",
                                   dtype="float32", batch_size=16, options={}, local=None)
        if as_scorer:
            pooled = pooled.as_scorer()  # type: ignore[union-attr]
        pooled.fingerprint()  # waits for the actors to finish loading
        load = time.perf_counter() - start
        seconds, got = _score(pooled, images, texts)
        assert torch.allclose(got, want, atol=1e-6, rtol=0), f"{spec}: pooled scores differ"
        rows[f"ray_{actors}_actor{'s' if actors > 1 else ''}"] = {
            "load_s": round(load, 2), "score_s": round(seconds, 3), "pairs_per_s": round(n / seconds, 1),
            "speedup_vs_in_process": round(rows["in_process"]["score_s"] / seconds, 2)}
        stop(hosts, started=False)
    per_item_ms = 1000 * rows["in_process"]["score_s"] / n
    return {"spec": spec + (" (as scorer)" if as_scorer else ""), "pairs": n,
            "unique_images": len({id(im) for im in images}), "unique_texts": len(set(texts)),
            "in_process_ms_per_pair": round(per_item_ms, 3), **rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--vlm-pairs", type=int, default=200)
    ap.add_argument("--out", default="benchmarks/results/ray.json")
    args = ap.parse_args()
    import ray

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        result = {
            "benchmark": "ray pool vs in-process pair scoring (reference world)",
            "machine_cores": os.cpu_count(),
            "threads": "torch.set_num_threads(1) in the driver and in each actor",
            "workloads": [bench("reference:clip", args.pairs, False),
                          bench("reference:vlm", args.vlm_pairs, True)],
            "environment": environment(),
        }
    finally:
        ray.shutdown()
    write_result(result, args.out)


if __name__ == "__main__":
    main()
