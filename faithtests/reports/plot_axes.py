"""The pieces every scorecard plot shares: text measuring and cutting, number formatting, round ticks,
the data-to-pixel frame, the axes and the legend (:mod:`faithtests.reports.plots` draws the marks).

Widths are estimated from a generous average glyph width (``CHAR``), so a margin sized from them never
clips a text; a cut text keeps its full wording in a ``<title>`` tooltip.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from faithtests.scorecard.model import Op, Plot

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
RIGHT, LEFT_MIN, PLOT_H = 16, 64, 200
CHAR = 0.62  # average glyph width in em: above DejaVu/Liberation Sans' mean, so estimates err wide
LABEL_CHARS = 28  # categorical tick labels are cut to this; the full text is in a <title> tooltip
SIN, COS = math.sin(math.radians(35)), math.cos(math.radians(35))  # x labels rotate by -35°
OP_TEXT = {">=": "≥", ">": ">", "<=": "≤", "<": "<"}
# verdict colours: the same hex values as the page's badges and banner (style.css.j2)
STATUS_COLOR = {"pass": "#2e7d32", "fail": "#c62828", "insufficient": "#c79100", "none": "#555555"}


def esc(text: object) -> str:
    return escape(str(text), quote=True)


def finite(v: object) -> float:
    """A finite float, or NaN for anything else (None from JSON, inf, strings)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return math.nan
    f = float(v)
    return f if math.isfinite(f) else math.nan


def fmt(v: float) -> str:
    if v == 0:
        return "0"
    return f"{v:.3g}"


