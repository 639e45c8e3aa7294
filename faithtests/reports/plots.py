"""Hand-written inline SVG for the scorecard: line (with a CI band), grouped bar and scatter plots.

Why not matplotlib: the report must be self-contained and small, and an SVG string needs no backend,
no fonts and no files. Every text is XML-escaped; NaN/None/inf values are skipped (a line breaks
around them, a bar shows "n/a") instead of poisoning the axis range. Only presentation attributes are
used (no ``style=""``), so the page's Content-Security-Policy can forbid inline style attributes.

Layout never clips a text: margins grow with the title, legend and tick labels they hold (widths are
estimated in :mod:`faithtests.reports.plot_axes`), long texts are cut with "…" and keep their
full wording in a ``<title>`` tooltip. A threshold is drawn as a dashed line (or, for a bar series with
its own threshold, a dash across each of its bars) and the y axis always reaches it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from faithtests.reports.plot_axes import (
    COS,
    LABEL_CHARS,
    LEFT_MIN,
    PALETTE,
    PLOT_H,
    RIGHT,
    SIN,
    Frame,
    ThresholdLine,
    axes,
    cut,
    esc,
    finite,
    fmt,
    legend,
    legend_rows,
    nice_ticks,
    text_width,
    wrap,
    y_range,
)
from faithtests.reports.plot_dots import DotRow, render_dots
from faithtests.scorecard.model import Plot, Series

__all__ = ["ThresholdLine", "nice_ticks", "render_plot", "text_width"]


def _aligned(s: Series, notes: list[str]) -> tuple[list[float | str], list[float], list[float], list[float]]:
    """x, y, lo, hi of a series cut to a common length; a mismatch is reported in the plot, not hidden."""
    n = min(len(s.x), len(s.y))
    if len(s.x) != len(s.y):
        notes.append(f"series {s.name!r}: {len(s.x)} x values but {len(s.y)} y values; drew {n}")
    y = [finite(v) for v in s.y[:n]]
    lo = [math.nan] * n
    hi = [math.nan] * n
    if s.lo is not None and s.hi is not None:
        if len(s.lo) != len(s.y) or len(s.hi) != len(s.y):
            notes.append(f"series {s.name!r}: lo/hi length differs from y; band drawn where present")
        lo = [finite(v) for v in s.lo[:n]] + [math.nan] * max(0, n - len(s.lo))
        hi = [finite(v) for v in s.hi[:n]] + [math.nan] * max(0, n - len(s.hi))
    return list(s.x[:n]), y, lo, hi


def _categories(data: Sequence[tuple[list[float | str], list[float], list[float], list[float]]]) -> list[str]:
    seen: dict[str, None] = {}
    for xs, *_ in data:
        for x in xs:
            seen.setdefault(str(x), None)
    return list(seen)


def _is_numeric_x(data: Sequence[tuple[list[float | str], list[float], list[float], list[float]]]) -> bool:
    return all(isinstance(x, int | float) and not isinstance(x, bool) for xs, *_ in data for x in xs)


def _whisker(f: Frame, x: float, lo: float, hi: float, color: str) -> str:
    if math.isnan(lo) or math.isnan(hi):
        return ""
    return (
        f'<path class="ci" d="M{x:.1f},{f.py(lo):.1f}V{f.py(hi):.1f}M{x - 3:.1f},{f.py(lo):.1f}h6'
        f'M{x - 3:.1f},{f.py(hi):.1f}h6" stroke="{color}" fill="none"/>'
    )


def _runs(idx: Sequence[int], ok: Sequence[bool]) -> list[list[int]]:
    """Consecutive stretches of indices where ``ok`` holds: a NaN breaks a line/band, never joins it."""
    runs: list[list[int]] = [[]]
    for i in idx:
        if ok[i]:
            runs[-1].append(i)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def _threshold_lines(f: Frame, lines: Sequence[ThresholdLine], names: list[str], bars: bool) -> list[str]:
    """Full-width dashed lines labelled at the right end; a bar series' own threshold is drawn by _bars."""
    out: list[str] = []
    for j, t in enumerate(lines):
        if bars and t.series in names:
            continue
        color = PALETTE[names.index(t.series) % len(PALETTE)] if t.series in names else "#c62828"
        y = f.py(t.value)
        label = cut(t.label, int((f.right - f.left - 8) / text_width("x", 10)))
        out.append(
            f'<line class="threshold" x1="{f.left:.1f}" y1="{y:.1f}" x2="{f.right}" y2="{y:.1f}" '
            f'stroke="{color}" stroke-width="1.5" stroke-dasharray="6 4"><title>{esc(t.label)}</title></line>'
            f'<text class="threshold-label" x="{f.right - 2}" y="{y - 3 - 11 * (j % 2):.1f}" font-size="10" '
            f'text-anchor="end" fill="{color}">{esc(label)}</text>'
        )
    return out


