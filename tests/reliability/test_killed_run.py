"""Issue 46 item 3: a run killed (SIGKILL, no cleanup) at points spread over its length (model calls,
cache writes, report writing) leaves the output cache readable, the previous report marked superseded
and the baseline byte for byte intact; re-running then completes with the results of an uninterrupted
run.

The kill points are fractions of the measured length of an uninterrupted run in the same session (a
busy machine stretches every point alike); whatever each kill hits, the assertions hold.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
KILL_AT = (0.3, 0.6, 0.9)  # of the uninterrupted run's wall time


def _cmd(cache: Path, report: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "suites/test_invariance.py", "-q", "-p", "no:cacheprovider",
            "--faith-model", "reference:clip", "--faith-no-vlm-scorer", "--faith-limit", "8",
            "--faith-cache", str(cache), "--faith-report", str(report), "--faith-no-progress", *extra]


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1"}


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
    for k, share in enumerate(KILL_AT):
        cache, report = tmp_path / f"cache{k + 1}", tmp_path / f"report{k + 1}"
        report.mkdir()
        (report / "scorecard.json").write_bytes(before)  # a previous run's report in the folder
        proc = subprocess.Popen(_cmd(cache, report, "--faith-baseline", str(baseline)), cwd=ROOT,
                                env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(share * wall)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert baseline.read_bytes() == before, share  # never touched without --faith-update-baseline
        card = json.loads((report / "scorecard.json").read_text())  # always readable JSON
        # the previous report says superseded until this run's own is complete (or it finished first)
        assert card.get("status") in ("superseded", "complete"), (share, card.get("status"))
        rerun = subprocess.run(_cmd(cache, report, "--faith-baseline", str(baseline)), cwd=ROOT, env=_env(),
                               capture_output=True, text=True, timeout=600)
        out = rerun.stdout + rerun.stderr
        # the cache the killed run left opens (a damaged one would be named: "is not a usable cache")
        assert rerun.returncode == 0 and "not a usable cache" not in out, (share, out[-3000:])
        assert _values(report) == expected, share
