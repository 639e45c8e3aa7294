"""Scorecard -> one self-contained HTML page (jinja2 templates shipped as package data).

The page works offline: CSS and the one small script are inline and pinned by hash in a
Content-Security-Policy that also forbids every network fetch (``default-src 'none'``, images only
from ``data:``), so a stray external reference fails loudly in a browser instead of leaking.
Thumbnails are the data-URI images the recorder already shrank; anything that is not a data URI of
an image is shown as text, never as a ``src``.

The first screen answers "ship or not": one banner (SHIP / DO NOT SHIP / INSUFFICIENT DATA, with the
count of failing checks and regressions), then one verdict row per model/variant naming (and linking)
every failed, insufficient and inconclusive check and regression
(:mod:`faithtests.reports.render_verdict`; variants without checks fold into their model's row), a
table filter, then the run's counts, with unusable inputs a check reads counted once per dataset and
the counts no check reads folded apart as coverage notes (:mod:`faithtests.reports.render_coverage`).
Then one collapsible section per suite (:mod:`faithtests.reports.render_sections`), open only when a
check or test in it failed, and then on its failing checks and failure exemplars alone: the other
rows of the metric table (pivoted so each model/variant is a column, each metric name carrying its
glossary definition), the glossary, slice breakdowns, plots (with the baseline's values when there is
one), invalid-input counts, test outcomes and the hardest items of passing tests fold, as does the
fingerprint (issue 49: a failing run's page fits in 5 screens). Sections fold with ``<details>``; the
filter and the image check are the one inline script, pinned by hash, so the CSP stays strict.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import defaultdict
from typing import Any

import jinja2
from markupsafe import Markup

from faithtests.reports.render_coverage import split_coverage
from faithtests.reports.render_sections import SuiteView, suite_view
from faithtests.reports.render_verdict import (
    fold_unchecked,
    regression_key,
    regression_rows,
    ship_banner,
    verdicts,
)
from faithtests.reports.render_views import Key, delta_index, fmt, node_function, slug
from faithtests.scorecard.baseline import MetricDelta, Tolerance, compare
from faithtests.scorecard.family import run_control
from faithtests.scorecard.model import GateMode, TestRecord, test_key
from faithtests.scorecard.scorecard import Scorecard

__all__ = ["DEFAULT_MAX_EXEMPLARS", "DEFAULT_MAX_IMAGE_CHARS", "node_function", "render_html"]

DEFAULT_MAX_EXEMPLARS = 8
DEFAULT_MAX_IMAGE_CHARS = 400_000  # a data URI above this is not a thumbnail; it is left out, with a note


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out += _flatten(v, key + ".")
        else:
            out.append((key, v if isinstance(v, str) else json.dumps(v, sort_keys=True)))
    return out


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("faithtests.reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _assets(env: jinja2.Environment) -> dict[str, Any]:
    """The inline CSS and script, and the Content-Security-Policy that pins exactly them."""
    css = env.get_template("style.css.j2").render()
    script = env.get_template("script.js.j2").render()
    csp = (
        f"default-src 'none'; img-src data:; style-src '{_csp_hash(css)}'; "
        f"script-src '{_csp_hash(script)}'; base-uri 'none'; form-action 'none'"
    )
    return {"css": Markup(css), "script": Markup(script), "csp": csp}


def _counts(sc: Scorecard, suites: list[SuiteView]) -> dict[str, Any]:
    """The run's counts for the first screen: test outcomes, checks by verdict, unusable inputs."""
    outcomes: dict[str, int] = defaultdict(int)
    for t in sc.tests:
        outcomes[t.outcome] += 1
    coverage = split_coverage(sc)
    return {
        "outcomes": dict(outcomes),
        "checks_passed": sum(s.checks_passed for s in suites),
        "checks_failed": sum(s.checks_failed for s in suites),
        "checks_insufficient": sum(s.checks_insufficient for s in suites),
        "checks_inconclusive": sum(s.checks_inconclusive for s in suites),
        "invalid_total": coverage.total,
        "coverage": coverage.lines,
        "notes_total": coverage.notes_total,
        "notes": coverage.notes,
    }


def _suites(sc: Scorecard, deltas: dict[Key, MetricDelta] | None, max_exemplars: int,
            max_image_chars: int, baseline: Scorecard | None) -> list[SuiteView]:
    by_suite: dict[str, list[TestRecord]] = defaultdict(list)
    for t in sc.tests:
        by_suite[t.suite].append(t)
    seen: dict[str, str] = {}  # exemplar cards already shown, page-wide
    base = {test_key(t.test): t for t in baseline.tests} if baseline is not None else None
    return [
        suite_view(name, tests, deltas, seen, max_exemplars, max_image_chars, sc.glossary, base)
        for name, tests in sorted(by_suite.items())
    ]


def render_html(
    scorecard: Scorecard,
    baseline: Scorecard | None = None,
    *,
    max_exemplars: int = DEFAULT_MAX_EXEMPLARS,
    max_image_chars: int = DEFAULT_MAX_IMAGE_CHARS,
    title: str = "faithtests scorecard",
    baseline_label: str | None = None,
    tolerance: Tolerance | str | float = 0.0,
    gate: GateMode = "point",
) -> str:
    """The scorecard as one offline HTML page; with ``baseline``, every cell shows its delta.

    ``max_exemplars`` caps the exemplars shown per test (the page says when it capped);
    ``baseline_label`` names the baseline in the header (default: the scorecard's own ``baseline``);
    ``tolerance`` is the gate's (see :mod:`faithtests.scorecard.baseline`), so a cell is coloured as a
    regression exactly when the gate would call it one (with its ``gate``)."""
    if max_exemplars < 0:
        raise ValueError(f"max_exemplars must be >= 0, got {max_exemplars}")
    sc = scorecard.sorted()
    # the run's own gate: its family of gated metrics and their control (issue 49), so a cell is red
    # exactly when the run called a regression; an unchecked metric's move is coloured, never gated
    comparison = None if baseline is None else compare(
        sc, baseline, tolerance, gate=gate, checked_only=sc.fingerprint.get("regression_all") is not True,
        control=run_control(sc.fingerprint))
    deltas = delta_index(comparison.deltas) if comparison is not None else None
    suites = _suites(sc, deltas, max_exemplars, max_image_chars, baseline)
    anchors = {k: v for s in suites for k, v in s.anchors.items()}
    suite_anchor = {s.name: s.anchor for s in suites}
    env = _environment()
    rows = verdicts(sc, anchors, suite_anchor, [regression_key(r) for r in sc.regressions])
    return env.get_template("scorecard.html.j2").render(
        title=title,
        sc=sc,
        suites=suites,
        verdicts=fold_unchecked(rows),
        banner=ship_banner(rows, sc.status, len(sc.regressions)),
        **_assets(env),
        **_counts(sc, suites),
        regressions=regression_rows(sc, anchors, suite_anchor),
        baseline_label=baseline_label or sc.baseline or ("(given)" if baseline is not None else None),
        has_baseline=baseline is not None,
        missing=comparison.missing if comparison is not None else [],
        max_exemplars=max_exemplars,
        capped=sum(g.capped for s in suites for g in s.exemplars),
        fingerprint=_flatten(sc.fingerprint),
        fmt=fmt,
        slug=slug,
    )
