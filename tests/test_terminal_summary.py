"""The terminal says what matters first (issue 33, item 4): a failed threshold check prints one line, not
the test's source (a real bug keeps its traceback); the summary lists failing and inconclusive checks
first, then checked passes, unchecked rows only with -v; zero coverage counts are not printed; the
failing metrics are explained; a metric recorded without a definition is named, never silently."""

from __future__ import annotations

import json
import logging

import pytest

from faithtests.plugin.noise import quiet_library_noise
from faithtests.reports.summary import legend_lines, summary_lines
from faithtests.scorecard.glossary import UNDEFINED, MetricTerm
from faithtests.scorecard.model import InvalidCount, MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard

PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio",
           "-W", "ignore::pytest.PytestAssertRewriteWarning")

SUITE = """
import pytest

def test_gate(faith):
    faith.metric("PR", 0.4, ci=(0.3, 0.5), n=100)
    faith.metric("planted_metric", 0.9, n=100)
    print("GATE_OUTPUT")  # captured output: shown for a bug, not for a failed check
    SOURCE_MARKER = 1  # appears in a traceback only
    faith.check("PR")

def test_bug(faith):
    faith.metric("E_inv", 0.01, n=100)
    print("BUG_OUTPUT")
    BUG_MARKER = {}["missing"]
"""
THRESHOLDS = """
[s]
PR = { op = ">=", value = 0.70 }
"""


@pytest.fixture
def failing_run(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_s=SUITE)
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "thresholds.toml").write_text(THRESHOLDS)
    return pytester


def test_check_failure_is_one_line_and_a_bug_keeps_its_traceback(failing_run: pytest.Pytester) -> None:
    result = failing_run.runpytest(*PLUGINS, "-q", "--faith-report", "out")
    out = result.stdout.str()
    assert "faithtests check failed: s/PR = 0.400" in out
    assert "SOURCE_MARKER" not in out and "GATE_OUTPUT" not in out  # no test source, no captured output
    assert "BUG_MARKER" in out and "KeyError" in out and "BUG_OUTPUT" in out  # a real bug keeps both
    card = json.loads((failing_run.path / "out" / "scorecard.json").read_text())
    assert card["glossary"]["PR"]["direction"] == "higher"
    assert set(card["glossary"]["planted_metric"].values()) == {UNDEFINED}
    assert "warning: 1 recorded metric(s) without a definition: planted_metric" in out
    legend = [line for line in out.splitlines() if line.startswith("  PR: ")]
    assert legend and "(higher is better; LGIP Eq. 5)" in legend[0]


def test_long_tracebacks_stay_available(failing_run: pytest.Pytester) -> None:
    result = failing_run.runpytest(*PLUGINS, "-q", "--tb=long", "--faith-report", "out")
    assert "SOURCE_MARKER" in result.stdout.str()


def _result(metric: str, verdict: str | None, threshold: float = 0.45, *, slice: str | None = None,
            ci: tuple[float, float] = (0.47, 0.53)) -> MetricResult:
    """Value 0.5 with ``ci``; checked (>= ``threshold``) unless ``verdict`` is None. A CI that straddles
    the threshold makes the check inconclusive."""
    checked = verdict is not None
    return MetricResult("s", f"s.py::test_{metric}[m]", metric, 0.5, model="m", n=50, slice=slice, ci=ci,
                        op=">=" if checked else None, threshold=threshold if checked else None,
                        passed=None if verdict is None else verdict == "pass",
                        gate="point" if checked else None,
                        insufficient=verdict == "insufficient")


def _card() -> Scorecard:
    rows = [_result("a_unchecked", None, slice="x"), _result("b_pass", "pass"),
            _result("c_fail", "fail", 0.6), _result("d_close", "pass", ci=(0.4, 0.6))]
    term = MetricTerm("c_fail", "A metric that failed.", "higher", "share", "Paper", "Eq. 1")
    tests = [TestRecord(r.test, "s", results=[r], dataset="world") for r in rows]
    tests[0].invalid = [InvalidCount("missing image", 0, 10), InvalidCount("tie", 2, 10)]
    return Scorecard(tests=tests, glossary={"c_fail": term.to_json()})


def _metrics(lines: list[str]) -> list[str]:
    return [line.split()[3] for line in lines if line.startswith("s ")]


def test_failing_and_inconclusive_first_unchecked_only_with_v() -> None:
    sc = _card()
    assert _metrics(summary_lines(sc, [], None, [])) == ["c_fail", "d_close", "b_pass"]
    assert _metrics(summary_lines(sc, [], None, [], quiet=True)) == ["c_fail", "d_close"]
    assert _metrics(summary_lines(sc, [], None, [], full=True)) == ["c_fail", "d_close", "b_pass",
                                                                     "a_unchecked[x]"]
    lines = summary_lines(sc, [], None, [])
    assert "... 1 unchecked result(s) not shown (-v prints all)" in lines
    assert "... 1 checked pass(es) and 1 unchecked result(s) not shown (-v prints all)" in summary_lines(
        sc, [], None, [], quiet=True)


def test_zero_coverage_counts_are_not_printed() -> None:
    lines = summary_lines(_card(), [], None, [])
    assert "coverage world: 2 of 10 inputs tie (20.0%)" in lines
    assert not any("missing image" in line for line in lines)


