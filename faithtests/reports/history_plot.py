"""One inline SVG per checked metric of a history: its value in each run with the 95% CI as a band,
the check's threshold as a dashed line, each point coloured by its check's verdict and the first
regression against the previous run marked. The x axis names each run by its ``--faith-step`` when the
runs record one, by its number in the history otherwise, and its title says which (:func:`x_axis`).

Drawn like the scorecard's plots (:mod:`faithtests.reports.plot_axes`: the same frame, axes, ticks and
escaping; presentation attributes only, so the page's Content-Security-Policy forbids inline styles).
The root element is ``<svg class="trend-plot" data-metric=... data-model=...>``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from faithtests.reports.history_trends import Trend
from faithtests.reports.plot_axes import (
    LABEL_CHARS,
    LEFT_MIN,
    OP_TEXT,
    PALETTE,
    SIN,
    Frame,
    axes,
    cut,
    esc,
    fmt,
    nice_ticks,
    text_width,
    y_range,
)
from faithtests.scorecard.model import Plot

WIDTH, PLOT_HEIGHT, TOP = 560, 170, 44
VERDICT_COLOR = {"pass": "#2e7d32", "fail": "#c62828", "insufficient": "#c79100"}  # style.css.j2's badges
NO_CHECK = "#555555"


def _values(trend: Trend) -> tuple[list[float], list[float], list[float]]:
    """value, CI low, CI high per run; NaN where the run did not produce the row or it is undefined."""
    ys, los, his = [], [], []
    for p in trend.points:
        ys.append(p.value if p is not None and p.value is not None else math.nan)
        lo, hi = (p.ci if p is not None and p.ci is not None else (math.nan, math.nan))
        los.append(lo)
        his.append(hi)
    return ys, los, his


def _segments(xs: list[float], ys: list[float]) -> list[list[tuple[float, float]]]:
    """Runs of consecutive finite points (a line or band breaks where a run has no value)."""
    out: list[list[tuple[float, float]]] = [[]]
    for x, y in zip(xs, ys, strict=True):
        if math.isnan(y):
            out.append([])
        else:
            out[-1].append((x, y))
    return [s for s in out if s]


def _band(f: Frame, los: list[float], his: list[float]) -> list[str]:
    out: list[str] = []
    xs = [float(i) for i in range(len(los))]
    lows = {round(x): y for seg in _segments(xs, los) for x, y in seg}
    for seg in _segments(xs, his):
        pts = [(x, y) for x, y in seg if round(x) in lows]
        if len(pts) == 1:  # a lone CI: an error bar
            x, hi = pts[0]
            out.append(f'<line class="ci" x1="{f.px(x):.1f}" y1="{f.py(lows[round(x)]):.1f}" '
                       f'x2="{f.px(x):.1f}" y2="{f.py(hi):.1f}" stroke="{PALETTE[0]}" stroke-width="6" '
                       'stroke-opacity="0.25"/>')
        elif pts:
            upper = [f"{f.px(x):.1f},{f.py(y):.1f}" for x, y in pts]
            lower = [f"{f.px(x):.1f},{f.py(lows[round(x)]):.1f}" for x, _ in reversed(pts)]
            out.append(f'<polygon class="ci-band" points="{" ".join(upper + lower)}" fill="{PALETTE[0]}" '
                       'fill-opacity="0.18" stroke="none"/>')
    return out


def _threshold(f: Frame, trend: Trend) -> list[str]:
    r = next((p for p in reversed(trend.points) if p is not None and p.threshold is not None), None)
    if r is None or r.op is None or r.threshold is None:
        return []
    y, label = f.py(r.threshold), f"threshold {OP_TEXT[r.op]} {fmt(r.threshold)}"
    # the label at the left end: the latest runs (where a regression is marked) are on the right
    return [f'<line class="threshold" x1="{f.left:.1f}" y1="{y:.1f}" x2="{f.right:.1f}" y2="{y:.1f}" '
            'stroke="#c62828" stroke-dasharray="6 4" stroke-width="1.5"/>',
            f'<text x="{f.left + 4:.1f}" y="{y - 5:.1f}" font-size="11" fill="#8a1c1c">{esc(label)}</text>']


def _points(f: Frame, trend: Trend, labels: list[str]) -> list[str]:
    out: list[str] = []
    for i, p in enumerate(trend.points):
        if p is None or p.value is None:
            continue
        verdict = p.verdict or "no check"
        color = VERDICT_COLOR.get(verdict, NO_CHECK)
        ci = f" [{fmt(p.ci[0])}, {fmt(p.ci[1])}]" if p.ci is not None else ""
        tip = f"{labels[i]}: {fmt(p.value)}{ci}, {verdict}"
        x, y = f.px(float(i)), f.py(p.value)
        out.append(f'<circle class="point {esc(verdict)}" cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{color}" '
                   f'stroke="#fff" stroke-width="1"><title>{esc(tip)}</title></circle>')
        if i == trend.first_regression:
            out.append(f'<circle class="first-regression" cx="{x:.1f}" cy="{y:.1f}" r="9" fill="none" '
                       f'stroke="#c62828" stroke-width="2"><title>first regression against the previous run'
                       f'</title></circle><text x="{x:.1f}" y="{y - 13:.1f}" text-anchor="middle" '
                       'font-size="11" font-weight="700" fill="#c62828">regression</text>')
    return out


def _frame(trend: Trend, ys: list[float], los: list[float], his: list[float], labels: list[str]) -> Frame:
    """The plot's frame: the x axis's rotated run labels and its title fit below it."""
    r = trend.result
    extra = [r.threshold] if r.threshold is not None else []
    rng = y_range([*ys, *los, *his, *extra], include_zero=False) or (0.0, 1.0)
    ticks = nice_ticks(*rng)
    left = max(LEFT_MIN, 14 + 8 + max(text_width(fmt(t), 11) for t in ticks))
    n = len(trend.points)
    below = 16 + max(text_width(cut(label, LABEL_CHARS), 11) for label in labels) * SIN + 24
    bottom = TOP + PLOT_HEIGHT
    return Frame(WIDTH, int(bottom + below), left, TOP, bottom, rng[0], rng[1], -0.5, n - 0.5)


def x_axis(labels: Sequence[str], steps: Sequence[int | None] = ()) -> tuple[list[str], str]:
    """(the x tick label of each run, the axis title): a run's ``--faith-step`` where the runs record one
    (``step 1200 · name``), else its number in the history (``#3 name``); the title says which."""
    steps = list(steps) or [None] * len(labels)
    ticks = [f"#{i + 1} {label}" if step is None else f"step {step} · {label}"
             for i, (label, step) in enumerate(zip(labels, steps, strict=True))]
    if all(s is None for s in steps):
        return ticks, "run number (no run records a --faith-step; by start time)"
    if None in steps:
        return ticks, "--faith-step (#N: the run number of a run without a step)"
    return ticks, "--faith-step of each run"


def trend_svg(trend: Trend, labels: list[str], steps: Sequence[int | None] = ()) -> str:
    """The trend of one checked row over the runs named ``labels`` (one per run, in order), labelled by
    their ``steps`` (their ``--faith-step``, None where a run has none; :func:`x_axis`)."""
    r = trend.result
    ys, los, his = _values(trend)
    names, x_title = x_axis(labels, steps)
    ticks = [(float(i), name) for i, name in enumerate(names)]
    f = _frame(trend, ys, los, his, [t for _, t in ticks])
    model = r.model + ("" if r.variant == "base" else f" · {r.variant}")
    title = cut(f"{trend.label} · {model}", int((WIDTH - 16) / text_width("x", 13, bold=True)))
    better = "higher is better" if r.higher_is_better else "lower is better"
    plot = Plot(trend.label, "line", [], x_label=x_title,
                y_label=f"{r.metric} ({better})")
    body = axes(f, plot, ticks, rotate=True)
    body += _band(f, los, his)
    body += _threshold(f, trend)
    xs = [float(i) for i in range(len(ys))]
    for seg in _segments(xs, ys):
        pts = " ".join(f"{f.px(x):.1f},{f.py(y):.1f}" for x, y in seg)
        body.append(f'<polyline class="trend" points="{pts}" fill="none" stroke="{PALETTE[0]}" '
                    'stroke-width="2"/>')
    body += _points(f, trend, names)
    test = r.test.partition("::")[2] or r.test
    head = [f'<text x="8" y="18" font-size="13" font-weight="700"><title>{esc(trend.label)} · {esc(model)}'
            f"</title>{esc(title)}</text>",
            f'<text x="8" y="34" font-size="11" fill="#555"><title>{esc(r.test)}</title>'
            f"{esc(cut(test, int((WIDTH - 16) / text_width('x', 11))))}</text>"]
    return (f'<svg class="trend-plot" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{f.height}" '
            f'viewBox="0 0 {WIDTH} {f.height}" role="img" data-metric="{esc(trend.label)}" '
            f'data-model="{esc(model)}" aria-label="{esc(trend.label)} of {esc(model)} across runs">'
            + "".join(head + body) + "</svg>")
