"""Benchmark: whole ``pytest suites/`` runs, every ratio of issue 35's "Done when" measured in ONE run.

Variants, each a subprocess ``pytest suites/ -q --faith-no-progress`` with its own report directory,
timed back to back on the same machine state (wall seconds), in this order:

1. ``baseline``: the main this work started from, run from a git worktree with ``PYTHONPATH`` pointing
   at it (never installed), e.g. ``git worktree add /tmp/base 3b5c6ba`` then ``--base /tmp/base``;
2. ``serial``: this tree's default run (target: <= 0.5 x baseline);
3. ``n2``: ``-n 2`` (target: serial / n2 >= 1.8), beside the machine's own parallel ceiling (the same
   CPU-bound job alone and two at once: a shared 2-vCPU machine does not always give a second core);
4. ``cache``: ``--faith-cache DIR`` cold (empty DIR), then warm twice (target: cold / warm >= 10), with
   the floor a warm run cannot avoid (collection, imports);
5. ``threads``: the forced-choice test (``-k "forced_choice_order_accuracy and orig"``) beside one
   CPU-bound competing process per core: the default thread policy vs every pool at one thread
   (``OMP/OPENBLAS/MKL_NUM_THREADS=1``, ``TOKENIZERS_PARALLELISM=false``, ``--faith-threads 1``), and
   the baseline's default for context (target: default / one thread <= 1.2);
6. ``quick``: ``--faith-profile quick`` in this tree and in the baseline's, back to back (issue 49: quick
   exits 0 "in under a minute of model time"): wall seconds, the seconds inside tests (setup + call +
   teardown summed from the scorecard: every model load and forward is in them, pytest's start-up and
   the report are not), each run's checks and whether every shared result is the same.

Threads are explicit: every child's thread variables are recorded, and the default variants get none
(the policy decides, as for a new user). What else was running is recorded before and after each run
(load averages, the busiest processes). The scorecards are compared: ``faithtests compare baseline
serial --noise-rule`` (issue 47's float-noise rule: same verdicts, each value within 1e-4 relative),
``faithtests compare baseline serial --all`` (changed results: 0 expected), and the serial, -n 2 and
warm metrics against each other.

    python benchmarks/bench_suite_runs.py --base /tmp/base [--parts baseline,serial,n2,cache,threads,quick]
        [--serial-first] [--select EXPR] [--out benchmarks/results/suite_runs.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import competing_load, environment, machine_load, write_result

from faithtests.models.threads import usable_cores

ROOT = Path(__file__).resolve().parents[1]
FORCED = ["-k", "forced_choice_order_accuracy and orig"]
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TOKENIZERS_PARALLELISM",
                    "RAYON_NUM_THREADS", "FAITH_THREADS_SET")
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TOKENIZERS_PARALLELISM": "false"}
PYTEST_CACHE = Path(tempfile.mkdtemp(prefix="faith_bench_pytest_cache_"))
SELECT: list[str] = []  # --select: extra -k for every run
RUNS: list[dict[str, Any]] = []  # every run's record, in order


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children, with their own children: a
    load-independent companion to wall seconds on a shared machine (-n 2 workers included)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(name: str, *args: str, tree: Path = ROOT, threads: dict[str, str] | None = None,
        compete: int = 0, select: bool = True) -> tuple[float, Path]:
    """Wall seconds and report directory of ``pytest suites/ ARGS`` in ``tree`` (fails loudly).

    ``threads``: the thread variables the child gets (none: the policy decides). Python's bytecode
    cache is on, as on a developer machine or CI runner (this sandbox sets PYTHONDONTWRITEBYTECODE=1)."""
    report = Path(tempfile.mkdtemp(prefix=f"faith_bench_{name}_"))
    cmd = [sys.executable, "-m", "pytest", "suites/", "-q", "-o", f"cache_dir={PYTEST_CACHE}",
           "--faith-no-progress", "--faith-report", str(report), *(SELECT if select else []), *args]
    env = {k: v for k, v in os.environ.items() if k not in (*THREAD_VARIABLES, "PYTHONDONTWRITEBYTECODE")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(threads or {})})
    if tree != ROOT:
        env["PYTHONPATH"] = str(tree)  # the baseline's own faithtests, not this checkout's
    before = machine_load()
    with competing_load(compete):
        start, cpu0 = time.perf_counter(), children_cpu()
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        wall, cpu = time.perf_counter() - start, children_cpu() - cpu0  # competitors are reaped later
    if done.returncode != 0:  # recorded, not fatal: the other variants of this one run still count
        print(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-3000:]}", file=sys.stderr)
    if not (report / "scorecard.json").is_file():
        raise SystemExit(f"{name}: no scorecard written ({done.returncode}):\n{done.stdout[-3000:]}")
    after = machine_load()
    RUNS.append({"name": name, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                 "exit_status": done.returncode, "args": list(args), "tree": str(tree),
                 "thread_variables": threads or {}, "competing_processes": compete,
                 "load_before": before["load_average_1_5_15"], "load_after": after["load_average_1_5_15"],
                 "pytest_processes_before": before["pytest_processes"], "busiest_before": before["busiest"]})
    print(f"{wall:7.1f} s  cpu {cpu:6.1f} s  load {before['load_average_1_5_15'][0]:5.2f}  {name}: "
          f"pytest suites/ {' '.join(args)}", flush=True)
    return wall, report


def metrics(report: Path) -> dict[str, Any]:
    card = json.loads((report / "scorecard.json").read_text(encoding="utf-8"))
    return {f"{r['test']}|{r['metric']}|{r['model']}|{r['variant']}|{r.get('slice')}": r["value"]
            for t in card["tests"] for r in t["results"]}


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Exactly equal metrics (NaN equal to NaN)."""
    return a.keys() == b.keys() and all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)


