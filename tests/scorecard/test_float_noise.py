"""The float-noise rule (``faithtests.scorecard.float_noise``, issue 47 item 7), each case by hand, and
``faithtests compare A B --noise-rule``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from faithtests import cli
from faithtests.scorecard.float_noise import REL, within_noise
from faithtests.scorecard.model import MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard, write_scorecard


def _card(*results: tuple[str, float | None, int | None, bool | None]) -> Scorecard:
    """One test; each result (metric, value, n, passed)."""
    rows = [MetricResult(suite="s", test="t.py::t", metric=m, value=v, model="m", n=n, passed=p)
            for m, v, n, p in results]
    return Scorecard(tests=[TestRecord(test="t.py::t", suite="s", results=rows)])


def test_identical_runs_are_within_noise() -> None:
    a = _card(("x", 0.25, None, True), ("undefined", None, None, None), ("nan", math.nan, None, None))
    report = within_noise(a, a)
    assert report.ok and report.compared == 3 and report.identical == 3


@pytest.mark.parametrize(("before", "after", "ok"), [
    (1.0, 1.00005, True),  # |d| = 5e-5 <= 1e-4 x 1.00005
    (1.0, 1.0002, False),  # |d| = 2e-4 > 1e-4 x 1.0002 = 1.0002e-4
    (-3.0, -3.0003, True),  # |d| = 3e-4 <= 1e-4 x 3.0003
    (0.0, 1e-12, False),  # relative to max(|a|, |b|) = 1e-12: 1e-12 > 1e-16
])
def test_a_value_may_move_by_one_part_in_ten_thousand(before: float, after: float, ok: bool) -> None:
    report = within_noise(_card(("x", before, None, None)), _card(("x", after, None, None)))
    assert report.ok is ok
    if not ok:
        assert report.moved[0].allowed == pytest.approx(REL * max(abs(before), abs(after)))


@pytest.mark.parametrize(("before", "after", "ok"), [
    (10 / 20, 11 / 20, True),  # one item of 20: |d| = 0.05 <= 1/20 + 1e-4 x 0.55
    (10 / 20, 12 / 20, False),  # two items: 0.1 > 0.05 + 6e-5
    (0.51, 0.55, False),  # 0.51 is no k/20: only the relative rule, 0.04 > 5.5e-5
])
def test_a_ratio_of_counts_may_move_by_one_item(before: float, after: float, ok: bool) -> None:
    report = within_noise(_card(("share", before, 20, None)), _card(("share", after, 20, None)))
    assert report.ok is ok


def test_a_verdict_change_a_missing_and_a_new_result_are_each_a_change() -> None:
    a = _card(("gated", 0.8, None, True), ("gone", 0.1, None, None))
    b = _card(("gated", 0.8, None, False), ("added", 0.1, None, None))
    report = within_noise(a, b)
    assert [(k[3], x, y) for k, x, y in report.verdicts] == [("gated", "pass", "fail")]
    assert [k[3] for k in report.missing] == ["gone"] and [k[3] for k in report.new] == ["added"]
    assert not report.ok


def test_a_value_that_became_undefined_moved() -> None:
    report = within_noise(_card(("x", 0.5, None, None)), _card(("x", None, None, None)))
    assert [(m.before, m.after, m.allowed) for m in report.moved] == [(0.5, None, 0.0)]


def test_the_compare_command_applies_the_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, same, moved = tmp_path / "a.json", tmp_path / "same.json", tmp_path / "moved.json"
    write_scorecard(_card(("x", 1.0, None, True)), a)
    write_scorecard(_card(("x", 1.00005, None, True)), same)
    write_scorecard(_card(("x", 1.001, None, True)), moved)
    assert cli.main(["compare", str(a), str(same), "--noise-rule"]) == 0
    assert "1 result(s) compared, 0 identical; 0 verdict(s) changed, 0 value(s) beyond noise" in \
        capsys.readouterr().out
    assert cli.main(["compare", str(a), str(moved), "--noise-rule"]) == 1
    out = capsys.readouterr().out
    assert "moved    t.py::t | m | base | x | : 1.0 -> 1.001" in out and out.rstrip().endswith("CHANGED")
