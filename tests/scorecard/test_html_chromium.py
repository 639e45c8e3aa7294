"""Open the rendered scorecard in headless Chromium (Debian package ``chromium``): the tables, images
and plots must be in the DOM, every inline image must decode, and the console must stay silent
(the page's Content-Security-Policy turns any external fetch or unpinned inline code into a console
error). A control page proves the console check itself can fail on this Chromium.

Layout is measured in the browser itself: a test-only copy of the page carries one more inline script,
pinned by its own hash in the page's CSP (the policy stays strict: an unpinned script would not run,
which the control test shows), that opens every folded section and writes into the DOM each SVG text
whose rendered box leaves its SVG; ``--dump-dom`` then reads it back.

Skipped when Chromium is absent, unless ``FAITH_REQUIRE_CHROMIUM=1`` (set by CI), which makes that a failure.
"""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _sample_scorecard import CLIP, OC, sample_scorecard, sample_with_regressions
from test_render import tables

from faithtests.reports.html import render_html
from faithtests.scorecard.model import MetricResult, Plot, Series, TestRecord
from faithtests.scorecard.scorecard import Scorecard

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=3000",
]


def find_chromium() -> str:
    """The chromium binary; a skip without one (a failure under FAITH_REQUIRE_CHROMIUM=1)."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found is None:
        if os.environ.get("FAITH_REQUIRE_CHROMIUM") == "1":
            pytest.fail("FAITH_REQUIRE_CHROMIUM=1 but no chromium binary (apt-get install chromium)")
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    return found


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


def _dump_dom(chromium: str, page: Path, profile: Path, *extra: str) -> tuple[str, list[str]]:
    """The DOM after load, and the console lines Chromium logged to stderr."""
    proc = subprocess.run(
        [chromium, *_FLAGS, *extra, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]
    return proc.stdout, console


def test_scorecard_renders_in_chromium_without_console_errors(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "scorecard.html"
    html = render_html(sample_scorecard())
    page.write_text(html, encoding="utf-8")
    dom, console = _dump_dom(chromium, page, tmp_path / "profile")
    assert console == []
    # lgip's failing checks (open) and its other rows (folded), premise's one table
    assert dom.count('<table class="metrics main filterable">') == 3
    assert dom.count('<table class="metrics slices filterable">') == 1
    assert '<table class="invalid filterable">' in dom and '<table class="fingerprint filterable">' in dom
    n_img = len(re.findall(r"<img ", html))
    # lgip: 3 distinct failure cards + 1 hardest item; premise: 3 tests x 8 (capped) pairs of images
    assert n_img == 3 + 1 + 3 * 8 * 2 and len(re.findall(r"<img ", dom)) == n_img
    assert f'data-images-ok="{n_img}/{n_img}"' in dom  # every thumbnail decoded
    assert dom.count("<svg") == 5 and dom.count('class="band"') == 3


# Test-only: opens every <details>, then lists each SVG text whose box leaves its SVG (0.5 px slack).
MEASURE = """
window.addEventListener("load", function () {
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  var bad = [], n = 0;
  document.querySelectorAll("svg").forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    svg.querySelectorAll("text").forEach(function (t) {
      var r = t.getBoundingClientRect();
      n++;
      if (r.width === 0 || r.left < box.left - 0.5 || r.right > box.right + 0.5 ||
          r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5) {
        bad.push(t.textContent.slice(0, 60) + " @" + Math.round(r.left - box.left) + "," +
                 Math.round(r.top - box.top) + " w" + Math.round(r.width) + " in " +
                 Math.round(box.width) + "x" + Math.round(box.height));
      }
    });
  });
  document.documentElement.dataset.svgTexts = String(n);
  document.documentElement.dataset.svgOverflow = JSON.stringify(bad);
});
"""


def _with_measurement(html: str, script: str = MEASURE) -> str:
    """The page plus a test-only script, pinned by hash next to the page's own: the CSP stays strict."""
    digest = "sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    out, n = re.subn(r"script-src (&#39;sha256-[^&]+&#39;)", rf"script-src \1 &#39;{digest}&#39;", html)
    assert n == 1
    return out.replace("</body>", f"<script>{script}</script></body>")


def _stress_plots() -> TestRecord:
    """Plots built to overflow: long title, many long categories, a long legend, a far threshold."""
    cats = [f"flip type number {i} with a long descriptive name" for i in range(9)]
    series = [Series(f"{OC} variant {k}", cats, [0.1 * (i % 5) + 0.05 * k for i in range(9)])
              for k in range(3)]
    long_title = "PR by flip type, strength bin and option order on the procedural world (reference data)"
    return TestRecord(
        "suites/test_flip.py::test_pr[world-open_clip:ViT-B-32@laion2b_s34b_b79k-all]", "flip",
        dataset="world",
        plots=[Plot(long_title, "bar", series, x_label="flip type " * 20,
                    y_label="PR (higher is better) " * 5),
               Plot("PR by layer", "line", [Series("m", [0, 1, 2, 3], [0.2, 0.3, 0.25, 0.4],
                                                   [0.1, 0.2, 0.2, 0.3], [0.3, 0.4, 0.3, 0.5])],
                    y_label="PR")],
    )


def test_verdict_failed_checks_and_svg_texts_in_chromium(chromium: str, tmp_path: Path) -> None:
    current, base = sample_with_regressions()
    current.tests.append(_stress_plots())
    page = tmp_path / "measured.html"
    control = '<svg width="50" height="20"><text x="30" y="15" font-size="11">control overflow</text></svg>'
    html = render_html(current, base).replace("</body>", control + "</body>")  # proves the check can fail
    page.write_text(_with_measurement(html), encoding="utf-8")
    dom, console = _dump_dom(chromium, page, tmp_path / "profile")
    assert console == []
    # the verdict block: first thing after the title, one row per model/variant
    assert dom.index('id="verdict"') < dom.index('class="suite"')
    verdict = {r[0]: r for r in tables(dom, "verdict")[0][1:]}
    assert verdict[OC][1] == "FAIL" and verdict[CLIP][1] == "FAIL" and verdict[f"{CLIP} · pgla"][1] == "PASS"
    # every failed check is in a main table, its row linked from the verdict block
    main = [row for t in tables(dom, "metrics main") for row in t[1:]]
    for r in (r for r in current.results if r.passed is False):
        label = f"{r.metric} [{r.slice}]" if r.slice else r.metric
        assert any(row[1].startswith(label) and "FAIL" in " ".join(row[2:]) for row in main), label
    # no SVG text leaves its SVG, once every section is open
    texts = re.search(r'data-svg-texts="(\d+)"', dom)
    overflow = re.search(r'data-svg-overflow="([^"]*)"', dom)
    assert texts is not None and int(texts.group(1)) > 50 and overflow is not None
    bad = json.loads(html_lib.unescape(overflow.group(1)))
    assert len(bad) == 1 and bad[0].startswith("control overflow @30"), bad


def test_the_console_check_can_fail(chromium: str, tmp_path: Path) -> None:
    """Control: a broken image, an external image and a console.error must all be visible to the check."""
    sc_html = render_html(sample_scorecard())
    script = re.search(r"<script>.*?</script>", sc_html, re.S)
    assert script is not None
    page = tmp_path / "control.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; img-src data:; script-src 'unsafe-inline'\"></head><body>"
        '<img src="data:image/png;base64,AAAA"><img src="https://example.invalid/a.png">'
        f"{script.group(0)}<script>console.error('control-error')</script></body></html>",
        encoding="utf-8",
    )
    dom, console = _dump_dom(chromium, page, tmp_path / "profile")
    assert 'data-images-ok="0/2"' in dom
    assert any("control-error" in ln for ln in console)
    assert any("example.invalid" in ln and "Content Security Policy" in ln for ln in console)


