"""Benchmark: whole ``pytest suites/`` runs, each variant against its naive baseline in one run.

Ratios (each pair timed back to back, same machine state; wall seconds of the pytest subprocess):

1. xdist: ``-n 2`` (loadgroup + per-stage groups for small models, longest groups first once a run
   has recorded their seconds: faithtests.plugin.distribution) vs serial (alternated, medians), vs
   the first ``-n 2`` run (no record yet) and vs xdist's own default ``--dist load``; beside it the machine's
   own parallel ceiling (one CPU-bound job alone vs two at once), since a shared 2-vCPU machine does
   not always give a second process a whole core;
2. output cache: ``--faith-cache DIR`` warm (the mean of the second and third runs) vs cold (first run,
   empty DIR), and a warm run that recompiles every module (``PYTHONDONTWRITEBYTECODE=1``, see run());
3. threads (the issue's table): torch's default threads (``--faith-threads`` = cores) vs the policy,
   for the default run and for ``-k "forced_choice_order_accuracy and orig"``.

Every run passes ``--faith-no-progress`` and writes its scorecard to a temporary directory. The
scorecards of serial, ``-n 2`` and warm-cache runs are compared: the metric values must be equal.

    python benchmarks/bench_suite_runs.py [--parts xdist,cache,threads] [--select "not premise"]
        [--repeats 2] [--out benchmarks/results/suite_runs.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import environment, write_result

from faithtests.models.threads import usable_cores

ROOT = Path(__file__).resolve().parents[1]
FORCED = ["-k", "forced_choice_order_accuracy and orig"]


PYTEST_CACHE = Path(tempfile.mkdtemp(prefix="faith_bench_pytest_cache_"))
#: Extra pytest arguments for every run (``--select``), e.g. ``-k "not premise"``.
SELECT: list[str] = []


def run(*args: str, env_threads: str | None = None, bytecode: bool = True) -> tuple[float, Path]:
    """Wall seconds of ``pytest suites/ ARGS`` and its report directory (fails loudly on a failed run).

    ``bytecode``: Python writes and reads its bytecode cache (``__pycache__``, pytest's rewritten test
    modules) as on any developer machine or CI runner. The sandbox these figures come from sets
    ``PYTHONDONTWRITEBYTECODE=1``, which makes every run recompile every module; that is cleared for
    the children unless ``bytecode=False`` (measured too, for the cache part)."""
    report = Path(tempfile.mkdtemp(prefix="faith_bench_"))
    # pytest's cache in a directory of this benchmark's own: the -n 2 runs keep each xdist group's
    # seconds there (longest groups first next time), and the checkout's .pytest_cache is left alone
    cmd = [sys.executable, "-m", "pytest", "suites/", "-q", "-o", f"cache_dir={PYTEST_CACHE}",
           "--faith-no-progress", "--faith-report", str(report), *SELECT, *args]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["HF_HUB_OFFLINE"] = "1"
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if env_threads is not None:
        env["OMP_NUM_THREADS"] = env_threads
    load = round(os.getloadavg()[0], 2)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}")
    print(f"{wall:7.1f} s  load {load:5.2f}  pytest suites/ {' '.join(args)}", flush=True)
    return wall, report


def metrics(report: Path) -> dict[str, Any]:
    card = json.loads((report / "scorecard.json").read_text(encoding="utf-8"))
    return {f"{r['test']}|{r['metric']}|{r['model']}|{r['variant']}|{r.get('slice')}": r["value"]
            for t in card["tests"] for r in t["results"]}


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Exactly equal metrics (NaN equal to NaN): what a warm run must give back."""
    return a.keys() == b.keys() and all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)


def _differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """How two runs' metrics differ: xdist workers batch a model's inputs differently from a serial run,
    and batch composition moves float32 outputs in the last bits (the batch-invariance tests allow 1e-5),
    so -n 2 is compared within a tolerance and the largest difference is recorded."""
    both = [k for k in a if k in b and a[k] is not None and b[k] is not None]
    diffs = {k: abs(float(a[k]) - float(b[k])) for k in both if not (a[k] != a[k] and b[k] != b[k])}
    worst = max(diffs, key=lambda k: diffs[k] if diffs[k] == diffs[k] else float("inf"), default=None)
    return {"same_keys": a.keys() == b.keys(), "exactly_equal": _same(a, b),
            "differing": sum(1 for d in diffs.values() if d != 0),
            "max_abs_diff": diffs[worst] if worst is not None else 0.0, "max_abs_diff_metric": worst,
            "within_1e-6": a.keys() == b.keys() and all(d <= 1e-6 for d in diffs.values())}


def _kernel(_: int = 0) -> float:
    """A fixed CPU-bound job (pure Python plus one-thread matmuls, like a test process's mix)."""
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    x, a = 0, torch.randn(384, 384)
    for i in range(10_000_000):
        x += i * i
    for _ in range(500):
        a @ a
    return time.perf_counter() - start


