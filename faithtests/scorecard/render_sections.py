"""One suite's section of the scorecard: metric tables, plots, invalid inputs, tests and exemplars.

Rules the page keeps (issue 17):

* every failed check is in the suite's main table: a failing slice (``AB_accuracy[orig]``) is shown
  there as well as under "Slice breakdowns";
* a test's own plot is titled with its dataset and subtitled with its parametrised test, and shows the
  threshold of the metric it plots; the automatic charts put one metric on one axis, with each model's
  own threshold on its bars, so metrics of different thresholds or directions never share an axis;
* exemplars of a passing test are "hardest items", not failures, and a card identical to one shown
  earlier on the page is counted, not repeated;
* invalid-input kinds that counted zero everywhere collapse into one line.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace

from markupsafe import Markup

from faithtests.scorecard.baseline import MetricDelta
from faithtests.scorecard.model import Exemplar, InvalidCount, MetricResult, Op, Plot, Series, TestRecord
from faithtests.scorecard.plots import ThresholdLine, render_plot
from faithtests.scorecard.render_views import (
    Column,
    Key,
    Row,
    build_rows,
    fmt,
    metric_label,
    row_anchor,
    row_labels,
    slug,
    strip_file,
)

_Sig = tuple[str, Op, float]  # (column label, op, threshold) of one bar series
_DATA_URI = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}")


@dataclass
class ExemplarView:
    reason: str
    column: str
    texts: dict[str, str]
    scores: dict[str, str]
    images: list[tuple[str, str]]  # (data URI, alt)
    image_notes: list[str]


@dataclass
class ExemplarGroup:
    test: str
    failed: bool  # the test failed: these are failure exemplars; else the hardest items of a pass
    shown: list[ExemplarView]
    total: int  # distinct cards of this test not shown earlier on the page
    repeated: int = 0  # cards identical to ones shown under an earlier test
    repeated_from: list[str] = field(default_factory=list)


@dataclass
class SuiteView:
    name: str
    anchor: str
    columns: list[Column]
    rows: list[Row]
    slice_groups: list[tuple[str, list[Row]]]
    plots: list[Markup]
    invalid: list[tuple[str, str, InvalidCount]]  # (test, column label, count): the non-zero ones
    invalid_zero: list[str]  # "missing image (6 tests)": kinds that counted zero everywhere
    tests: list[TestRecord]
    exemplars: list[ExemplarGroup]
    checks_passed: int = 0
    checks_insufficient: int = 0
    checks_failed: int = 0
    checks_inconclusive: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    anchors: dict[Key, str] = field(default_factory=dict)  # result key -> id of its main-table row


def _delta_sym(metric: str) -> str:
    return "Δ" + metric[len("Delta_"):] if metric.startswith("Delta_") else metric


def _plot_thresholds(plot: Plot, checked: list[MetricResult]) -> list[ThresholdLine]:
    """Thresholds of the test's checks on the metric the plot shows: a series named after the metric
    (``Δlex`` for ``Delta_lex``) gets its own; a metric named in the title or y label, the whole plot."""
    words = set(re.findall(r"[\wΔ]+", f"{plot.title} {plot.y_label}"))
    names = {s.name for s in plot.series}
    out: dict[tuple[float, str, str | None], ThresholdLine] = {}
    for r in checked:
        assert r.threshold is not None and r.op is not None
        series = next((n for n in (r.metric, _delta_sym(r.metric)) if n in names), None)
        if series is not None or r.metric in words or _delta_sym(r.metric) in words:
            out.setdefault((r.threshold, r.op, series), ThresholdLine(r.threshold, r.op, series))
    return list(out.values())[:4]


def _test_plots(t: TestRecord) -> list[Markup]:
    checked = [r for r in t.results if r.threshold is not None and r.op is not None]
    dataset = str(getattr(t, "dataset", "") or "")
    out = []
    for p in t.plots:
        titled = replace(p, title=f"{p.title} · {dataset}") if dataset and dataset not in p.title else p
        out.append(Markup(render_plot(titled, subtitle=strip_file(t.test),
                                      thresholds=_plot_thresholds(p, checked))))
    return out


_Cat = tuple[str, str, str]  # (metric, test label, slice or "")
_Chart = tuple[str, bool, tuple[_Sig, ...]]  # (metric, higher is better, each bar series' threshold)


def _charts(chosen: list[MetricResult], labels: dict[str, str]
            ) -> tuple[dict[_Cat, dict[Column, MetricResult]], dict[_Chart, list[tuple[str, str]]]]:
    """The results by bar group, and the bar groups (test, slice) of each chart: one chart per metric,
    direction and set of per-model thresholds."""
    by_cat: dict[_Cat, dict[Column, MetricResult]] = defaultdict(dict)
    for r in chosen:
        by_cat[(r.metric, labels[r.test], r.slice or "")][Column(r.model, r.variant)] = r
    charts: dict[_Chart, list[tuple[str, str]]] = defaultdict(list)
    for (metric, test, sl), cols in sorted(by_cat.items()):
        sig = tuple(sorted((c.label, r.op, r.threshold) for c, r in cols.items()
                           if r.op is not None and r.threshold is not None))
        hib = next(iter(cols.values())).higher_is_better
        charts[(metric, hib, sig)].append((test, sl))
    return by_cat, charts


def _bar_series(col: Column, names: list[float | str], rs: list[MetricResult | None]) -> Series:
    """One model's bars (value and CI, NaN where it has no result) over the chart's bar groups."""
    return Series(col.label, names,
                  [math.nan if r is None or r.value is None else r.value for r in rs],
                  [math.nan if r is None or r.ci is None else r.ci[0] for r in rs],
                  [math.nan if r is None or r.ci is None else r.ci[1] for r in rs])


def _auto_chart(suite: str, chart: _Chart, cats: list[tuple[str, str]],
                by_cat: dict[_Cat, dict[Column, MetricResult]], columns: list[Column], kind: str) -> Markup:
    metric, hib, sig = chart
    used = [c for c in columns if any(c in by_cat[(metric, t, s)] for t, s in cats)]
    one_test = len({t for t, _ in cats}) == 1  # then the slice alone names the bar group
    names: list[float | str] = [
        (s or "overall") if one_test else metric_label(t.split("::")[-1], s or None) for t, s in cats]
    series = [_bar_series(col, names, [by_cat[(metric, t, s)].get(col) for t, s in cats]) for col in used]
    lines = [ThresholdLine(th, op, label) for label, op, th in sig]
    direction = "higher is better" if hib else "lower is better"
    x_label = f"slice of {cats[0][0].split('::')[-1]}" if one_test else "test[slice]"
    plot = Plot(f"{suite}: {metric} per model ({direction})", "bar", series, x_label=x_label,
                y_label=metric)
    note = f"{kind} metric; black dash: each model's threshold" if lines else f"{kind} metric"
    return Markup(render_plot(plot, subtitle=note, thresholds=lines))


def _auto_plots(suite: str, results: list[MetricResult], columns: list[Column],
                labels: dict[str, str]) -> list[Markup]:
    """One bar chart per checked metric (per unchecked metric when nothing is checked): categories are
    the tests (and slices), bars the models, each bar with its own threshold. Categories whose
    thresholds differ for some model get a chart of their own, so a series never has two thresholds."""
    checked = [r for r in results if r.threshold is not None and r.op is not None]
    by_cat, charts = _charts(checked or [r for r in results if r.slice is None], labels)
    kind = "checked" if checked else "recorded"
    return [_auto_chart(suite, chart, cats, by_cat, columns, kind) for chart, cats in charts.items()]


def _image(uri: str | None, alt: str, max_chars: int, notes: list[str]) -> tuple[str, str] | None:
    if uri is None:
        return None
    if len(uri) > max_chars:
        notes.append(f"{alt}: thumbnail of {len(uri) // 1024} KiB left out (over {max_chars // 1024} KiB)")
        return None
    if not _DATA_URI.fullmatch(uri):
        notes.append(f"{alt}: not an inline image (left out to keep the page offline): {uri[:80]}")
        return None
    return uri, alt


def _exemplar_view(e: Exemplar, max_chars: int) -> ExemplarView:
    notes: list[str] = []
    imgs = [
        im
        for im in (_image(e.image, "image", max_chars, notes), _image(e.image_b, "image B", max_chars, notes))
        if im is not None
    ]
    return ExemplarView(e.reason, Column(e.model, e.variant).label, dict(e.texts),
                        {k: fmt(v) for k, v in e.scores.items()}, imgs, notes)


def exemplar_groups(tests: list[TestRecord], seen: dict[str, str], max_exemplars: int,
                    max_image_chars: int) -> list[ExemplarGroup]:
    """Exemplar groups of a suite's tests; ``seen`` (card JSON -> test that showed it) spans the page."""
    out = []
    for t in tests:
        if not t.exemplars:
            continue
        fresh: list[Exemplar] = []
        repeated_from: dict[str, None] = {}
        for e in t.exemplars:
            key = json.dumps(e.to_json(), sort_keys=True)
            if key in seen:
                repeated_from[seen[key]] = None
            else:
                seen[key] = strip_file(t.test)
                fresh.append(e)
        out.append(ExemplarGroup(
            strip_file(t.test), t.outcome in ("failed", "error"),
            [_exemplar_view(e, max_image_chars) for e in fresh[:max_exemplars]], len(fresh),
            len(t.exemplars) - len(fresh), [k for k in repeated_from if k != strip_file(t.test)]))
    return out


