"""Reports: what shows a scorecard (:mod:`faithtests.scorecard`, the run model) to a person or a tool.

One self-contained HTML page per run (``html``, jinja2 templates shipped as package data; ``render_*``
build its views, ``plots`` / ``plot_*`` its SVG charts), the history page across runs (``history*``),
the side-by-side viewer, tidy pandas tables (:func:`load` of a scorecard, :func:`load_many` of several
runs; pandas is imported when a table is built), exports to experiment trackers, and the terminal's
summary and comparison text. Reports read the run model and never change a verdict; the run model never
imports a report (the import contract in ``pyproject.toml``). ``html`` is imported on demand, not here.
"""

from faithtests.reports.comparison_text import format_comparison
from faithtests.reports.frames import LoadedScorecard, deltas_frame, load, load_many

__all__ = ["LoadedScorecard", "deltas_frame", "format_comparison", "load", "load_many"]
