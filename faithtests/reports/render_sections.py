"""One suite's section of the scorecard: metric tables, plots, invalid inputs, tests and exemplars.

Rules the page keeps (issue 17):

* every failed check is in the suite's main table: a failing slice (``AB_accuracy[orig]``) is shown
  there as well as under "Slice breakdowns";
* a test's own plot is titled with its dataset and subtitled with its parametrised test, and shows the
  threshold of the metric it plots; the automatic charts put one metric on one axis as compact dot rows
  (zero always in view; each row's own threshold, its verdict's colour and, with a baseline, the
  baseline's value), so metrics of different thresholds or directions never share an axis;
* exemplars of a passing test are "hardest items", not failures, and a card identical to one shown
  earlier on the page is counted, not repeated; near-identical cards show once with ×N
  (:mod:`faithtests.reports.render_exemplars`);
* each plot and glossary line carries its results' flags, so "only flagged" hides those of unflagged
  rows;
* invalid-input kinds that counted zero everywhere collapse into one line.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from markupsafe import Markup

from faithtests.reports.plot_dots import DotRow, render_dots
from faithtests.reports.plots import ThresholdLine, render_plot
from faithtests.reports.render_exemplars import ExemplarGroup, exemplar_groups
from faithtests.reports.render_views import (
    Column,
    Key,
    Row,
    build_rows,
    metric_label,
    row_anchor,
    row_labels,
    slug,
    strip_file,
)
from faithtests.scorecard.baseline import MetricDelta
from faithtests.scorecard.glossary import term_for
from faithtests.scorecard.model import InvalidCount, MetricResult, Plot, TestRecord, test_key


@dataclass(frozen=True)
class PlotView:
    """A plot and what the table filter's "only flagged" reads: its results' flags ("" when none)."""

    svg: Markup
    flags: str = ""


def result_flags(results: list[MetricResult], broken: bool = False) -> str:
    """``fail insufficient inconclusive``, as a flagged table row says (``broken``: a test that did not
    pass, flagged "fail"); "" when none applies."""
    return " ".join(f for f, hit in (("fail", broken or any(r.verdict == "fail" for r in results)),
                                     ("insufficient", any(r.verdict == "insufficient" for r in results)),
                                     ("inconclusive", any(bool(r.inconclusive) for r in results))) if hit)


@dataclass
class SuiteView:
    name: str
    anchor: str
    columns: list[Column]
    rows: list[Row]
    slice_groups: list[tuple[str, list[Row]]]
    plots: list[PlotView]
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
    terms: list[Term] = field(default_factory=list)  # the suite's metrics with their definitions
    definitions: dict[str, str] = field(default_factory=dict)  # metric -> one-line definition ("" none)

    @property
    def flagged(self) -> bool:
        """A failing check or a test that failed or errored: the section opens by default. Any other
        suite (insufficient and inconclusive checks included: the verdict table links them, and a link
        opens the section) folds to its summary line, which keeps the page short."""
        return bool(self.checks_failed or self.outcomes.get("failed") or self.outcomes.get("error"))

    @property
    def failing_rows(self) -> list[Row]:
        """The main table's failing rows: open in a flagged suite; the other rows fold below them."""
        return [r for r in self.rows if r.failed]

    @property
    def other_rows(self) -> list[Row]:
        return [r for r in self.rows if not r.failed]


@dataclass(frozen=True)
class Term:
    """A metric of the suite as its glossary line shows it (``anchor``: the line's id)."""

    metric: str
    anchor: str
    sentence: str  # "" when the scorecard's glossary has no definition for it
    detail: str  # "lower is better; share of items; AC-Bench Eq. 3"
    flags: str = ""  # its results' flags (fail, insufficient, inconclusive): the filter keeps it


def _terms(name: str, results: list[MetricResult], glossary: Mapping[str, Mapping[str, str]]
           ) -> list[Term]:
    out = []
    for metric in sorted({r.metric for r in results}):
        term = term_for(metric, glossary)
        detail = "" if term is None else "; ".join(p for p in (term.better, term.unit, term.source()) if p)
        flags = result_flags([r for r in results if r.metric == metric])
        out.append(Term(metric, slug("g-", name, metric), "" if term is None else term.sentence, detail,
                        flags))
    return out


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


def _test_plots(t: TestRecord, base: TestRecord | None) -> list[PlotView]:
    """The test's own plots, each with the baseline run's plot of the same title drawn into it."""
    checked = [r for r in t.results if r.threshold is not None and r.op is not None]
    dataset = str(getattr(t, "dataset", "") or "")
    base_plots = {p.title: p for p in base.plots} if base is not None else {}
    out = []
    for p in t.plots:
        titled = replace(p, title=f"{p.title} · {dataset}") if dataset and dataset not in p.title else p
        bp = base_plots.get(p.title)
        sub = strip_file(t.test) + (" · dashed/◇: baseline" if bp is not None else "")
        out.append(PlotView(Markup(render_plot(titled, subtitle=sub, thresholds=_plot_thresholds(p, checked),
                                               baseline=bp)),
                            result_flags(t.results, t.outcome in ("failed", "error"))))
    return out


