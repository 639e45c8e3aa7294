"""Scorecards as tidy pandas tables, for slicing per-checkpoint results in a notebook.

>>> card = faithtests.scorecard.load("reports/ckpt-0420")          # doctest: +SKIP
>>> card.results_frame().query("suite == 'invariance'")            # doctest: +SKIP

One row per recorded metric (:meth:`LoadedScorecard.results_frame`) or per item outcome
(:meth:`LoadedScorecard.items_frame`), each with ``run`` / ``suite`` / ``test`` / ``model`` /
``variant`` columns, so frames of several runs concatenate and group cleanly. pandas is imported when
a frame is built, never by ``import faithtests``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from faithtests.scorecard.baseline import Comparison
from faithtests.scorecard.scorecard import Scorecard, read_scorecard, scorecard_path

if TYPE_CHECKING:
    import pandas as pd

RESULT_COLUMNS = ("run", "suite", "test", "outcome", "model", "variant", "metric", "slice", "value",
                  "ci_lo", "ci_hi", "n", "higher_is_better", "op", "threshold", "passed", "gate",
                  "inconclusive", "detectable_diff")
ITEM_COLUMNS = ("run", "suite", "test", "model", "variant", "item_set", "item", "outcome", "value")
DELTA_COLUMNS = ("suite", "test", "model", "variant", "metric", "slice", "baseline", "current", "delta",
                 "higher_is_better", "status", "basis", "delta_ci_low", "delta_ci_high", "ci_status",
                 "n_shared", "good_to_bad", "bad_to_good", "mcnemar_p")
_SEP = " | "  # faithtests.scorecard.recording.items_key joins "name | model | variant"


def split_items_key(key: str) -> tuple[str, str, str]:
    """(item set, model, variant) of a :attr:`TestRecord.items` key (``items_key`` in reverse)."""
    parts = key.rsplit(_SEP, 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else (key, "", "base")


@dataclass(frozen=True)
class LoadedScorecard:
    """A scorecard read from disk, with its tables. ``run`` labels the rows (default: the file's folder)."""

    scorecard: Scorecard
    run: str

    def results_frame(self) -> pd.DataFrame:
        """One row per metric result; ``value`` / CI bounds are NaN where a metric was undefined and
        ``passed`` is None where it was recorded without a check."""
        import pandas as pd  # lazy: pandas, only when a table is built (never on import faithtests)

        rows: list[dict[str, Any]] = []
        for t in self.scorecard.tests:
            for r in t.results:
                rows.append({
                    "run": self.run, "suite": r.suite, "test": r.test, "outcome": t.outcome,
                    "model": r.model, "variant": r.variant, "metric": r.metric, "slice": r.slice,
                    "value": r.value, "ci_lo": r.ci[0] if r.ci else None, "ci_hi": r.ci[1] if r.ci else None,
                    "n": r.n, "higher_is_better": r.higher_is_better, "op": r.op, "threshold": r.threshold,
                    "passed": r.passed, "gate": r.gate, "inconclusive": r.inconclusive,
                    "detectable_diff": r.detectable_diff,
                })
        frame = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
        for col in ("value", "ci_lo", "ci_hi", "threshold", "detectable_diff"):
            frame[col] = frame[col].astype("float64")
        frame["n"] = frame["n"].astype("Int64")
        return frame

    def items_frame(self) -> pd.DataFrame:
        """One row per item outcome: ``outcome`` as recorded (bool or number), ``value`` as a float
        (True -> 1.0), so per-item agreement between runs is one merge away."""
        import pandas as pd  # lazy: pandas, only when a table is built (never on import faithtests)

        rows: list[dict[str, Any]] = []
        for t in self.scorecard.tests:
            for key, outcomes in t.items.items():
                name, model, variant = split_items_key(key)
                for item, outcome in outcomes.items():
                    rows.append({"run": self.run, "suite": t.suite, "test": t.test, "model": model,
                                 "variant": variant, "item_set": name, "item": item, "outcome": outcome,
                                 "value": float(outcome)})
        frame = pd.DataFrame(rows, columns=list(ITEM_COLUMNS))
        frame["value"] = frame["value"].astype("float64")
        return frame


def load(path: str | os.PathLike[str], run: str | None = None) -> LoadedScorecard:
    """Read a report directory or ``scorecard.json``; ``run`` defaults to the report folder's name."""
    sc = read_scorecard(path)
    return LoadedScorecard(sc, run if run is not None else scorecard_path(path).resolve().parent.name)


def deltas_frame(comparison: Comparison) -> pd.DataFrame:
    """One row per metric of either run (``faithtests compare --csv``)."""
    import pandas as pd  # lazy: pandas, only when a table is built (never on import faithtests)

    rows = [{"suite": d.suite, "test": d.test, "model": d.model, "variant": d.variant, "metric": d.metric,
             "slice": d.slice, "baseline": d.baseline, "current": d.current, "delta": d.delta,
             "higher_is_better": d.higher_is_better, "status": d.status, "basis": d.basis,
             "delta_ci_low": d.delta_ci[0] if d.delta_ci else None,
             "delta_ci_high": d.delta_ci[1] if d.delta_ci else None, "ci_status": d.ci_status,
             "n_shared": d.paired.n if d.paired else None,
             "good_to_bad": d.paired.good_to_bad if d.paired and d.paired.binary else None,
             "bad_to_good": d.paired.bad_to_good if d.paired and d.paired.binary else None,
             "mcnemar_p": d.paired.mcnemar_p if d.paired else None}
            for d in comparison.deltas if d.gated]  # ungated (unchecked) metrics: --all includes them
    frame = pd.DataFrame(rows, columns=list(DELTA_COLUMNS))
    for col in ("baseline", "current", "delta", "delta_ci_low", "delta_ci_high", "mcnemar_p"):
        frame[col] = frame[col].astype("float64")
    return frame
