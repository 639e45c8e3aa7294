"""Benchmark: encode once (``faithtests.models.encode_once``) on a vision tower of real width.

The reference models' towers are a few MB, so their runs do not show what the memo saves: the default
run's wall time is the same with and without it (``results/suite_runs_encode_once.json``). This
benchmark measures it where a real checkpoint spends its time.

**The model.** The tiny Qwen2-VL the family matrix builds, with its vision tower widened to
Qwen2-VL-2B's: embed 1280, 16 heads, MLP ratio 4. It has ``--depth`` of the real model's 32 blocks
(default 8, so the run takes about a minute on 2 cores). The weights are random; a forward costs the
same whatever they are.

**The workload.** The suites' pattern: ``--questions`` option-scoring calls, each asking one question
of every one of ``--images`` images (a suite asks each kind of question in its own call). Each variant
loads its own copy of the model, through the adapter (``faithtests.load_model``):
- ``memo``: as shipped;
- ``plain``: the family's own tower methods restored, as before this change.

The two run alternately, ``--repeats`` times each, with threads explicit (``--threads``), and the load
recorded before and after. The result has the median seconds per variant, their ratio, each variant's
vision-tower passes, and the largest logit difference between them.

    python benchmarks/bench_encode_once.py [--depth 8] [--images 4] [--questions 3] [--repeats 2]
        [--threads 2] [--out benchmarks/results/encode_once_realwidth.json]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import environment, machine_load, write_result
from PIL import Image

from faithtests.models.encode_once import unmemoise
from faithtests.models.interfaces import Prompt
from faithtests.models.registry import load_model
from faithtests.models.work import work_of
from faithtests.testing.tiny import build_tiny

ROOT = Path(__file__).resolve().parents[1]
#: Qwen2-VL-2B-Instruct's vision tower (benchmarks/configs/qwen2-vl-2b-instruct.json), less its depth
WIDTH = {"embed_dim": 1280, "num_heads": 16, "mlp_ratio": 4}


def widened(out: Path, depth: int, image_size: int) -> Path:
    """The tiny Qwen2-VL of the family matrix with a real-width vision tower of ``depth`` blocks."""
    from transformers import AutoConfig, Qwen2VLForConditionalGeneration

    path = build_tiny("qwen2_vl", out, image_size=image_size)
    config: Any = AutoConfig.from_pretrained(path)
    for key, value in {**WIDTH, "depth": depth}.items():
        setattr(config.vision_config, key, value)
    torch.manual_seed(0)
    Qwen2VLForConditionalGeneration(config).eval().save_pretrained(path)
    return path


def plain(vlm: Any) -> Any:
    """The family's own tower methods (the instance attributes encode_once set, removed)."""
    vlm.option_logits([Prompt((Image.new("RGB", (8, 8)),), "A or B?")], ["A", "B"])  # loaded
    unmemoise(vlm.model)
    return vlm


def tower_passes(vlm: Any, counted: str) -> int:
    """Images through the vision tower so far (models.work): encoded by the memo, or handed to the
    forwards when the family's own methods run."""
    work = work_of(vlm)
    assert work is not None
    return int(work.get(counted) or 0)


def workload(images: int, questions: int, size: int) -> list[list[Prompt]]:
    """One call per question, each over every image: a suite asks each kind of question in its own call
    (SPD-Faith's same / different / count, IMAVB's prompt variants), so an image recurs across calls."""
    rng = np.random.default_rng(0)
    pics = [Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)) for _ in range(images)]
    return [[Prompt((pic,), f"Question {q}: is it red? Answer A or B.") for pic in pics]
            for q in range(questions)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--images", type=int, default=4)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--image-size", type=int, default=112)  # 4 px patches: 784, as a 392 px image at 14
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "encode_once_realwidth.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    calls = workload(args.images, args.questions, args.image_size)
    before = machine_load()
    with tempfile.TemporaryDirectory() as tmp:
        path = widened(Path(tmp), args.depth, args.image_size)
        seconds: dict[str, list[float]] = {"memo": [], "plain": []}
        logits: dict[str, torch.Tensor] = {}
        passes: dict[str, int] = {}
        for _ in range(args.repeats):
            for name in ("memo", "plain"):  # alternating: load drifts apply to both
                vlm = load_model(f"hf:{path}", device="cpu", batch_size=16)
                vlm = plain(vlm) if name == "plain" else vlm
                vlm.option_logits([Prompt((Image.new("RGB", (8, 8)),), "A or B?")], ["A", "B"])  # warm
                counted = "images_encoded" if name == "memo" else "image_inputs"  # plain: every input
                first = tower_passes(vlm, counted)
                start = time.perf_counter()
                logits[name] = torch.cat([vlm.option_logits(call, ["A", "B"]) for call in calls])
                seconds[name].append(time.perf_counter() - start)
                passes[name] = tower_passes(vlm, counted) - first
        visual = vlm.model.model.visual
        params = sum(p.numel() for p in visual.parameters())
    med = {k: statistics.median(v) for k, v in seconds.items()}
    write_result({
        "benchmark": "option scoring of the suites' pattern (several questions per image), vision tower "
                     "encoded once per image (memo) vs per prompt (plain), one process, threads explicit",
        "environment": environment(), "threads": args.threads,
        "model": {"family": "qwen2_vl", "vision": {**WIDTH, "depth": args.depth, "parameters": params},
                  "image_size": args.image_size},
        "workload": {"images": args.images, "calls": args.questions, "prompts": args.images * args.questions},
        "seconds": {k: [round(x, 2) for x in v] for k, v in seconds.items()},
        "median_s": {k: round(v, 2) for k, v in med.items()},
        "ratio_memo_vs_plain": round(med["memo"] / med["plain"], 3),
        "tower_passes": passes,
        "max_abs_logit_diff": float((logits["memo"] - logits["plain"]).abs().max()),
        "machine_before": before, "machine_after": machine_load(),
    }, args.out)


if __name__ == "__main__":
    main()
