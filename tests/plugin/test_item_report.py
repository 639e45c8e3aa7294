"""The item report builds its viewer from the rows in memory (no re-read of ``items.jsonl.gz``): the
page is exactly the one the re-read log gives, for rows holding every kind of value a suite may log."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from faithtests.plugin.item_report import image_of, keep_baseline_log, write_item_report
from faithtests.reports.viewer import VIEWER, render_viewer
from faithtests.scorecard.item_log import ITEM_LOG, iter_item_log, log_beside
from faithtests.scorecard.model import TestRecord
from faithtests.scorecard.recording import Faith
from faithtests.scorecard.scorecard import Scorecard


def _rows() -> list[dict[str, object]]:
    f = Faith("test_x.py::test_a", "suite", model="clip")
    f.outputs("acc", {"i1": {"inputs": {"image": "world/caption/0/1", "pair": ("a", "b"), 3: "int key"},
                             "output": {"p": float("nan"), "q": np.float32(0.123456789), "n": np.int64(7),
                                        "logits": np.arange(20.0), "text": "é < & > " * 200},
                             "outcome": np.bool_(True), "invalid": None},
                      "i2": {"output": {"nested": {"x": [1.5, None, True]}}, "outcome": -0.0,
                             "invalid": ValueError("bad")},
                      "i3": {"outcome": {"label": "A"}}}, slice="s")
    return list(f.record.outputs)


def test_viewer_from_memory_equals_the_viewer_of_the_written_log(tmp_path: Path) -> None:
    rows = _rows()
    sc = Scorecard(tests=[TestRecord(test="test_x.py::test_a", suite="suite"),
                          TestRecord(test="test_x.py::test_b", suite="suite")])
    notes: list[str] = []
    written = write_item_report(tmp_path, sc, {"test_x.py::test_a": rows}, None, notes)
    assert written == [tmp_path / ITEM_LOG, tmp_path / VIEWER] and not notes
    back = list(iter_item_log(tmp_path / ITEM_LOG))
    assert [{k: v for k, v in r.items() if k not in ("suite", "test")} for r in back] == rows
    assert (tmp_path / VIEWER).read_text(encoding="utf-8") == render_viewer(back, image_of=image_of)


def test_a_damaged_baseline_item_log_is_named_and_the_viewer_still_written(tmp_path: Path) -> None:
    """Issue 46: a truncated baseline ``items.jsonl.gz`` gave an unnamed ERROR, no viewer (a dangling
    items.html link in the scorecard) and exit 0. Now one warning names the file; the viewer is written
    without the flipped-items view."""
    sc = Scorecard(tests=[TestRecord(test="test_x.py::test_a", suite="suite")])
    base = tmp_path / "base"
    base.mkdir()
    write_item_report(base, sc, {"test_x.py::test_a": _rows()}, None, [])
    log = base / ITEM_LOG
    log.write_bytes(log.read_bytes()[:-20])  # cut short, as an interrupted copy leaves it
    notes: list[str] = []
    out = tmp_path / "run"
    out.mkdir()
    written = write_item_report(out, sc, {"test_x.py::test_a": _rows()}, base / "scorecard.json", notes)
    assert written == [out / ITEM_LOG, out / VIEWER]
    (note,) = notes
    assert note.startswith(f"warning: the baseline's item log is unreadable ({log}: not a readable item log")
    assert "truncated or damaged" in note and "item flips not compared in items.html" in note


def test_a_standalone_baseline_says_why_item_flips_are_not_compared(tmp_path: Path) -> None:
    """Issue 49, item 6: a scorecard.json copied out of its report (``--faith-baseline base.json``) lost the
    flipped-items view without a word. The note and the viewer say so; the log kept beside it by
    --faith-update-baseline (``base.items.jsonl.gz``) brings the view back."""
    sc = Scorecard(tests=[TestRecord(test="test_x.py::test_a", suite="suite")])
    report = tmp_path / "old"
    report.mkdir()
    old = write_item_report(report, sc, {"test_x.py::test_a": _rows()}, None, [])
    alone = tmp_path / "base.json"
    notes: list[str] = []
    run = tmp_path / "run"
    run.mkdir()
    write_item_report(run, sc, {"test_x.py::test_a": _rows()}, alone, notes)
    assert not notes  # no baseline yet (a first --faith-update-baseline): nothing to compare, no note
    alone.write_text("{}")  # only its existence is read here
    write_item_report(run, sc, {"test_x.py::test_a": _rows()}, alone, notes)
    (note,) = notes
    log = tmp_path / "base.items.jsonl.gz"
    assert note.startswith(f"note: no item log beside the baseline {alone} ({log} does not exist): item "
                           "flips not compared in items.html")
    page = (run / VIEWER).read_text(encoding="utf-8")
    assert 'id="viewer-no-flips"' in page and 'id="viewer-flips"' not in page
    assert keep_baseline_log(old, alone) == [log_beside(alone)] == [tmp_path / "base.items.jsonl.gz"]
    notes.clear()
    write_item_report(run, sc, {"test_x.py::test_a": _rows()}, alone, notes)
    page = (run / VIEWER).read_text(encoding="utf-8")
    assert not notes and 'id="viewer-flips"' in page and 'id="viewer-no-flips"' not in page
    assert keep_baseline_log([], alone) == [] and not log_beside(alone).exists()  # a run that logged nothing
    assert log_beside(report / "scorecard.json") == report / ITEM_LOG


SUITE = """
import json, pathlib

def test_a(faith):
    hits = json.loads((pathlib.Path(__file__).parent / "hits.json").read_text())
    faith.metric("acc", sum(hits) / len(hits), n=len(hits))
    faith.outputs("acc", {f"i{k}": {"outcome": bool(h)} for k, h in enumerate(hits)})
"""


def test_update_baseline_keeps_the_item_log_beside_a_baseline_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s=SUITE)
    (pytester.path / "hits.json").write_text(json.dumps([1, 1, 0]))
    base = pytester.path / "out" / "baseline.json"
    plugins = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-W",
               "ignore::pytest.PytestAssertRewriteWarning")
    first = pytester.runpytest(*plugins, "--faith-baseline", str(base), "--faith-update-baseline")
    assert first.ret == 0 and (pytester.path / "out" / "baseline.items.jsonl.gz").exists(), first.stdout.str()
    (pytester.path / "hits.json").write_text(json.dumps([1, 0, 0]))
    second = pytester.runpytest(*plugins, "--faith-baseline", str(base), "--faith-allow-missing")
    page = (pytester.path / "faith-report" / VIEWER).read_text(encoding="utf-8")
    assert "no item log beside" not in second.stdout.str() and 'id="viewer-flips"' in page
    assert "1 item(s) changed outcome" in page
