"""Which xdist worker runs what (faithtests.plugin.distribution): ``-n N`` alone means loadgroup, a
small model's tests are grouped per model stage, a large model's per label."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from faithtests.models.locations import weight_bytes
from faithtests.plugin.distribution import (
    SPLIT_MODEL_BYTES,
    group_name,
    group_of,
    longest_first,
    model_stage,
)

PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio")


def _defs(**argnames: tuple[str, ...]) -> dict[str, list[Any]]:
    return {name: [SimpleNamespace(argnames=args)] for name, args in argnames.items()}


def test_model_stage_is_the_fixtures_that_use_the_model() -> None:
    defs = _defs(faith_scorer=("request",), flip_scored=("faith_scorer", "flip_data"), flip_data=(),
                 strengths=("flip_scored",), faith=("request",))
    closure = ["faith", "flip_scored", "flip_data", "faith_scorer"]
    assert model_stage(closure, defs, "faith_scorer") == "flip_scored"
    # transitively: strengths uses flip_scored, which uses the model
    assert model_stage(["strengths", "flip_scored", "faith_scorer"], defs, "faith_scorer") == (
        "flip_scored+strengths")
    assert model_stage(["faith", "faith_scorer"], defs, "faith_scorer") == ""  # the model used directly
    # the values of the parameters a stage fixture takes name the stage (not the model's own)
    params = {"flip_data": "world", "faith_scorer": "m", "flip_case": "combined"}
    assert model_stage(closure, defs, "faith_scorer", params) == "flip_scored(world)"


def test_weight_bytes(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert weight_bytes(f"hf:{tmp_path}") is None  # no weight files: unknown
    (tmp_path / "model.safetensors").write_bytes(b"x" * 1000)
    assert weight_bytes(f"hf:{tmp_path}") == weight_bytes(f"vlm-scorer:hf:{tmp_path}") == 1000
    assert weight_bytes("hf:org/not-local") is None
    assert weight_bytes(f"open_clip:ViT-B-32@{tmp_path / 'model.safetensors'}") == 1000


def test_group_name_splits_small_models_only(tmp_path: Path) -> None:
    small, big = tmp_path / "small", tmp_path / "big"
    for d in (small, big):
        d.mkdir()
    (small / "model.safetensors").write_bytes(b"x" * 10)
    with (big / "model.safetensors").open("wb") as f:  # sparse: large on paper, nothing on disk
        f.truncate(SPLIT_MODEL_BYTES + 1)
    item: Any = SimpleNamespace(
        fixturenames=["stage", "faith_vlm", "data"], callspec=SimpleNamespace(params={"data": "coco"}),
        _fixtureinfo=SimpleNamespace(name2fixturedefs=_defs(stage=("faith_vlm", "data"), faith_vlm=(),
                                                            data=())))
    assert group_name(item, "faith_vlm", "m", f"hf:{small}") == "m/stage(coco)"
    assert group_name(item, "faith_vlm", "m", f"hf:{big}") == "m"
    assert group_name(item, "faith_vlm", "m", "hf:org/remote") == "m"  # size unknown: keep together
    # xdist reads a group only when no "]" follows the last "@": such characters never reach it
    item.callspec.params["data"] = "a[1]@b"
    assert group_name(item, "faith_vlm", "m[x]", f"hf:{small}") == "m(x)/stage(a(1)_b)"


STAGES = """
import os
import pytest

def _log(request, tag):
    with open({log!r}, "a") as f:
        f.write(tag + " " + os.environ["PYTEST_XDIST_WORKER"] + " " + request.node.nodeid + "\\n")

@pytest.fixture
def stage_a(faith_scorer):
    return 1

@pytest.fixture
def stage_b(faith_scorer):
    return 2

@pytest.mark.parametrize("i", range(3))
def test_a(stage_a, request, i):
    _log(request, "a")

@pytest.mark.parametrize("i", range(3))
def test_b(stage_b, request, i):
    _log(request, "b")
