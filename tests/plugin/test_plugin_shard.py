"""``--faith-shard K/N`` (faithtests.plugin.shard): whole groups per shard, a deterministic balanced
split, usage errors, the baseline gate of a shard, and sharded + merged = unsharded (also on every
default suite, N = 3, with few items per dataset)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (inline runs restore sys.modules; numpy cannot be imported twice)
import pytest

from faithtests.cli import main as cli_main
from faithtests.plugin.shard import assign, parse_shard
from faithtests.scorecard.scorecard import ScorecardError, merge_scorecards, read_scorecard
from faithtests.testing.suite_run import SMALL_RUN

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio",
           "-W", "ignore::pytest.PytestAssertRewriteWarning")

# four models (groups a..d) with 4 tests each, and two tests without a model (a group each)
SUITE = """
import pytest

MODELS = [pytest.param(m, marks=pytest.mark.xdist_group(name=m)) for m in "abcd"]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("i", range(4))
def test_model(faith, model, i):
    faith.metric("acc", 0.5 + 0.1 * i, ci=(0.4, 0.9), n=10 + i)


@pytest.mark.parametrize("j", range(2))
def test_plain(faith, j):
    faith.metric("acc", 1.0, n=1)
"""


# -- the split ---------------------------------------------------------------------------------------
def test_assign_is_longest_processing_time_first() -> None:
    weights = {"a": 5.0, "b": 4.0, "c": 3.0, "d": 3.0, "e": 2.0, "f": 1.0}
    # a -> 0, b -> 1, c -> 2, d -> 2 (3 < 4 < 5), e -> 1 (4 < 5), f -> 0: loads 6/6/6
    assert assign(weights, 3) == [["a", "f"], ["b", "e"], ["c", "d"]]
    assert assign(weights, 1) == [["a", "b", "c", "d", "e", "f"]]


def test_assign_is_deterministic_ties_by_name_and_fills_every_shard() -> None:
    equal = {g: 1.0 for g in "dcba"}  # insertion order must not matter
    assert assign(equal, 2) == [["a", "c"], ["b", "d"]] == assign(dict(sorted(equal.items())), 2)
    # zero-weight groups still spread: no shard stays empty while there are enough groups
    assert assign({"x": 0.0, "y": 0.0, "z": 0.0}, 3) == [["x"], ["y"], ["z"]]
    many = {f"g{i:02d}": float(i % 7 + 1) for i in range(40)}
    bins = assign(many, 3)
    assert sorted(g for b in bins for g in b) == sorted(many)  # every group exactly once
    loads = [sum(many[g] for g in b) for b in bins]
    assert max(loads) - min(loads) <= max(many.values())  # LPT's balance bound


@pytest.mark.parametrize("text, expected", [("2/3", (2, 3)), (" 1 / 1 ", (1, 1)), ("3/3", (3, 3))])
def test_parse_shard(text: str, expected: tuple[int, int]) -> None:
    assert parse_shard(text) == expected


SHARD_ERRORS = [
    ("0/3", "--faith-shard: '0/3': K must be between 1 and N (got K=0, N=3)"),
    ("4/3", "--faith-shard: '4/3': K must be between 1 and N (got K=4, N=3)"),
    ("1/0", "--faith-shard: '1/0': K must be between 1 and N (got K=1, N=0)"),
    ("a/b", "--faith-shard: 'a/b' is not K/N (shard K of N, 1-based, e.g. 2/3)"),
    ("3", "--faith-shard: '3' is not K/N (shard K of N, 1-based, e.g. 2/3)"),
    ("-1/3", "--faith-shard: '-1/3' is not K/N (shard K of N, 1-based, e.g. 2/3)"),
]


@pytest.mark.parametrize("text, message", SHARD_ERRORS)
def test_bad_shard_is_a_usage_error(pytester: pytest.Pytester, text: str, message: str) -> None:
    pytester.makepyfile(test_flip=SUITE)
    result = pytester.runpytest(*PLUGINS, f"--faith-shard={text}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {message}" in result.stderr.lines
    pytester.makeini(f"[pytest]\nfaith_shard = {text}\n")  # the ini value is checked the same way
    assert f"ERROR: {message}" in pytester.runpytest(*PLUGINS).stderr.lines


def test_too_few_groups_and_update_baseline_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_flip=SUITE)
    few = pytester.runpytest(*PLUGINS, "--faith-shard", "1/3", "-k", "test_plain")
    assert few.ret == pytest.ExitCode.USAGE_ERROR
    assert ("ERROR: --faith-shard 1/3: the selected tests form only 2 group(s) (a model or model stage, or "
            "a test without a model, each), too few for 3 shards: use at most 2 shards") in few.stderr.lines
    update = pytester.runpytest(*PLUGINS, "--faith-shard", "1/3", "--faith-baseline", "b.json",
                                "--faith-update-baseline")
    assert update.ret == pytest.ExitCode.USAGE_ERROR
    assert ("ERROR: --faith-shard 1/3 with --faith-update-baseline would write one shard's results as the "
            "baseline: run the shards, `faithtests merge` them, and use the merged scorecard.json"
            ) in update.stderr.lines


# -- shards of a small suite --------------------------------------------------------------------------
def _shards(pytester: pytest.Pytester, n: int, *args: str) -> list[dict[str, Any]]:
    out = []
    for k in range(1, n + 1):
        result = pytester.runpytest(*PLUGINS, "--faith-shard", f"{k}/{n}", "--faith-report", f"r{k}", *args)
        assert result.ret == 0, result.stdout.str()
        assert any("deselected" in line for line in result.stdout.lines)
        out.append(json.loads((pytester.path / f"r{k}" / "scorecard.json").read_text()))
    return out


def test_shards_partition_whole_groups_and_merge_to_the_whole_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_flip=SUITE)
    assert pytester.runpytest(*PLUGINS, "--faith-report", "whole").ret == 0
    whole = json.loads((pytester.path / "whole" / "scorecard.json").read_text())
    parts = _shards(pytester, 3)
    keys = [{t["test"] for t in p["tests"]} for p in parts]
    assert set.union(*keys) == {t["test"] for t in whole["tests"]}
    assert sum(len(k) for k in keys) == len(whole["tests"])  # no test in two shards
    for model in "abcd":  # a model's tests on one shard
        assert sum(any(f"-{model}]" in t for t in k) for k in keys) == 1
    # by test count (no recorded seconds): a, b, c (4 tests each) one per shard, d to shard 1, then the
    # two plain tests to shards 2 and 3
    assert [p["fingerprint"]["shard"]["tests"] for p in parts] == [8, 5, 5]
    plans = {p["fingerprint"]["shard"]["plan"] for p in parts}
    assert len(plans) == 1 and [p["fingerprint"]["shard"]["index"] for p in parts] == [1, 2, 3]
    assert all(p["fingerprint"]["shard"]["weights"] == "tests" for p in parts)

    assert cli_main(["merge", "r1", "r2", "r3", "-o", "merged"]) == 0
    merged = json.loads((pytester.path / "merged" / "scorecard.json").read_text())
    assert merged["results"] == whole["results"] and "shard" not in merged["fingerprint"]
    assert [(t["test"], t["outcome"]) for t in merged["tests"]] == [
        (t["test"], t["outcome"]) for t in whole["tests"]]
    again = _shards(pytester, 3)  # deterministic
    assert [{t["test"] for t in p["tests"]} for p in again] == keys
    assert {p["fingerprint"]["shard"]["plan"] for p in again} == plans


def test_merge_refuses_incomplete_or_mismatched_shards(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_flip=SUITE)
    _shards(pytester, 3)
    p = pytester.path
    r1, r2, r3 = (read_scorecard(p / f"r{k}") for k in (1, 2, 3))
    assert len(merge_scorecards([r3, r1, r2]).tests) == 18  # any order
    with pytest.raises(ScorecardError) as missing:
        merge_scorecards([r1, r3], ["r1", "r3"])
    assert str(missing.value) == "shard(s) 2/3 missing: merge all 3 shards of the run"
    with pytest.raises(ScorecardError) as twice:
        merge_scorecards([r1, r2, r2], ["r1", "r2", "again"])
    assert str(twice.value) == "r2 and again are both shard 2/3"
    assert pytester.runpytest(*PLUGINS, "--faith-shard", "1/2", "--faith-report", "h1").ret == 0
    with pytest.raises(ScorecardError) as plan:
        merge_scorecards([r1, read_scorecard(p / "h1")], ["r1", "h1"])
    assert str(plan.value).startswith("r1 and h1 are not shards of one run: they split the tests differently "
                                      "(shard 1/3, plan ")
    assert pytester.runpytest(*PLUGINS, "--faith-report", "whole").ret == 0
    with pytest.raises(ScorecardError) as mixed:
        merge_scorecards([r1, read_scorecard(p / "whole")], ["r1", "whole"])
    assert str(mixed.value) == "whole is not a --faith-shard run, r1 is: not shards of one run"


def test_shard_gate_expects_other_shards_results_missing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_flip=SUITE)
    base = str(pytester.path / "base.json")
    assert pytester.runpytest(*PLUGINS, "--faith-baseline", base, "--faith-update-baseline").ret == 0
    shard = pytester.runpytest(*PLUGINS, "--faith-shard", "1/3", "--faith-baseline", base)
    assert shard.ret == 0
    assert any("belong to other shards of --faith-shard 1/3 (expected, not gated here)" in line
               for line in shard.stdout.lines)
    # a test no shard collects is still missing
    gone = pytester.runpytest(*PLUGINS, "--faith-shard", "1/3", "--faith-baseline", base, "-k", "not plain")
    assert gone.ret == 1
    out = gone.stdout.str()
    assert "baseline result(s) of 2 test(s) were not compared" in out and "test_plain" in out


# -- the default suites: sharded + merged = unsharded -------------------------------------------------
def _pytest(args: list[str], report: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "--faith-report",
           str(report)]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _close(a: Any, b: Any, abs_tol: float = 1e-6) -> bool:
    """Equal, numbers to 1e-6 relative or 1e-6 absolute: a model stage computed in another process may
    batch its float32 encodings differently, as under ``-n`` (observed: one E_sens differing by 1e-10, and
    one per-item E_inv, a difference of two float32 cosines, by 6e-8 absolute = 1.4e-5 relative on a
    value of 0.0044: float32 rounding of the cosines themselves, ~6e-8, is the floor)."""
    if isinstance(a, dict) and isinstance(b, dict):
        # a *_pct metric is 100x its fraction: the same 1e-6 of the fraction is 1e-4 percentage points
        tol = 1e-4 if str(a.get("metric", "")).endswith("_pct") else abs_tol
        return a.keys() == b.keys() and all(_close(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, abs_tol) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-6, abs=abs_tol)
    return bool(a == b)


def sharded_equals_unsharded(tmp_path: Path, args: list[str], whole_report: Path, n: int = 3) -> None:
    """Run ``pytest ARGS`` as ``n`` shards (concurrently), merge them, and compare with the unsharded run
    of the same ARGS in ``whole_report``."""
    runs = {f"r{k}": _pytest([*args, "--faith-shard", f"{k}/{n}"], tmp_path / f"r{k}")
            for k in range(1, n + 1)}
    for name, proc in runs.items():
        out, _ = proc.communicate()
        assert proc.returncode in (0, 1), f"{name}: exit {proc.returncode}\n{out[-3000:]}"
    parts = [str(tmp_path / f"r{k}") for k in range(1, n + 1)]
    assert cli_main(["merge", *parts, "-o", str(tmp_path / "merged")]) == 0
    whole, merged = read_scorecard(whole_report), read_scorecard(tmp_path / "merged")
    keys = [{t.test for t in read_scorecard(p).tests} for p in parts]
    assert all(keys)  # every shard ran something
    assert sum(len(k) for k in keys) == len(set.union(*keys)) == len(whole.tests)  # each test once
    assert set.union(*keys) == {t.test for t in whole.tests}
    got, want = [r.to_json() for r in merged.results], [r.to_json() for r in whole.results]
    assert [(r["test"], r["metric"], r["slice"], r["n"], r["passed"]) for r in got] == [
        (r["test"], r["metric"], r["slice"], r["n"], r["passed"]) for r in want]
    assert _close(got, want)  # values and CIs (see _close)
    assert [(t.test, t.outcome) for t in merged.tests] == [(t.test, t.outcome) for t in whole.tests]
    assert merged.status == whole.status


@pytest.mark.whole_runs  # the small default run again, in shards: CI's own step (tests/conftest.py)
def test_default_suites_sharded_and_merged_equal_unsharded(tmp_path: Path, small_default_run: Path) -> None:
    """Issue 18's "done when": N = 3 on the default suites, on six items per dataset (``SMALL_RUN``; the
    unsharded run is the session's shared ``small_default_run``). What sharding splits and merges does
    not depend on the item count: the groups (a model, a model stage, a test without a model) and the tests
    are those of the full run (every suite, model, variant and stage: 70 tests, ~740 results with their
    CIs), and every result is compared; the full data would only make each stage longer."""
    whole = read_scorecard(small_default_run)
    assert {t.suite for t in whole.tests} >= {"invariance", "flip_sensitivity", "premise_rejection",
                                               "affective_conflict", "difference_consistency"}
    assert {r.variant for r in whole.results} >= {"base", "cecs", "sage"}
    sharded_equals_unsharded(tmp_path, list(SMALL_RUN), small_default_run)
