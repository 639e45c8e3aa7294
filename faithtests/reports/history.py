"""History across checkpoints: ``faithtests history RUN...`` and its self-contained HTML page.

>>> from faithtests.reports.history import load_history, write_history_html   # doctest: +SKIP
>>> h = load_history(["faith-report", "out/ckpt-*"])                            # doctest: +SKIP
>>> write_history_html(["out/ckpt-*"], "faith-history.html")                     # doctest: +SKIP

The rules (ordering, first failing run, regressions, the exit status) are in
:mod:`faithtests.reports.history_trends`; the terminal table and CSV in
:mod:`faithtests.reports.history_text`; the trend plots in :mod:`faithtests.reports.history_plot`.

The page works offline like ``scorecard.html``: inline CSS pinned by hash in a Content-Security-Policy
that forbids every fetch and every script (``default-src 'none'``). Stable hooks for checks: the
runs table ``#runs``, the summary ``#history-verdict``, the metric table ``#trend-table`` and
``<div id="trend-plots">`` with one ``<figure class="trend">`` holding one ``<svg class="trend-plot">``
per checked metric and model.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from faithtests.reports.frames import LoadedScorecard, read_runs
from faithtests.reports.history_plot import trend_svg
from faithtests.reports.history_text import (
    delta_text,
    format_history,
    history_csv,
    run_names,
    value_text,
)
from faithtests.reports.history_trends import History, Trend, build_history
from faithtests.reports.text_table import num
from faithtests.scorecard.baseline import Tolerance
from faithtests.scorecard.history_run import order_key, run_label, unique_labels
from faithtests.scorecard.model import MetricResult
from faithtests.scorecard.scorecard import Scorecard, atomic_write_text

__all__ = ["History", "collect_runs", "format_history", "history_csv", "load_history", "render_history_html",
           "write_history_csv", "write_history_html"]

RunSource = str | os.PathLike[str] | Scorecard | LoadedScorecard


def collect_runs(items: Sequence[RunSource]) -> list[LoadedScorecard]:
    """Runs from paths (folders, files, globs), :class:`Scorecard` or :class:`LoadedScorecard` objects,
    in history order, with unique run labels (a scorecard object without a run name: ``run K``)."""
    runs: list[LoadedScorecard] = []
    for k, item in enumerate(items):
        if isinstance(item, LoadedScorecard):
            runs.append(item)
        elif isinstance(item, Scorecard):
            name = run_label(item.run, Path(f"run {k + 1}/scorecard.json"))
            runs.append(LoadedScorecard(item, name, None))
        else:
            runs += read_runs([item])
    runs.sort(key=lambda r: order_key(r.scorecard.run, r.scorecard.fingerprint, r.source or Path(r.run)))
    labels = unique_labels([r.run for r in runs])
    return [LoadedScorecard(r.scorecard, label, r.source) for r, label in zip(runs, labels, strict=True)]


def load_history(items: Sequence[RunSource], tolerance: Tolerance | str | float = 0.0) -> History:
    """The history of ``items`` (see :func:`collect_runs`); ValueError when there are none."""
    runs = collect_runs(items)
    if not runs:
        raise ValueError("no runs given")
    return build_history(runs, tolerance)


def _cell(p: MetricResult | None) -> dict[str, str]:
    """One run's value (first line) and CI and n (second line) of a row."""
    if p is None or p.value is None or p.ci is None:
        return {"value": value_text(p), "ci": "", "verdict": (p.verdict or "none") if p else "absent"}
    n = f" n={p.n}" if p.n is not None else ""
    ci = f"[{num(p.ci[0])}, {num(p.ci[1])}]{n}"
    return {"value": num(p.value), "ci": ci, "verdict": p.verdict or "none"}


def _row(t: Trend, names: list[str], labels: list[str], steps: list[int | None]) -> dict[str, Any]:
    r = t.result
    j = t.against[t.first_regression] if t.first_regression is not None else None
    last = "—"
    if t.missing_last:
        last = "missing from the last run"
    elif t.last_delta is not None and t.best is not None:
        last = delta_text(t.last_delta, names[t.best])
    return {
        "label": t.label, "model": r.model + ("" if r.variant == "base" else f" · {r.variant}"),
        "check": t.check or "—", "better": "higher ↑" if r.higher_is_better else "lower ↓",
        "values": [_cell(p) for p in t.points],
        "first_failed": names[t.first_failed] if t.first_failed is not None else None,
        "first_regression": (f"{names[t.first_regression]} (vs {names[j]})"
                             if t.first_regression is not None and j is not None else None),
        "last": last, "regressed": t.regressed,
        "svg": Markup(trend_svg(t, labels, steps)),
    }


def render_history_html(history: History, title: str = "faithtests history") -> str:
    """The history as one offline HTML page (see the module docstring for its DOM hooks)."""
    import jinja2  # lazy: jinja2, only when a page is rendered

    env = jinja2.Environment(loader=jinja2.PackageLoader("faithtests.reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    css = env.get_template("history.css.j2").render()
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    csp = (f"default-src 'none'; img-src data:; style-src 'sha256-{digest}'; script-src 'none'; "
           "base-uri 'none'; form-action 'none'")
    names, labels = run_names(history), [r.run for r in history.runs]
    steps = [r.step for r in history.runs]  # the plots' x axis: steps where the runs record them
    return env.get_template("history.html.j2").render(
        title=title, csp=csp, css=Markup(css), runs=history.runs, names=names,
        rows=[_row(t, names, labels, steps) for t in history.trends], regressed=history.regressed,
        tolerance=str(history.tolerance), n_failing=sum(t.first_failed is not None for t in history.trends),
        last=names[-1])


def write_history_html(items: Sequence[RunSource] | History, out_path: str | os.PathLike[str],
                       tolerance: Tolerance | str | float = 0.0) -> Path:
    """Write the history page of ``items`` (paths, scorecards, or a built :class:`History`) to
    ``out_path``; returns the path written."""
    history = items if isinstance(items, History) else load_history(items, tolerance)
    out = Path(out_path)
    atomic_write_text(out, render_history_html(history))
    return out


def write_history_csv(history: History, out_path: str | os.PathLike[str]) -> Path:
    out = Path(out_path)
    atomic_write_text(out, history_csv(history))
    return out

