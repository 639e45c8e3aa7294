"""History across checkpoints: each checked metric's trend over ordered runs, and the verdicts on it.

Rules (documented in docs/reports.md, "History across checkpoints"):

* Runs are ordered by ``--faith-step``, then start time (:func:`~faithtests.reports.frames.read_runs`).
* A row is one result key (test key, model label, variant, metric, slice), so a model keeps its row
  across runs when its checkpoints are tested under one label (``--faith-model cand=SPEC``), as for
  the baseline gate. Only *checked* rows are followed: those with a threshold check in some run.
* *First failing run*: the first run whose check of the row failed (verdict ``fail``).
* *Regression against the previous run*: :func:`~faithtests.scorecard.baseline.compare` of the run
  against the nearest earlier run that produced the row, under the paired rule (gate ``ci``, as
  ``faithtests compare --regression paired``): the delta's 95% CI (paired on the items both runs
  share when they share most, else from the two runs' CIs; point estimates when a run has no CI) lies
  wholly beyond the tolerance in the metric's bad direction, and its p-value, adjusted over the checked
  metrics of that pair of runs as the pytest gate adjusts them (the later run's
  ``--faith-regression-control``; Holm for a run from before it), is below 0.05. A value that became
  undefined regressed.
* *Best earlier run* of a row: among the runs before the last that produced a defined value, the one
  with the best value in the metric's direction (the later one on a tie). The history *regressed*
  (exit status 1) when the last run regressed against it, by the same paired rule, on a checked row.
  A checked row the last run did not produce is listed as missing; it does not change the exit status.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from faithtests.reports.frames import LoadedScorecard
from faithtests.scorecard.baseline import Comparison, MetricDelta, Tolerance, compare
from faithtests.scorecard.family import run_control
from faithtests.scorecard.model import MetricResult

RowKey = tuple[str, str, str, str, str]


@dataclass
class Trend:
    """One checked row across the runs: its result in each run (None: not produced) and the verdicts."""

    key: RowKey
    points: list[MetricResult | None]
    deltas: list[MetricDelta | None] = field(default_factory=list)  # run i vs ``against[i]``
    against: list[int | None] = field(default_factory=list)  # the earlier run each delta is against
    first_failed: int | None = None  # index of the first run whose check failed
    first_regression: int | None = None  # index of the first run that regressed against its previous
    best: int | None = None  # the best earlier run (before the last)
    last_delta: MetricDelta | None = None  # the last run against ``best``

    @property
    def result(self) -> MetricResult:
        """The row's latest result (its names, direction and check)."""
        return next(p for p in reversed(self.points) if p is not None)

    @property
    def label(self) -> str:
        r = self.result
        return f"{r.suite}/{r.metric}" + (f"[{r.slice}]" if r.slice else "")

    @property
    def check(self) -> str:
        """The latest check, ``>= 0.8``, or "" when the latest result carries none."""
        r = next((p for p in reversed(self.points) if p is not None and p.op is not None), None)
        return f"{r.op} {r.threshold:g}" if r is not None and r.threshold is not None else ""

    @property
    def regressed(self) -> bool:
        return self.last_delta is not None and self.last_delta.status == "regression"

    @property
    def missing_last(self) -> bool:
        return self.points[-1] is None


@dataclass
class History:
    runs: list[LoadedScorecard]
    trends: list[Trend]
    tolerance: Tolerance

    @property
    def regressed(self) -> list[Trend]:
        """Checked rows on which the last run regressed against the best earlier run."""
        return [t for t in self.trends if t.regressed]

    @property
    def exit_status(self) -> int:
        return 1 if self.regressed else 0


def _checked_rows(runs: list[LoadedScorecard]) -> list[RowKey]:
    return sorted({r.key for run in runs for r in run.scorecard.results if r.passed is not None})


def _best(points: list[MetricResult | None]) -> int | None:
    """The index of the best defined value before the last run (the later one on a tie)."""
    best: int | None = None
    for i, p in enumerate(points[:-1]):
        if p is None or p.value is None:
            continue
        chosen = points[best] if best is not None else None
        if chosen is None or chosen.value is None:
            best = i
            continue
        better = p.value >= chosen.value if p.higher_is_better else p.value <= chosen.value
        best = i if better else best
    return best


class _Comparisons:
    """``compare(run i, run j)`` under the paired rule, each pair computed once."""

    def __init__(self, runs: list[LoadedScorecard], tolerance: Tolerance) -> None:
        self.runs, self.tolerance = runs, tolerance
        self.done: dict[tuple[int, int], dict[RowKey, MetricDelta]] = {}

    def delta(self, current: int, baseline: int, key: RowKey) -> MetricDelta | None:
        if (current, baseline) not in self.done:
            now = self.runs[current].scorecard
            c: Comparison = compare(now, self.runs[baseline].scorecard, self.tolerance, gate="ci",
                                    checked_only=True, control=run_control(now.fingerprint, "holm"))
            self.done[(current, baseline)] = c.by_key()
        return self.done[(current, baseline)].get(key)


def _trend(key: RowKey, runs: list[LoadedScorecard], pairs: _Comparisons) -> Trend:
    points = [next((r for r in run.scorecard.results if r.key == key), None) for run in runs]
    trend = Trend(key, points)
    previous: int | None = None
    for i, p in enumerate(points):
        delta = pairs.delta(i, previous, key) if p is not None and previous is not None else None
        trend.deltas.append(delta)
        trend.against.append(previous if delta is not None else None)
        if p is not None:
            if trend.first_failed is None and p.verdict == "fail":
                trend.first_failed = i
            if trend.first_regression is None and delta is not None and delta.status == "regression":
                trend.first_regression = i
            previous = i
    trend.best = _best(points)
    if trend.best is not None and points[-1] is not None:
        trend.last_delta = pairs.delta(len(runs) - 1, trend.best, key)
    return trend


def build_history(runs: list[LoadedScorecard], tolerance: Tolerance | str | float = 0.0) -> History:
    """The trends of every checked row over ``runs`` (already in history order)."""
    if not runs:
        raise ValueError("history needs at least one run")
    tol = Tolerance.parse(tolerance)
    pairs = _Comparisons(runs, tol)
    return History(runs, [_trend(k, runs, pairs) for k in _checked_rows(runs)], tol)