_Data = list[tuple[list[float | str], list[float], list[float], list[float]]]


@dataclass(frozen=True)
class _Layout:
    """Sizes of one plot, every margin grown to the texts it holds."""

    width: int
    height: int
    left: float
    top: float
    bottom: float
    title: list[str]  # wrapped title lines
    sub: str  # the subtitle as shown (cut)
    legend: list[list[tuple[int, str]]]
    rotate: bool  # categorical x labels rotated
    yr: tuple[float, float] | None  # y range; None: no finite data


def _layout(plot: Plot, data: _Data, cats: list[str], width: int, subtitle: str,
            thresholds: Sequence[ThresholdLine], extra_y: Sequence[float] = ()) -> _Layout:
    if plot.kind == "bar":  # widen so each group of bars stays readable
        width = max(width, LEFT_MIN + RIGHT + len(cats) * (len(data) * 12 + 16))
    title = wrap(plot.title, int((width - 16) / text_width("x", 14, bold=True)), 2)
    sub = cut(subtitle, int((width - 16) / text_width("x", 11)))
    rows = legend_rows([s.name for s in plot.series], width)
    top = 8 + 18 * len(title) + (15 if sub else 0) + 15 * len(rows) + 12
    all_y = [v for _, y, lo, hi in data for v in (*y, *lo, *hi)] + [finite(t.value) for t in thresholds]
    all_y += list(extra_y)
    yr = y_range(all_y, include_zero=plot.kind == "bar")
    tick_w = max((text_width(fmt(t), 11) for t in nice_ticks(*yr)), default=0.0) if yr else 0.0
    left = max(LEFT_MIN, 22 + 8 + tick_w)
    shorts = [cut(c, LABEL_CHARS) for c in cats]
    cat_w = (width - left - RIGHT) / max(len(cats), 1)
    rotate = any(text_width(c, 11) > cat_w - 6 for c in shorts)
    if rotate:  # the first label reaches down-left from its tick: keep it inside the left edge
        longest = max(text_width(c, 11) for c in shorts)
        left = max(left, text_width(shorts[0], 11) * COS + 4 - cat_w / 2)
        below = 12 + longest * SIN + 11 * COS + 4
    else:
        below = 22.0
    bottom = top + PLOT_H
    height = math.ceil(bottom + below + (18 if plot.x_label else 0) + 6)
    return _Layout(width, height, left, top, bottom, title, sub, rows, rotate, yr)