def parallel_ceiling(repeats: int = 3) -> dict[str, Any]:
    """What two processes can gain on this machine right now: the same job alone and two at once.
    ``ceiling`` = 2 x alone / slower-of-two (2.0 on two free cores)."""
    from concurrent.futures import ProcessPoolExecutor

    alone, pair = [], []
    with ProcessPoolExecutor(2) as pool:
        for _ in range(repeats):
            alone.append(pool.submit(_kernel).result())
            pair.append(max(pool.map(_kernel, range(2))))
    a, p = sorted(alone)[len(alone) // 2], sorted(pair)[len(pair) // 2]
    return {"alone_s": round(a, 2), "two_at_once_s": round(p, 2), "ceiling": round(2 * a / p, 2)}


def xdist_part(repeats: int) -> dict[str, Any]:
    """Serial and -n 2 alternated ``repeats`` times (medians), then --dist load once."""
    ceiling = parallel_ceiling()
    first, _ = run("-n", "2")  # no group seconds recorded yet: xdist's order (by test count)
    serial_runs, n2_runs = [], []
    for _ in range(repeats):
        serial, rs = run()
        n2, rn = run("-n", "2")
        serial_runs.append(serial)
        n2_runs.append(n2)
    load, _ = run("-n", "2", "--dist", "load")
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    return {"machine_parallel_ceiling": ceiling,
            "serial_s": [round(x, 1) for x in serial_runs],
            "n2_first_run_s": round(first, 1),  # before any group seconds were recorded
            "n2_loadgroup_s": [round(x, 1) for x in n2_runs],  # longest groups first
            "n2_dist_load_s": round(load, 1),
            "speedup_n2_vs_serial_median": round(med(serial_runs) / med(n2_runs), 2),
            "speedup_n2_vs_dist_load": round(load / med(n2_runs), 2),
            "metrics_vs_serial": _differences(metrics(rs), metrics(rn))}


def _wall(cmd: list[str]) -> float:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as in run()
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=True)
    return time.perf_counter() - start


def floor() -> dict[str, float]:
    """What a warm run cannot avoid: collecting the suites, and importing the libraries it still needs
    (torch for the tensors the store gives back, scikit-learn for the probes; the models' own stacks,
    transformers' processors and open_clip, are not imported when every output is stored)."""
    collect = _wall([sys.executable, "-m", "pytest", "suites/", "--collect-only", "-q",
                     "-p", "no:cacheprovider", *SELECT])
    imports = _wall([sys.executable, "-c", "import torch, sklearn.model_selection, sklearn.linear_model"])
    return {"collect_s": round(collect, 1), "imports_s": round(imports, 1)}


def cache_part() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="faith_cache_") as cache:
        cold, rc = run("--faith-cache", cache)
        warm, rw = run("--faith-cache", cache)
        warm_again, _ = run("--faith-cache", cache)
        recompiling, _ = run("--faith-cache", cache, bytecode=False)
        models = json.loads((rw / "scorecard.json").read_text(encoding="utf-8"))["fingerprint"]["models"]
        counts = {label: info.get("output_cache") for label, info in models.items()}
    base = floor()
    mean_warm = (warm + warm_again) / 2
    return {"cold_s": round(cold, 1), "warm_s": [round(warm, 1), round(warm_again, 1)],
            "speedup_warm_vs_cold": round(cold / mean_warm, 2),
            "warm_without_bytecode_cache_s": round(recompiling, 1),
            "speedup_warm_without_bytecode_cache": round(cold / recompiling, 2),
            "floor": base,
            "speedup_ceiling_cold_vs_floor": round(cold / (base["collect_s"] + base["imports_s"]), 1),
            "warm_output_cache": counts, "same_metrics_as_cold": _same(metrics(rc), metrics(rw))}


def threads_part() -> dict[str, Any]:
    cores = str(usable_cores())
    out: dict[str, Any] = {}
    for name, args in (("forced_choice_orig", FORCED), ("default_run", [])):
        naive, _ = run(*args, "--faith-threads", cores)
        policy, _ = run(*args)
        one, _ = run(*args, env_threads="1")
        out[name] = {"default_threads_s": round(naive, 1), "policy_s": round(policy, 1),
                     "omp_num_threads_1_s": round(one, 1), "speedup_policy": round(naive / policy, 2)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--parts", default="xdist,cache,threads")
    parser.add_argument("--repeats", type=int, default=2, help="serial / -n 2 pairs (medians)")
    parser.add_argument("--select", default="", help='pytest -k expression for every run, e.g. "not premise"')
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "suite_runs.json"))
    args = parser.parse_args()
    env = environment()
    if args.select:
        SELECT.extend(["-k", args.select])
    parts = {"xdist": lambda: xdist_part(args.repeats), "cache": cache_part, "threads": threads_part}
    results = {name: parts[name]() for name in args.parts.split(",")}
    write_result({
        "benchmark": "pytest suites/ runs: -n 2 vs serial, warm vs cold cache, thread policy vs default",
        "environment": env, "cores": usable_cores(), "load_average_1min_end": round(os.getloadavg()[0], 2),
        "select": args.select or "all of suites/",
        **results,
        "note": "one run per variant, pairs back to back; load_average_1min (start/end) says what else ran "
                "(other agents' test runs share this 2-core machine)",
    }, args.out)


if __name__ == "__main__":
    main()
