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
#: An output cache (``--faith-cache`` folder) that the library tests' suite runs (:class:`SuiteCards`, and
#: runs given :func:`env_cache_args`) read and extend: CI points it at the folder its main job (``pytest
#: suites/ --faith-cache DIR``, before the library tests) filled with the bundled models' outputs on every
#: suite, so those rows are not computed again (a served row is the bytes the model computes).
CACHE_ENV = "FAITH_TEST_CACHE"


def env_cache() -> Path | None:
    """The folder ``$FAITH_TEST_CACHE`` names, or None when unset; a name that is not a folder is an error
    (a typo would otherwise only make the tests slow)."""
    where = os.environ.get(CACHE_ENV, "").strip()
    if not where:
        return None
    if not Path(where).is_dir():
        raise FileNotFoundError(f"${CACHE_ENV}={where} is not a folder (an output cache a run filled)")
    return Path(where)


def cache_args(folder: Path | None) -> tuple[str, ...]:
    """``("--faith-cache", FOLDER)``, or nothing without a folder."""
    return () if folder is None else ("--faith-cache", str(folder))


def env_cache_args() -> tuple[str, ...]:
    """:func:`cache_args` of :func:`env_cache` (nothing when ``$FAITH_TEST_CACHE`` is unset)."""
    return cache_args(env_cache())


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
    """``cards(vlm)``: one suite run per model, memoised (a module-scoped fixture shares it).

    ``shared_cache=True``: every run of this object, and any other run given :meth:`cache_args`, keeps its
    model outputs in one ``--faith-cache`` folder, so a model whose calls are another's (a wrapper over
    ``reference:vlm``: the store keys rows by the weights they came from, and a wrapper passes
    ``use_store`` through to the model it wraps) reads the rows the earlier run wrote instead of computing
    them again. With ``$FAITH_TEST_CACHE`` (:data:`CACHE_ENV`) set, every ``SuiteCards`` uses that folder.
    Served rows are the bytes the model computes, so every card is the one a run without the cache
    writes; only runs sharing a checkpoint gain anything."""

    def __init__(self, root: Path, suite: str, tmp: _TmpFactory, *, shared_cache: bool = False) -> None:
        self.root, self.suite, self.tmp = root, suite, tmp
        self._cards: dict[str, Card] = {}
        self.cache: Path | None = env_cache() or (tmp.mktemp("outputs") if shared_cache else None)

    def cache_args(self) -> tuple[str, ...]:
        """``("--faith-cache", DIR)`` of the shared folder, or nothing without one."""
        return cache_args(self.cache)

    def __call__(self, vlm: str, *args: str) -> Card:
        """The card of ``vlm``'s run, with ``args`` added to its command line (a ``-k`` selection: a twin
        whose gates sit in one variant runs only that variant's tests)."""
        key = " ".join((vlm, *args))
        if key not in self._cards:
            report = self.tmp.mktemp(vlm.replace(":", "_")) / "report"
            self._cards[key] = run_suite(self.root, self.suite, report, vlm, *args, *self.cache_args())
        return self._cards[key]
