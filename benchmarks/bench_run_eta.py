"""Benchmark: how far the run's "time left" is off (issue 49, item 3), replayed on two real runs.

Runs ``pytest suites/`` twice (``--junitxml``, each test's setup + call + teardown in run order), then
replays the second run test by test through :class:`faithtests.progress.RunProgress` and compares every
estimate with the truth (the second run's remaining seconds):

* ``no history``: a first run in a checkout (the kinds' means, :data:`~faithtests.progress.MIN_LEARNT`);
* ``earlier run``: the first run's durations as ``previous`` (what pytest's cache gives a second run),
  scaled by the second run's pace.

Estimates while fewer than 20 seconds remain are left out of the error (there any estimate says "<1
min"). Load is recorded before and after each run; the two runs may differ in speed (another job on
the machine): the pace is what absorbs that.

    python benchmarks/bench_run_eta.py [--select EXPR] [--out benchmarks/results/run_eta.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from _common import environment, machine_load, write_result

from faithtests.progress import RunProgress

ROOT = Path(__file__).resolve().parents[1]
GROUPS_PLUGIN = '''
import json, os
from faithtests.plugin.progress_report import run_group

def pytest_collection_finish(session):
    with open(os.environ["FAITH_BENCH_GROUPS"], "w") as f:
        json.dump({item.nodeid: run_group(item) for item in session.items}, f)
'''
MIN_TRUTH = 20.0


def _run(tmp: Path, name: str, select: str | None) -> tuple[list[tuple[str, float]], dict[str, Any]]:
    """One ``pytest suites/`` run: (test id, seconds) in run order, and the load around it."""
    xml = tmp / f"{name}.xml"
    cmd = [sys.executable, "-m", "pytest", "suites/", "-q", "-p", "no:cacheprovider", "--faith-no-progress",
           "--faith-report", str(tmp / name), "--junitxml", str(xml), "-o", "junit_duration_report=total"]
    cmd += ["-k", select] if select else []
    before = machine_load()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{name}: pytest exited {proc.returncode}\n{proc.stdout[-2000:]}\n"
                         f"{proc.stderr[-2000:]}")
    rows = [(f"suites/{c.get('classname', '').split('.')[-1]}.py::{c.get('name')}", float(c.get("time", 0)))
            for c in ET.parse(xml).getroot().iter("testcase")]
    return rows, {"before": before, "after": machine_load()}


def _groups(tmp: Path, select: str | None) -> dict[str, str | None]:
    (tmp / "faith_bench_groups.py").write_text(GROUPS_PLUGIN)
    out = tmp / "groups.json"
    cmd = [sys.executable, "-m", "pytest", "suites/", "--collect-only", "-q", "-p", "no:cacheprovider",
           "-p", "faith_bench_groups"] + (["-k", select] if select else [])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "FAITH_BENCH_GROUPS": str(out),
           "PYTHONPATH": os.pathsep.join([str(tmp), os.environ.get("PYTHONPATH", "")])}
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    groups: dict[str, str | None] = json.loads(out.read_text())
    return groups


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def replay(rows: list[tuple[str, float]], groups: dict[str, str | None],
           previous: dict[str, float] | None) -> dict[str, Any]:
    """Every estimate after each finished test against the truth; the summary of how far off."""
    clock, total, elapsed = _Clock(), sum(s for _, s in rows), 0.0
    run = RunProgress(groups, clock=clock, previous=previous)
    points = []
    for test, seconds in rows:
        run.start(test)
        elapsed += seconds
        clock.now = elapsed
        run.add(test, seconds, last=True)
        left = run.seconds_left()
        points.append({"elapsed": round(elapsed, 1), "truth": round(total - elapsed, 1),
                       "estimate": None if left is None else round(left, 1)})
    judged = [p for p in points if p["estimate"] is not None and p["truth"] >= MIN_TRUTH]
    errors = [abs(p["estimate"] - p["truth"]) / p["truth"] for p in judged]
    first = next((p for p in points if p["estimate"] is not None), None)
    return {"mean_relative_error": round(sum(errors) / len(errors), 3) if errors else None,
            "max_relative_error": round(max(errors), 3) if errors else None,
            "estimating_until_s": None if first is None else first["elapsed"],
            "first_estimate": first, "points": points}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--select", default=None, help="a -k expression (default: the whole default run)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "run_eta.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        groups = _groups(tmp, args.select)
        first, load1 = _run(tmp, "first", args.select)
        second, load2 = _run(tmp, "second", args.select)
    result = {
        "environment": environment(), "select": args.select, "tests": len(second),
        "seconds": {name: round(sum(s for _, s in rows), 1) for name, rows in (("first", first),
                                                                             ("second", second))},
        "load": {"first": load1, "second": load2},
        "no history": replay(second, groups, None),
        "earlier run": replay(second, groups, dict(first)),
    }
    write_result(result, args.out)
    for name in ("no history", "earlier run"):
        r = result[name]
        print(f"{name}: mean error {r['mean_relative_error']}, max {r['max_relative_error']}, first estimate "
              f"{r['first_estimate']}")


if __name__ == "__main__":
    main()
