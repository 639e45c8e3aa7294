"""Benchmark: the thread policy (faithtests.models.threads) vs torch's default threads, measured in one run.

Two parts, each timed quiet and under a competing CPU load the benchmark makes itself (one busy
process per core, as on a shared CI runner):

1. model size sweep: A/B decisions of LLaVA-layout VLMs (random init; the cost does not depend on the
   weights) from ~0.16M to ~30M parameters, 1 thread vs all cores: where does one thread stop winning?
   ``SMALL_MODEL_PARAMS`` is set from it (the largest size measured while no crossing is found).
2. the suite: ``pytest suites/ -k "forced_choice_order_accuracy and orig"`` on the bundled reference
   VLM, with torch's default threads (``--faith-threads`` = cores) vs the policy (no option) vs every
   pool at one thread (``OMP/OPENBLAS/MKL_NUM_THREADS=1``, ``TOKENIZERS_PARALLELISM=false``,
   ``--faith-threads 1``): the policy covers numpy's BLAS, scikit-learn's OpenMP and the tokenizers'
   pools too, so beside a competing process the default should cost no more than one thread (issue 35:
   <= 1.2x; before, 50.2 s against 24.9 s beside three other jobs).

    python benchmarks/bench_threads.py [--repeats 3] [--parts sweep,suite]
        [--out benchmarks/results/threads.json]
"""

from __future__ import annotations

import argparse
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
from _common import competing_load as _competing
from _common import environment, machine_load, write_result
from PIL import Image

from faithtests.models.interfaces import Prompt
from faithtests.models.registry import load_model
from faithtests.models.threads import SMALL_MODEL_PARAMS, parameter_count, usable_cores
from faithtests.testing.tiny import build_tiny_llava

ROOT = Path(__file__).resolve().parents[1]
WORDS = ["a", "red", "blue", "green", "circle", "square", "triangle", "above", "below", "left", "right",
         "of", "the", "two", "three"]
SIZES = ((64, 2), (256, 4), (512, 6), (1024, 8))  # (hidden, layers) of the language model


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TOKENIZERS_PARALLELISM",
                    "RAYON_NUM_THREADS", "FAITH_THREADS_SET")
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TOKENIZERS_PARALLELISM": "false"}


@contextmanager
def competing_load(on: bool) -> Iterator[None]:
    """One busy process per usable core while the block runs."""
    with _competing(usable_cores() if on else 0):
        yield


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


def suite_run(threads: int | None, load: bool, variables: dict[str, str] | None = None) -> float:
    """Wall seconds of the forced-choice test; ``variables``: the thread variables the child gets (none
    but these: the default is what a new user's shell has)."""
    cmd = [sys.executable, "-m", "pytest", "suites/", "-q", "-p", "no:cacheprovider",
           "-k", "forced_choice_order_accuracy and orig", "--faith-report", tempfile.mkdtemp()]
    if threads is not None:
        cmd += ["--faith-threads", str(threads)]
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    env.update(variables or {})
    with competing_load(load):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parts", default="sweep,suite")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "threads.json"))
    args = parser.parse_args()
    env, before = environment(), machine_load()
    cores = usable_cores()
    sweep = size_sweep(args.repeats) if "sweep" in args.parts else None
    suite: dict[str, Any] = {}
    for load in (False, True) if "suite" in args.parts else ():
        key = "loaded" if load else "quiet"
        naive = suite_run(cores, load)
        policy = suite_run(None, load)
        one = suite_run(1, load, ONE_THREAD)
        suite[key] = {"default_threads_s": round(naive, 1), "policy_s": round(policy, 1),
                      "one_thread_everywhere_s": round(one, 1), "speedup": round(naive / policy, 2),
                      "ratio_policy_vs_one_thread": round(policy / one, 2)}
        print(key, suite[key], flush=True)
    write_result({
        "benchmark": "thread policy (torch, BLAS/OpenMP, tokenizers) vs torch default threads vs one thread",
        "environment": env, "cores": cores, "small_model_params": SMALL_MODEL_PARAMS,
        "machine_at_start": before, "machine_at_end": machine_load(),
        "size_sweep": sweep,
        "suite_forced_choice_orig": suite,
        "note": "speedup = default-threads time / policy time; ratio_policy_vs_one_thread = policy / every "
                "pool at one thread (target <= 1.2); 'loaded' = one busy process per core started by the "
                "benchmark; what else ran is in machine_at_start/end (other agents share this 2-core "
                "machine)",
    }, args.out)


if __name__ == "__main__":
    main()
