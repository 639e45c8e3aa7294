"""The per-item log (``items.jsonl.gz``): bounded rows, the recorder's ``outputs``, round trips, merges,
and that the rows reach the log, never ``scorecard.json``, in serial and ``-n 2`` runs."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest

from faithtests.scorecard.item_log import (
    ITEM_LOG,
    MAX_FIELDS,
    MAX_LIST,
    TEXT_CHARS,
    count_mismatches,
    item_log_path,
    iter_item_log,
    log_rows,
    merge_item_logs,
    read_item_log,
    write_item_log,
)
from faithtests.scorecard.model import MetricResult, TestRecord
from faithtests.scorecard.recording import Faith


def _faith() -> Faith:
    return Faith("test_x.py::test_a", "suite", model="clip")


def test_rows_are_bounded() -> None:
    f = _faith()
    long = "word " * 1000
    f.outputs("acc", {"i1": {"inputs": {"image": "world/caption/0/1", "caption": long},
                             "output": {"text": long, "logits": list(range(40)),
                                        **{f"k{j}": j for j in range(MAX_FIELDS + 5)}},
                             "outcome": np.bool_(True), "invalid": None},
                      "i2": {"output": {"p": float("nan"), "q": np.float32(0.123456789)}, "outcome": 0.5}})
    a, b = f.record.outputs
    assert a["inputs"]["caption"].startswith("word word") and a["inputs"]["caption"].endswith("chars]")
    assert len(a["inputs"]["caption"]) < TEXT_CHARS + 30
    assert f"+{len(long) - TEXT_CHARS} chars" in a["output"]["text"]
    assert a["output"]["logits"][:MAX_LIST] == list(range(MAX_LIST))
    assert a["output"]["logits"][-1] == f"…[+{40 - MAX_LIST} more]"
    assert len(a["output"]) == MAX_FIELDS + 1 and a["output"]["…"] == "+7 more fields"
    assert a["outcome"] is True and a["model"] == "clip" and a["metric"] == "acc" and a["slice"] is None
    assert b["output"] == {"p": None, "q": 0.1234568} and b["outcome"] == 0.5
    json.dumps(f.record.outputs, allow_nan=False)  # always serialisable


def test_outputs_refuse_bad_payloads() -> None:
    f = _faith()
    f.outputs("acc", {"i1": {"outcome": True}})
    with pytest.raises(ValueError, match="recorded twice"):
        f.outputs("acc", {"i1": {"outcome": False}})
    f.outputs("acc", {"i1": {"outcome": False}}, slice="s")  # another slice: another row
    with pytest.raises(ValueError, match="unknown key"):
        f.outputs("acc", {"i2": {"answer": "A"}})


def test_outputs_ride_on_the_record_and_only_when_present() -> None:
    f = _faith()
    assert "outputs" not in f.record.to_json()  # scorecards without outputs are unchanged
    f.outputs("acc", {"i1": {"output": {"answer": "B"}, "outcome": False}})
    back = TestRecord.from_json(json.loads(json.dumps(f.record.to_json())))
    assert back.outputs == f.record.outputs


def test_write_read_merge(tmp_path: Path) -> None:
    rows = list(log_rows([("s", "t.py::a", [{"model": "m", "variant": "base", "metric": "acc", "slice": None,
                                             "item": f"i{k}", "inputs": {}, "output": {"a": k},
                                             "outcome": k % 2 == 0, "invalid": None} for k in range(5)])]))
    assert write_item_log(rows, tmp_path / "one" / ITEM_LOG) == 5
    first = (tmp_path / "one" / ITEM_LOG).read_bytes()
    write_item_log(rows, tmp_path / "one" / ITEM_LOG)
    assert (tmp_path / "one" / ITEM_LOG).read_bytes() == first  # no timestamp: identical bytes
    assert list(iter_item_log(tmp_path / "one")) == rows
    assert item_log_path(tmp_path / "one" / "scorecard.json") == tmp_path / "one" / ITEM_LOG
    frame = read_item_log(tmp_path / "one" / "scorecard.json")
    assert list(frame.columns)[:3] == ["suite", "test", "model"] and frame["outcome"].tolist() == [
        True, False, True, False, True]
    write_item_log(rows[:2], tmp_path / "two" / ITEM_LOG)
    (tmp_path / "three").mkdir()  # a shard without a log adds nothing
    assert merge_item_logs([tmp_path / "one", tmp_path / "two", tmp_path / "three"], tmp_path / "merged") == 7
    assert len(read_item_log(tmp_path / "merged")) == 7
    bad = tmp_path / "bad" / ITEM_LOG
    bad.parent.mkdir()
    with gzip.open(bad, "wt") as fh:
        fh.write("{not json\n")
    with pytest.raises(ValueError, match="line 1 is not JSON"):
        list(iter_item_log(bad))


def test_count_mismatches_catches_missing_and_extra_rows() -> None:
    results = [MetricResult("s", "t.py::a", "acc", 0.5, model="m", n=2),
               MetricResult("s", "t.py::a", "acc", 0.5, model="m", n=1, slice="x")]
    row = {"test": "t.py::a", "model": "m", "variant": "base", "metric": "acc", "slice": None}
    assert count_mismatches(results, [row, row, {**row, "slice": "x"}]) == []
    short = count_mismatches(results, [row, {**row, "slice": "x"}])
    assert short == ["t.py::a acc (m, base): 1 logged row(s), the scorecard's n is 2"]
    assert "name no result" in count_mismatches(results, [row, row, {**row, "metric": "other"}])[0]


SUITE = """
import pytest

