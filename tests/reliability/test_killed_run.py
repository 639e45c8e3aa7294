"""Issue 46 item 3: a run killed (SIGKILL, no cleanup) at points spread over its length leaves the
output cache readable, the previous report marked superseded and the baseline byte for byte intact;
re-running then completes with the results of an uninterrupted run.

Where each kill lands is watched, not guessed: a share of the uninterrupted run's wall time lands in
model loading (two thirds of a short run are imports and loads, so time shares alone never reached the
model calls), and the others fire on what the run does: its first output committed to the cache (the
SQLite write-ahead log grows: mid model calls and cache writes), and its new scorecard.json renamed into
place (the HTML and the item log still to be written). Each kill must find the run still going.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOADING = 0.3  # of the uninterrupted run's wall time: imports and model loads
POLL = 0.002  # seconds between looks at the cache and the report


def _cmd(cache: Path, report: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "suites/test_invariance.py", "-q", "-p", "no:cacheprovider",
            "--faith-model", "reference:clip", "--faith-no-vlm-scorer", "--faith-limit", "8",
            "--faith-cache", str(cache), "--faith-report", str(report), "--faith-no-progress", *extra]


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1"}


class Run:
    """What a kill point looks at: the killed run's cache and report folders, the report it replaces,
    when it started and how long an uninterrupted run took."""

    def __init__(self, cache: Path, report: Path, previous: bytes, wall: float) -> None:
        self.cache, self.report, self.previous, self.wall = cache, report, previous, wall
        self.started = time.monotonic()


def _loading(run: Run) -> bool:
    return time.monotonic() - run.started >= LOADING * run.wall


def _cache_written(run: Run) -> bool:
    wal = run.cache / "outputs.sqlite3-wal"  # faithtests.models.store: one SQLite file per folder, WAL mode
    return wal.is_file() and wal.stat().st_size > 0


def _report_written(run: Run) -> bool:
    """This run's own scorecard.json is in place (the previous one, rewritten as superseded when the run
    starts, does not count)."""
    card = run.report / "scorecard.json"
    data = card.read_bytes() if card.is_file() else run.previous
    return data != run.previous and json.loads(data).get("status") != "superseded"


#: where a kill lands -> when it fires
KILLS: dict[str, Callable[[Run], bool]] = {
    "model loading": _loading, "cache writes": _cache_written, "report writing": _report_written}


def _kill_when(proc: subprocess.Popen[bytes], fires: Callable[[], bool], limit: float) -> None:
    """SIGKILL ``proc`` as soon as ``fires()``; fail if it ended first or ``limit`` seconds passed."""
    end = time.monotonic() + limit
    while not fires():
        assert proc.poll() is None, "the run ended before the kill point: it never came"
        assert time.monotonic() < end, f"no kill point within {limit:.0f} s"
        time.sleep(POLL)
    assert proc.poll() is None, "the run ended as the kill point came"
    proc.send_signal(signal.SIGKILL)


def _values(report: Path) -> dict[tuple[str, str, str], Any]:
    card = json.loads((report / "scorecard.json").read_text())
    return {(r["test"], r["metric"], str(r["slice"])): r["value"] for r in card["results"]}


@pytest.mark.xdist_group("killed_run")
def test_a_run_killed_anywhere_loses_nothing_and_a_rerun_completes(tmp_path: Path) -> None:
    base_dir = tmp_path / "base"
    t0 = time.monotonic()
    whole = subprocess.run(_cmd(tmp_path / "cache0", base_dir), cwd=ROOT, env=_env(), capture_output=True,
                           text=True, timeout=600)
    wall = time.monotonic() - t0
    assert whole.returncode == 0, whole.stdout[-2000:]
    expected = _values(base_dir)
    baseline = base_dir / "scorecard.json"
    before = baseline.read_bytes()
    for k, (where, fires) in enumerate(KILLS.items()):
        cache, report = tmp_path / f"cache{k + 1}", tmp_path / f"report{k + 1}"
        report.mkdir()
        (report / "scorecard.json").write_bytes(before)  # a previous run's report in the folder
        proc = subprocess.Popen(_cmd(cache, report, "--faith-baseline", str(baseline)), cwd=ROOT,
                                env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run = Run(cache, report, before, wall)
        _kill_when(proc, partial(fires, run), limit=600)
        proc.wait(timeout=60)
        assert baseline.read_bytes() == before, where  # never touched without --faith-update-baseline
        card = json.loads((report / "scorecard.json").read_text())  # always readable JSON
        # the previous report says superseded until this run's own is complete (a kill in the first
        # imports may come before the run marks it)
        assert card.get("status") == {"model loading": card.get("status"), "cache writes": "superseded",
                                      "report writing": "complete"}[where] in ("superseded", "complete"), (
            where, card.get("status"))
        rerun = subprocess.run(_cmd(cache, report, "--faith-baseline", str(baseline)), cwd=ROOT, env=_env(),
                               capture_output=True, text=True, timeout=600)
        out = rerun.stdout + rerun.stderr
        # the cache the killed run left opens (a damaged one would be named: "is not a usable cache")
        assert rerun.returncode == 0 and "not a usable cache" not in out, (where, out[-3000:])
        assert _values(report) == expected, where
