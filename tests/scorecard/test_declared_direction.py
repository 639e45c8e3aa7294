"""A metric's direction is declared once, by its glossary term (issue 48): the recorder records a metric
with it, a default threshold without ``op`` gates it, and neither may contradict it.

The shipped thresholds file writes no ``op`` at all, so each of its gates compares in the direction its
metric's term declares; a term flipped by mistake flips the gate and the recorded direction together,
and the reference models' tests then fail (it cannot be flipped in one place only)."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest

from faithtests.protocols import declared_terms, load_suite_thresholds
from faithtests.scorecard.glossary import DirectionError, MetricTerm, gated_higher, recorded_higher
from faithtests.scorecard.recording import Faith
from faithtests.scorecard.thresholds import ThresholdError, parse_defaults, split_key

SHIPPED = Path(__file__).resolve().parents[2] / "suites" / "thresholds.toml"
TERMS = {
    "acc": MetricTerm("acc", "Share right.", "higher", "share", "P", "Eq. 1"),
    "err": MetricTerm("err", "Share wrong.", "lower", "share", "P", "Eq. 2"),
    "rate": MetricTerm("rate", "Share rejected: wanted on some splits only.", "none", "share", "P", "§3"),
}


def test_the_term_decides_when_the_suite_says_nothing() -> None:
    assert recorded_higher("acc", None, TERMS, "w") is True
    assert recorded_higher("err", None, TERMS, "w") is False
    assert recorded_higher("err[slice=a]", None, TERMS, "w") is False  # any decoration: its base name
    assert recorded_higher("err", False, TERMS, "w") is False  # repeating the term is allowed


def test_a_suite_contradicting_the_term_is_an_error_naming_both() -> None:
    with pytest.raises(DirectionError, match=r"^s/err: recorded as higher-is-better, but its glossary term "
                                            r"declares lower is better \(P Eq\. 2\)"):
        recorded_higher("err", True, TERMS, "s/err")


def test_no_better_side_or_no_term_the_suite_decides() -> None:
    """A rejection rate is wanted on misleading questions and not on standard ones: its term has no
    better side and the suite says which; an undefined metric keeps the recorder's default (higher)."""
    assert recorded_higher("rate", False, TERMS, "w") is False
    assert recorded_higher("rate", None, TERMS, "w") is True
    assert recorded_higher("undeclared", False, TERMS, "w") is False
    assert recorded_higher("undeclared", None, TERMS, "w") is True


def test_the_recorder_reads_the_terms() -> None:
    f = Faith("t.py::t", "s", terms=TERMS)
    assert f.metric("err", 0.1).higher_is_better is False
    assert f.metric("acc", 0.9).higher_is_better is True
    with pytest.raises(DirectionError, match="s/acc\\[x\\]: recorded as lower-is-better"):
        f.metric("acc", 0.9, slice="x", higher_is_better=False)
    assert Faith("t.py::t", "s").metric("err", 0.1).higher_is_better is True  # no terms: as before


def test_a_default_entry_without_op_gates_the_declared_direction() -> None:
    th = parse_defaults({"s": {"acc": {"value": 0.5}, "err": {"value": 0.2}, "acc[x]": {"value": 0.4},
                               "err2": {"op": "<", "value": 0.1}}}, "d.toml",
                        {**TERMS, "err2": TERMS["err"]})
    entries = th.entries("s")
    assert (entries["acc"].op, entries["err"].op, entries["acc[x]"].op) == (">=", "<=", ">=")
    assert entries["err2"].op == "<"  # a strict comparison is still written, in the declared direction


@pytest.mark.parametrize(("spec", "terms", "message"), [
    ({"err": {"op": ">=", "value": 0.2}}, TERMS,
     "d.toml: [s] err: op '>=': recorded as higher-is-better, but its glossary term declares lower is "
     "better"),
    ({"rate": {"value": 0.2}}, TERMS, "d.toml: [s] rate: no op, and rate has a glossary term with no better "
                                      "side"),
    ({"acc": {"value": 0.2}}, {}, "d.toml: [s] acc: no op, and acc has no glossary term"),
])
def test_a_default_entry_contradicting_or_missing_a_direction_is_an_error(
        spec: dict[str, dict[str, object]], terms: dict[str, MetricTerm], message: str) -> None:
    with pytest.raises(ThresholdError) as info:
        parse_defaults({"s": spec}, "d.toml", terms)
    assert str(info.value).startswith(message), str(info.value)


def test_gated_higher_names_the_metric_base() -> None:
    assert gated_higher("acc[x]", TERMS, "w") and not gated_higher("err", TERMS, "w")


def test_the_shipped_file_writes_no_op_and_gates_each_declared_direction() -> None:
    raw = tomllib.loads(SHIPPED.read_text(encoding="utf-8"))
    written = [f"[{suite}] {key}" for suite, table in raw.items() if suite != "coverage"
               for key, spec in table.items() if isinstance(spec, dict) and "op" in spec]
    assert not written, f"a direction is declared once, in the glossary; these also write an op: {written}"
    terms, th = declared_terms(), load_suite_thresholds(SHIPPED, default_required=True)
    gates = [(suite, key, entry) for suite in th.suites() for key, entry in th.entries(suite).items()]
    assert len(gates) >= 35
    for suite, key, entry in gates:
        term = terms[split_key(key)[0]]
        assert entry.op == {"higher": ">=", "lower": "<="}[term.direction], (suite, key)
        assert math.isfinite(entry.value)
