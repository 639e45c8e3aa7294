"""The scorecard's first screen and compactness (issue 17 items 7-12): a verdict per model that names
and links every failing check, failed slice checks in the main table, parametrised regressions,
honest exemplar labels without repeats, collapsed zero counts, folding sections, plots that say which
dataset they show and where the threshold is, and durations that include fixture setup."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from _sample_scorecard import CLIP, OC, sample_scorecard, sample_with_regressions
from test_render import suite_html, tables

from faithtests.reports.html import render_html
from faithtests.reports.plots import ThresholdLine, render_plot, text_width
from faithtests.reports.render_coverage import split_coverage, touches_check
from faithtests.scorecard.kinds import NONFINITE
from faithtests.scorecard.model import InvalidCount, MetricResult, Plot, Series, TestRecord
from faithtests.scorecard.scorecard import Scorecard

NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def failing_html() -> str:
    current, base = sample_with_regressions()
    return render_html(current, base, baseline_label="out/ckpt-0410")


def _ids(html: str) -> set[str]:
    return set(re.findall(r'\sid="([^"]+)"', html))


def _chips(row_html: str) -> list[tuple[str, str]]:
    return re.findall(r'<a class="chip[^"]*" href="#([^"]+)"[^>]*>([^<]+)</a>', row_html)


def test_verdict_names_every_failing_check_per_model_and_links_it(failing_html: str) -> None:
    verdict = tables(failing_html, "verdict")[0]
    assert verdict[0][:3] == ["Model · variant", "Verdict", "Checks"]
    rows = {r[0]: r for r in verdict[1:]}
    assert rows[OC][1:4] == ["FAIL", "0 passed, 3 failed", "E_inv E_inv[colour] PR"]
    assert rows[CLIP][1:5] == ["FAIL", "3 passed, 0 failed", "none", "E_inv"]  # regressed vs the baseline
    assert rows[f"{CLIP} · pgla"][1:5] == ["PASS", "1 passed, 0 failed", "none", "none"]
    assert failing_html.index('id="verdict"') < failing_html.index('<details class="suite"')  # first screen
    section = failing_html[failing_html.index('id="verdict"'):failing_html.index('<table class="summary">')]
    ids = _ids(failing_html)
    mains = re.findall(r'<table class="metrics main filterable">.*?</table>', failing_html, re.S)
    main_rows = {a for t in mains for a in re.findall(r'<tr id="([^"]+)"', t)}
    links = _chips(section)
    assert len(links) == 4 and all(href in ids and href in main_rows for href, _ in links)


def test_a_broken_test_without_results_gets_a_verdict_row() -> None:
    broken = TestRecord("s.py::test_load[world-m]", "s", outcome="error", message="OSError: no weights")
    html = render_html(Scorecard(tests=[*sample_scorecard().tests, broken]))
    rows = {r[0]: r for r in tables(html, "verdict")[0][1:]}
    assert rows["(no model)"][1] == "FAIL" and rows["(no model)"][3] == "test test_load[world-m] did not pass"


def test_every_failed_check_is_in_the_main_table(failing_html: str) -> None:
    current, _ = sample_with_regressions()
    failed = [r for r in current.results if r.passed is False]
    assert any(r.slice for r in failed)  # the sample has a failing slice check
    main = [row for s in ("lgip", "premise") for t in tables(suite_html(failing_html, s), "metrics main")
            for row in t[1:]]
    for r in failed:
        label = f"{r.metric} [{r.slice}]" if r.slice else r.metric
        assert any(row[1].startswith(label) and "FAIL" in " ".join(row[2:]) for row in main), label
    colour = [row for row in main if row[1].startswith("E_inv [colour]")]
    assert len(colour) == 1 and colour[0][2].startswith("0.170 FAIL")
    assert len(_ids(failing_html)) == len(re.findall(r'\sid="', failing_html))  # ids stay unique


def test_regressions_name_the_parametrised_test(failing_html: str) -> None:
    reg = tables(failing_html, "regressions")[0]
    assert reg[0][0] == "Test (parametrised)" and reg[1][0] == f"test_invariance[{CLIP}]"


def test_exemplars_of_a_passing_test_are_hardest_items_and_repeats_are_counted(failing_html: str) -> None:
    lgip = suite_html(failing_html, "lgip")
    assert f"test_invariance[{CLIP}] — hardest items (test passed)" in lgip
    assert "failure exemplars (test failed)" in lgip
    assert '<div class="exemplar hardest">' in lgip and '<div class="exemplar failure">' in lgip
    assert "1 card(s) identical to ones shown above: not repeated." in lgip  # within the failing test
    premise = suite_html(failing_html, "premise")
    assert f"1 card(s) identical to ones shown under test_invariance[{CLIP}]: not repeated." in premise
    assert failing_html.count("smallest margin") == 1  # the shared card is drawn once on the page


def test_zero_invalid_kinds_collapse_into_one_line() -> None:
    recs = [TestRecord(f"s.py::test_{k}", "s", invalid=[InvalidCount("missing image", 0, 10),
                                                         InvalidCount("tie", 0, 10)]) for k in "abc"]
    recs.append(TestRecord("s.py::test_d", "s", invalid=[InvalidCount("tie", 2, 10, ["item 7"])]))
    html = render_html(Scorecard(tests=recs))
    inv = tables(html, "invalid")[0]
    assert [r[:4] for r in inv[1:]] == [["test_d", "(no model)", "tie", "2 / 10 (20.0%)"]]
    assert "Counted, none found: missing image (3 tests), tie (3 tests)." in html


def _checked_test(name: str, **kw: Any) -> TestRecord:
    """A test with one checked result (model "m"): the invalid counts it records touch a verdict."""
    r = MetricResult("s", name, "acc", 0.9, model="m", n=47, threshold=0.5, op=">=", passed=True)
    return TestRecord(name, "s", results=[r], **kw)


def test_header_counts_each_missing_input_once_per_dataset() -> None:
    recs = [_checked_test(f"s.py::test_{k}[sugarcrepe-m]", dataset="sugarcrepe",
                          invalid=[InvalidCount("missing image", 7300, 7347)]) for k in "abc"]
    html = render_html(Scorecard(tests=recs)).replace("\n", "")
    assert "Invalid inputs</th><td>7300 <span" in html  # not 3 x 7300
    assert "coverage sugarcrepe: 7300 of 7347 inputs missing image (99.4%)" in html
    assert '<details class="coverage-notes">' not in html


def test_counts_no_check_reads_are_folded_notes_apart_from_the_header_count() -> None:
    """A diagnostic's counts (no checked result for its model/variant: a prompt not applicable, an
    unparseable verdict of an ungated variant) are notes; a count a check reads stays in the header."""
    na = TestRecord("s.py::test_variant[world-m-A6]", "s", dataset="world",
                    results=[MetricResult("s", "s.py::test_variant[world-m-A6]", "Bal", 0.5, model="m")],
                    invalid=[InvalidCount("A6 not applicable", 400, 400, model="m"),
                             InvalidCount("unparseable A5 verdict", 400, 400, model="m")])
    gated = _checked_test("s.py::test_acc[world-m]", dataset="world",
                          invalid=[InvalidCount("tied top logit", 3, 400, model="m")])
    other_variant = _checked_test("s.py::test_acc2[world-m]", dataset="world",
                                  invalid=[InvalidCount("unparseable claim", 5, 50, model="m",
                                                        variant="sage")])
    split = split_coverage(Scorecard(tests=[na, gated, other_variant]))
    assert split.total == 3 and split.lines == ["coverage world: 3 of 400 inputs tied top logit (0.8%)"]
    assert split.notes_total == 805 and len(split.notes) == 3
    assert touches_check(gated, gated.invalid[0])
    assert not touches_check(other_variant, other_variant.invalid[0])
    nonfinite = InvalidCount(NONFINITE, 1, 400, model="m")
    assert touches_check(na, nonfinite)  # a fatal kind is never a note
    html = render_html(Scorecard(tests=[na, gated, other_variant])).replace("\n", "")
    assert "Invalid inputs</th><td>3 <span" in html
    notes = html[html.index('<details class="coverage-notes">'):]
    assert notes.index("3 coverage note(s) no check reads") < notes.index("A6 not applicable (100.0%)")


def test_sections_fold_without_a_new_script(failing_html: str) -> None:
    assert failing_html.count('<details class="suite" id="') == 2
    assert re.search(r'<details class="part" open><summary><h3>Failing checks \(\d+\)</h3></summary>',
                     failing_html)
    assert re.search(r'<details class="part"><summary><h3>Other metrics \(\d+\)</h3></summary>', failing_html)
    assert re.search(r'<details class="part"><summary><h3>Plots \(\d+\)</h3></summary>', failing_html)
    assert re.search(r'<details class="part"><summary><h3>Tests \(2\)</h3></summary>', failing_html)
    assert failing_html.count("<script") == 1


# ---------------------------------------------------------------- plots


def test_test_plots_name_their_dataset_and_test(failing_html: str) -> None:
    premise = suite_html(failing_html, "premise")
    titles = re.findall(r'<text class="title"[^>]*><title>([^<]+)</title>', premise)
    assert titles.count("rejection vs layer · world") == 3
    subtitles = re.findall(r'<text class="subtitle"[^>]*><title>([^<]+)</title>', premise)
    # with a baseline, its plot of the same title is drawn in (dashed) and the subtitle says so
    assert f"test_rejection[{CLIP}-pgla] · dashed/◇: baseline" in subtitles and len(set(subtitles[:3])) == 3


def test_line_plot_draws_the_threshold_inside_its_axis() -> None:
    # the plotted PR stays below 0.66; its check is PR >= 0.8: the axis must stretch to show the line
    p = Plot("PR by layer", "line", [Series("m", [0, 1, 2], [0.5, 0.6, 0.62], [0.4, 0.5, 0.55],
                                            [0.6, 0.65, 0.66])], y_label="PR")
    root = ET.fromstring(render_plot(p, thresholds=[ThresholdLine(0.8, ">=")]))
    line = next(e for e in root.iter(f"{NS}line") if e.get("class") == "threshold")
    axis = [e for e in root.iter(f"{NS}line") if e.get("class") == "axis"]
    top, bottom = float(axis[1].get("y1", "nan")), float(axis[1].get("y2", "nan"))
    assert top <= float(line.get("y1", "nan")) <= bottom
    assert any("threshold ≥ 0.8" in "".join(t.itertext()) for t in root.iter(f"{NS}text"))
    assert len([e for e in root.iter(f"{NS}polygon") if e.get("class") == "band"]) == 1


def test_automatic_charts_put_one_metric_on_one_axis() -> None:
    t = "s.py::test_a"
    res = [MetricResult("s", t, "acc", 0.9, model="m1", threshold=0.8, op=">=", passed=True),
           MetricResult("s", t, "acc", 0.7, model="m2", threshold=0.6, op=">=", passed=True),
           MetricResult("s", t, "err", 0.2, model="m1", higher_is_better=False, threshold=0.1, op="<=",
                        passed=False)]
    html = render_html(Scorecard(tests=[TestRecord(t, "s", results=res)]))
    titles = re.findall(r'<text class="title"[^>]*><title>([^<]+)</title>', html)
    assert titles == ["s: acc per model (higher is better)", "s: err per model (lower is better)"]
    acc = html[html.index("s: acc per model"):html.index("s: err per model")]
    assert re.findall(r"<title>(m\d: threshold [^<]+)</title>", acc) == ["m1: threshold ≥ 0.8",
                                                                         "m2: threshold ≥ 0.6"]


def _estimated_boxes(svg: str) -> list[tuple[str, float, float]]:
    """(text, left, right) of every unrotated text, by the renderer's own width estimate."""
    root = ET.fromstring(svg)
    out = []
    for e in root.iter(f"{NS}text"):
        if e.get("transform"):
            continue
        shown = (e.text or "") + "".join((c.tail or "") for c in e)
        w = text_width(shown, float(e.get("font-size", "11")), e.get("font-weight") == "bold")
        x = float(e.get("x", "0"))
        anchor = e.get("text-anchor", "start")
        left = x - w if anchor == "end" else (x - w / 2 if anchor == "middle" else x)
        out.append((shown, left, left + w))
    return out


def test_long_titles_legends_and_labels_are_cut_to_fit() -> None:
    long = "x" * 300
    p = Plot(long, "bar", [Series(long, [long, "b" * 40], [0.3, 0.4])], x_label=long, y_label=long)
    svg = render_plot(p, subtitle=long)
    width = float(ET.fromstring(svg).get("width", "0"))
    for text, left, right in _estimated_boxes(svg):
        assert left >= 0 and right <= width, text
    assert svg.count(f"<title>{long}</title>") >= 4  # the full texts stay available as tooltips


def test_duration_includes_fixture_setup(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slow="""
        import time
        import pytest

        @pytest.fixture(scope="session")
        def stage():
            time.sleep(0.3)  # a model stage: computed in the first test's setup

        @pytest.mark.suite("s")
        def test_a(faith, stage):
            faith.metric("m", 1.0)
    """)
    result = pytester.runpytest("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-W",
                                "ignore::pytest.PytestAssertRewriteWarning")
    result.assert_outcomes(passed=1)
    data = json.loads((pytester.path / "faith-report" / "scorecard.json").read_text())
    assert data["tests"][0]["duration"] >= 0.3

