"""Hand-written inline SVG for the scorecard: line (with a CI band), grouped bar and scatter plots.

Why not matplotlib: the report must be self-contained and small, and an SVG string needs no backend,
no fonts and no files. Every text is XML-escaped; NaN/None/inf values are skipped (a line breaks
around them, a bar shows "n/a") instead of poisoning the axis range. Only presentation attributes are
used (no ``style=""``), so the page's Content-Security-Policy can forbid inline style attributes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from faithtests.scorecard.model import Plot, Series

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_LEFT, _RIGHT, _TOP = 64, 16, 56
_LABEL_CHARS = 28  # categorical tick labels are cut to this; the full text is in a <title> tooltip


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
    bottom: int
    y_lo: float
    y_hi: float
    x_lo: float = 0.0
    x_hi: float = 1.0

    def px(self, x: float) -> float:
        return _LEFT + (x - self.x_lo) / (self.x_hi - self.x_lo) * (self.width - _LEFT - _RIGHT)

    def py(self, y: float) -> float:
        return self.bottom - (y - self.y_lo) / (self.y_hi - self.y_lo) * (self.bottom - _TOP)


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
        f'<line class="axis" x1="{_LEFT}" y1="{f.bottom}" x2="{f.width - _RIGHT}" y2="{f.bottom}" '
        'stroke="#444"/>',
        f'<line class="axis" x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{f.bottom}" stroke="#444"/>',
    ]
    for t in nice_ticks(f.y_lo, f.y_hi):
        y = f.py(t)
        out.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{f.width - _RIGHT}" y2="{y:.1f}" stroke="#e4e4e4"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_x(_fmt(t))}</text>'
        )
    for xv, label in x_ticks:
        x = f.px(xv)
        short = label if len(label) <= _LABEL_CHARS else label[: _LABEL_CHARS - 1] + "…"
        out.append(f'<line x1="{x:.1f}" y1="{f.bottom}" x2="{x:.1f}" y2="{f.bottom + 4}" stroke="#444"/>')
        if rotate:
            out.append(
                f'<text x="{x:.1f}" y="{f.bottom + 12}" font-size="11" text-anchor="end" '
                f'transform="rotate(-35 {x:.1f} {f.bottom + 12})">'
                f"<title>{_x(label)}</title>{_x(short)}</text>"
            )
        else:
            out.append(
                f'<text x="{x:.1f}" y="{f.bottom + 16}" font-size="11" text-anchor="middle">'
                f"<title>{_x(label)}</title>{_x(short)}</text>"
            )
    mid_x = (_LEFT + f.width - _RIGHT) / 2
    out.append(
        f'<text x="{mid_x:.1f}" y="{f.height - 6}" text-anchor="middle" font-size="12">'
        f"{_x(plot.x_label)}</text>"
        f'<text x="14" y="{(_TOP + f.bottom) / 2:.1f}" text-anchor="middle" font-size="12" '
        f'transform="rotate(-90 14 {(_TOP + f.bottom) / 2:.1f})">{_x(plot.y_label)}</text>'
    )
    return out


def _legend(names: Sequence[str], width: int) -> list[str]:
    out: list[str] = []
    x, y = _LEFT, 36
    for i, name in enumerate(names):
        w = 22 + 7 * min(len(name), 48)
        if x + w > width - _RIGHT and x > _LEFT:
            x, y = _LEFT, y + 14  # wrap; the top margin leaves room for two rows
        out.append(
            f'<g class="legend-item"><rect x="{x}" y="{y - 9}" width="12" height="10" '
            f'fill="{PALETTE[i % len(PALETTE)]}"/><text x="{x + 16}" y="{y}" font-size="11">'
            f"{_x(name[:48])}</text></g>"
        )
        x += w
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


def render_plot(plot: Plot, *, width: int = 560, height: int = 320) -> str:
    """One :class:`Plot` as an ``<svg>`` string (line, grouped bar or scatter)."""
    if plot.kind not in ("line", "bar", "scatter"):
        raise ValueError(f"plot {plot.title!r}: unknown kind {plot.kind!r} (line, bar or scatter)")
    notes: list[str] = []
    data = [_aligned(s, notes) for s in plot.series]
    numeric = plot.kind != "bar" and _is_numeric_x(data)
    cats = [] if numeric else _categories(data)
    rotate = bool(cats) and (len(cats) > 6 or max(len(c) for c in cats) > 10)
    if plot.kind == "bar":  # widen so each group of bars stays readable
        width = max(width, _LEFT + _RIGHT + len(cats) * (len(data) * 12 + 16))
    bottom = height - (92 if rotate else 44)
    all_y = [v for _, y, lo, hi in data for v in (*y, *lo, *hi)]
    yr = _y_range(all_y, include_zero=plot.kind == "bar")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot plot-{plot.kind}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{_x(plot.title)}" '
        'font-family="sans-serif">',
        f'<text x="{width / 2:.1f}" y="18" text-anchor="middle" font-size="14" font-weight="bold">'
        f"{_x(plot.title)}</text>",
    ]
    parts += _legend([s.name for s in plot.series], width)
    if yr is None:
        parts.append(
            f'<text x="{width / 2:.1f}" y="{height / 2:.1f}" text-anchor="middle" font-size="12" '
            'class="no-data">no finite data</text></svg>'
        )
        return "".join(parts)
    f = _Frame(width, height, bottom, *yr)
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
    for k, (xs_raw, y, lo, hi) in enumerate(data):
        color = PALETTE[k % len(PALETTE)]
        xpos = [_num(x) if numeric else cat_pos[str(x)] for x in xs_raw]
        if plot.kind == "bar":
            parts += _bars(f, xpos, y, lo, hi, k, len(data), color)
            continue
        order = sorted(range(len(y)), key=lambda i: (math.isnan(xpos[i]), xpos[i]))
        if plot.kind == "line":
            band_ok = [
                not (math.isnan(xpos[i]) or math.isnan(lo[i]) or math.isnan(hi[i])) for i in range(len(y))
            ]
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
            if plot.kind == "scatter":
                parts.append(_whisker(f, f.px(xpos[i]), lo[i], hi[i], color))
            parts.append(
                f'<circle cx="{f.px(xpos[i]):.1f}" cy="{f.py(y[i]):.1f}" r="3" fill="{color}">'
                f"<title>{_x(plot.series[k].name)}: {_x(_fmt(y[i]))}</title></circle>"
            )
    for j, note in enumerate(notes):
        parts.append(
            f'<text class="note" x="{_LEFT}" y="{_TOP + 10 + 12 * j}" font-size="10" fill="#b00">'
            f"{_x(note)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


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
) -> list[str]:
    band = min((f.px(1.0) - f.px(0.0)) * 0.8, 48.0 * n_series)  # no metre-wide bars for one category
    w = band / max(n_series, 1)
    base = f.py(min(max(0.0, f.y_lo), f.y_hi))
    out: list[str] = []
    for i in range(len(y)):
        x0 = f.px(xpos[i]) - band / 2 + k * w
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
