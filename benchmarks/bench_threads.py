"""Benchmark: the thread policy (faithtests.models.threads) vs torch's default threads, measured in one run.

Two parts, each timed quiet and under a competing CPU load the benchmark makes itself (one busy
process per core, as on a shared CI runner):

1. model size sweep: A/B decisions of LLaVA-layout VLMs (random init; the cost does not depend on the
   weights) from ~0.16M to ~30M parameters, 1 thread vs all cores: where does one thread stop winning?
   ``SMALL_MODEL_PARAMS`` is set from it (the largest size measured while no crossing is found).
2. the suite: ``pytest suites/ -k "forced_choice_order_accuracy and orig"`` on the bundled reference
   VLM, with torch's default threads (``--faith-threads`` = cores) vs the policy (no option).

    python benchmarks/bench_threads.py [--repeats 3] [--out benchmarks/results/threads.json]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import environment, write_result
from PIL import Image

from faithtests.models.interfaces import Prompt
from faithtests.models.registry import load_model
from faithtests.models.threads import SMALL_MODEL_PARAMS, parameter_count, usable_cores
from faithtests.testing.tiny import build_tiny_llava

ROOT = Path(__file__).resolve().parents[1]
WORDS = ["a", "red", "blue", "green", "circle", "square", "triangle", "above", "below", "left", "right",
         "of", "the", "two", "three"]
SIZES = ((64, 2), (256, 4), (512, 6), (1024, 8))  # (hidden, layers) of the language model


def _spin(stop: Any) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 1103515245 + 12345) % 2**31


@contextmanager
def competing_load(on: bool) -> Iterator[None]:
    """One busy process per usable core while the block runs."""
    if not on:
        yield
        return
    stop = mp.Event()
    procs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(usable_cores())]
    for p in procs:
        p.start()
    time.sleep(0.5)
    try:
        yield
    finally:
        stop.set()
        for p in procs:
            p.join()


def _prompts(n: int) -> list[Prompt]:
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))
    text = ('Which caption better matches the image? Answer only A or B.\n'
            'A: "a red circle"\nB: "two blue square"')
    return [Prompt((image,), text) for _ in range(n)]


def _best(fn: Any, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def size_sweep(repeats: int) -> list[dict[str, Any]]:
    rows = []
    cores = usable_cores()
    prompts = _prompts(8)
    with tempfile.TemporaryDirectory() as tmp:
        for hidden, layers in SIZES:
            path = build_tiny_llava(Path(tmp) / f"h{hidden}", words=WORDS, image_size=64, patch_size=8,
                                    hidden_size=hidden, num_layers=layers,
                                    vision_hidden_size=min(hidden, 256), vision_layers=2)
            model: Any = load_model(f"hf:{path}", device="cpu", batch_size=8)
            row: dict[str, Any] = {"hidden": hidden, "layers": layers, "params": parameter_count(model)}
            for load in (False, True):
                with competing_load(load):
                    for threads in (1, cores):
                        torch.set_num_threads(threads)
                        model.decide(prompts, ["A", "B"])  # warm-up
                        t = _best(lambda m=model: m.decide(prompts, ["A", "B"]), repeats)
                        row[f"{'loaded' if load else 'quiet'}_{threads}t_s"] = round(t, 4)
                key = "loaded" if load else "quiet"
                row[f"{key}_speedup_1t_vs_{cores}t"] = round(row[f"{key}_{cores}t_s"] / row[f"{key}_1t_s"], 2)
            rows.append(row)
            print(row, flush=True)
    return rows


def suite_run(threads: int | None, load: bool) -> float:
    cmd = [sys.executable, "-m", "pytest", "suites/", "-q", "-p", "no:cacheprovider",
           "-k", "forced_choice_order_accuracy and orig", "--faith-report", tempfile.mkdtemp()]
    if threads is not None:
        cmd += ["--faith-threads", str(threads)]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    with competing_load(load):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "threads.json"))
    args = parser.parse_args()
    env = environment()
    cores = usable_cores()
    sweep = size_sweep(args.repeats)
    suite: dict[str, Any] = {}
    for load in (False, True):
        key = "loaded" if load else "quiet"
        naive = suite_run(cores, load)
        policy = suite_run(None, load)
        suite[key] = {"default_threads_s": round(naive, 1), "policy_s": round(policy, 1),
                      "speedup": round(naive / policy, 2)}
        print(key, suite[key], flush=True)
    write_result({
        "benchmark": "thread policy vs torch default threads",
        "environment": env, "cores": cores, "small_model_params": SMALL_MODEL_PARAMS,
        "size_sweep": sweep,
        "suite_forced_choice_orig": suite,
        "note": "speedup = default-threads time / policy time; 'loaded' = one busy process per core "
                "started by the benchmark; other work on the machine is recorded as load_average_1min",
    }, args.out)


if __name__ == "__main__":
    main()