_Cat = tuple[str, str, str]  # (metric, test label, slice or "")
_Chart = tuple[str, bool]  # (metric, higher is better): each row carries its own threshold


def _charts(chosen: list[MetricResult], labels: dict[str, str]
            ) -> tuple[dict[_Cat, dict[Column, MetricResult]], dict[_Chart, list[tuple[str, str]]]]:
    """The results by group, and the groups (test, slice) of each chart: one chart per metric and
    direction."""
    by_cat: dict[_Cat, dict[Column, MetricResult]] = defaultdict(dict)
    for r in chosen:
        by_cat[(r.metric, labels[r.test], r.slice or "")][Column(r.model, r.variant)] = r
    charts: dict[_Chart, list[tuple[str, str]]] = defaultdict(list)
    for (metric, test, sl), cols in sorted(by_cat.items()):
        hib = next(iter(cols.values())).higher_is_better
        charts[(metric, hib)].append((test, sl))
    return by_cat, charts


def _dot_row(label: str, r: MetricResult, deltas: dict[Key, MetricDelta] | None) -> DotRow:
    """One result as a dot row: value, CI, its own threshold, the baseline's value, its verdict."""
    d = deltas.get(r.key) if deltas else None
    th = ThresholdLine(r.threshold, r.op, label) if r.threshold is not None and r.op is not None else None
    return DotRow(label, math.nan if r.value is None else r.value,
                  math.nan if r.ci is None else r.ci[0], math.nan if r.ci is None else r.ci[1], th,
                  math.nan if d is None or d.baseline is None else d.baseline, r.verdict or "none")


def _auto_chart(suite: str, chart: _Chart, cats: list[tuple[str, str]],
                by_cat: dict[_Cat, dict[Column, MetricResult]], columns: list[Column], kind: str,
                deltas: dict[Key, MetricDelta] | None) -> PlotView:
    """One metric's rows, a row per (test[slice], model): a bar per value would hide zero and waste space."""
    metric, hib = chart
    used = [c for c in columns if any(c in by_cat[(metric, t, s)] for t, s in cats)]
    one_test = len({t for t, _ in cats}) == 1  # then the slice alone names the group
    rows = []
    for t, s in cats:
        group = (s or "overall") if one_test else metric_label(t.split("::")[-1], s or None)
        for col in used:
            r = by_cat[(metric, t, s)].get(col)
            if r is not None:
                name = " · ".join([*([group] if len(cats) > 1 else []), *([col.label] if len(used) > 1 or
                                                                           len(cats) == 1 else [])])
                rows.append(_dot_row(name, r, deltas))
    direction = "higher is better" if hib else "lower is better"
    note = f"{kind} metric; dot: value (verdict colour), whisker: 95% CI"
    if deltas is not None:
        note += "; diamond: baseline"
    shown = [r for t, s in cats for r in by_cat[(metric, t, s)].values()]
    return PlotView(Markup(render_dots(f"{suite}: {metric} per model ({direction})", rows, subtitle=note,
                                       x_label=metric)), result_flags(shown))


def _auto_plots(suite: str, results: list[MetricResult], columns: list[Column],
                labels: dict[str, str], deltas: dict[Key, MetricDelta] | None) -> list[PlotView]:
    """One dot/row chart per checked metric (per unchecked metric when nothing is checked): a row per
    test (and slice) and model, each with its own threshold tick and, with a baseline, its value."""
    checked = [r for r in results if r.threshold is not None and r.op is not None]
    by_cat, charts = _charts(checked or [r for r in results if r.slice is None], labels)
    kind = "checked" if checked else "recorded"
    return [_auto_chart(suite, chart, cats, by_cat, columns, kind, deltas) for chart, cats in charts.items()]


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
               seen: dict[str, str], max_exemplars: int, max_image_chars: int,
               glossary: Mapping[str, Mapping[str, str]] | None = None,
               baseline_tests: Mapping[str, TestRecord] | None = None) -> SuiteView:
    """One suite's section; ``baseline_tests`` (the baseline's tests by test key) puts the baseline's
    values into the plots."""
    results = sorted((r for t in tests for r in t.results), key=lambda r: r.key)
    columns = sorted(
        {Column(r.model, r.variant) for r in results}, key=lambda c: (c.model, c.variant != "base", c.variant)
    )
    labels = row_labels(results)
    rows, slice_groups = _tables(name, results, columns, labels, deltas)
    base = baseline_tests or {}
    plots = [p for t in tests for p in _test_plots(t, base.get(test_key(t.test)))]
    plots += _auto_plots(name, results, columns, labels, deltas)
    invalid, invalid_zero = _invalid(tests)
    terms = _terms(name, results, glossary or {})
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
        terms=terms,
        definitions={t.metric: f"{t.sentence} ({t.detail})" if t.detail else t.sentence for t in terms},
    )
