"""Scorecard -> one self-contained HTML page (jinja2 templates shipped as package data).

The page works offline: CSS and the one small script are inline and pinned by hash in a
Content-Security-Policy that also forbids every network fetch (``default-src 'none'``, images only
from ``data:``), so a stray external reference fails loudly in a browser instead of leaking.
Thumbnails are the data-URI images the recorder already shrank; anything that is not a data URI of
an image is shown as text, never as a ``src``.

Layout per suite: a metric table pivoted so each model/variant is a column, slice breakdowns, plots
(the test's own plus an automatic bar chart of the suite's checked metrics), invalid-input counts,
test outcomes and failure exemplars (capped per test, with a visible note when capped).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import jinja2
from markupsafe import Markup

from faithtests.scorecard.baseline import MetricDelta, Tolerance, compare
from faithtests.scorecard.model import Exemplar, InvalidCount, MetricResult, Plot, Series, TestRecord
from faithtests.scorecard.plots import render_plot
from faithtests.scorecard.scorecard import Scorecard

DEFAULT_MAX_EXEMPLARS = 8
DEFAULT_MAX_IMAGE_CHARS = 400_000  # a data URI above this is not a thumbnail; it is left out, with a note
_DATA_URI = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}")


@dataclass(frozen=True, order=True)
class Column:
    model: str
    variant: str

    @property
    def label(self) -> str:
        name = self.model or "(no model)"
        return name if self.variant == "base" else f"{name} · {self.variant}"


@dataclass
class Cell:
    value: str
    ci: str = ""
    n: str = ""
    threshold: str = ""
    status: str = "none"  # pass | fail | none
    inconclusive: bool = False  # the CI straddles the threshold (see MetricResult.inconclusive)
    detectable: str = ""  # ±(smallest distance from the threshold the check's n resolves)
    delta: str = ""
    delta_class: str = ""  # better | worse | same | new
    baseline_value: str = ""


@dataclass
class Row:
    anchor: str
    test: str
    metric: str
    slice: str | None
    higher_is_better: bool
    cells: list[Cell | None]


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
    shown: list[ExemplarView]
    total: int


@dataclass
class SuiteView:
    name: str
    anchor: str
    columns: list[Column]
    rows: list[Row]
    slice_groups: list[tuple[str, list[Row]]]
    plots: list[Markup]
    invalid: list[tuple[str, str, InvalidCount]]  # (test, column label, count)
    tests: list[TestRecord]
    exemplars: list[ExemplarGroup]
    checks_passed: int = 0
    checks_failed: int = 0
    checks_inconclusive: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    anchors: dict[tuple[str, str, str, str, str], str] = field(default_factory=dict)  # result key -> row id


def _fmt(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or abs(v) < 1e-3:
        return f"{v:.3g}"
    return f"{v:.4g}" if abs(v) >= 1 else f"{v:.3f}"


def _slug(prefix: str, *parts: object) -> str:
    return prefix + hashlib.sha1("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:10]


def node_function(node_id: str) -> str:
    """``suites/test_lgip.py::TestX::test_inv[clip-base]`` -> ``TestX::test_inv`` (no file, no params)."""
    name = node_id.split("::", 1)[1] if "::" in node_id else node_id
    return name.split("[", 1)[0]


def _row_labels(results: Iterable[MetricResult]) -> dict[str, str]:
    """Node id -> row label. Params are dropped so models line up as columns, unless two param sets of
    the same function would then land in one cell; those keep their params to stay distinct."""
    results = list(results)
    cells: dict[tuple[str, str, str, str, str], set[str]] = defaultdict(set)
    for r in results:
        cells[(node_function(r.test), r.metric, r.slice or "", r.model, r.variant)].add(r.test)
    ambiguous = {k[0] for k, ids in cells.items() if len(ids) > 1}
    return {
        r.test: (_strip_file(r.test) if node_function(r.test) in ambiguous else node_function(r.test))
        for r in results
    }


def _strip_file(node_id: str) -> str:
    return node_id.split("::", 1)[1] if "::" in node_id else node_id


_DELTA_CLASS = {"regression": "worse", "improvement": "better", "unchanged": "same", "new": "new"}


def _cell(r: MetricResult, d: MetricDelta | None) -> Cell:
    """One table cell; ``d`` is the baseline comparison of this result (None: no baseline given)."""
    c = Cell(value=_fmt(r.value))
    if r.ci is not None:
        c.ci = f"[{_fmt(r.ci[0])}, {_fmt(r.ci[1])}]"
    if r.n is not None:
        c.n = str(r.n)
    if r.threshold is not None and r.op is not None:
        c.threshold = f"{r.op} {_fmt(r.threshold)}" + (" (CI)" if r.gate == "ci" else "")
    c.status = "none" if r.passed is None else ("pass" if r.passed else "fail")
    c.inconclusive = bool(r.inconclusive)
    c.detectable = "" if r.detectable_diff is None else f"±{_fmt(r.detectable_diff)}"
    if d is None:
        return c
    c.delta_class = _DELTA_CLASS.get(d.status, "same")
    if d.status == "new":
        c.delta = "new"
        return c
    c.baseline_value = _fmt(d.baseline)
    c.delta = "n/a" if d.delta is None else f"{d.delta:+.3g}"
    return c


def _row_anchor(suite: str, label: str, metric: str, sl: str) -> str:
    return _slug("r-", suite, label, metric, sl)


def _rows(
    suite: str,
    results: list[MetricResult],
    columns: list[Column],
    labels: dict[str, str],
    deltas: dict[tuple[str, str, str, str, str], MetricDelta] | None,
) -> list[Row]:
    by_row: dict[tuple[str, str, str], dict[Column, MetricResult]] = defaultdict(dict)
    for r in results:
        by_row[(labels[r.test], r.metric, r.slice or "")][Column(r.model, r.variant)] = r
    rows = []
    for (test, metric, sl), cols in sorted(by_row.items()):
        first = next(iter(cols.values()))
        cells = [
            None
            if col not in cols
            else _cell(cols[col], None if deltas is None else deltas.get(cols[col].key))
            for col in columns
        ]
        rows.append(
            Row(_row_anchor(suite, test, metric, sl), test, metric, sl or None, first.higher_is_better, cells)
        )
    return rows


def _auto_plot(
    suite: str, results: list[MetricResult], columns: list[Column], labels: dict[str, str]
) -> Plot | None:
    """Bar chart of the suite's checked metrics per model/variant (all unsliced metrics if none is checked),
    so every suite shows at least one plot even when its tests supplied none."""
    unsliced = [r for r in results if r.slice is None]
    chosen = [r for r in unsliced if r.threshold is not None] or unsliced
    if not chosen:
        return None
    cats = sorted({(labels[r.test], r.metric) for r in chosen})
    index = {(labels[r.test], r.metric, Column(r.model, r.variant)): r for r in chosen}
    series = []
    for col in columns:
        ys: list[float] = []
        lo: list[float] = []
        hi: list[float] = []
        for cat in cats:
            r = index.get((*cat, col))
            ys.append(math.nan if r is None or r.value is None else r.value)
            lo.append(math.nan if r is None or r.ci is None else r.ci[0])
            hi.append(math.nan if r is None or r.ci is None else r.ci[1])
        series.append(Series(col.label, [f"{t.split('::')[-1]} · {m}" for t, m in cats], ys, lo, hi))
    kind = "checked metrics" if any(r.threshold is not None for r in chosen) else "metrics"
    return Plot(f"{suite}: {kind} per model", "bar", series, x_label="test · metric", y_label="value")


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
    return ExemplarView(
        e.reason,
        Column(e.model, e.variant).label,
        dict(e.texts),
        {k: _fmt(v) for k, v in e.scores.items()},
        imgs,
        notes,
    )


def _suite_view(
    name: str,
    tests: list[TestRecord],
    deltas: dict[Any, MetricDelta] | None,
    max_exemplars: int,
    max_image_chars: int,
) -> SuiteView:
    results = sorted((r for t in tests for r in t.results), key=lambda r: r.key)
    columns = sorted(
        {Column(r.model, r.variant) for r in results}, key=lambda c: (c.model, c.variant != "base", c.variant)
    )
    labels = _row_labels(results)
    rows = _rows(name, [r for r in results if r.slice is None], columns, labels, deltas)
    sliced = _rows(name, [r for r in results if r.slice is not None], columns, labels, deltas)
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in sliced:
        groups[f"{row.test} · {row.metric}"].append(row)
    plots = [Markup(render_plot(p)) for t in tests for p in t.plots]
    auto = _auto_plot(name, results, columns, labels)
    if auto is not None:
        plots.append(Markup(render_plot(auto)))
    invalid = [(node_function(t.test), Column(i.model, i.variant).label, i) for t in tests for i in t.invalid]
    exemplars = [
        ExemplarGroup(
            t.test,
            [_exemplar_view(e, max_image_chars) for e in t.exemplars[:max_exemplars]],
            len(t.exemplars),
        )
        for t in tests
        if t.exemplars
    ]
    outcomes: dict[str, int] = defaultdict(int)
    for t in tests:
        outcomes[t.outcome] += 1
    return SuiteView(
        name=name,
        anchor=_slug("s-", name),
        columns=columns,
        rows=rows,
        slice_groups=sorted(groups.items()),
        plots=plots,
        invalid=invalid,
        tests=tests,
        exemplars=exemplars,
        checks_passed=sum(r.passed is True for r in results),
        checks_failed=sum(r.passed is False for r in results),
        checks_inconclusive=sum(bool(r.inconclusive) for r in results),
        outcomes=dict(outcomes),
        anchors={r.key: _row_anchor(name, labels[r.test], r.metric, r.slice or "") for r in results},
    )


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out += _flatten(v, key + ".")
        else:
            out.append((key, v if isinstance(v, str) else json.dumps(v, sort_keys=True)))
    return out


def _regression_rows(
    sc: Scorecard, anchors: dict[tuple[str, str, str, str, str], str], suite_of: dict[str, str]
) -> list[dict[str, str]]:
    """The gate's regression dicts (``MetricDelta.to_json()``), linked to their row (or suite)."""
    out = []
    for reg in sc.regressions:
        test = str(reg.get("test", ""))
        key = (
            test,
            str(reg.get("model", "")),
            str(reg.get("variant", "base")),
            str(reg.get("metric", "")),
            str(reg.get("slice") or ""),
        )
        link = anchors.get(key) or (_slug("s-", suite_of[test]) if test in suite_of else "")
        hib = reg.get("higher_is_better")
        delta = reg.get("delta")
        out.append(
            {
                "link": link,
                "test": node_function(test) if test else "?",
                "metric": key[3],
                "column": Column(key[1], key[2]).label,
                "slice": key[4],
                "baseline": _fmt(_float(reg.get("baseline"))),
                "current": _fmt(_float(reg.get("current"))),
                "delta": "n/a" if _float(delta) is None else f"{_float(delta):+.3g}",
                "better": "" if hib is None else ("higher" if hib else "lower"),
            }
        )
    return out


