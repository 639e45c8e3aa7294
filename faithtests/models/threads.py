"""The torch intra-op thread policy of a test process, decided deliberately (issue: a busy 2-core box).

torch's default (one intra-op thread per core) makes every small op wait for a descheduled OpenMP
thread when other work shares the cores: a 128-wide linear layer took 14 ms per call beside other load.
Precedence, per process (each xdist worker decides for itself):

1. ``--faith-threads N`` (ini ``faith_threads``);
2. the user's own setting: ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` in the environment (left as is);
3. auto: 1 thread while every model this process loaded is below :data:`SMALL_MODEL_PARAMS` (parallel
   ops cost more than they save there; measured by ``benchmarks/bench_threads.py``), else the usable
   cores divided by the xdist workers.

The same count covers every other thread pool of the process (issue 35: beside three other jobs a
forced-choice run took 50.2 s with numpy's and scikit-learn's pools at one thread per core, 24.9 s with
``OMP_NUM_THREADS=1``): the BLAS (OpenBLAS/MKL) and OpenMP pools already loaded are limited through
threadpoolctl, and ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` are set for the
libraries loaded later (scikit-learn's own libgomp, scipy's OpenBLAS read them when they load), marked
in ``FAITH_THREADS_SET`` so that the next load in this process (or an xdist worker it starts) does not
take them for the user's setting. The Hugging Face tokenizers library runs batch encoding on its own
Rayon pool, one thread per core; beside one-thread torch or other xdist workers that oversubscribes the
cores just as OpenMP does (the default ``pytest suites/ -n 2`` took 61.7 s with it and 32.9 s without,
against 59.7 s serial). So ``TOKENIZERS_PARALLELISM=false`` is set when torch runs one thread or the run
has several workers, else ``RAYON_NUM_THREADS`` to the count, unless the user set the variable. The
choice and the pools' counts are recorded with each model's info in the scorecard fingerprint.
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
#: Variables the policy sets for pools loaded after it ran; ``MARKER`` holds the value it set them to.
POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
MARKER = "FAITH_THREADS_SET"


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
    ours = env.get(MARKER, "").strip()
    for var in USER_VARIABLES:
        value = env.get(var, "").strip()
        if value and value != ours:
            return ThreadChoice(None, f"{var}={value} (user setting)")
    if largest_model_params is not None and largest_model_params < SMALL_MODEL_PARAMS:
        return ThreadChoice(1, f"auto: models below {SMALL_MODEL_PARAMS:,} parameters")
    share = max(1, cores // max(1, workers))
    return ThreadChoice(share, f"auto: {cores} core(s) / {workers} worker(s)")


def tokenizers_parallelism(env: Mapping[str, str], threads: int, workers: int) -> str | None:
    """The ``TOKENIZERS_PARALLELISM`` value to set (None: leave it; the user's setting always stands)."""
    if env.get("TOKENIZERS_PARALLELISM", "").strip():
        return None
    return "false" if threads == 1 or workers > 1 else None


def pool_variables(env: Mapping[str, str], threads: int, workers: int) -> dict[str, str]:
    """Environment variables to set so that pools loaded later follow ``threads``: the OpenMP/BLAS
    counts (with :data:`MARKER`), ``TOKENIZERS_PARALLELISM`` (:func:`tokenizers_parallelism`) or else
    ``RAYON_NUM_THREADS``. A variable the user set is left as is (empty: nothing to set)."""
    ours = env.get(MARKER, "").strip()
    if any(env.get(v, "").strip() not in ("", ours) for v in USER_VARIABLES):
        return {}  # the user's own pool setting (choose_threads leaves torch alone too)
    out = {v: str(threads) for v in POOL_VARIABLES if env.get(v, "").strip() in ("", ours)}
    out[MARKER] = str(threads)
    if (parallel := tokenizers_parallelism(env, threads, workers)) is not None:
        out["TOKENIZERS_PARALLELISM"] = parallel
    elif not env.get("TOKENIZERS_PARALLELISM", "").strip() and not env.get("RAYON_NUM_THREADS", "").strip():
        out["RAYON_NUM_THREADS"] = str(threads)
    return out


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


def apply_threads(choice: ThreadChoice, workers: int = 1) -> int:
    """Set torch's intra-op threads, the loaded BLAS/OpenMP pools (threadpoolctl) and the variables of
    the pools loaded later (:func:`pool_variables`), unless the user's setting stands; torch's count in
    effect."""
    import torch  # lazy: the plugin imports this module torch-free

    if choice.threads is not None:
        if torch.get_num_threads() != choice.threads:
            torch.set_num_threads(choice.threads)
        os.environ.update(pool_variables(os.environ, choice.threads, workers))
        limit_loaded_pools(choice.threads)
    return int(torch.get_num_threads())


def limit_loaded_pools(threads: int) -> None:
    """Limit every BLAS and OpenMP pool loaded in this process to ``threads`` (they keep the limit)."""
    from threadpoolctl import threadpool_limits  # lazy: reads every loaded library, only when applied

    threadpool_limits(limits=threads)


def pool_threads() -> dict[str, int]:
    """Threads of each kind of pool loaded in this process (``blas``, ``openmp``: the largest of its
    libraries), for the fingerprint; an unset variable of the tokenizers' pool is left out."""
    from threadpoolctl import threadpool_info  # lazy: as above

    out: dict[str, int] = {}
    for lib in threadpool_info():
        api = str(lib.get("user_api"))
        out[f"{api}_threads"] = max(out.get(f"{api}_threads", 0), int(lib.get("num_threads", 0)))
    if (rayon := os.environ.get("RAYON_NUM_THREADS", "").strip()).isdigit():
        out["rayon_threads"] = int(rayon)
    return out