@dataclass(frozen=True)
class ThresholdLine:
    """A check's threshold on a plot's value axis; ``series`` limits it to one series (its own threshold)."""

    value: float
    op: Op
    series: str | None = None

    @property
    def label(self) -> str:
        who = f"{self.series}: " if self.series else ""
        return f"{who}threshold {OP_TEXT[self.op]} {fmt(self.value)}"


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Estimated rendered width in px (errs wide; see ``CHAR``)."""
    return len(text) * size * (CHAR + (0.06 if bold else 0.0))


def cut(text: str, chars: int) -> str:
    chars = max(chars, 2)
    return text if len(text) <= chars else text[: chars - 1] + "…"


def wrap(text: str, chars: int, lines: int) -> list[str]:
    """Word-wrap into at most ``lines`` lines of ``chars``; the last line is cut with "…"."""
    out: list[str] = []
    words = text.split()
    while words and len(out) < lines:
        line = words.pop(0)
        while words and len(line) + 1 + len(words[0]) <= chars:
            line += " " + words.pop(0)
        out.append(line)
    if words:
        out[-1] = cut(out[-1] + " " + " ".join(words), chars)
    return [cut(line, chars) for line in out] or [""]


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (steps of 1, 2, 2.5 or 5 times a power of 10).

    Ticks are ``k * step`` for whole ``k`` counted up front, never accumulated: a span of a few ulps (two
    values one float step apart) or one near the float range's ends yields at most ``10 * n`` ticks, or
    just its two ends when no round step fits between them; no loop depends on float addition advancing.
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise ValueError(f"nice_ticks needs finite lo <= hi, got {lo!r}, {hi!r}")
    if hi == lo:
        return [lo]
    n = max(n, 1)
    raw = hi / n - lo / n  # (not (hi - lo) / n: that overflows for lo = -1e308, hi = 1e308)
    mag = 10.0 ** math.floor(math.log10(raw)) if raw > 0 else 0.0
    step = next((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), 0.0)
    if not (math.isfinite(step) and step > 0):
        return [lo, hi]
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    if not (0 <= last - first <= 10 * n):
        return [lo, hi]
    # round to the step's own decimals (a fixed number of decimals would zero a step of 1e-17)
    digits = min(max(2 - math.floor(math.log10(step)), 0), 300)
    ticks: list[float] = []
    for k in range(first, last + 1):
        t = round(k * step, digits) + 0.0  # + 0.0 turns -0.0 into 0.0
        if lo - step * 1e-9 <= t <= hi + step * 1e-9 and (not ticks or t > ticks[-1]):
            ticks.append(t)
    return ticks or [lo, hi]


@dataclass
class Frame:
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
        return self.width - RIGHT

    def px(self, x: float) -> float:
        return self.left + share(x, self.x_lo, self.x_hi) * (self.right - self.left)

    def py(self, y: float) -> float:
        return self.bottom - share(y, self.y_lo, self.y_hi) * (self.bottom - self.top)


def share(v: float, lo: float, hi: float) -> float:
    """Where ``v`` sits in [lo, hi] as a fraction; halved operands so a range spanning the whole float
    line does not overflow to inf (which would put NaN coordinates into the SVG)."""
    return (v / 2 - lo / 2) / (hi / 2 - lo / 2)


def y_range(values: Sequence[float], include_zero: bool) -> tuple[float, float] | None:
    """The padded value range of ``values`` (NaN ignored), finite even at the float range's ends, and
    never narrower than a few ulps of its values (a constant series gets 10% either side)."""
    finite = [v for v in values if math.isfinite(v)]
    if include_zero:
        finite.append(0.0)
    if not finite:
        return None
    lo, hi = min(finite), max(finite)
    if hi - lo <= 4 * math.ulp(max(abs(lo), abs(hi))):  # constant, or equal up to float noise
        mid = lo / 2 + hi / 2
        pad = abs(mid) * 0.1 or 1.0
        return _clip(mid - pad), _clip(mid + pad)
    pad = (hi / 2 - lo / 2) * 0.1  # (hi - lo) * 0.05 without overflowing
    low = lo if include_zero and lo == 0 else _clip(lo - pad)
    return low, (hi if include_zero and hi == 0 else _clip(hi + pad))


def _clip(v: float) -> float:
    return max(-sys.float_info.max, min(sys.float_info.max, v))


def axes(f: Frame, plot: Plot, x_ticks: list[tuple[float, str]], rotate: bool) -> list[str]:
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
            f"{esc(fmt(t))}</text>"
        )
    for xv, label in x_ticks:
        x = f.px(xv)
        short = cut(label, LABEL_CHARS)
        out.append(f'<line x1="{x:.1f}" y1="{f.bottom:.1f}" x2="{x:.1f}" y2="{f.bottom + 4:.1f}" '
                   'stroke="#444"/>')
        if rotate:
            out.append(
                f'<text x="{x:.1f}" y="{f.bottom + 12:.1f}" font-size="11" text-anchor="end" '
                f'transform="rotate(-35 {x:.1f} {f.bottom + 12:.1f})">'
                f"<title>{esc(label)}</title>{esc(short)}</text>"
            )
        else:
            out.append(
                f'<text x="{x:.1f}" y="{f.bottom + 16:.1f}" font-size="11" text-anchor="middle">'
                f"<title>{esc(label)}</title>{esc(short)}</text>"
            )
    mid_x = (f.left + f.right) / 2
    mid_y = (f.top + f.bottom) / 2
    x_label = cut(plot.x_label, int((2 * min(mid_x, f.width - mid_x) - 8) / text_width("x", 12)))
    y_label = cut(plot.y_label, int((f.bottom - f.top + 20) / text_width("x", 12)))
    if x_label:
        out.append(f'<text x="{mid_x:.1f}" y="{f.height - 6}" text-anchor="middle" font-size="12">'
                   f"<title>{esc(plot.x_label)}</title>{esc(x_label)}</text>")
    if y_label:
        out.append(f'<text x="14" y="{mid_y:.1f}" text-anchor="middle" font-size="12" '
                   f'transform="rotate(-90 14 {mid_y:.1f})">'
                   f"<title>{esc(plot.y_label)}</title>{esc(y_label)}</text>")
    return out


def legend_rows(names: Sequence[str], width: int) -> list[list[tuple[int, str]]]:
    """Legend items (index, shown name) wrapped into rows that fit between the margins."""
    room = width - 8 - RIGHT
    rows: list[list[tuple[int, str]]] = [[]]
    used = 0.0
    for i, name in enumerate(names):
        shown = cut(name, int((room - 20) / text_width("x", 11)))
        w = 22 + text_width(shown, 11)
        if rows[-1] and used + w > room:
            rows.append([])
            used = 0.0
        rows[-1].append((i, shown))
        used += w
    return [r for r in rows if r]


def legend(rows: list[list[tuple[int, str]]], y0: float, names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for r, row in enumerate(rows):
        x, y = 8.0, y0 + 15 * r + 11
        for i, shown in row:
            out.append(
                f'<g class="legend-item"><rect x="{x:.1f}" y="{y - 9:.1f}" width="12" height="10" '
                f'fill="{PALETTE[i % len(PALETTE)]}"/><text x="{x + 16:.1f}" y="{y:.1f}" font-size="11">'
                f"<title>{esc(names[i])}</title>{esc(shown)}</text></g>"
            )
            x += 22 + text_width(shown, 11)
    return out