# Test-only: the folded page's height, then the table filter driven as a user would (a word typed, then
# "only flagged rows" ticked), each step's visible rows written into the DOM for --dump-dom to read.
PROBE = """
window.addEventListener("load", function () {
  var d = document.documentElement, out = {height: d.scrollHeight};
  var box = document.getElementById("table-filter"), flag = document.getElementById("table-filter-flagged");
  function visible() {
    var rows = [];
    document.querySelectorAll("table.filterable tr").forEach(function (r) {
      if (r.querySelector("td") && !r.hidden) { rows.push(r); }
    });
    return rows;
  }
  if (box && flag) {
    var cell = document.querySelector("table.metrics.main tbody tr td:nth-child(2)");
    var word = cell ? cell.textContent.trim().split(/\\s+/)[0] : "";
    out.barShown = !document.getElementById("table-filter-bar").hidden;
    out.all = visible().length;
    box.value = word; box.dispatchEvent(new Event("input"));
    out.word = word;
    out.wordRows = visible().map(function (r) {
      return r.textContent.toLowerCase().indexOf(word.toLowerCase()) >= 0;
    });
    out.count = document.getElementById("table-filter-count").textContent;
    box.value = ""; box.dispatchEvent(new Event("input"));
    flag.checked = true; flag.dispatchEvent(new Event("change"));
    out.flagged = visible().map(function (r) { return r.hasAttribute("data-flags"); });
    // plots, exemplar groups and glossary lines still shown: only flagged ones (those of flagged rows)
    out.extras = document.querySelectorAll("div.plot-box, .exemplar-group, dl.glossary > div").length;
    out.extrasShown = Array.prototype.filter.call(
      document.querySelectorAll("div.plot-box, .exemplar-group, dl.glossary > div"),
      function (x) { return !x.closest("[hidden]"); })
      .map(function (x) { return x.hasAttribute("data-flags"); });
    flag.checked = false; flag.dispatchEvent(new Event("change"));
    out.restored = visible().length;
  }
  d.dataset.probe = JSON.stringify(out);
  // follow the verdict table's last link, as a click would: its row must end up in open sections
  var chips = document.querySelectorAll("#verdict a.chip[href^='#']");
  if (chips.length) {
    var href = chips[chips.length - 1].getAttribute("href");
    location.hash = href;
    setTimeout(function () {
      var closed = 0, row = document.getElementById(href.slice(1));
      for (var x = row ? row.closest("details") : null; x; x = x.parentElement.closest("details")) {
        if (!x.open) { closed++; }
      }
      d.dataset.linkFollowed = row ? href + " closed=" + closed : href + " missing";
    }, 200);
  }
});
"""


