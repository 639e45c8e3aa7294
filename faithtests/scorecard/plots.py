"""Hand-written inline SVG for the scorecard: line (with a CI band), grouped bar and scatter plots.

Why not matplotlib: the report must be self-contained and small, and an SVG string needs no backend,
no fonts and no files. Every text is XML-escaped; NaN/None/inf values are skipped (a line breaks
around them, a bar shows "n/a") instead of poisoning the axis range. Only presentation attributes are
used (no ``style=""``), so the page's Content-Security-Policy can forbid inline style attributes.

Layout never clips a text: margins grow with the title, legend and tick labels they hold (widths are
estimated from a generous average glyph width, ``_CHAR``), long texts are cut with "…" and keep their
full wording in a ``<title>`` tooltip. A threshold is drawn as a dashed line (or, for a bar series with
its own threshold, a dash across each of its bars) and the y axis always reaches it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from faithtests.scorecard.model import Op, Plot, Series

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_RIGHT, _LEFT_MIN, _PLOT_H = 16, 64, 200
_CHAR = 0.62  # average glyph width in em: above DejaVu/Liberation Sans' mean, so estimates err wide
_LABEL_CHARS = 28  # categorical tick labels are cut to this; the full text is in a <title> tooltip
_SIN, _COS = math.sin(math.radians(35)), math.cos(math.radians(35))  # x labels rotate by -35°
_OP_TEXT = {">=": "≥", ">": ">", "<=": "≤", "<": "<"}


@dataclass(frozen=True)
class ThresholdLine:
    """A check's threshold on a plot's y axis; ``series`` limits it to one series (its own threshold)."""

    value: float
    op: Op
    series: str | None = None

    @property
    def label(self) -> str:
        who = f"{self.series}: " if self.series else ""
        return f"{who}threshold {_OP_TEXT[self.op]} {_fmt(self.value)}"


def _x(text: object) -> str:
    return escape(str(text), quote=True)


def _num(v: object) -> float:
    """A finite float, or NaN for anything else (None from JSON, inf, strings)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return math.nan
    f = float(v)
    return f if math.isfinite(f) else math.nan


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    return f"{v:.3g}"


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Estimated rendered width in px (errs wide; see ``_CHAR``)."""
    return len(text) * size * (_CHAR + (0.06 if bold else 0.0))


def _cut(text: str, chars: int) -> str:
    chars = max(chars, 2)
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _wrap(text: str, chars: int, lines: int) -> list[str]:
    """Word-wrap into at most ``lines`` lines of ``chars``; the last line is cut with "…"."""
    out: list[str] = []
    words = text.split()
    while words and len(out) < lines:
        line = words.pop(0)
        while words and len(line) + 1 + len(words[0]) <= chars:
            line += " " + words.pop(0)
        out.append(line)
    if words:
        out[-1] = _cut(out[-1] + " " + " ".join(words), chars)
    return [_cut(line, chars) for line in out] or [""]


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (steps of 1, 2, 2.5 or 5 times a power of 10)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise ValueError(f"nice_ticks needs finite lo <= hi, got {lo!r}, {hi!r}")
    if hi == lo:
        return [lo]
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks: list[float] = []
    t = first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12) + 0.0)  # + 0.0 turns -0.0 into 0.0
        t += step
    return ticks


@dataclass
class _Frame:
    """Maps data coordinates to pixels for one plot."""

    width: int
    height: int
    left: float
    top: float
    bottom: float
    y_lo: float
    y_hi: float
    x_lo: float = 0.0
    x_hi: float = 1.0

    @property
    def right(self) -> float:
        return self.width - _RIGHT

    def px(self, x: float) -> float:
        return self.left + (x - self.x_lo) / (self.x_hi - self.x_lo) * (self.right - self.left)

    def py(self, y: float) -> float:
        return self.bottom - (y - self.y_lo) / (self.y_hi - self.y_lo) * (self.bottom - self.top)


def _y_range(values: Sequence[float], include_zero: bool) -> tuple[float, float] | None:
    finite = [v for v in values if not math.isnan(v)]
    if include_zero:
        finite.append(0.0)
    if not finite:
        return None
    lo, hi = min(finite), max(finite)
    if lo == hi:
        pad = abs(lo) * 0.1 or 1.0
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.05
    return (lo if include_zero and lo == 0 else lo - pad), (hi if include_zero and hi == 0 else hi + pad)


def _aligned(s: Series, notes: list[str]) -> tuple[list[float | str], list[float], list[float], list[float]]:
    """x, y, lo, hi of a series cut to a common length; a mismatch is reported in the plot, not hidden."""
    n = min(len(s.x), len(s.y))
    if len(s.x) != len(s.y):
        notes.append(f"series {s.name!r}: {len(s.x)} x values but {len(s.y)} y values; drew {n}")
    y = [_num(v) for v in s.y[:n]]
    lo = [math.nan] * n
    hi = [math.nan] * n
    if s.lo is not None and s.hi is not None:
        if len(s.lo) != len(s.y) or len(s.hi) != len(s.y):
            notes.append(f"series {s.name!r}: lo/hi length differs from y; band drawn where present")
        lo = [_num(v) for v in s.lo[:n]] + [math.nan] * max(0, n - len(s.lo))
        hi = [_num(v) for v in s.hi[:n]] + [math.nan] * max(0, n - len(s.hi))
    return list(s.x[:n]), y, lo, hi


def _categories(data: Sequence[tuple[list[float | str], list[float], list[float], list[float]]]) -> list[str]:
    seen: dict[str, None] = {}
    for xs, *_ in data:
        for x in xs:
            seen.setdefault(str(x), None)
    return list(seen)


def _is_numeric_x(data: Sequence[tuple[list[float | str], list[float], list[float], list[float]]]) -> bool:
    return all(isinstance(x, int | float) and not isinstance(x, bool) for xs, *_ in data for x in xs)


def _axes(f: _Frame, plot: Plot, x_ticks: list[tuple[float, str]], rotate: bool) -> list[str]:
    out = [
        f'<line class="axis" x1="{f.left:.1f}" y1="{f.bottom:.1f}" x2="{f.right}" y2="{f.bottom:.1f}" '
        'stroke="#444"/>',
        f'<line class="axis" x1="{f.left:.1f}" y1="{f.top:.1f}" x2="{f.left:.1f}" y2="{f.bottom:.1f}" '
        'stroke="#444"/>',
    ]
    for t in nice_ticks(f.y_lo, f.y_hi):
        y = f.py(t)
        out.append(
            f'<line x1="{f.left:.1f}" y1="{y:.1f}" x2="{f.right}" y2="{y:.1f}" stroke="#e4e4e4"/>'
            f'<text x="{f.left - 6:.1f}" y="{y + 4:.1f}" text-anchor="end" font-size="11">'
            f"{_x(_fmt(t))}</text>"
        )
    for xv, label in x_ticks:
        x = f.px(xv)
        short = _cut(label, _LABEL_CHARS)
        out.append(f'<line x1="{x:.1f}" y1="{f.bottom:.1f}" x2="{x:.1f}" y2="{f.bottom + 4:.1f}" '
                   'stroke="#444"/>')
        if rotate:
            out.append(
                f'<text x="{x:.1f}" y="{f.bottom + 12:.1f}" font-size="11" text-anchor="end" '
                f'transform="rotate(-35 {x:.1f} {f.bottom + 12:.1f})">'
                f"<title>{_x(label)}</title>{_x(short)}</text>"
            )
        else:
            out.append(
                f'<text x="{x:.1f}" y="{f.bottom + 16:.1f}" font-size="11" text-anchor="middle">'
                f"<title>{_x(label)}</title>{_x(short)}</text>"
            )
    mid_x = (f.left + f.right) / 2
    mid_y = (f.top + f.bottom) / 2
    x_label = _cut(plot.x_label, int((2 * min(mid_x, f.width - mid_x) - 8) / text_width("x", 12)))
    y_label = _cut(plot.y_label, int((f.bottom - f.top + 20) / text_width("x", 12)))
    if x_label:
        out.append(f'<text x="{mid_x:.1f}" y="{f.height - 6}" text-anchor="middle" font-size="12">'
                   f"<title>{_x(plot.x_label)}</title>{_x(x_label)}</text>")
    if y_label:
        out.append(f'<text x="14" y="{mid_y:.1f}" text-anchor="middle" font-size="12" '
                   f'transform="rotate(-90 14 {mid_y:.1f})">'
                   f"<title>{_x(plot.y_label)}</title>{_x(y_label)}</text>")
    return out


def _legend_rows(names: Sequence[str], width: int) -> list[list[tuple[int, str]]]:
    """Legend items (index, shown name) wrapped into rows that fit between the margins."""
    room = width - 8 - _RIGHT
    rows: list[list[tuple[int, str]]] = [[]]
    used = 0.0
    for i, name in enumerate(names):
        shown = _cut(name, int((room - 20) / text_width("x", 11)))
        w = 22 + text_width(shown, 11)
        if rows[-1] and used + w > room:
            rows.append([])
            used = 0.0
        rows[-1].append((i, shown))
        used += w
    return [r for r in rows if r]


def _legend(rows: list[list[tuple[int, str]]], y0: float, names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for r, row in enumerate(rows):
        x, y = 8.0, y0 + 15 * r + 11
        for i, shown in row:
            out.append(
                f'<g class="legend-item"><rect x="{x:.1f}" y="{y - 9:.1f}" width="12" height="10" '
                f'fill="{PALETTE[i % len(PALETTE)]}"/><text x="{x + 16:.1f}" y="{y:.1f}" font-size="11">'
                f"<title>{_x(names[i])}</title>{_x(shown)}</text></g>"
            )
            x += 22 + text_width(shown, 11)
    return out


def _whisker(f: _Frame, x: float, lo: float, hi: float, color: str) -> str:
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


def _threshold_lines(f: _Frame, lines: Sequence[ThresholdLine], names: list[str], bars: bool) -> list[str]:
    """Full-width dashed lines labelled at the right end; a bar series' own threshold is drawn by _bars."""
    out: list[str] = []
    for j, t in enumerate(lines):
        if bars and t.series in names:
            continue
        color = PALETTE[names.index(t.series) % len(PALETTE)] if t.series in names else "#c62828"
        y = f.py(t.value)
        label = _cut(t.label, int((f.right - f.left - 8) / text_width("x", 10)))
        out.append(
            f'<line class="threshold" x1="{f.left:.1f}" y1="{y:.1f}" x2="{f.right}" y2="{y:.1f}" '
            f'stroke="{color}" stroke-width="1.5" stroke-dasharray="6 4"><title>{_x(t.label)}</title></line>'
            f'<text class="threshold-label" x="{f.right - 2}" y="{y - 3 - 11 * (j % 2):.1f}" font-size="10" '
            f'text-anchor="end" fill="{color}">{_x(label)}</text>'
        )
    return out


