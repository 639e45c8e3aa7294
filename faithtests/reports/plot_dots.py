"""A compact dot/row chart: one row per value (a model's metric on one test or slice), on a horizontal
axis that always shows zero.

Why: a bar chart of one or two values spends 300 px to show a bar whose length hides where zero is
(a value of 0 is an invisible bar). A row per value is ~18 px tall, draws zero as a solid line, and
carries everything a check needs on one line: the value as a dot coloured by its verdict (the page's
pass/fail/insufficient colours), its 95% CI as a whisker, the check's threshold as a dark tick, the
baseline's value as a hollow diamond, and the value in figures at the right. Texts are cut to fit and
keep their full wording in a ``<title>`` tooltip, as in :mod:`faithtests.reports.plots`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from faithtests.reports.plot_axes import (
    RIGHT,
    STATUS_COLOR,
    ThresholdLine,
    cut,
    esc,
    finite,
    fmt,
    nice_ticks,
    share,
    text_width,
    wrap,
    y_range,
)

__all__ = ["DotRow", "render_dots"]

ROW_H = 18
VALUE_W = 52  # the right-hand column with the value in figures


@dataclass(frozen=True)
class DotRow:
    """One value: ``status`` is its check's verdict (pass, fail, insufficient or none: unchecked)."""

    label: str
    value: float
    lo: float = math.nan
    hi: float = math.nan
    threshold: ThresholdLine | None = None
    baseline: float = math.nan
    status: str = "none"


def _x_range(rows: Sequence[DotRow]) -> tuple[float, float]:
    values = [finite(v) for r in rows for v in (r.value, r.lo, r.hi, r.baseline)]
    values += [finite(r.threshold.value) for r in rows if r.threshold is not None]
    return y_range(values, include_zero=True) or (0.0, 1.0)


def _dot(x: float, y: float, status: str, tip: str = "") -> str:
    title = f"<title>{esc(tip)}</title>" if tip else ""
    return (f'<circle class="dot {status}" cx="{x:.1f}" cy="{y:.1f}" r="4.5" '
            f'fill="{STATUS_COLOR.get(status, STATUS_COLOR["none"])}">{title}</circle>')


def _tick(x: float, y: float, tip: str = "") -> str:
    title = f"<title>{esc(tip)}</title>" if tip else ""
    return (f'<line class="threshold" x1="{x:.1f}" y1="{y - 7:.1f}" x2="{x:.1f}" y2="{y + 7:.1f}" '
            f'stroke="#111" stroke-width="2.5">{title}</line>')


def _diamond(x: float, y: float, tip: str = "") -> str:
    title = f"<title>{esc(tip)}</title>" if tip else ""
    return (f'<path class="baseline" d="M{x:.1f},{y - 5:.1f}l5,5l-5,5l-5,-5z" fill="#fff" stroke="#111" '
            f'stroke-width="1.5">{title}</path>')


def _legend(rows: Sequence[DotRow], y: float, width: int) -> list[str]:
    """Only the marks this chart uses: verdict colours, the threshold tick, the baseline diamond."""
    items: list[tuple[str, str]] = [(name, status) for status, name in (
        ("pass", "pass"), ("fail", "fail"), ("insufficient", "insufficient"), ("none", "unchecked"))
        if any(r.status == status for r in rows)]
    if any(r.threshold is not None for r in rows):
        items.append(("threshold", "threshold"))
    if any(not math.isnan(finite(r.baseline)) for r in rows):
        items.append(("baseline", "baseline"))
    out, x = [], 12.0
    for name, kind in items:
        if x + 12 + text_width(name, 10) > width - RIGHT:
            break
        mark = (_tick(x, y - 4) if kind == "threshold" else _diamond(x, y - 4) if kind == "baseline"
                else _dot(x, y - 4, kind))
        out.append(f'<g class="legend-item">{mark}'
                   f'<text x="{x + 9:.1f}" y="{y:.1f}" font-size="10">{esc(name)}</text></g>')
        x += 24 + text_width(name, 10)
    return out


@dataclass(frozen=True)
class _Axis:
    """Maps values to x pixels between ``left`` and ``right``."""

    lo: float
    hi: float
    left: float
    right: float

    def px(self, v: float) -> float:
        return self.left + share(v, self.lo, self.hi) * (self.right - self.left)


