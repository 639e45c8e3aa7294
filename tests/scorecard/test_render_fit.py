"""Pages that fit (issue 49 item 4), without a browser: variants without checks fold into their model's
verdict row, near-identical exemplar cards are shown once with ×N, and a failing suite opens on its
failing checks and their exemplars while passing rows, plots, glossary, hardest items and the
fingerprint fold; plots and glossary lines carry the flags the "only flagged" filter keeps.
(The Chromium side, page heights and the filter driven in a browser: test_render_screenshots.py.)"""

from __future__ import annotations

import re

from _sample_scorecard import sample_with_regressions
from test_render import suite_html

from faithtests.reports.html import render_html
from faithtests.reports.render_exemplars import group_similar, near_identical
from faithtests.reports.render_verdict import Verdict, fold_unchecked
from faithtests.scorecard.model import Exemplar, MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard


def _result(model: str, variant: str = "base", passed: bool | None = True) -> MetricResult:
    checked = passed is not None
    return MetricResult("s", f"s.py::test_a[{model}-{variant}]", "acc", 0.9 if passed is not False else 0.1,
                        model=model, variant=variant, n=100, threshold=0.5 if checked else None,
                        op=">=" if checked else None, passed=passed)


def test_variants_without_checks_fold_into_their_models_row() -> None:
    rows = [Verdict("m", "v1", passed=1, model="m"), Verdict("m · cecs", "v2", model="m", variant="cecs"),
            Verdict("m · sage", "v3", model="m", variant="sage"),
            Verdict("n · x", "v4", model="n", variant="x"), Verdict("n · y", "v5", model="n", variant="y")]
    folded = fold_unchecked(rows)
    assert [(v.column, v.unchecked) for v in folded] == [("m", ["cecs", "sage"]), ("n · x", ["y"])]
    recs = [TestRecord(r.test, "s", results=[r]) for r in
            (_result("m"), *(_result("m", v, None) for v in ("cecs", "sage", "pgla")))]
    html = render_html(Scorecard(tests=recs))
    assert "NO CHECKS" not in html and html.count('<tr id="v-') == 1
    assert "+3 variants recorded without checks (cecs, pgla, sage)" in html


def _card(description: str, answer: str, reason: str = "followed the description (constrained)") -> Exemplar:
    return Exemplar(reason, texts={"description": description, "y_txt": answer, "answer": answer}, model="m")


def test_near_identical_exemplars_are_grouped_with_a_count() -> None:
    a = _card("one small green circle on the left and one large purple circle in the center on a warm "
              "background", "disgust")
    b = _card("one small green circle on the left and one large purple circle in the center on a cool "
              "background", "disgust")
    c = _card("three large red crosses at the top", "awe")
    other_outcome = _card(a.texts["description"], "disgust", reason="followed the image (constrained)")
    assert near_identical(a, b) and not near_identical(a, c) and not near_identical(a, other_outcome)
    numbers_only = Exemplar("strict-correct, Δlex = 0.2634", texts={"c+": "x y z"}, model="m")
    other_number = Exemplar("strict-correct, Δlex = 0.25", texts={"c+": "x y z"}, model="m")
    assert near_identical(numbers_only, other_number)
    assert [len(g) for g in group_similar([a, c, b, other_outcome])] == [2, 1, 1]
    test = "s.py::test_conflict[m]"
    rec = TestRecord(test, "s", outcome="failed", exemplars=[a, c, b],
                     results=[MetricResult("s", test, "acc", 0.1, model="m", threshold=0.5, op=">=",
                                           passed=False)])
    html = render_html(Scorecard(tests=[rec]))
    assert html.count('<span class="times"') == 1 and ">×2</span>" in html
    assert '<details class="similar"><summary>the 1 other</summary>' in html
    assert html.count('<div class="exemplar failure">') == 2  # two cards shown, the third one click away


def test_a_failing_suite_opens_on_its_failures_and_folds_the_rest() -> None:
    current, base = sample_with_regressions()
    html = render_html(current, base)
    lgip = suite_html(html, "lgip")
    failing = re.search(r'<details class="part" open><summary><h3>Failing checks \((\d+)\)</h3>'
                        r'(.*?)</details>', lgip, re.S)
    assert failing is not None and int(failing.group(1)) == failing.group(2).count("<tr id=")
    rows = failing.group(2).split("<tr id=")[1:]
    assert rows and all('<span class="badge fail">FAIL</span>' in r for r in rows)  # a failing cell each
    assert re.search(r'<details class="part" open><summary><h3>Failure exemplars', lgip)
    for folded in ("Other metrics", "Glossary", "Plots", "Tests", "Hardest items of passing tests"):
        assert re.search(rf'<details class="part"><summary><h3>{folded}', lgip), folded
    assert '<details class="suite env" id="fingerprint">' in html  # folded too
    # what "only flagged" keeps: the failing test's exemplars, plots and glossary lines of flagged metrics
    assert '<div class="exemplar-group" data-flags="fail">' in lgip and '<div class="exemplar-group">' in lgip
    assert re.search(r'<div class="plot-box" data-flags="[a-z ]*fail', lgip)
    assert '<div class="plot-box">' in html  # a plot of passing rows: hidden by the filter
    assert re.search(r'<dl class="glossary"><div data-flags="[^"]+"><dt id="[^"]+">E_inv</dt>', lgip)
