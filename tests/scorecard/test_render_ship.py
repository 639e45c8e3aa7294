"""The scorecard's first screen answers "ship?" (issue 33 item 5): one banner above the per-model table
whose colour matches the verdict, inconclusive and insufficient checks linked from that table, a
glossary definition beside each metric name, filterable tables, baseline values in plots and compact
dot/row charts (zero always on the axis) instead of one-bar charts."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import replace

from _sample_scorecard import CLIP, OC, sample_scorecard, sample_with_regressions
from test_render import tables

from faithtests.reports.html import render_html
from faithtests.reports.plot_axes import STATUS_COLOR
from faithtests.reports.plot_dots import DotRow, render_dots
from faithtests.reports.plots import ThresholdLine, render_plot
from faithtests.scorecard.model import MetricResult, Plot, Series, TestRecord
from faithtests.scorecard.scorecard import Scorecard

NS = "{http://www.w3.org/2000/svg}"


def _banner(html: str) -> tuple[str, str, str]:
    """(class, label, counts) of the page's one banner."""
    found = re.findall(r'<div id="ship" class="banner ([a-z-]+)"[^>]*>\s*<span class="banner-label">([^<]+)'
                       r'</span>\s*<span class="banner-counts">([^<]*)</span>', html)
    assert len(found) == 1, found
    return found[0]


def _checked(model: str, value: float, passed: bool, **kw: object) -> MetricResult:
    return MetricResult("s", f"s.py::test_a[{model}]", "acc", value, model=model,
                        ci=(value - 0.05, value + 0.05), n=100, threshold=0.5, op=">=", passed=passed, **kw)  # type: ignore[arg-type]


def _card(*results: MetricResult, status: str = "complete") -> Scorecard:
    return Scorecard(tests=[TestRecord(r.test, "s", results=[r]) for r in results], status=status)


def test_banner_says_do_not_ship_with_its_counts_above_the_verdict_table() -> None:
    current, base = sample_with_regressions()
    html = render_html(current, base)
    cls, label, counts = _banner(html)
    assert (cls, label) == ("do-not-ship", "DO NOT SHIP")
    assert counts.startswith("3 failing checks · 1 regression · failing: ")
    assert OC in counts and CLIP in counts  # the two failing columns; "· pgla" passes
    assert html.index('id="ship"') < html.index('id="verdict"') < html.index('<table class="verdict')
    # the run's status stays visible, but neither as the headline nor in green
    assert '<p class="run-meta">Run complete' in html and "status-complete" not in html


def test_banner_ship_insufficient_partial_and_no_checks() -> None:
    assert _banner(render_html(_card(_checked("m", 0.8, True))))[:2] == ("ship", "SHIP")
    thin = _checked("m", 0.8, False, insufficient=True, coverage="3 of 100 items usable")
    cls, label, counts = _banner(render_html(_card(_checked("k", 0.8, True), thin)))
    assert (cls, label) == ("insufficient", "INSUFFICIENT DATA") and "1 with too little data" in counts
    cls, _, counts = _banner(render_html(_card(_checked("m", 0.8, True), status="interrupted")))
    assert cls == "insufficient" and "the run is interrupted: its results are partial" in counts
    bare = _card(MetricResult("s", "s.py::test_a", "m", 0.4))
    cls, _, counts = _banner(render_html(bare))
    assert cls == "insufficient" and "no check recorded a verdict" in counts
    assert _banner(render_html(_card(_checked("m", 0.3, False))))[0] == "do-not-ship"  # a failure wins