@pytest.mark.parametrize("k", range(3))
def test_items(faith, k):
    faith.bind(model="m")
    outcomes = {f"i{j}": (j + k) % 2 == 0 for j in range(4 + k)}
    faith.metric("acc", sum(outcomes.values()) / len(outcomes), n=len(outcomes))
    faith.outputs("acc", {i: {"inputs": {"image": f"img/{i}.png", "caption": "a red cup on a table"},
                             "output": {"answer": "yes" if o else "no"}, "outcome": o}
                          for i, o in outcomes.items()})
"""
PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio")


@pytest.mark.parametrize("workers", [None, 2])
def test_outputs_reach_the_log_not_the_scorecard(pytester: pytest.Pytester, workers: int | None) -> None:
    pytester.makepyfile(test_log=SUITE)
    extra = ("-p", "xdist", "-n", str(workers)) if workers else ()
    pytester.runpytest_subprocess(*PLUGINS, *extra, "--faith-report", "rep").assert_outcomes(passed=3)
    rep = pytester.path / "rep"
    card = json.loads((rep / "scorecard.json").read_text())
    assert all("outputs" not in t for t in card["tests"])
    rows = list(iter_item_log(rep))
    assert len(rows) == 4 + 5 + 6
    results = [MetricResult.from_json(r) for r in card["results"]]
    assert count_mismatches(results, rows) == []
    assert {r["output"]["answer"] for r in rows} == {"yes", "no"} and rows[0]["suite"]
    assert (rep / "items.html").exists() and "viewer-items" in (rep / "items.html").read_text()
    assert math.isclose(sum(r["outcome"] for r in rows) / len(rows), 7 / 15)  # 2 + 2 + 3 true


def test_a_run_logging_nothing_writes_no_log_and_drops_a_stale_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_a(faith):\n    faith.metric('m', 0.5)\n")
    rep = pytester.path / "rep"
    rep.mkdir()
    (rep / ITEM_LOG).write_bytes(b"stale")
    (rep / "items.html").write_text("stale")
    pytester.runpytest_subprocess(*PLUGINS, "--faith-report", "rep").assert_outcomes(passed=1)
    assert sorted(p.name for p in rep.iterdir()) == ["scorecard.html", "scorecard.json"]