def probe(chromium: str, html: str, tmp_path: Path, name: str) -> tuple[dict[str, Any], str, list[str]]:
    """PROBE's findings on a copy of ``html`` (1280 px wide), the DOM and the console lines."""
    page = tmp_path / f"{name}.probe.html"
    page.write_text(_with_measurement(html, PROBE), encoding="utf-8")
    dom, console = _dump_dom(chromium, page, tmp_path / f"profile-{name}", "--window-size=1280,900")
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found is not None, "the probe did not run"
    return json.loads(html_lib.unescape(found.group(1))), dom, console


def test_banner_glossary_and_table_filter_in_chromium(chromium: str, tmp_path: Path) -> None:
    current, base = sample_with_regressions()
    current.glossary = {"E_inv": {"sentence": "How often a paraphrase changes the model's choice.",
                                  "direction": "lower", "unit": "share of items", "paper": "LGIP",
                                  "equation": "Eq. 2"}}
    found, dom, console = probe(chromium, render_html(current, base), tmp_path, "failing")
    assert console == []
    assert re.search(r'<div id="ship" class="banner do-not-ship"[^>]*>\s*'
                     r'<span class="banner-label">DO NOT SHIP</span>\s*'
                     r'<span class="banner-counts">3 failing checks · 1 regression', dom)
    assert dom.index('id="ship"') < dom.index('id="verdict"')  # the headline, above the per-model table
    assert "How often a paraphrase changes the model's choice." in dom  # the glossary line
    assert 'title="How often a paraphrase' in dom  # and the metric name's tooltip
    # the filter: shown (script ran), a word keeps only rows holding it, "flagged" only flagged rows
    assert found["barShown"] and found["all"] > 10 and found["word"] == "E_inv"
    assert 0 < len(found["wordRows"]) < found["all"] and all(found["wordRows"])
    assert found["count"] == f"{len(found['wordRows'])} of {found['all']} rows shown"
    assert 0 < len(found["flagged"]) < found["all"] and all(found["flagged"])
    assert 0 < len(found["extrasShown"]) < found["extras"] and all(found["extrasShown"])  # unflagged: hidden
    assert found["restored"] == found["all"]


def test_a_link_into_a_folded_suite_opens_it_in_chromium(chromium: str, tmp_path: Path) -> None:
    straddles = MetricResult("s", "s.py::test_a", "acc", 0.52, model="m", ci=(0.47, 0.57), n=100,
                             threshold=0.5, op=">=", passed=True)  # an inconclusive pass: its suite folds
    html = render_html(Scorecard(tests=[TestRecord(straddles.test, "s", results=[straddles])]))
    assert re.search(r'<details class="suite" id="[^"]+">', html)  # folded as served
    _, dom, console = probe(chromium, html, tmp_path, "folded")
    assert console == []
    followed = re.search(r'data-link-followed="([^"]*)"', dom)
    assert followed is not None and followed.group(1).endswith(" closed=0"), followed