def _invalid(tests: list[TestRecord]) -> tuple[list[tuple[str, str, InvalidCount]], list[str]]:
    nonzero = [(strip_file(t.test), Column(i.model, i.variant).label, i)
               for t in tests for i in t.invalid if i.count]
    zero: dict[str, set[str]] = defaultdict(set)
    for t in tests:
        for i in t.invalid:
            if not i.count:
                zero[i.kind].add(t.test)
    return nonzero, [f"{kind} ({len(ids)} test{'s' if len(ids) > 1 else ''})"
                     for kind, ids in sorted(zero.items())]


def _tables(name: str, results: list[MetricResult], columns: list[Column], labels: dict[str, str],
            deltas: dict[Key, MetricDelta] | None) -> tuple[list[Row], list[tuple[str, list[Row]]]]:
    """The main table's rows (unsliced results and every failing slice) and the slice groups."""
    sliced = build_rows(name, [r for r in results if r.slice is not None], columns, labels, deltas)
    surfaced = [replace(r, anchor=r.anchor + "-m") for r in sliced if r.failed]  # failing slices, in main
    rows = build_rows(name, [r for r in results if r.slice is None], columns, labels, deltas)
    rows = sorted([*rows, *surfaced], key=lambda r: (r.test, r.metric, r.slice or ""))
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in sliced:
        groups[f"{row.test} · {row.metric}"].append(row)
    return rows, sorted(groups.items())