def _differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """How two runs' metrics differ: xdist workers batch a model's inputs differently from a serial run,
    and batch composition moves float32 outputs in the last bits, so -n 2 is compared within 1e-6."""
    both = [k for k in a if k in b and a[k] is not None and b[k] is not None]
    diffs = {k: abs(float(a[k]) - float(b[k])) for k in both if not (a[k] != a[k] and b[k] != b[k])}
    worst = max(diffs, key=lambda k: diffs[k] if diffs[k] == diffs[k] else float("inf"), default=None)
    return {"same_keys": a.keys() == b.keys(), "exactly_equal": _same(a, b),
            "differing": sum(1 for d in diffs.values() if d != 0),
            "max_abs_diff": diffs[worst] if worst is not None else 0.0, "max_abs_diff_metric": worst,
            "within_1e-6": a.keys() == b.keys() and all(d <= 1e-6 for d in diffs.values())}


def compare_cli(a: Path, b: Path) -> dict[str, Any]:
    """``faithtests compare A B --all --json`` (this tree's CLI): results whose status is not unchanged.
    ``--allow-mismatch all``, as the noise rule's: a baseline commit may have another thresholds file, and
    what is compared here is the results. A comparison that fails is written down, never lost with the
    timings."""
    cmd = [sys.executable, "-m", "faithtests.cli", "compare", str(a), str(b), "--all", "--json",
           "--allow-mismatch", "all"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    try:
        deltas = json.loads(done.stdout)["deltas"]
    except (ValueError, KeyError):
        return {"exit_status": done.returncode, "error": (done.stderr or done.stdout).strip()[-500:]}
    changed = [f"{d['test']}|{d['metric']}|{d['status']}" for d in deltas if d["status"] != "unchanged"]
    return {"exit_status": done.returncode, "compared": len(deltas), "changed": len(changed),
            "changed_first": changed[:10]}


def noise_rule(a: Path, b: Path) -> dict[str, Any]:
    """``faithtests compare A B --noise-rule`` (faithtests.scorecard.float_noise): is B run A within float
    noise? Its summary line and the first changes it lists."""
    cmd = [sys.executable, "-m", "faithtests.cli", "compare", str(a), str(b), "--noise-rule",
           "--max-flips", "10", "--allow-mismatch", "all"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    return {"exit_status": done.returncode, "summary": lines[-1] if lines else done.stderr.strip()[-500:],
            "changes_first": lines[:-1][:10]}


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


def parallel_ceiling() -> dict[str, Any]:
    """The same job alone and two at once: ``ceiling`` = 2 x alone / slower-of-two (2.0 on two free cores)."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2) as pool:
        alone = pool.submit(_kernel).result()
        pair = max(pool.map(_kernel, range(2)))
    return {"alone_s": round(alone, 2), "two_at_once_s": round(pair, 2),
            "ceiling": round(2 * alone / pair, 2)}


def _wall(cmd: list[str]) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env={**env, "HF_HUB_OFFLINE": "1"}, capture_output=True, check=True)
    return time.perf_counter() - start


def floor() -> dict[str, float]:
    """What a warm run cannot avoid: collecting the suites and importing torch and scikit-learn."""
    collect = _wall([sys.executable, "-m", "pytest", "suites/", "--collect-only", "-q",
                     "-p", "no:cacheprovider", *SELECT])
    imports = _wall([sys.executable, "-c", "import torch, sklearn.model_selection, sklearn.linear_model"])
    return {"collect_s": round(collect, 1), "imports_s": round(imports, 1)}


def test_seconds(report: Path) -> float:
    """Seconds inside the run's tests (each test's setup + call + teardown, from the scorecard)."""
    card = json.loads((report / "scorecard.json").read_text(encoding="utf-8"))
    return round(sum(float(t.get("duration") or 0.0) for t in card["tests"]), 1)


def checks(report: Path) -> dict[str, Any]:
    """Each checked result's verdict (``passed``), keyed as :func:`metrics` keys values."""
    card = json.loads((report / "scorecard.json").read_text(encoding="utf-8"))
    return {f"{r['test']}|{r['metric']}|{r['model']}|{r['variant']}|{r.get('slice')}": r["passed"]
            for t in card["tests"] for r in t["results"] if r.get("op")}


def quick_part(base: Path) -> dict[str, Any]:
    """Part 6 (module doc): this tree's quick profile beside the baseline's."""
    wall, report = run("quick", "--faith-profile", "quick")
    base_wall, base_report = run("quick_baseline", "--faith-profile", "quick", tree=base)
    now, before = metrics(report), metrics(base_report)
    shared = sorted(set(now) & set(before))
    return {"wall_s": round(wall, 1), "test_s": test_seconds(report), "exit_status": RUNS[-2]["exit_status"],
            "baseline_wall_s": round(base_wall, 1), "baseline_test_s": test_seconds(base_report),
            "baseline_exit_status": RUNS[-1]["exit_status"],
            "ratio_wall_vs_baseline": round(wall / base_wall, 3),
            "checks": len(checks(report)), "baseline_checks": len(checks(base_report)),
            "same_verdicts": checks(report) == checks(base_report),
            "shared_results": len(shared),
            "shared_results_identical": _same({k: now[k] for k in shared}, {k: before[k] for k in shared})}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", type=Path,
                        help="worktree of the baseline commit (git worktree add DIR REV)")
    parser.add_argument("--parts", default="baseline,serial,n2,cache,threads")
    parser.add_argument("--serial-first", action="store_true",
                        help="time this tree's serial run before the baseline (load drifts over a run)")
    parser.add_argument("--select", default="", help='pytest -k expression for every run, e.g. "not premise"')
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "suite_runs.json"))
    args = parser.parse_args()
    parts = args.parts.split(",")
    needs_base = bool({"baseline", "threads", "quick"} & set(parts))
    if needs_base and (args.base is None or not (args.base / "faithtests").is_dir()):
        parser.error("--base DIR (a worktree of the baseline commit) is needed for the baseline, "
                     "threads and quick parts")
    if args.select:
        SELECT.extend(["-k", args.select])
    env, start_load = environment(), machine_load()
    out: dict[str, Any] = {}
    reports: dict[str, Path] = {}

    def save(complete: bool) -> None:
        """The results so far (each part adds its numbers: a run cut short keeps what it measured)."""
        result = {
            "benchmark": "pytest suites/ in one run: today's main vs this tree serial, -n 2, warm vs cold "
                         "cache, thread policy vs one thread beside a competing process",
            "complete": complete, "environment": env, "cores": usable_cores(),
            "select": args.select or "all of suites/", "base": str(args.base) if args.base else None,
            "machine_at_start": start_load, "machine_at_end": machine_load(), **out, "runs": RUNS,
            "note": "wall seconds of one run per variant, back to back; load averages and the busiest "
                    "processes before each run say what else was running (other agents' test runs share "
                    "this 2-core machine): the ratios within this one run are what count",
        }
        if complete:
            write_result(result, args.out)
        else:
            Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    first = ("serial", "baseline") if args.serial_first else ("baseline", "serial")
    for name in first:  # load drifts: --serial-first runs the pair the other way round
        if name in parts:
            out[f"{name}_s"], reports[name] = run(name, tree=args.base if name == "baseline" else ROOT)
            save(complete=False)
    if "serial" in reports and "baseline" in reports:
        out["ratio_serial_vs_baseline"] = round(out["serial_s"] / out["baseline_s"], 3)
        out["compare_baseline_vs_serial"] = compare_cli(reports["baseline"], reports["serial"])
        out["noise_rule_baseline_vs_serial"] = noise_rule(reports["baseline"], reports["serial"])
        out["metrics_baseline_vs_serial"] = _differences(metrics(reports["baseline"]),
                                                         metrics(reports["serial"]))
        save(complete=False)
    if "n2" in parts:
        out["machine_parallel_ceiling"] = parallel_ceiling()
        out["n2_s"], reports["n2"] = run("n2", "-n", "2")
        if "serial_s" in out:
            out["speedup_n2_vs_serial"] = round(out["serial_s"] / out["n2_s"], 2)
            out["metrics_serial_vs_n2"] = _differences(metrics(reports["serial"]), metrics(reports["n2"]))
    save(complete=False)
    if "cache" in parts:
        with tempfile.TemporaryDirectory(prefix="faith_cache_") as cache:
            cold, rc = run("cache_cold", "--faith-cache", cache)
            cpus = [RUNS[-1]["cpu_s"]]
            warm = []
            for i in (1, 2):
                warm.append(run(f"cache_warm{i}", "--faith-cache", cache))
                cpus.append(RUNS[-1]["cpu_s"])
            card = json.loads((warm[0][1] / "scorecard.json").read_text(encoding="utf-8"))
            models = card["fingerprint"]["models"]
            counts = {label: info.get("output_cache") for label, info in models.items()}
        mean_warm = sum(w for w, _ in warm) / len(warm)
        out["cache"] = {"cold_s": round(cold, 1), "warm_s": [round(w, 1) for w, _ in warm],
                        "speedup_warm_vs_cold": round(cold / mean_warm, 2),
                        "cold_cpu_s": cpus[0], "warm_cpu_s": cpus[1:],
                        "speedup_warm_vs_cold_cpu": round(2 * cpus[0] / max(cpus[1] + cpus[2], 1e-9), 2),
                        "floor": floor(),
                        "warm_output_cache": counts,
                        "same_metrics_as_cold": _same(metrics(rc), metrics(warm[0][1])),
                        "cold_same_metrics_as_serial": (_same(metrics(rc), metrics(reports["serial"]))
                                                        if "serial" in reports else None)}
    save(complete=False)
    if "threads" in parts:
        cores = usable_cores()
        default, _ = run("threads_default_competing", *FORCED, compete=cores, select=False)
        one, _ = run("threads_one_competing", *FORCED, "--faith-threads", "1", threads=ONE_THREAD,
                     compete=cores, select=False)
        base, _ = run("threads_baseline_default_competing", *FORCED, tree=args.base, compete=cores,
                      select=False)
        out["threads"] = {"competing_processes": cores, "default_s": round(default, 1),
                          "one_thread_s": round(one, 1), "baseline_default_s": round(base, 1),
                          "ratio_default_vs_one_thread": round(default / one, 2),
                          "ratio_baseline_default_vs_one_thread": round(base / one, 2)}
    if "quick" in parts:
        out["quick"] = quick_part(args.base)
    save(complete=True)


if __name__ == "__main__":
    main()