def test_inconclusive_and_insufficient_checks_are_linked_from_the_verdict_table() -> None:
    straddles = _checked("m", 0.52, True)  # CI [0.47, 0.57] straddles 0.5: a pass, but inconclusive
    thin = replace(_checked("m", 0.8, False, insufficient=True), metric="rec")
    html = render_html(_card(straddles, thin))
    row = tables(html, "verdict")[0][1]
    assert row[1] == "INSUFFICIENT" and "1 inconclusive" in row[2]
    assert "acc: inconclusive" in row[3] and "rec: not enough data" in row[3]
    ids = set(re.findall(r'<tr id="([^"]+)"', html))
    chips = re.findall(r'<a class="chip (inconclusive|insufficient)" href="#([^"]+)"', html)
    assert {c for c, _ in chips} == {"inconclusive", "insufficient"} and all(h in ids for _, h in chips)
    # the filter's "flagged only" keeps these rows: they carry data-flags
    assert re.search(r'<tr id="[^"]+" data-flags="inconclusive">', html)
    assert re.search(r'<tr id="[^"]+" data-flags="insufficient">', html)


def test_glossary_definition_beside_each_metric_name() -> None:
    sc = sample_scorecard()
    sc.glossary = {"E_inv": {"sentence": "Share of items whose choice a paraphrase flips.",
                             "direction": "lower", "unit": "share of items", "paper": "LGIP",
                             "equation": "Eq. 2"},
                   "PR": {"sentence": "undefined", "direction": "undefined", "unit": "undefined",
                          "paper": "undefined", "equation": "undefined"}}
    html = render_html(sc)
    tip = "Share of items whose choice a paraphrase flips. (lower is better; share of items; LGIP Eq. 2)"
    assert html.count(f'<abbr class="term" title="{tip}">E_inv</abbr>') == 4  # 2 main rows, 2 slice rows
    dt = r'<dt id="g-[0-9a-f]+">'
    assert re.search(dt + r"E_inv</dt><dd>Share of items whose choice a paraphrase flips\. <span", html)
    for name in ("PR", "E_sens"):  # marked undefined, or absent: said so
        none = r'</dt><dd><span class="muted">no definition recorded</span>'
        assert re.search(dt + name + none, html), name


def test_tables_are_filterable_and_the_bar_waits_for_the_script() -> None:
    html = render_html(sample_scorecard())
    assert '<div id="table-filter-bar" class="filter-bar" hidden>' in html  # shown by the script only
    for cls in ("verdict", "metrics main", "metrics slices", "invalid", "tests", "fingerprint"):
        assert re.search(rf'<table class="{cls} filterable">', html), cls
    script = re.search(r"<script>(.*?)</script>", html, re.S)
    assert script is not None and 'getElementById("table-filter")' in script.group(1)


# ---------------------------------------------------------------- plots


def _dots(svg: str) -> list[ET.Element]:
    return [e for e in ET.fromstring(svg).iter(f"{NS}circle") if "dot" in (e.get("class") or "")]


def test_dot_rows_show_zero_verdict_colours_threshold_and_baseline() -> None:
    rows = [DotRow("a", 0.0, -0.02, 0.03, ThresholdLine(0.1, "<=", "a"), 0.05, "pass"),
            DotRow("b", 0.4, 0.3, 0.5, ThresholdLine(0.1, "<=", "b"), math.nan, "fail"),
            DotRow("c", math.nan)]
    svg = render_dots("t", rows, subtitle="s", x_label="E")
    root = ET.fromstring(svg)
    assert int(root.get("height", "0")) < 160  # three rows: compact
    dots = _dots(svg)
    assert [d.get("fill") for d in dots if d.find(f"{NS}title") is not None] == [STATUS_COLOR["pass"],
                                                                                  STATUS_COLOR["fail"]]
    zero = next(e for e in root.iter(f"{NS}line") if e.get("class") == "zero")
    x0 = float(zero.get("x1", "nan"))
    first = next(d for d in dots if d.find(f"{NS}title") is not None)
    assert abs(float(first.get("cx", "nan")) - x0) < 0.11  # the value 0 sits on the zero line: visible
    ticks = [e for e in root.iter(f"{NS}line")
             if e.get("class") == "threshold" and e.find(f"{NS}title") is not None]
    assert len(ticks) == 2 and all(t.get("x1") == ticks[0].get("x1") for t in ticks)
    diamonds = [e for e in root.iter(f"{NS}path") if e.get("class") == "baseline"]
    assert len(diamonds) == 1 + 1 and "<title>baseline 0.05</title>" in svg  # a row's, the legend's
    assert "n/a" in svg