def _anchors(name: str, results: list[MetricResult], labels: dict[str, str], rows: list[Row]
             ) -> dict[Key, str]:
    """Result key -> id of its row: the main table's copy of a failing slice when there is one."""
    in_main = {r.anchor for r in rows}
    anchors = {}
    for r in results:
        a = row_anchor(name, labels[r.test], r.metric, r.slice or "")
        anchors[r.key] = a + "-m" if a + "-m" in in_main else a
    return anchors


def _outcomes(tests: list[TestRecord]) -> dict[str, int]:
    outcomes: dict[str, int] = defaultdict(int)
    for t in tests:
        outcomes[t.outcome] += 1
    return dict(outcomes)


def suite_view(name: str, tests: list[TestRecord], deltas: dict[Key, MetricDelta] | None,
               seen: dict[str, str], max_exemplars: int, max_image_chars: int) -> SuiteView:
    results = sorted((r for t in tests for r in t.results), key=lambda r: r.key)
    columns = sorted(
        {Column(r.model, r.variant) for r in results}, key=lambda c: (c.model, c.variant != "base", c.variant)
    )
    labels = row_labels(results)
    rows, slice_groups = _tables(name, results, columns, labels, deltas)
    plots = [p for t in tests for p in _test_plots(t)] + _auto_plots(name, results, columns, labels)
    invalid, invalid_zero = _invalid(tests)
    return SuiteView(
        name=name,
        anchor=slug("s-", name),
        columns=columns,
        rows=rows,
        slice_groups=slice_groups,
        plots=plots,
        invalid=invalid,
        invalid_zero=invalid_zero,
        tests=tests,
        exemplars=exemplar_groups(tests, seen, max_exemplars, max_image_chars),
        checks_passed=sum(r.passed is True for r in results),
        checks_failed=sum(r.verdict == "fail" for r in results),
        checks_insufficient=sum(r.verdict == "insufficient" for r in results),
        checks_inconclusive=sum(bool(r.inconclusive) for r in results),
        outcomes=_outcomes(tests),
        anchors=_anchors(name, results, labels, rows),
    )