def _header(plot: Plot, lay: _Layout, subtitle: str) -> list[str]:
    """The ``<svg>`` tag, the title lines, the subtitle and the legend."""
    width, title = lay.width, lay.title
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot plot-{plot.kind}" width="{width}" '
        f'height="{lay.height}" viewBox="0 0 {width} {lay.height}" role="img" aria-label="{esc(plot.title)}" '
        'font-family="sans-serif">',
    ]
    for i, line in enumerate(title):
        parts.append(
            f'<text class="title" x="{width / 2:.1f}" y="{22 + 18 * i}" text-anchor="middle" font-size="14" '
            f'font-weight="bold"><title>{esc(plot.title)}</title>{esc(line)}</text>'
        )
    if lay.sub:
        parts.append(
            f'<text class="subtitle" x="{width / 2:.1f}" y="{20 + 18 * len(title)}" text-anchor="middle" '
            f'font-size="11" fill="#444"><title>{esc(subtitle)}</title>{esc(lay.sub)}</text>'
        )
    names = [s.name for s in plot.series]
    return parts + legend(lay.legend, 8 + 18 * len(title) + (15 if lay.sub else 0) + 6, names)


def _x_ticks(f: Frame, data: _Data, cats: list[str], numeric: bool) -> list[tuple[float, str]]:
    """Set the frame's x range and return its ticks: round numbers, or one tick per category."""
    if numeric:
        xs = [finite(x) for xs_, *_ in data for x in xs_]
        xr = y_range(xs, include_zero=False) or (0.0, 1.0)
        f.x_lo, f.x_hi = xr
        return [(t, fmt(t)) for t in nice_ticks(*xr)]
    f.x_lo, f.x_hi = 0.0, float(max(len(cats), 1))
    return [(i + 0.5, c) for i, c in enumerate(cats)]


def _marks(f: Frame, plot: Plot, data: _Data, cats: list[str], numeric: bool,
           thresholds: Sequence[ThresholdLine]) -> list[str]:
    """Every series' bars, or lines/bands/points, in series order."""
    names = [s.name for s in plot.series]
    cat_pos = {c: i + 0.5 for i, c in enumerate(cats)}
    own = {t.series: t for t in thresholds if t.series is not None}
    parts: list[str] = []
    for k, (xs_raw, y, lo, hi) in enumerate(data):
        color = PALETTE[k % len(PALETTE)]
        xpos = [finite(x) if numeric else cat_pos[str(x)] for x in xs_raw]
        if plot.kind == "bar":
            parts += _bars(f, xpos, y, lo, hi, k, len(data), color, own.get(names[k]))
        else:
            parts += _line_or_scatter(f, plot, k, xpos, y, lo, hi, color)
    return parts


def _notes(f: Frame, top: float, notes: list[str]) -> list[str]:
    return [
        f'<text class="note" x="{f.left + 4:.1f}" y="{top + 10 + 12 * j}" font-size="10" fill="#b00">'
        f"<title>{esc(note)}</title>{esc(cut(note, int((f.right - f.left) / text_width('x', 10))))}</text>"
        for j, note in enumerate(notes)
    ]


def render_plot(
    plot: Plot,
    *,
    width: int = 560,
    subtitle: str = "",
    thresholds: Sequence[ThresholdLine] = (),
    baseline: Plot | None = None,
) -> str:
    """One :class:`Plot` as an ``<svg>`` string (line, grouped bar or scatter).

    ``subtitle`` is a second, smaller title line (the scorecard puts the test's dataset and parameters
    there); ``thresholds`` are drawn and always lie inside the y axis; ``baseline`` (the baseline run's
    plot of the same name) draws each series it shares with ``plot`` as a dashed line (line, scatter) or
    a hollow diamond per bar (bar), inside the axis too."""
    if plot.kind not in ("line", "bar", "scatter"):
        raise ValueError(f"plot {plot.title!r}: unknown kind {plot.kind!r} (line, bar or scatter)")
    notes: list[str] = []
    data = [_aligned(s, notes) for s in plot.series]
    numeric = plot.kind != "bar" and _is_numeric_x(data)
    cats = [] if numeric else _categories(data)
    base = _baseline_data(plot, baseline, cats, numeric)
    if plot.kind == "bar" and len(cats) == 1:  # one bar per series: rows of dots, zero in view
        return render_dots(plot.title, _bar_rows(plot, data, thresholds, base), subtitle=subtitle,
                           x_label=plot.y_label, width=width)
    lay = _layout(plot, data, cats, width, subtitle, thresholds, [v for _, _, y in base for v in y])
    parts = _header(plot, lay, subtitle)
    if lay.yr is None:
        parts.append(
            f'<text x="{lay.width / 2:.1f}" y="{(lay.top + lay.bottom) / 2:.1f}" text-anchor="middle" '
            'font-size="12" class="no-data">no finite data</text></svg>'
        )
        return "".join(parts)
    f = Frame(lay.width, lay.height, lay.left, lay.top, lay.bottom, *lay.yr)
    parts += axes(f, plot, _x_ticks(f, data, cats, numeric), lay.rotate)
    parts += _marks(f, plot, data, cats, numeric, thresholds)
    parts += _baseline_marks(f, plot, base, cats, numeric)
    parts += _threshold_lines(f, thresholds, [s.name for s in plot.series], plot.kind == "bar")
    parts += _notes(f, lay.top, notes)
    parts.append("</svg>")
    return "".join(parts)


