"""Run one suite file as a user would (a pytest subprocess writing a scorecard) and read the card back:
the gate tests of each protocol show both sides of their thresholds on the bundled reference models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Protocol

#: (test name -> outcome, results, test name -> invalid entries) of one suite run
Card = tuple[dict[str, str], list[dict[str, Any]], dict[str, list[dict[str, Any]]]]

#: Items per dataset of the small default run the library tests share (``small_default_run`` in
#: tests/conftest.py): every suite, test, model and model stage of ``pytest suites/``, six items each.
SMALL_LIMIT = 6
#: Its arguments: a run this small has checks short of data, reported INSUFFICIENT (exit 6 without the flag).
SMALL_RUN = ("suites/", "--faith-limit", str(SMALL_LIMIT), "--faith-allow-insufficient")


def run_suite(root: Path, suite: str, report: Path, vlm: str, *extra: str, timeout: int = 900) -> Card:
    """``pytest SUITE --faith-vlm VLM --faith-report REPORT EXTRA...`` in ``root``; a crash (exit status
    other than 0 or 1) fails with the end of its output."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        suite,
        "-p",
        "no:cacheprovider",
        "-q",
        "--faith-vlm",
        vlm,
        "--faith-report",
        str(report),
        *extra,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in (0, 1):
        raise AssertionError(proc.stdout[-3000:] + proc.stderr[-3000:])
    card: dict[str, Any] = json.loads((report / "scorecard.json").read_text())
    outcomes = {t["test"].split("::")[1]: t["outcome"] for t in card["tests"]}
    invalid = {t["test"].split("::")[1]: t["invalid"] for t in card["tests"]}
    return outcomes, card["results"], invalid


def run_small_default(root: Path, report: Path, *extra: str, timeout: int = 1500) -> Path:
    """``pytest suites/ --faith-limit 6 --faith-allow-insufficient --faith-report REPORT EXTRA...`` in
    ``root`` on the bundled reference models (one thread per pool: a test's subprocess shares the cores);
    a crash fails with the end of its output. Returns ``report``."""
    cmd = [sys.executable, "-m", "pytest", *SMALL_RUN, "-p", "no:cacheprovider", "-q", "--faith-report",
           str(report), *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in (0, 1) or not (report / "scorecard.json").is_file():
        raise AssertionError(f"exit {proc.returncode}\n" + proc.stdout[-3000:] + proc.stderr[-3000:])
    return report


def result(
    results: list[dict[str, Any]], metric: str, variant: str = "base", slice: str | None = None
) -> dict[str, Any]:
    """The one result row of (metric, variant, slice); StopIteration names nothing, so say what is missing."""
    for r in results:
        if (r["metric"], r["variant"], r["slice"]) == (metric, variant, slice):
            return r
    raise KeyError(f"no result {metric!r} variant={variant!r} slice={slice!r} in the scorecard")


def value(
    results: list[dict[str, Any]], metric: str, variant: str = "base", slice: str | None = None
) -> float:
    return float(result(results, metric, variant, slice)["value"])


class _TmpFactory(Protocol):
    def mktemp(self, basename: str, numbered: bool = True) -> Path: ...


class SuiteCards:
    """``cards(vlm)``: one suite run per model, memoised (a module-scoped fixture shares it)."""

    def __init__(self, root: Path, suite: str, tmp: _TmpFactory) -> None:
        self.root, self.suite, self.tmp = root, suite, tmp
        self._cards: dict[str, Card] = {}

    def __call__(self, vlm: str) -> Card:
        if vlm not in self._cards:
            report = self.tmp.mktemp(vlm.replace(":", "_")) / "report"
            self._cards[vlm] = run_suite(self.root, self.suite, report, vlm)
        return self._cards[vlm]