def _float(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("faithtests.scorecard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def render_html(
    scorecard: Scorecard,
    baseline: Scorecard | None = None,
    *,
    max_exemplars: int = DEFAULT_MAX_EXEMPLARS,
    max_image_chars: int = DEFAULT_MAX_IMAGE_CHARS,
    title: str = "faithtests scorecard",
    baseline_label: str | None = None,
    tolerance: Tolerance | str | float = 0.0,
) -> str:
    """The scorecard as one offline HTML page; with ``baseline``, every cell shows its delta.

    ``max_exemplars`` caps the exemplars shown per test (the page says when it capped);
    ``baseline_label`` names the baseline in the header (default: the scorecard's own ``baseline``);
    ``tolerance`` is the gate's (see :mod:`faithtests.scorecard.baseline`), so a cell is coloured as a
    regression exactly when the gate would call it one."""
    if max_exemplars < 0:
        raise ValueError(f"max_exemplars must be >= 0, got {max_exemplars}")
    sc = scorecard.sorted()
    comparison = compare(sc, baseline, tolerance) if baseline is not None else None
    deltas = comparison.by_key() if comparison is not None else None
    by_suite: dict[str, list[TestRecord]] = defaultdict(list)
    for t in sc.tests:
        by_suite[t.suite].append(t)
    suites = [
        _suite_view(name, tests, deltas, max_exemplars, max_image_chars)
        for name, tests in sorted(by_suite.items())
    ]
    anchors = {k: v for s in suites for k, v in s.anchors.items()}
    suite_of = {t.test: t.suite for t in sc.tests}
    missing = comparison.missing if comparison is not None else []
    outcomes: dict[str, int] = defaultdict(int)
    for t in sc.tests:
        outcomes[t.outcome] += 1
    env = _environment()
    css = env.get_template("style.css.j2").render()
    script = env.get_template("script.js.j2").render()
    csp = (
        f"default-src 'none'; img-src data:; style-src '{_csp_hash(css)}'; "
        f"script-src '{_csp_hash(script)}'; base-uri 'none'; form-action 'none'"
    )
    capped = sum(g.total > len(g.shown) for s in suites for g in s.exemplars)
    return env.get_template("scorecard.html.j2").render(
        title=title,
        sc=sc,
        suites=suites,
        css=Markup(css),
        script=Markup(script),
        csp=csp,
        outcomes=dict(outcomes),
        checks_passed=sum(s.checks_passed for s in suites),
        checks_failed=sum(s.checks_failed for s in suites),
        checks_inconclusive=sum(s.checks_inconclusive for s in suites),
        invalid_total=sum(i.count for s in suites for _, _, i in s.invalid),
        regressions=_regression_rows(sc, anchors, suite_of),
        baseline_label=baseline_label or sc.baseline or ("(given)" if baseline is not None else None),
        has_baseline=baseline is not None,
        missing=missing,
        max_exemplars=max_exemplars,
        capped=capped,
        fingerprint=_flatten(sc.fingerprint),
        fmt=_fmt,
        node_function=node_function,
    )