"""


def test_n2_alone_runs_each_model_stage_on_one_worker(
    pytester: pytest.Pytester, tiny_dir: Callable[[str], Path]
) -> None:
    log = pytester.path / "log.txt"
    pytester.makepyfile(test_suite=STAGES.replace("{log!r}", repr(str(log))))
    result = pytester.runpytest_subprocess(*PLUGINS, "-n", "2", "--faith-model",
                                           f"m=open_clip:local-dir:{tiny_dir('open_clip')}")
    result.assert_outcomes(passed=6)
    workers: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        tag, worker, nodeid = line.split()
        assert nodeid.endswith(f"@m/stage_{tag}")  # loadgroup without --dist, group = label/stage
        workers.setdefault(tag, set()).add(worker)
    assert sorted(workers) == ["a", "b"] and all(len(w) == 1 for w in workers.values())
    # an explicit --dist wins: under "load" there are no group suffixes
    log.unlink()
    pytester.runpytest_subprocess(*PLUGINS, "-n", "2", "--dist", "load", "--faith-model",
                                  f"m=open_clip:local-dir:{tiny_dir('open_clip')}").assert_outcomes(passed=6)
    assert all("@" not in line for line in log.read_text().splitlines())


def test_group_of_follows_xdists_rule() -> None:
    assert group_of("t.py::test_a[x]@clip/stage(world)") == "clip/stage(world)"
    assert group_of("t.py::test_a[x]") is None
    assert group_of("t.py::test_a[a@b]") is None  # an "@" inside the parameters is not a group


def test_longest_first_orders_groups_by_recorded_seconds() -> None:
    items = [SimpleNamespace(nodeid=n) for n in
             ("t::a@short", "t::plain", "t::b@long", "t::c@short", "t::d@new", "t::e@long")]
    order = [i.nodeid for i in longest_first(items, {"short": 1.0, "long": 9.0})]
    # unrecorded groups first (may be heavy), then longest first, ungrouped last; stable within a group
    assert order == ["t::d@new", "t::b@long", "t::e@long", "t::a@short", "t::c@short", "t::plain"]


SLOW_FAST = """
import time
import pytest

@pytest.mark.xdist_group(name="fast")
@pytest.mark.parametrize("k", range(4))
def test_fast(k):
    pass

@pytest.mark.xdist_group(name="slow")
def test_slow():
    time.sleep(0.3)
"""

WHAT_XDIST_SEES = """
import json, os

def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the controller
        with open("reorder.json", "w") as f:
            json.dump(session.config.option.loadscopereorder, f)

def pytest_collection_finish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        with open(f"collected-{worker}.json", "w") as f:
            json.dump([item.nodeid for item in session.items], f)
"""


def test_n2_records_group_seconds_and_runs_the_longest_group_first(pytester: pytest.Pytester) -> None:
    """A first ``-n 2`` run records each group's seconds in pytest's cache; the next run collects the
    slow group first on every worker and turns xdist's reorder by test count off (which would put the
    four fast tests first)."""
    pytester.makepyfile(test_groups=SLOW_FAST)
    pytester.makeconftest(WHAT_XDIST_SEES)
    args = ("-p", "faithtests.plugin", "-p", "xdist", "-n", "2", "-p", "no:hypothesispytest",
            "-p", "no:anyio")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=5)
    cache = json.loads((pytester.path / ".pytest_cache" / "v" / "faithtests" / "xdist_group_seconds")
                       .read_text())
    assert set(cache) == {"fast", "slow"} and cache["slow"] >= 0.3 > cache["fast"]
    assert json.loads((pytester.path / "reorder.json").read_text()) is True  # nothing recorded yet
    first = json.loads((pytester.path / "collected-gw0.json").read_text())
    assert first[0].startswith("test_groups.py::test_fast")  # collection order

    pytester.runpytest_subprocess(*args).assert_outcomes(passed=5)
    assert json.loads((pytester.path / "reorder.json").read_text()) is False
    for worker in ("gw0", "gw1"):
        order = json.loads((pytester.path / f"collected-{worker}.json").read_text())
        assert order[0] == "test_groups.py::test_slow@slow", order