def render_plot(
    plot: Plot,
    *,
    width: int = 560,
    subtitle: str = "",
    thresholds: Sequence[ThresholdLine] = (),
) -> str:
    """One :class:`Plot` as an ``<svg>`` string (line, grouped bar or scatter).

    ``subtitle`` is a second, smaller title line (the scorecard puts the test's dataset and parameters
    there); ``thresholds`` are drawn and always lie inside the y axis."""
    if plot.kind not in ("line", "bar", "scatter"):
        raise ValueError(f"plot {plot.title!r}: unknown kind {plot.kind!r} (line, bar or scatter)")
    notes: list[str] = []
    data = [_aligned(s, notes) for s in plot.series]
    names = [s.name for s in plot.series]
    numeric = plot.kind != "bar" and _is_numeric_x(data)
    cats = [] if numeric else _categories(data)
    if plot.kind == "bar":  # widen so each group of bars stays readable
        width = max(width, _LEFT_MIN + _RIGHT + len(cats) * (len(data) * 12 + 16))
    title = _wrap(plot.title, int((width - 16) / text_width("x", 14, bold=True)), 2)
    sub = _cut(subtitle, int((width - 16) / text_width("x", 11)))
    legend = _legend_rows(names, width)
    top = 8 + 18 * len(title) + (15 if sub else 0) + 15 * len(legend) + 12
    all_y = [v for _, y, lo, hi in data for v in (*y, *lo, *hi)] + [_num(t.value) for t in thresholds]
    yr = _y_range(all_y, include_zero=plot.kind == "bar")
    tick_w = max((text_width(_fmt(t), 11) for t in nice_ticks(*yr)), default=0.0) if yr else 0.0
    left = max(_LEFT_MIN, 22 + 8 + tick_w)
    shorts = [_cut(c, _LABEL_CHARS) for c in cats]
    cat_w = (width - left - _RIGHT) / max(len(cats), 1)
    rotate = any(text_width(c, 11) > cat_w - 6 for c in shorts)
    if rotate:  # the first label reaches down-left from its tick: keep it inside the left edge
        longest = max(text_width(c, 11) for c in shorts)
        left = max(left, text_width(shorts[0], 11) * _COS + 4 - cat_w / 2)
        below = 12 + longest * _SIN + 11 * _COS + 4
    else:
        below = 22.0
    bottom = top + _PLOT_H
    height = math.ceil(bottom + below + (18 if plot.x_label else 0) + 6)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot plot-{plot.kind}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{_x(plot.title)}" '
        'font-family="sans-serif">',
    ]
    for i, line in enumerate(title):
        parts.append(
            f'<text class="title" x="{width / 2:.1f}" y="{22 + 18 * i}" text-anchor="middle" font-size="14" '
            f'font-weight="bold"><title>{_x(plot.title)}</title>{_x(line)}</text>'
        )
    if sub:
        parts.append(
            f'<text class="subtitle" x="{width / 2:.1f}" y="{20 + 18 * len(title)}" text-anchor="middle" '
            f'font-size="11" fill="#444"><title>{_x(subtitle)}</title>{_x(sub)}</text>'
        )
    parts += _legend(legend, 8 + 18 * len(title) + (15 if sub else 0) + 6, names)
    if yr is None:
        parts.append(
            f'<text x="{width / 2:.1f}" y="{(top + bottom) / 2:.1f}" text-anchor="middle" font-size="12" '
            'class="no-data">no finite data</text></svg>'
        )
        return "".join(parts)
    f = _Frame(width, height, left, top, bottom, *yr)
    if numeric:
        xs = [_num(x) for xs_, *_ in data for x in xs_]
        xr = _y_range(xs, include_zero=False) or (0.0, 1.0)
        f.x_lo, f.x_hi = xr
        x_ticks = [(t, _fmt(t)) for t in nice_ticks(*xr)]
    else:
        f.x_lo, f.x_hi = 0.0, float(max(len(cats), 1))
        x_ticks = [(i + 0.5, c) for i, c in enumerate(cats)]
    parts += _axes(f, plot, x_ticks, rotate)
    cat_pos = {c: i + 0.5 for i, c in enumerate(cats)}
    own = {t.series: t for t in thresholds if t.series is not None}
    for k, (xs_raw, y, lo, hi) in enumerate(data):
        color = PALETTE[k % len(PALETTE)]
        xpos = [_num(x) if numeric else cat_pos[str(x)] for x in xs_raw]
        if plot.kind == "bar":
            parts += _bars(f, xpos, y, lo, hi, k, len(data), color, own.get(names[k]))
            continue
        parts += _line_or_scatter(f, plot, k, xpos, y, lo, hi, color)
    parts += _threshold_lines(f, thresholds, names, plot.kind == "bar")
    for j, note in enumerate(notes):
        parts.append(
            f'<text class="note" x="{f.left + 4:.1f}" y="{top + 10 + 12 * j}" font-size="10" fill="#b00">'
            f"<title>{_x(note)}</title>{_x(_cut(note, int((f.right - f.left) / text_width('x', 10))))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _line_or_scatter(
    f: _Frame, plot: Plot, k: int, xpos: list[float], y: list[float], lo: list[float], hi: list[float],
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
            f"<title>{_x(plot.series[k].name)}: {_x(_fmt(y[i]))}</title></circle>"
        )
    return parts


def _pts(points: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in points)


def _bars(
    f: _Frame,
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
                f'y2="{ty:.1f}" stroke="#111" stroke-width="2.5"><title>{_x(threshold.label)}</title></line>'
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
            f'height="{abs(base - top):.1f}" fill="{color}"><title>{_x(_fmt(y[i]))}</title></rect>'
        )
        out.append(_whisker(f, x0 + w / 2, lo[i], hi[i], "#222"))
    return out
