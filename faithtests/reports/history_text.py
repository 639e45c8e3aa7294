"""``faithtests history``'s terminal table and CSV: each checked metric per model across the runs, with
its 95% CI, n and check, the delta against the previous run, the first failing run, the first
regression and the last run against the best earlier run (rules: :mod:`.history_trends`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from faithtests.reports.history_trends import History, Trend
from faithtests.reports.text_table import num, signed
from faithtests.scorecard.baseline import MetricDelta, test_label
from faithtests.scorecard.model import MetricResult

CSV_COLUMNS = ("run_index", "run", "step", "started", "source", "suite", "test", "model", "variant",
               "metric", "slice", "value", "ci_lo", "ci_hi", "n", "higher_is_better", "op", "threshold",
               "verdict", "vs_run", "delta", "delta_ci_lo", "delta_ci_hi", "basis", "status",
               "first_failed", "first_regression")


def value_text(p: MetricResult | None) -> str:
    """``0.876 [0.848, 0.903] n=900``, ``undefined``, or ``not run``."""
    if p is None:
        return "not run"
    if p.value is None:
        return "undefined"
    ci = f" [{num(p.ci[0])}, {num(p.ci[1])}]" if p.ci is not None else ""
    return f"{num(p.value)}{ci}" + (f" n={p.n}" if p.n is not None else "")


def delta_text(d: MetricDelta, against: str) -> str:
    """``vs #2: -0.590 [-0.650, -0.530] REGRESSION (paired, g>b=180 b>g=0)``."""
    ci = f" [{signed(d.delta_ci[0])}, {signed(d.delta_ci[1])}]" if d.delta_ci is not None else ""
    status = d.status.upper() if d.status == "regression" else d.status
    counts = ""
    if d.paired is not None and d.paired.binary:
        counts = f", g>b={d.paired.good_to_bad} b>g={d.paired.bad_to_good}"
    return f"vs {against}: {signed(d.delta)}{ci} {status} ({d.basis}{counts})"


def run_names(history: History) -> list[str]:
    return [f"#{i + 1} {r.run}" for i, r in enumerate(history.runs)]


def _header(history: History) -> list[str]:
    rows = [[f"{i + 1}", r.run, "" if r.step is None else str(r.step), r.started or "—",
             str(r.source or "—")] for i, r in enumerate(history.runs)]
    head = ["#", "run", "step", "started", "source"]
    widths = [max(len(h), *(len(row[k]) for row in rows)) for k, h in enumerate(head[:4])]
    out = [f"faithtests history: {len(history.runs)} run(s), by step, then start time"]
    for row in [head, *rows]:
        cells = [row[0].rjust(widths[0]), row[1].ljust(widths[1]), row[2].rjust(widths[2]),
                 row[3].ljust(widths[3]), row[4]]
        out.append("  " + "  ".join(cells))
    return out


def _trend_lines(t: Trend, names: Sequence[str], width: int) -> list[str]:
    r = t.result
    model = r.model + ("" if r.variant == "base" else f" · {r.variant}")
    better = "higher is better" if r.higher_is_better else "lower is better"
    check = f"check {t.check}" if t.check else "no check in the last run"
    out = ["", f"{t.label}  model {model}  {check} ({better})  {test_label(r.test)}"]
    for i, p in enumerate(t.points):
        verdict = "" if p is None else {"fail": "FAIL", None: "no check"}.get(p.verdict, p.verdict or "")
        line = f"  {names[i].ljust(width)}  {value_text(p).ljust(30)}  {verdict.ljust(12)}"
        d, j = t.deltas[i], t.against[i]
        if d is not None and j is not None:
            line += delta_text(d, f"#{j + 1}")
        out.append(line.rstrip())
    parts = _verdict_parts(t, names)
    out += ["  " + "; ".join(parts[:2]), *("  " + p for p in parts[2:])]
    return out


def _verdict_parts(t: Trend, names: Sequence[str]) -> list[str]:
    failed = names[t.first_failed] if t.first_failed is not None else "none"
    parts = [f"first failing run: {failed}"]
    if t.first_regression is not None:
        j = t.against[t.first_regression]
        against = names[j] if j is not None else "?"
        parts.append(f"first regression: {names[t.first_regression]} (vs {against})")
    else:
        parts.append("first regression: none")
    if t.missing_last:
        parts.append("MISSING from the last run")
    elif t.best is not None and t.last_delta is not None:
        parts.append("last run " + delta_text(t.last_delta, f"best earlier {names[t.best]}"))
    return parts


def row_name(t: Trend) -> str:
    """``flip/PR[color] (clip, test_pr[world-color-clip])``: a row told apart from any other."""
    r = t.result
    model = r.model + ("" if r.variant == "base" else f" · {r.variant}")
    return f"{t.label} ({model}, {test_label(r.test)})"


def _summary(history: History, names: Sequence[str]) -> list[str]:
    out = [""]
    failing = [t for t in history.trends if t.first_failed is not None]
    for t in failing:
        out.append(f"first failure: {row_name(t)} in run {names[t.first_failed or 0]}")
    missing = [t for t in history.trends if t.missing_last]
    if missing:
        out.append(f"note: {len(missing)} checked metric(s) not produced by the last run (not gated): "
                   + ", ".join(row_name(t) for t in missing[:10]))
    last = names[-1]
    if len(history.runs) < 2:
        out.append(f"one run ({last}): nothing earlier to compare with: exit status 0")
    elif history.regressed:
        listed = "; ".join(f"{row_name(t)} vs {names[t.best or 0]}" for t in history.regressed)
        out.append(f"FAIL: the last run {last} regressed against the best earlier run on "
                   f"{len(history.regressed)} checked metric(s): {listed}: exit status 1")
    else:
        out.append(f"the last run {last} did not regress against the best earlier run on any of "
                   f"{len(history.trends)} checked metric(s) (tolerance {history.tolerance}, paired rule): "
                   "exit status 0")
    return out


def format_history(history: History) -> str:
    """The runs, then one block per checked metric and model (one line per run), then the verdicts."""
    names = run_names(history)
    width = max(len(n) for n in names)
    out = _header(history)
    out.append("")
    out.append("checked metrics: value [95% CI] n per run, its verdict, and the delta against the previous "
               "run that has it (paired rule: REGRESSION when the delta's CI lies beyond the tolerance)")
    for t in history.trends:
        out += _trend_lines(t, names, width)
    if not history.trends:
        out.append("(no run holds a checked metric)")
    return "\n".join(out + _summary(history, names))


def history_csv(history: History) -> str:
    """One row per run and checked metric (a run that did not produce it: no row)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for t in history.trends:
        for i, p in enumerate(t.points):
            if p is None:
                continue
            run, d, j = history.runs[i], t.deltas[i], t.against[i]
            ci = p.ci or (None, None)
            dci = d.delta_ci if d is not None and d.delta_ci is not None else (None, None)
            writer.writerow(_blank([
                i + 1, run.run, run.step, run.started, run.source, p.suite, p.test, p.model, p.variant,
                p.metric, p.slice, p.value, ci[0], ci[1], p.n, p.higher_is_better, p.op, p.threshold,
                p.verdict, None if j is None else j + 1, d.delta if d else None, dci[0], dci[1],
                d.basis if d else None, d.status if d else None, i == t.first_failed, i == t.first_regression,
            ]))
    return buf.getvalue()


def _blank(row: list[object]) -> list[object]:
    return ["" if v is None else v for v in row]
