"""Tables and lines that fit the output (issue 49, item 3): ``text_table.table`` narrows the wrappable
columns and wraps their cells, ``fit_lines`` wraps free text at spaces, and the run's summary and
``faithtests compare`` use them (the summary's natural width was ~230 columns)."""

from __future__ import annotations

import pytest

from faithtests.reports.comparison_text import format_comparison
from faithtests.reports.summary import summary_lines
from faithtests.reports.text_table import LOG_WIDTH, fit_lines, output_width, table
from faithtests.scorecard.baseline import compare
from faithtests.scorecard.model import MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard


def test_a_table_that_fits_keeps_its_natural_widths() -> None:
    assert table(["a", "bb"], [["xyz", "1"]], width=80) == ["a    bb", "xyz  1"]
    assert table(["a", "bb"], [["xyz", "1"]]) == table(["a", "bb"], [["xyz", "1"]], width=80)


def test_a_wide_table_wraps_its_widest_wrappable_column() -> None:
    rows = [["test_flip_positive_rate[world-all-reference:clip]", "PR", "0.91"]]
    out = table(["test", "metric", "value"], rows, width=30, wrap=[0])
    assert all(len(line) <= 30 for line in out), out
    # the test column narrowed to 30 - 2 - 6 - 2 - 5 = 15 characters, its cell on four lines
    assert out[0] == "test             metric  value"
    assert out[1] == "test_flip_posit  PR      0.91"
    assert "".join(line[:15] for line in out[1:]) == rows[0][0]  # every character kept, in order
    assert out[2].strip() == "ive_rate[world-"  # 30 - 2 - 6 - 2 - 5 = 15 >= MIN_COLUMN


def test_columns_narrow_to_the_minimum_and_add_a_rule() -> None:
    out = table(["name", "n"], [["x" * 20, "12345"]], width=19, wrap=[0], rule=True)
    assert out == ["name          n", "------------  -----", "xxxxxxxxxxxx  12345", "xxxxxxxx"]  # 12 + 2 + 5


def test_fit_lines_wraps_at_spaces_and_keeps_paths_whole() -> None:
    path = "/very/long/report/directory/of/the/run/scorecard.json"
    out = fit_lines(["  FAIL: three things went wrong in " + path + " and more words here"], 40)
    assert out == ["  FAIL: three things went wrong in", "      " + path, "      and more words here"]
    assert fit_lines(["short"], 40) == ["short"]


def test_a_table_too_wide_for_the_output_becomes_records() -> None:
    out = table(["name", "n"], [["x" * 30, "12345"]], width=12, wrap=[0])  # 12 + 2 + 5 > 12
    assert out == ["name:", "    xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "    · n:", "    12345"]


def test_columns_every_row_shares_go_above_a_table_too_wide() -> None:
    header = ["suite", "model", "metric", "value"]
    rows = [["difference_consistency", "reference:vlm", "DS_count", "0.91"],
            ["difference_consistency", "reference:vlm", "DS_exist", "0.12"]]
    assert table(header, rows, width=40) == [
        "suite: difference_consistency · model:", "    reference:vlm",
        "metric    value", "DS_count  0.91", "DS_exist  0.12"]
    one = table(header, rows[:1], width=40)  # one row: its record
    assert one[0] == "suite: difference_consistency · model:"
    assert table(header, rows, width=80)[0].startswith("suite  ")  # it fits: a plain table


def test_output_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert output_width(True, 200) == 200 and output_width(False, 80) == LOG_WIDTH == 120
    monkeypatch.setenv("COLUMNS", "150")
    assert output_width(False, 80) == 150
    monkeypatch.setenv("COLUMNS", "wide")
    assert output_width(False, 80) == LOG_WIDTH


def _card() -> Scorecard:
    tests = []
    for k in range(6):
        test = f"test_difference_consistency.py::test_symmetric_consistency[world-reference:vlm-sage-{k}]"
        r = MetricResult("difference_consistency", test, "contradiction_rate", 0.1 + k / 100,
                         model="reference:vlm", variant="sage-oracle", slice="difficulty=easy",
                         ci=(0.05, 0.2), n=400, threshold=0.3, op="<=", passed=True, higher_is_better=False)
        tests.append(TestRecord(test, "difference_consistency", results=[r]))
    return Scorecard(tests=tests)


def test_the_summary_and_the_comparison_fit_a_log() -> None:
    sc = _card()
    natural = summary_lines(sc, [], None, [])
    assert max(len(line) for line in natural) > 120  # the case that needs fitting
    fitted = summary_lines(sc, [], None, [], width=200)
    assert max(len(line) for line in fitted) <= 200 and fitted[1].startswith("suite "), fitted  # a table
    narrow = summary_lines(sc, [], None, [], width=60)  # too narrow for 11 columns: one record per result
    assert max(len(line) for line in narrow) <= 60 and narrow[1].startswith("suite: difference_consistency")
    for width in (200, 120):  # 13 columns fit neither: what the six deltas share goes on a line above
        text = format_comparison(compare(sc, sc), width=width)
        assert max(len(line) for line in text.splitlines()) <= width
        assert text.startswith("status: unchanged · ")
        assert [line.split() for line in text.splitlines() if line.startswith("test ")] == [
            ["test", "baseline", "current"]], text
    assert max(len(line) for line in format_comparison(compare(sc, sc)).splitlines()) > 120
