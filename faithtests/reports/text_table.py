"""Plain-text tables and lines that fit a width (issue 49, item 3): the run's summary and ``faithtests
compare`` print tables whose natural width was ~230 columns, which a CI log or an 80-column terminal
folds into noise. Stdlib only.

:func:`table` lays out columns at their natural width when they fit; otherwise it narrows the widest
wrappable column one character at a time (never below :data:`MIN_COLUMN`) until the row fits, and wraps
those cells onto continuation lines, so every value stays in its column; a table that cannot fit so
becomes one record per row (``header: cell`` pairs). Before narrowing, the columns every row shares (one
model, one suite) go on a line above the table, which then often fits. :func:`fit_lines`
wraps free-text lines at spaces (a path or an id is never cut), continuation lines indented.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Iterable, Sequence

#: The width of a log (output that is not a terminal) unless ``$COLUMNS`` says otherwise.
LOG_WIDTH = 120
#: The narrowest a wrapped column becomes: narrower, a name split every few characters reads worse than
#: the records a table too wide becomes.
MIN_COLUMN = 12
GAP = "  "


def output_width(isatty: bool, terminal_width: int) -> int:
    """The width to fit: the terminal's on a terminal; for a log ``$COLUMNS`` if set, else
    :data:`LOG_WIDTH` (a pipe reports 80 columns that nothing enforces; CI logs are read wider)."""
    if isatty:
        return max(terminal_width, 40)
    try:
        return max(int(os.environ.get("COLUMNS", "")), 40)
    except ValueError:
        return LOG_WIDTH


def stdout_width() -> int | None:
    """The width the CLI's reports fit on this process's standard output: the terminal's; a pipe or file
    keeps one line per row (``None``: natural widths, what ``grep`` and ``awk`` read) unless
    ``$COLUMNS`` asks for a width."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return output_width(sys.stdout.isatty(), shutil.get_terminal_size().columns)
    return None


def table(header: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None,
          wrap: Iterable[int] | None = None, *, rule: bool = False) -> list[str]:
    """The rows under ``header`` (and a rule of dashes under it with ``rule``), columns joined by two
    spaces, each line at most ``width`` characters where narrowing the ``wrap`` columns (default: all)
    to :data:`MIN_COLUMN` allows (``None``: natural widths). A table that cannot fit even so becomes
    one record per row, ``header: cell`` pairs wrapped at spaces (:func:`records`). Trailing spaces are
    stripped."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    wrapped = set(range(len(header))) if wrap is None else set(wrap)
    if width is not None and _excess(widths, width) > 0:
        shared = _shared(header, rows, wrapped, width, rule)
        if shared is not None:
            return shared
    if width is not None and not _narrow(widths, width, wrapped):
        return records(header, rows, width)
    out: list[str] = []
    for n, cells in enumerate((header, *rows)):
        parts = [_cut(c, w) for c, w in zip(cells, widths, strict=True)]
        for k in range(max(len(p) for p in parts)):
            out.append(GAP.join((p[k] if k < len(p) else "").ljust(w)
                                for p, w in zip(parts, widths, strict=True)).rstrip())
        if n == 0 and rule:
            out.append(GAP.join("-" * w for w in widths))
    return out


def _excess(widths: Sequence[int], width: int) -> int:
    """How many characters a row at ``widths`` is wider than ``width`` (<= 0: it fits)."""
    return sum(widths) + len(GAP) * (len(widths) - 1) - width


def _shared(header: Sequence[str], rows: Sequence[Sequence[str]], wrap: set[int], width: int,
            rule: bool) -> list[str] | None:
    """A table too wide whose rows share some cells (one model, one suite): those ``header: cell`` pairs
    on a line above, the table of the other columns under it; ``None`` when no column is shared (or
    one row: its record reads better)."""
    same = [i for i in range(len(header)) if all(r[i] == rows[0][i] for r in rows)] if len(rows) > 1 else []
    if not same or len(same) == len(header):
        return None
    keep = [i for i in range(len(header)) if i not in same]
    above = fit_lines([" · ".join(f"{header[i]}: {rows[0][i]}" for i in same if rows[0][i])], width)
    below = table([header[i] for i in keep], [[r[i] for i in keep] for r in rows], width,
                  [j for j, i in enumerate(keep) if i in wrap], rule=rule)
    return [*above, *below] if above != [""] else below


def records(header: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """Each row as one record, ``header: cell`` pairs (empty cells left out) joined by `` · `` and
    wrapped at spaces to ``width``: what a table too wide for the output becomes."""
    return fit_lines([" · ".join(f"{h}: {c}" for h, c in zip(header, r, strict=True) if c) for r in rows],
                     width)


def _narrow(widths: list[int], width: int, wrap: set[int]) -> bool:
    """Narrow the widest wrappable column, one character at a time, until the line fits (in place);
    False when it cannot."""
    excess = _excess(widths, width)
    while excess > 0:
        candidates = [i for i in wrap if widths[i] > MIN_COLUMN]
        if not candidates:
            return False
        widest = max(candidates, key=lambda i: (widths[i], -i))
        widths[widest] -= 1
        excess -= 1
    return True


def _cut(cell: str, width: int) -> list[str]:
    """``cell`` in lines of at most ``width``: at spaces where it has them, else every ``width``."""
    if len(cell) <= width:
        return [cell]
    return textwrap.wrap(cell, width, break_long_words=True, break_on_hyphens=False) or [""]


def fit_lines(lines: Iterable[str], width: int, indent: str = "    ") -> list[str]:
    """Each line wrapped at spaces to ``width``, continuations indented; a word longer than the width
    (a path) stays whole on its own line; table rows (already fitted) and blank lines pass through."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[:len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, width, initial_indent="", subsequent_indent=lead + indent,
                             break_long_words=False, break_on_hyphens=False, drop_whitespace=True) or [line]
    return out


def num(x: float | None) -> str:
    """A value as the terminal tables print it: 3 decimals, 4 significant digits under 1e-3, "—" when
    undefined."""
    if x is None:
        return "—"
    return f"{x:.4g}" if x != 0 and abs(x) < 1e-3 else f"{x:.3f}"


def signed(x: float | None) -> str:
    """:func:`num` with its sign (a delta)."""
    return "—" if x is None else ("+" if x >= 0 else "") + num(x)