_Base = list[tuple[int, list[float | str], list[float]]]  # (series index, x, y) of the baseline's series


def _baseline_data(plot: Plot, baseline: Plot | None, cats: list[str], numeric: bool) -> _Base:
    """The baseline's series that ``plot`` also has (by name), at x values ``plot`` can place."""
    if baseline is None or baseline.kind != plot.kind:
        return []
    names = [s.name for s in plot.series]
    out: _Base = []
    for s in baseline.series:
        if s.name not in names:
            continue
        xs, y, _, _ = _aligned(s, [])
        keep = [i for i, x in enumerate(xs) if (not math.isnan(finite(x)) if numeric else str(x) in cats)]
        out.append((names.index(s.name), [xs[i] for i in keep], [y[i] for i in keep]))
    return out


def _baseline_marks(f: Frame, plot: Plot, base: _Base, cats: list[str], numeric: bool) -> list[str]:
    cat_pos = {c: i + 0.5 for i, c in enumerate(cats)}
    band = min((f.px(1.0) - f.px(0.0)) * 0.8, 48.0 * len(plot.series))
    w = band / max(len(plot.series), 1)
    out: list[str] = []
    for k, xs, y in base:
        color = PALETTE[k % len(PALETTE)]
        xpos = [finite(x) if numeric else cat_pos[str(x)] for x in xs]
        pts = [(f.px(x), f.py(v)) for x, v in sorted(zip(xpos, y, strict=True)) if not math.isnan(v)]
        if plot.kind == "bar":
            pts = [(f.px(x) - band / 2 + (k + 0.5) * w, f.py(v)) for x, v in zip(xpos, y, strict=True)
                   if not math.isnan(v)]
            out += [f'<path class="baseline" d="M{x:.1f},{py - 5:.1f}l5,5l-5,5l-5,-5z" fill="#fff" '
                    f'stroke="#111" stroke-width="1.5"><title>baseline {esc(plot.series[k].name)}</title>'
                    "</path>"
                    for x, py in pts]
        elif pts:
            out.append(f'<polyline class="baseline" points="{_pts(pts)}" fill="none" stroke="{color}" '
                       f'stroke-width="1.5" stroke-dasharray="5 3" opacity="0.8">'
                       f"<title>baseline: {esc(plot.series[k].name)}</title></polyline>")
    return out


def _bar_rows(plot: Plot, data: _Data, thresholds: Sequence[ThresholdLine], base: _Base) -> list[DotRow]:
    """A one-category bar chart's series as dot rows, each with its own (else the plot's) threshold and
    the baseline's value."""
    common = next((t for t in thresholds if t.series is None), None)
    own = {t.series: t for t in thresholds if t.series is not None}
    base_y = {k: y[0] for k, _, y in base if y}
    return [DotRow(s.name, y[0] if y else math.nan, lo[0] if lo else math.nan, hi[0] if hi else math.nan,
                   own.get(s.name, common), base_y.get(k, math.nan))
            for k, (s, (_, y, lo, hi)) in enumerate(zip(plot.series, data, strict=True))]