def test_legend_explains_each_failing_metric_once() -> None:
    sc = _card()
    assert legend_lines(sc, sc.results) == [
        "what the failing metrics mean (faithtests explain METRIC):",
        "  c_fail: A metric that failed (higher is better; Paper Eq. 1)"]
    sc.glossary = {}
    assert legend_lines(sc, sc.results) == []  # undefined: the run's note names it instead


def test_library_noise_is_dropped_and_other_warnings_kept(caplog: pytest.LogCaptureFixture) -> None:
    quiet_library_noise()
    quiet_library_noise()  # idempotent: one filter per logger
    generic = logging.getLogger("transformers.utils.generic")
    assert len(generic.filters) == 1
    with caplog.at_level(logging.WARNING):
        generic.warning("`past_key_values`/`cache_params` are deprecated. Use `cache` instead.")
        logging.getLogger("transformers.generation.configuration_utils").warning(
            "The following generation flags are not valid and may be ignored: ['temperature'].")
        generic.warning("Some weights of the checkpoint were not used")
        logging.getLogger("transformers.modeling_utils").warning("`past_key_values`/`cache_params` ...")
    assert [r.getMessage() for r in caplog.records] == [
        "Some weights of the checkpoint were not used", "`past_key_values`/`cache_params` ..."]


def test_floors_are_shown_apart_from_paper_gates_in_terminal_html_and_json() -> None:
    """A failed floor says it is one and what its failure means (terminal: the threshold column, the
    model's verdict line and a legend line; HTML: a marked badge with the meaning as its title; JSON:
    ``gate_kind`` / ``gate_note`` round-trip); a paper gate is marked as such."""
    from dataclasses import replace

    from faithtests.reports.html import render_html

    sc = _card()
    means = "the model reports a difference where there is none"
    for t in sc.tests:
        t.results = [replace(r, gate_kind="floor", gate_note=means) if r.metric == "c_fail" else
                     replace(r, gate_kind="paper", gate_note="Table 2") if r.passed is not None else r
                     for r in t.results]
    lines = summary_lines(sc, [], None, [])
    row = next(line for line in lines if line.startswith("s ") and " c_fail " in line)
    assert ">= 0.600 floor" in row and "FAIL" in row
    assert any(" b_pass " in line and ">= 0.450 paper" in line for line in lines)
    assert f"  floor s/c_fail (no paper row measures it) failed: {means}" in lines
    assert "failed 1: s/c_fail (floor)" in lines[-2]
    html = render_html(sc)
    assert f'class="gate-kind gate-floor" title="{means}">floor<' in html
    assert 'class="gate-kind gate-paper" title="Table 2">paper gate<' in html
    back = MetricResult.from_json(next(r for r in sc.results if r.metric == "c_fail").to_json())
    assert (back.gate_kind, back.gate_note) == ("floor", means)


def test_a_served_model_says_what_it_was_asked() -> None:
    """A served model (openai:) prints the requests the run sent it (its cost) and the option letters it
    could only bound; an in-process model prints no such line."""
    sc = _card()
    sc.fingerprint["models"] = {"gpt": {"endpoint": {"requests": 1234, "bounded_letters": 3}},
                                "local": {"dtype": "float32"}}
    lines = summary_lines(sc, [], None, [])
    assert [x for x in lines if x.startswith("endpoint ")] == [
        "endpoint gpt: 1234 request(s) sent; 3 option letter(s) outside its top log-probs, bounded"]
    sc.fingerprint["models"]["gpt"]["endpoint"]["bounded_letters"] = 0
    assert "endpoint gpt: 1234 request(s) sent" in summary_lines(sc, [], None, [])
    # per suite where the run recorded it (plugin.api_cost.endpoint_info), the probe's apart
    sc.fingerprint["models"]["gpt"]["endpoint"] |= {"probe": 2, "suites": {"b": 1000, "a": 232}}
    assert ("endpoint gpt: 1234 request(s) sent; per suite: a 232, b 1000, the probe at load 2"
            in summary_lines(sc, [], None, []))


def test_the_verdicts_count_missing_baseline_results() -> None:
    """Issue 49, item 6: a run that failed the gate on missing baseline results printed "PASS model m: ...,
    all passed" (and no line at all for a baseline model it lacked). The first line and the verdicts
    count them now, naming the first few."""
    from dataclasses import replace

    from faithtests.scorecard.baseline import compare

    sc = _card()
    gone = [*(_result(f"gone_{k:02d}", "pass") for k in range(12)),
            replace(_result("e_other", "pass"), model="old")]
    baseline = Scorecard(tests=[*sc.tests, *(TestRecord(r.test, "s", results=[r]) for r in gone)])
    comparison = compare(sc, baseline, 0.0)
    missing = comparison.missing_gated
    assert len(missing) == 13
    lines = summary_lines(sc, [], comparison, [], missing=missing)
    assert "1 failed, 13 baseline result(s) missing" in lines[0]
    verdicts = {line.split(":")[0]: line for line in lines if " model " in line}
    assert verdicts["FAIL model old"] == "FAIL model old: 0 check(s), missing baseline result(s) 1: s/e_other"
    assert "; missing baseline result(s) 12: s/gone_00, " in verdicts["FAIL model m"]
    assert verdicts["FAIL model m"].endswith("s/gone_09, ... 2 more")
    assert not any(" model " in x and "missing" in x for x in summary_lines(sc, [], comparison, []))
