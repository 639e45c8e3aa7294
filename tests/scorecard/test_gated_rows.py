"""A protocol declares its gates (issue 48): a :class:`MetricRow` its pure function marks ``gated`` is
checked when a suite records it with ``Faith.rows(..., gate=True)``, against the thresholds file, once
the test has recorded everything it counts. So a new gated result is declared in its protocol folder
and the thresholds file; the suite names no gate (``tests/walkthrough`` adds one in a copy of the repo)."""

from __future__ import annotations

import pytest

from faithtests.scorecard.glossary import MetricTerm
from faithtests.scorecard.model import FaithCheckFailed, FaithInsufficient, MetricRow
from faithtests.scorecard.recording import Faith
from faithtests.scorecard.thresholds import parse_defaults

TERMS = {
    "acc": MetricTerm("acc", "Share right.", "higher", "share", "P", "Eq. 1"),
    "err": MetricTerm("err", "Share wrong.", "lower", "share", "P", "Eq. 2"),
}
TH = parse_defaults({"s": {"acc": {"value": 0.5, "slices": ["part=a"]}, "err": {"value": 0.2}},
                     "coverage": {"min_valid_fraction": 0.5, "min_n": 1}}, "d.toml", TERMS)


def _faith(**kw: object) -> Faith:
    f = Faith("t.py::t", "s", thresholds=TH, terms=TERMS, model="m", **kw)  # type: ignore[arg-type]
    f.deferred = True  # as the suites' fixture makes it
    return f


ROWS = [MetricRow("acc", 0.9, 40, gated=True), MetricRow("acc", 0.3, 20, slice="part=a", gated=True),
        MetricRow("err", 0.5, 40)]  # err: recorded beside the gates, not one of them


def test_gated_rows_are_checked_when_the_test_ends_and_only_they() -> None:
    f = _faith()
    f.rows(ROWS, gate=True)
    assert all(r.op is None for r in f.record.results)  # nothing judged yet
    with pytest.raises(FaithCheckFailed, match=r"s/acc\[part=a\] = 0\.300 .*fails >= 0\.500"):
        f.settle()
    verdicts = {(r.metric, r.slice): (r.op, r.passed) for r in f.record.results}
    assert verdicts == {("acc", None): (">=", True), ("acc", "part=a"): (">=", False),
                        ("err", None): (None, None)}  # err has a threshold but its row is no gate


def test_without_gate_the_rows_are_recorded_not_gated() -> None:
    f = _faith()
    f.rows(ROWS)  # the suite's diagnostic parametrisation (a method's variant, another answer mode)
    f.settle()
    assert all(r.op is None and r.passed is None for r in f.record.results)


def test_a_gate_sees_the_invalid_counts_recorded_after_its_row() -> None:
    f = _faith()
    f.rows([MetricRow("acc", 0.9, 40, gated=True)], gate=True)
    f.invalid("unparseable answer", 30, total=40)  # counted after the row: the coverage rule still applies
    with pytest.raises(FaithInsufficient, match="valid"):
        f.settle()
    assert f.record.results[0].insufficient


def test_each_gate_is_judged_once_under_the_labels_it_was_recorded_with() -> None:
    f = _faith()
    f.rows([MetricRow("acc", 0.9, 40, gated=True)], gate=True)
    f.check("acc")  # an explicit check first: not judged twice
    f.bind(model="other", variant="v")
    f.rows([MetricRow("acc", 0.1, 40, gated=True)], gate=True)
    f.bind(model="m", variant="base")
    with pytest.raises(FaithCheckFailed) as failed:
        f.settle()
    assert str(failed.value).count("fails") == 1 and "model=other" in str(failed.value)
    assert (f.model, f.variant) == ("m", "base")  # the bound labels are restored
    f.settle()  # judged once: a second settle raises nothing


def test_a_gated_row_without_a_threshold_is_an_error_naming_it() -> None:
    f = _faith()
    f.rows([MetricRow("new_metric", 0.9, 40, gated=True)], gate=True)
    with pytest.raises(LookupError, match="no threshold for suite 's', metric 'new_metric'"):
        f.settle()


def test_a_hand_made_recorder_raises_at_the_first_failing_gate() -> None:
    f = Faith("t.py::t", "s", thresholds=TH, terms=TERMS)
    f.rows([MetricRow("err", 0.5, 40, gated=True), MetricRow("acc", 0.1, 40, gated=True)], gate=True)
    with pytest.raises(FaithCheckFailed, match="s/err"):
        f.gate_rows()
