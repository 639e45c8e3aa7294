"""Results model, scorecard JSON I/O, thresholds, baseline comparison, fingerprint and rendering.

Pure Python (no torch, no pytest): a scorecard can be read, compared, merged and rendered without the
run that produced it. ``html`` (jinja2) is imported on demand, not here; :func:`load` gives tidy
pandas tables of a scorecard and :func:`load_many` one table of several runs (pandas imported when a
table is built).
"""

from faithtests.scorecard.baseline import Comparison, Tolerance, compare
from faithtests.scorecard.comparison_text import format_comparison
from faithtests.scorecard.frames import LoadedScorecard, deltas_frame, load, load_many
from faithtests.scorecard.gate_kinds import ThresholdError
from faithtests.scorecard.model import (
    SCHEMA_VERSION,
    Exemplar,
    InvalidCount,
    MetricResult,
    Plot,
    Series,
    TestRecord,
)
from faithtests.scorecard.scorecard import (
    Scorecard,
    ScorecardError,
    merge_scorecards,
    read_scorecard,
    write_scorecard,
)
from faithtests.scorecard.thresholds import Thresholds, load_thresholds

__all__ = [
    "SCHEMA_VERSION",
    "Comparison",
    "Exemplar",
    "InvalidCount",
    "LoadedScorecard",
    "MetricResult",
    "Plot",
    "Scorecard",
    "ScorecardError",
    "Series",
    "TestRecord",
    "ThresholdError",
    "Thresholds",
    "Tolerance",
    "compare",
    "deltas_frame",
    "format_comparison",
    "load",
    "load_many",
    "load_thresholds",
    "merge_scorecards",
    "read_scorecard",
    "write_scorecard",
]