def _line_or_scatter(
    f: Frame, plot: Plot, k: int, xpos: list[float], y: list[float], lo: list[float], hi: list[float],
    color: str,
) -> list[str]:
    parts: list[str] = []
    order = sorted(range(len(y)), key=lambda i: (math.isnan(xpos[i]), xpos[i]))
    if plot.kind == "line":
        band_ok = [not (math.isnan(xpos[i]) or math.isnan(lo[i]) or math.isnan(hi[i])) for i in range(len(y))]
        for run in _runs(order, band_ok):
            pts = [(f.px(xpos[i]), f.py(hi[i])) for i in run] + [
                (f.px(xpos[i]), f.py(lo[i])) for i in reversed(run)
            ]
            parts.append(
                f'<polygon class="band" points="{_pts(pts)}" fill="{color}" fill-opacity="0.18" '
                'stroke="none"/>'
            )
        ok = [not (math.isnan(xpos[i]) or math.isnan(y[i])) for i in range(len(y))]
        for run in _runs(order, ok):
            parts.append(
                f'<polyline class="line" points="{_pts([(f.px(xpos[i]), f.py(y[i])) for i in run])}" '
                f'fill="none" stroke="{color}" stroke-width="2"/>'
            )
    for i in order:
        if math.isnan(xpos[i]) or math.isnan(y[i]):
            continue
        if plot.kind == "scatter" or (len(order) == 1 and plot.kind == "line"):
            parts.append(_whisker(f, f.px(xpos[i]), lo[i], hi[i], color))
        parts.append(
            f'<circle cx="{f.px(xpos[i]):.1f}" cy="{f.py(y[i]):.1f}" r="3" fill="{color}">'
            f"<title>{esc(plot.series[k].name)}: {esc(fmt(y[i]))}</title></circle>"
        )
    return parts


def _pts(points: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in points)


def _bars(
    f: Frame,
    xpos: list[float],
    y: list[float],
    lo: list[float],
    hi: list[float],
    k: int,
    n_series: int,
    color: str,
    threshold: ThresholdLine | None,
) -> list[str]:
    band = min((f.px(1.0) - f.px(0.0)) * 0.8, 48.0 * n_series)  # no metre-wide bars for one category
    w = band / max(n_series, 1)
    base = f.py(min(max(0.0, f.y_lo), f.y_hi))
    out: list[str] = []
    for i in range(len(y)):
        x0 = f.px(xpos[i]) - band / 2 + k * w
        if threshold is not None:  # this series' own threshold: a dash across its bar
            ty = f.py(threshold.value)
            out.append(
                f'<line class="threshold" x1="{x0 - 2:.1f}" y1="{ty:.1f}" x2="{x0 + w + 1:.1f}" '
                f'y2="{ty:.1f}" stroke="#111" stroke-width="2.5"><title>{esc(threshold.label)}</title></line>'
            )
        if math.isnan(y[i]):
            out.append(
                f'<text class="na" x="{x0 + w / 2:.1f}" y="{base - 3:.1f}" font-size="9" '
                'text-anchor="middle" fill="#888">n/a</text>'
            )
            continue
        top = f.py(y[i])
        out.append(
            f'<rect class="bar" x="{x0:.1f}" y="{min(top, base):.1f}" width="{max(w - 1, 1):.1f}" '
            f'height="{abs(base - top):.1f}" fill="{color}"><title>{esc(fmt(y[i]))}</title></rect>'
        )
        out.append(_whisker(f, x0 + w / 2, lo[i], hi[i], "#222"))
    return out