def _row(r: DotRow, y: float, ax: _Axis, label_chars: int, width: int) -> list[str]:
    """Label, CI whisker, threshold tick, baseline diamond, dot and the value in figures."""
    v, lo, hi, base = finite(r.value), finite(r.lo), finite(r.hi), finite(r.baseline)
    out = [f'<text class="row-label" x="8" y="{y + 4:.1f}" font-size="11"><title>{esc(r.label)}</title>'
           f"{esc(cut(r.label, label_chars))}</text>"]
    if not (math.isnan(lo) or math.isnan(hi)):
        out.append(f'<path class="ci" d="M{ax.px(lo):.1f},{y:.1f}H{ax.px(hi):.1f}M{ax.px(lo):.1f},{y - 3:.1f}'
                   f'v6M{ax.px(hi):.1f},{y - 3:.1f}v6" stroke="#444" fill="none"/>')
    if r.threshold is not None:
        out.append(_tick(ax.px(r.threshold.value), y, r.threshold.label))
    if not math.isnan(base):
        out.append(_diamond(ax.px(base), y, f"baseline {fmt(base)}"))
    color = STATUS_COLOR.get(r.status, STATUS_COLOR["none"])
    if math.isnan(v):
        out.append(f'<text class="na" x="{ax.px(0.0) + 4:.1f}" y="{y + 4:.1f}" font-size="10" fill="#888">'
                   "n/a</text>")
        shown = "n/a"
    else:
        ci = "" if math.isnan(lo) or math.isnan(hi) else f" [{fmt(lo)}, {fmt(hi)}]"
        out.append(_dot(ax.px(v), y, r.status, f"{r.label}: {fmt(v)}{ci} ({r.status})"))
        shown = fmt(v)
    out.append(f'<text class="value" x="{width - RIGHT}" y="{y + 4:.1f}" font-size="11" text-anchor="end" '
               f'fill="{color}" font-weight="bold">{esc(cut(shown, 7))}</text>')
    return out


def _x_axis(ax: _Axis, y: float, x_label: str, width: int, height: int) -> list[str]:
    out = [f'<line class="axis" x1="{ax.left:.1f}" y1="{y:.1f}" x2="{ax.right:.1f}" y2="{y:.1f}" '
           'stroke="#444"/>']
    for t in nice_ticks(ax.lo, ax.hi):
        x = ax.px(t)
        out.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y + 4:.1f}" stroke="#444"/>'
                   f'<text x="{x:.1f}" y="{y + 15:.1f}" font-size="10" text-anchor="middle">'
                   f"{esc(fmt(t))}</text>")
    if x_label:
        mid = (ax.left + ax.right) / 2
        shown = cut(x_label, int((2 * min(mid, width - mid) - 8) / text_width("x", 11)))
        out.append(f'<text x="{mid:.1f}" y="{height - 5}" font-size="11" text-anchor="middle">'
                   f"<title>{esc(x_label)}</title>{esc(shown)}</text>")
    return out


def render_dots(title: str, rows: Sequence[DotRow], *, subtitle: str = "", x_label: str = "",
                width: int = 560) -> str:
    """The rows as one ``<svg>``: zero is always on the axis (a solid line), as is every threshold and
    baseline value."""
    title_lines = wrap(title, int((width - 16) / text_width("x", 13, bold=True)), 2)
    sub = cut(subtitle, int((width - 16) / text_width("x", 11)))
    top = 6 + 17 * len(title_lines) + (14 if sub else 0)
    legend_y = top + 10
    first = legend_y + 14 + ROW_H / 2
    label_w = min(max((text_width(r.label, 11) for r in rows), default=0.0), width * 0.42)
    lo, hi = _x_range(rows)
    ax = _Axis(lo, hi, 8 + label_w + 14, width - RIGHT - VALUE_W - 6)
    axis_y = first + ROW_H * (len(rows) - 0.5) + 2
    height = math.ceil(axis_y + 18 + (16 if x_label else 0) + 4)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot plot-dots" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}" '
             'font-family="sans-serif">']
    parts += [f'<text class="title" x="{width / 2:.1f}" y="{20 + 17 * i}" text-anchor="middle" '
              f'font-size="13" font-weight="bold"><title>{esc(title)}</title>{esc(line)}</text>'
              for i, line in enumerate(title_lines)]
    if sub:
        parts.append(f'<text class="subtitle" x="{width / 2:.1f}" y="{18 + 17 * len(title_lines)}" '
                     f'text-anchor="middle" font-size="11" fill="#444"><title>{esc(subtitle)}</title>'
                     f"{esc(sub)}</text>")
    parts += _legend(rows, legend_y + 4, width)
    parts += [f'<rect x="4" y="{first + ROW_H * (i - 0.5):.1f}" width="{width - 8}" height="{ROW_H}" '
              'fill="#f4f4f4"/>' for i in range(1, len(rows), 2)]
    zero = ax.px(0.0)
    parts.append(f'<line class="zero" x1="{zero:.1f}" y1="{first - ROW_H / 2:.1f}" x2="{zero:.1f}" '
                 f'y2="{axis_y:.1f}" stroke="#888" stroke-width="1"/>')
    label_chars = round(label_w / text_width("x", 11))  # the longest label fits whole, unless capped
    for i, r in enumerate(rows):
        parts += _row(r, first + ROW_H * i, ax, label_chars, width)
    parts += _x_axis(ax, axis_y, x_label, width, height)
    parts.append("</svg>")
    return "".join(parts)