def test_a_one_bar_chart_becomes_a_dot_row_chart() -> None:
    one = Plot("acc", "bar", [Series("m1", ["all"], [0.0]), Series("m2", ["all"], [0.6])], y_label="acc")
    svg = render_plot(one, thresholds=[ThresholdLine(0.5, ">=")],
                      baseline=Plot("acc", "bar", [Series("m2", ["all"], [0.7])]))
    assert 'class="plot plot-dots"' in svg and "<rect class=\"bar\"" not in svg
    assert len(_dots(svg)) >= 2 and "<title>baseline 0.7</title>" in svg
    two = Plot("acc", "bar", [Series("m1", ["a", "b"], [0.2, 0.6])])
    assert 'class="plot plot-bar"' in render_plot(two)  # several categories: still bars


def test_baseline_is_drawn_into_line_and_bar_plots_inside_the_axis() -> None:
    cur = Plot("PR by layer", "line", [Series("m", [0, 1, 2], [0.5, 0.6, 0.7])])
    old = Plot("PR by layer", "line", [Series("m", [0, 1, 2], [0.9, 0.95, 1.4]), Series("gone", [0], [5.0])])
    root = ET.fromstring(render_plot(cur, baseline=old))
    line = [e for e in root.iter(f"{NS}polyline") if e.get("class") == "baseline"]
    assert len(line) == 1 and line[0].get("stroke-dasharray")  # only the series both runs have
    axis = [e for e in root.iter(f"{NS}line") if e.get("class") == "axis"][1]
    top = float(axis.get("y1", "nan"))
    assert all(float(p.split(",")[1]) >= top - 0.01 for p in line[0].get("points", "").split())
    bars = Plot("b", "bar", [Series("m", ["x", "y"], [0.2, 0.3])])
    svg = render_plot(bars, baseline=Plot("b", "bar", [Series("m", ["x", "y"], [0.25, 0.1])]))
    assert svg.count('<path class="baseline"') == 2


def test_automatic_charts_carry_the_baseline_value_of_each_row() -> None:
    current, base = sample_with_regressions()
    html = render_html(current, base)
    lgip = html[html.index("lgip: E_inv per model"):]
    lgip = lgip[:lgip.index("</svg>")]
    assert "<title>baseline 0.01</title>" in lgip  # reference:clip's E_inv in the baseline run
    assert "diamond: baseline" in html
    assert "diamond: baseline" not in render_html(current)  # no baseline given: no diamonds promised


def test_only_suites_that_need_a_look_open_by_default() -> None:
    ok = TestRecord("a.py::test_a", "calm", results=[_checked("m", 0.8, True)])
    bad = TestRecord("b.py::test_b", "loud", outcome="failed",
                     results=[replace(_checked("m", 0.3, False), suite="loud", test="b.py::test_b")])
    html = render_html(Scorecard(tests=[ok, bad]))
    found = {name: flag for flag, name in re.findall(
        r'<details class="suite" id="[^"]+"( open)?>\s*<summary><h2>Suite: (\w+)</h2>', html)}
    assert found == {"calm": "", "loud": " open"}
    assert '<span class="badge pass">all 1 checks pass</span>' in html
    assert '<span class="badge fail">1 failed</span></span></summary>' in html


def test_a_suite_with_only_inconclusive_passes_folds_and_its_link_opens_it() -> None:
    html = render_html(_card(_checked("m", 0.52, True)))  # a pass whose CI straddles the threshold
    assert re.search(r'<details class="suite" id="[^"]+">\s*<summary><h2>Suite: s</h2>', html)  # folded
    assert ('<span class="badge inconclusive">1 inconclusive</span><span class="badge pass">all 1 checks'
            in html)
    script = re.search(r"<script>(.*?)</script>", html, re.S)
    assert script is not None and 'addEventListener("hashchange", openTarget)' in script.group(1)
