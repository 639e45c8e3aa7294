"""HTML scorecard and inline-SVG plots: structure, offline-ness, escaping, caps, baseline deltas."""

from __future__ import annotations

import base64
import hashlib
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from html import unescape
from html.parser import HTMLParser

import pytest
from _sample_scorecard import CLIP, HOSTILE, OC, sample_scorecard

from faithtests.reports.html import node_function, render_html
from faithtests.reports.plots import nice_ticks, render_plot
from faithtests.scorecard.baseline import compare
from faithtests.scorecard.model import Exemplar, GateMode, MetricResult, Op, Plot, Series, TestRecord, passes
from faithtests.scorecard.scorecard import Scorecard


class _Tables(HTMLParser):
    """Collects every <table> as (class, rows of cell texts); enough to check layout without a DOM lib."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self._stack: list[tuple[str, list[list[str]]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._stack.append((dict(attrs).get("class") or "", []))
        elif tag == "tr" and self._stack:
            self._stack[-1][1].append([])
        elif tag in ("td", "th") and self._stack:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._stack:
            self._stack[-1][1][-1].append(" ".join(" ".join(self._cell).split()))
            self._cell = None
        elif tag == "table" and self._stack:
            self.tables.append(self._stack.pop())

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(html: str, cls: str) -> list[list[list[str]]]:
    """Tables whose class list contains every class in ``cls`` ("metrics main")."""
    p = _Tables()
    p.feed(html)
    return [rows for c, rows in p.tables if set(cls.split()) <= set(c.split())]


def suite_html(html: str, suite: str) -> str:
    start = html.index(f"<h2>Suite: {suite}</h2>")
    end = html.find('<details class="suite"', start + 5)
    return html[start:end]


@pytest.fixture(scope="module")
def html() -> str:
    return render_html(sample_scorecard())


# ---------------------------------------------------------------- page structure


def test_metric_table_puts_models_side_by_side(html: str) -> None:
    lgip = tables(suite_html(html, "lgip"), "metrics main")[0]
    assert lgip[0] == ["Test", "Metric", OC, CLIP]  # columns sorted by model, then base before variants
    e_inv = next(r for r in lgip if r[1].startswith("E_inv"))
    assert e_inv[0] == "test_invariance"  # parametrisation dropped: one row, two model columns
    assert e_inv[2].startswith("0.140 FAIL") and "threshold <= 0.100" in e_inv[2] and "n=200" in e_inv[2]
    assert e_inv[3].startswith("0.050 PASS") and "CI [0.030, 0.070]" in e_inv[3]
    premise = tables(suite_html(html, "premise"), "metrics main")[0]
    assert premise[0] == ["Test", "Metric", OC, CLIP, f"{CLIP} · pgla"]
    assert "threshold >= 0.800 (CI)" in premise[1][2]  # gate mode shown


def test_slice_breakdowns_and_invalid_counts_and_fingerprint(html: str) -> None:
    sliced = tables(suite_html(html, "lgip"), "metrics slices")[0]
    assert [r[2] for r in sliced[1:]] == ["colour", "count"]
    assert sliced[1][3].startswith("0.170") and sliced[1][4].startswith("0.080")
    inv = tables(suite_html(html, "premise"), "invalid")[0]
    assert inv[0] == ["Test", "Model", "Kind", "Count / total", "Examples"]
    assert len(inv) == 4 and all(r[2] == "unparseable answer" and r[3] == "3 / 80 (3.8%)" for r in inv[1:])
    fp = dict(tuple(r) for r in tables(html, "fingerprint")[0])
    assert fp["packages.torch"] == "2.14.1" and fp["models.reference:clip.sha256"] == "ab12"


def test_every_suite_has_a_plot_including_an_automatic_one(html: str) -> None:
    lgip = suite_html(html, "lgip")  # supplies no plot of its own: one chart per checked metric
    assert lgip.count("<svg") == 1 and "lgip: E_inv per model (lower is better)" in lgip
    premise = suite_html(html, "premise")
    assert premise.count("<svg") == 4 and premise.count('class="band"') == 3  # 3 line plots with CI bands
    bare = Scorecard(
        tests=[TestRecord("t.py::test_a", "bare", results=[MetricResult("bare", "t.py::test_a", "m", 0.4)])]
    )
    assert "bare: m per model (higher is better)" in render_html(bare)


def test_exemplar_thumbnails_are_data_uris_and_capped(html: str) -> None:
    srcs = re.findall(r'<img src="([^"]*)"', html)
    # lgip: 3 distinct exemplars of the failing model + 1 hardest item of the passing one;
    # premise: 3 tests x min(10, cap 8) distinct exemplars x 2 images (the repeated card is not shown)
    assert len(srcs) == 3 + 1 + 3 * 8 * 2
    for s in srcs:
        assert s.startswith("data:image/jpeg;base64,")
        assert base64.b64decode(s.split(",", 1)[1])[:2] == b"\xff\xd8"  # a real JPEG
    assert html.count("Showing 8 of 10 exemplars") == 3
    small = render_html(sample_scorecard(), max_exemplars=2)
    assert "Showing 2 of 3 exemplars" in small and len(re.findall(r"<img ", small)) == 2 + 1 + 3 * 2 * 2
    with pytest.raises(ValueError, match="max_exemplars"):
        render_html(sample_scorecard(), max_exemplars=-1)


def test_page_is_offline_and_csp_pins_the_inline_code(html: str) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//|file:)""", html, re.I)
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert 'style="' not in html  # the CSP forbids inline style attributes
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert csp is not None
    policy = unescape(csp.group(1))
    assert "default-src 'none'" in policy and "img-src data:" in policy
    for tag in ("style", "script"):
        body = re.search(rf"<{tag}>(.*?)</{tag}>", html, re.S)
        assert body is not None
        digest = base64.b64encode(hashlib.sha256(body.group(1).encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy, tag


def test_text_is_escaped_and_non_data_images_are_not_loaded() -> None:
    sc = sample_scorecard()
    evil = TestRecord(
        "s.py::test_evil",
        "evil<b>",
        exemplars=[
            Exemplar(reason="</div><script>x()</script>", image="https://example.com/a.png"),
            Exemplar(reason="too big", image="data:image/png;base64," + "A" * 500),
        ],
        results=[MetricResult("evil<b>", "s.py::test_evil", "m<i>", 0.5, model="<img src=x>")],
        plots=[Plot("<script>t</script>", "bar", [Series("<s>", ["<x>"], [1.0])])],
    )
    html = render_html(Scorecard(tests=[*sc.tests, evil]), max_image_chars=400)
    assert html.count("<script") == 1  # only the page's own
    assert "&lt;script&gt;alert(" in html and HOSTILE not in html
    assert "<img src=x>" not in html and "&lt;img src=x&gt;" in html
    assert "https://example.com/a.png" not in re.findall(r'src="([^"]*)"', html)
    assert "not an inline image" in html and "thumbnail of 0 KiB left out" in html


def test_baseline_deltas_are_direction_aware() -> None:
    current = sample_scorecard()
    base = sample_scorecard()
    t0 = base.tests[0]  # reference:clip lgip: E_inv (lower is better) was 0.03, E_sens was 0.70
    base.tests[0] = replace(
        t0, results=[replace(t0.results[0], value=0.03), replace(t0.results[1], value=0.70), *t0.results[2:]]
    )
    base.tests.append(
        TestRecord(
            "suites/test_lgip.py::test_gone",
            "lgip",
            results=[MetricResult("lgip", "suites/test_lgip.py::test_gone", "old", 1.0)],
        )
    )
    html = render_html(current, base, baseline_label="out/ckpt-0410")
    # the failing slice check E_inv[colour] is in the open "Failing checks" table, the rest fold below it
    rows = [r for t in tables(suite_html(html, "lgip"), "metrics main") for r in t[1:]]
    e_inv, e_sens = (next(r for r in rows if r[1].split()[0] == m) for m in ("E_inv", "E_sens"))
    assert "Δ +0.02 (baseline 0.030)" in e_inv[3]  # 0.05 - 0.03: worse for a lower-is-better metric
    assert "Δ -0.09 (baseline 0.700)" in e_sens[3]  # 0.61 - 0.70: worse for a higher-is-better metric
    assert "Δ +0 (baseline 0.140)" in e_inv[2]
    lgip = suite_html(html, "lgip")
    assert lgip.count('class="delta worse"') == 2 and lgip.count('class="delta same"') >= 2
    assert "out/ckpt-0410" in html and "Baseline metrics absent from this run (1)" in html
    improved = render_html(base, current)  # the other way round both are improvements
    assert suite_html(improved, "lgip").count('class="delta better"') == 2
    # a generous tolerance turns both into "unchanged", exactly as the gate would
    tol = render_html(current, base, tolerance="50%")
    assert (
        suite_html(tol, "lgip").count('class="delta worse"') == 1
    )  # 0.61 vs 0.70 is within 50%, 0.05 vs 0.03 not


def test_regressions_are_listed_with_links_to_their_rows() -> None:
    current, base = sample_scorecard(), sample_scorecard()
    t0 = base.tests[0]
    base.tests[0] = replace(t0, results=[replace(t0.results[0], value=0.01), *t0.results[1:]])
    current.regressions = [d.to_json() for d in compare(current, base).regressions]
    html = render_html(current, base)
    reg = tables(html, "regressions")[0]
    assert len(reg) == 2 and reg[1][:4] == [f"test_invariance[{CLIP}]", "E_inv", CLIP, ""]  # parametrised
    assert reg[1][4:] == ["0.010", "0.050", "+0.04 95% CI [+0.0117, +0.0683] (unpaired)", "lower"]
    link = re.search(r'<section id="regressions">.*?href="#([^"]+)"', html, re.S)
    assert link is not None and re.search(f'<tr id="{link.group(1)}"[ >]', html)


def test_interrupted_run_is_flagged_and_status_counts() -> None:
    html = render_html(sample_scorecard(status="interrupted"))
    assert "Run interrupted" in html and "results below are partial" in html
    assert (
        '<span class="badge passed">3 passed</span>' in html
        and '<span class="badge failed">2 failed</span>' in html
    )


def test_colliding_parametrisations_keep_their_params() -> None:
    recs = [
        TestRecord(
            f"s.py::test_x[seed{i}]", "s", results=[MetricResult("s", f"s.py::test_x[seed{i}]", "m", i / 4)]
        )
        for i in (1, 2)
    ]
    rows = tables(render_html(Scorecard(tests=recs)), "metrics main")[0]
    assert [r[0] for r in rows[1:]] == ["test_x[seed1]", "test_x[seed2]"]
    assert node_function("suites/test_a.py::TestK::test_b[x-y]") == "TestK::test_b"


def test_sample_page_stays_small(html: str) -> None:
    assert len(html.encode()) < 300_000


# ---------------------------------------------------------------- plots


def _svg(plot: Plot) -> ET.Element:
    return ET.fromstring(render_plot(plot))


NS = "{http://www.w3.org/2000/svg}"


def test_nice_ticks_hand_values() -> None:
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(3.0, 3.5) == [3.0, 3.1, 3.2, 3.3, 3.4, 3.5]
    assert nice_ticks(-7.0, 12.0) == [-5.0, 0.0, 5.0, 10.0]
    assert nice_ticks(2.0, 2.0) == [2.0]
    with pytest.raises(ValueError):
        nice_ticks(0.0, math.inf)


def test_line_plot_band_only_with_lo_hi_and_nan_breaks_the_line() -> None:
    with_band = Plot(
        "t",
        "line",
        [Series("a", [0, 1, 2, 3], [0.1, 0.2, 0.3, 0.4], [0, 0.1, 0.2, 0.3], [0.2, 0.3, 0.4, 0.5])],
    )
    root = _svg(with_band)
    bands = root.findall(f".//{NS}polygon")
    assert (
        len(bands) == 1 and bands[0].get("class") == "band" and len(bands[0].get("points", "").split()) == 8
    )
    assert not _svg(Plot("t", "line", [Series("a", [0, 1], [0.1, 0.2])])).findall(f".//{NS}polygon")
    gap = _svg(
        Plot(
            "t",
            "line",
            [
                Series(
                    "a",
                    [0, 1, 2, 3, 4],
                    [0.1, math.nan, 0.3, 0.4, None],  # type: ignore[list-item]
                    [0, 0, math.nan, 0.3, 0.3],
                    [0.2, 0.2, 0.4, 0.5, 0.5],
                )
            ],
        )
    )
    assert len(gap.findall(f".//{NS}polyline")) == 2  # [0] and [2, 3]: the NaN splits, never joins
    assert len(gap.findall(f".//{NS}polygon")) == 2  # band runs [0, 1] and [3, 4]
    assert len(gap.findall(f".//{NS}circle")) == 3
    assert "nan" not in render_plot(Plot("t", "line", [Series("a", [0, 1, 2], [0.1, math.nan, 0.3])])).lower()


def test_bar_heights_are_proportional_and_nan_is_marked() -> None:
    root = _svg(
        Plot("b", "bar", [Series("m1", ["x", "y", "z"], [0.5, 1.0, math.nan]), Series("m2", ["x"], [0.25])])
    )
    bars = [r for r in root.iter(f"{NS}rect") if r.get("class") == "bar"]
    heights = [float(r.get("height", "nan")) for r in bars]
    assert len(bars) == 3 and heights[0] / heights[1] == pytest.approx(0.5, abs=0.01)  # y axis starts at 0
    assert heights[2] / heights[1] == pytest.approx(0.25, abs=0.01)
    assert [t.text for t in root.iter(f"{NS}text") if t.get("class") == "na"] == ["n/a"]
    assert [t.text for t in root.iter(f"{NS}text")].count("0") == 1  # the zero tick


def test_scatter_escaping_legend_and_notes() -> None:
    p = Plot(
        "<b>&'\"",
        "scatter",
        [
            Series("<s1>", [0.0, 1.0, 2.0], [1.0, 2.0], [0.5, 1.5], [1.5, 2.5]),
            Series("s2", ["a", "b"], [1.0, 2.0]),
        ],
        x_label="x<",
        y_label="y>",
    )
    root = _svg(p)  # parses as XML despite the hostile strings
    shown = ["".join(t.itertext()) for t in root.iter(f"{NS}text")]  # a text's <title> holds the full one
    assert any(t.startswith("<b>&'\"") for t in shown) and any(t.startswith("x<") for t in shown)
    assert any(t.startswith("<s1>") for t in shown)
    assert any("2 y values" in t for t in shown)  # length mismatch is visible, not hidden
    assert len(root.findall(f".//{NS}circle")) == 4 and len(root.findall(f".//{NS}path")) == 2


def test_empty_and_bad_plots() -> None:
    empty = render_plot(Plot("e", "line", [Series("a", [0, 1], [math.nan, math.nan])]))
    assert "no finite data" in empty and ET.fromstring(empty) is not None
    with pytest.raises(ValueError, match="unknown kind"):
        render_plot(Plot("e", "pie", []))  # type: ignore[arg-type]


def _checked(value: float | None, ci: tuple[float, float] | None, op: Op, threshold: float,
             gate: GateMode = "point", model: str = "") -> MetricResult:
    compared = value if gate == "point" or ci is None else (ci[0] if op in (">=", ">") else ci[1])
    return MetricResult("s", "s.py::test_x", "m", value, ci=ci, op=op, threshold=threshold, model=model,
                        passed=compared is not None and passes(compared, op, threshold), gate=gate)


@pytest.mark.parametrize(
    ("value", "ci", "op", "threshold", "inconclusive", "detectable"),
    [
        (0.85, (0.75, 0.95), ">=", 0.80, True, 0.10),  # straddles: a point pass, flagged
        (0.85, (0.81, 0.89), ">=", 0.80, False, 0.04),  # clear pass
        (0.60, (0.50, 0.70), ">=", 0.80, False, 0.10),  # clear fail: hi - value below the threshold
        (0.78, (0.70, 0.86), ">=", 0.80, True, 0.08),  # a point fail within reach
        (0.85, (0.80, 0.90), ">=", 0.80, False, 0.05),  # lo on the threshold passes >=: conclusive
        (0.85, (0.80, 0.90), ">", 0.80, True, 0.05),  # ... but not >
        (0.05, (0.02, 0.12), "<=", 0.10, True, 0.07),  # lower is better: the side facing 0.10
        (0.05, (0.02, 0.08), "<=", 0.10, False, 0.03),
    ],
)
def test_inconclusive_and_detectable_difference(
    value: float, ci: tuple[float, float], op: Op, threshold: float, inconclusive: bool, detectable: float
) -> None:
    r = _checked(value, ci, op, threshold)
    assert r.inconclusive is inconclusive
    assert r.detectable_diff == pytest.approx(detectable)
    assert abs(value - threshold) < detectable or not inconclusive  # inconclusive <=> within reach
    d = r.to_json()
    assert (d["inconclusive"], d["detectable_diff"]) == (r.inconclusive, r.detectable_diff)
    assert MetricResult.from_json(d) == r  # derived fields are not read back


def test_no_power_fields_without_a_check_a_ci_or_a_value() -> None:
    unchecked = MetricResult("s", "t", "m", 0.5, ci=(0.4, 0.6))
    no_ci = _checked(0.5, None, ">=", 0.4)
    undefined = _checked(None, None, ">=", 0.4)
    for r in (unchecked, no_ci, undefined):
        assert (r.inconclusive, r.detectable_diff) == (None, None)


def test_inconclusive_checks_are_flagged_in_html_and_summary() -> None:
    from faithtests.reports.summary import INCONCLUSIVE_NOTE, summary_lines

    straddles = _checked(0.85, (0.75, 0.95), ">=", 0.80, model="a")
    clear = replace(_checked(0.85, (0.81, 0.89), ">=", 0.80, model="b"), test="s.py::test_y")
    ci_gate = replace(_checked(0.85, (0.75, 0.95), ">=", 0.80, gate="ci", model="c"), test="s.py::test_z")
    sc = Scorecard(tests=[TestRecord(r.test, "s", results=[r]) for r in (straddles, clear, ci_gate)])
    html = render_html(sc)
    assert html.count('<span class="badge inconclusive"') == 2 + 1 + 1  # two cells, run and suite summaries
    assert "detects ±0.100" in html and "detects ±0.040" in html
    assert "2 checks passed, 1 failed, 2 inconclusive" in html
    lines = summary_lines(sc, [], None, [])
    assert any("3 check(s), 1 failed, 2 inconclusive" in line for line in lines)
    rows = {line.split()[4]: line for line in lines if line.startswith("s ")}  # 5th column: the model
    assert re.search(r">= 0\.800\s+pass \(inconclusive\)\s+±0\.100$", rows["a"])
    assert re.search(r">= 0\.800\s+pass\s+±0\.040$", rows["b"])
    assert re.search(r">= 0\.800\s+FAIL \(ci, inconclusive\)\s+±0\.100$", rows["c"])
    assert INCONCLUSIVE_NOTE in lines
