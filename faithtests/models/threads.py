"""The torch intra-op thread policy of a test process, decided deliberately (issue: a busy 2-core box).

torch's default (one intra-op thread per core) makes every small op wait for a descheduled OpenMP
thread when other work shares the cores: a 128-wide linear layer took 14 ms per call beside other load.
Precedence, per process (each xdist worker decides for itself):

1. ``--faith-threads N`` (ini ``faith_threads``);
2. the user's own setting: ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` in the environment (left as is);
3. auto: 1 thread while every model this process loaded is below :data:`SMALL_MODEL_PARAMS` (parallel
   ops cost more than they save there; measured by ``benchmarks/bench_threads.py``), else the usable
   cores divided by the xdist workers.

The Hugging Face tokenizers library runs batch encoding on its own thread pool, one thread per core;
beside one-thread torch or other xdist workers that oversubscribes the cores just as OpenMP does (the
default ``pytest suites/ -n 2`` took 61.7 s with it and 32.9 s without, against 59.7 s serial). So
``TOKENIZERS_PARALLELISM=false`` is set when torch runs one thread or the run has several workers,
unless the user set the variable. The choice is recorded with each model's info in the scorecard
fingerprint.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Up to this many parameters one intra-op thread was faster than two on the 2-core reference machine,
#: quiet (1.5x at 29.5M) and loaded (2.6x): benchmarks/results/threads.json. No crossing was found within
#: the sweep, so this is the largest size measured, not the crossing; above it the cores are shared.
SMALL_MODEL_PARAMS = 30_000_000
USER_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class ThreadChoice:
    threads: int | None  # None: leave torch as the user configured it
    reason: str


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def xdist_workers(env: Mapping[str, str]) -> int:
    """Workers of this run (xdist sets ``PYTEST_XDIST_WORKER_COUNT`` on each worker), 1 when serial."""
    count = env.get("PYTEST_XDIST_WORKER_COUNT", "")
    return int(count) if count.isdigit() and int(count) > 0 else 1


def choose_threads(requested: int | None, env: Mapping[str, str], cores: int, workers: int,
                   largest_model_params: int | None) -> ThreadChoice:
    """The policy above, as a pure function."""
    if requested is not None:
        if requested < 1:
            raise ValueError(f"--faith-threads must be >= 1, got {requested}")
        return ThreadChoice(requested, "--faith-threads")
    for var in USER_VARIABLES:
        if env.get(var, "").strip():
            return ThreadChoice(None, f"{var}={env[var].strip()} (user setting)")
    if largest_model_params is not None and largest_model_params < SMALL_MODEL_PARAMS:
        return ThreadChoice(1, f"auto: models below {SMALL_MODEL_PARAMS:,} parameters")
    share = max(1, cores // max(1, workers))
    return ThreadChoice(share, f"auto: {cores} core(s) / {workers} worker(s)")


def tokenizers_parallelism(env: Mapping[str, str], threads: int, workers: int) -> str | None:
    """The ``TOKENIZERS_PARALLELISM`` value to set (None: leave it; the user's setting always stands)."""
    if env.get("TOKENIZERS_PARALLELISM", "").strip():
        return None
    return "false" if threads == 1 or workers > 1 else None


def parameter_count(model: Any) -> int | None:
    """Parameters of an adapter's torch module (``.model``, or a wrapped VLM's), None if unknown. An
    adapter's own ``num_parameters()`` answers first (it sizes a model whose weights are not loaded)."""
    for obj in (model, getattr(model, "vlm", None)):
        count = getattr(type(obj), "num_parameters", None)
        if callable(count):
            return count(obj)  # type: ignore[no-any-return]
    for obj in (model, getattr(model, "vlm", None)):
        module = getattr(obj, "model", None)
        if module is not None and hasattr(module, "parameters"):
            return int(sum(p.numel() for p in module.parameters()))
    return None


def apply_threads(choice: ThreadChoice) -> int:
    """Set torch's intra-op threads (unless the user's setting stands); the count in effect."""
    import torch  # lazy: the plugin imports this module torch-free

    if choice.threads is not None and torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)
    return int(torch.get_num_threads())
