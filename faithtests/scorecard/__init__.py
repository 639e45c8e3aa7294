"""The run model: results, the recorder, thresholds and verdicts, coverage, the metric glossary, the
scorecard's JSON I/O, fingerprints, baselines and the paired comparison.

Pure Python (no torch, no pytest, no jinja2 or pandas): a scorecard can be read, judged, compared and
merged without the run that produced it. Everything that shows a scorecard to a person or another tool
(HTML, plots, history, the viewer, pandas tables, exports, terminal text) is :mod:`faithtests.reports`,
one layer above: an import contract (``pyproject.toml``) keeps this package from importing it.
"""

from faithtests.scorecard.baseline import Comparison, Tolerance, compare
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
    "load_thresholds",
    "merge_scorecards",
    "read_scorecard",
    "write_scorecard",
]
