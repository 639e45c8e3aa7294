"""Scorecards as tidy pandas tables, for slicing per-checkpoint results in a notebook.

>>> card = faithtests.scorecard.load("reports/ckpt-0420")          # doctest: +SKIP
>>> card.results_frame().query("suite == 'invariance'")            # doctest: +SKIP
>>> faithtests.scorecard.load_many(["reports/ckpt-*"])             # doctest: +SKIP

One row per recorded metric (:meth:`LoadedScorecard.results_frame`) or per item outcome
(:meth:`LoadedScorecard.items_frame`), each with ``run`` / ``suite`` / ``test`` / ``model`` /
``variant`` columns, so frames of several runs concatenate and group cleanly; :func:`load_many` reads
several runs into one frame with their ``step`` / ``started`` / ``source``, in history order (step,
then start time). pandas is imported when a frame is built, never by ``import faithtests``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faithtests.scorecard.baseline import Comparison
from faithtests.scorecard.history_run import expand_runs, order_key, run_identity, run_label, unique_labels
from faithtests.scorecard.scorecard import Scorecard, read_scorecard, scorecard_path

if TYPE_CHECKING:
    import pandas as pd

RESULT_COLUMNS = ("run", "suite", "test", "outcome", "model", "variant", "metric", "slice", "value",
                  "ci_lo", "ci_hi", "n", "higher_is_better", "op", "threshold", "passed", "gate",
                  "inconclusive", "detectable_diff")
MANY_COLUMNS = ("step", "started", "source")  # load_many: after "run"
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
    source: Path | None = None  # the scorecard file it was read from

    @property
    def step(self) -> int | None:
        """The run's recorded ``--faith-step`` (None when not given or not recorded)."""
        ident = run_identity(self.scorecard.run)
        return ident[1] if ident is not None else None

    @property
    def started(self) -> str | None:
        """When the run started (``run.started``, else the fingerprint's ``start``)."""
        started = self.scorecard.run.get("started") or self.scorecard.fingerprint.get("start")
        return str(started) if started else None

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
    source = scorecard_path(path)
    return LoadedScorecard(sc, run if run is not None else source.resolve().parent.name, source)


def read_runs(paths: Sequence[str | os.PathLike[str]]) -> list[LoadedScorecard]:
    """Scorecards of several runs (report folders, ``scorecard.json`` files or globs: see
    :func:`~faithtests.scorecard.history_run.expand_runs`) in history order: runs with a ``--faith-step``
    by step, then the others, by start time. ``run`` is the recorded run name (else the folder's name),
    with ``#2``, ``#3`` when two runs share one. An unreadable file raises :class:`ScorecardError`, a
    path that names nothing :class:`~faithtests.scorecard.history_run.RunPathError`."""
    cards = [(f, read_scorecard(f)) for f in expand_runs(paths)]
    cards.sort(key=lambda fc: order_key(fc[1].run, fc[1].fingerprint, fc[0]))
    labels = unique_labels([run_label(sc.run, f) for f, sc in cards])
    return [LoadedScorecard(sc, label, f) for (f, sc), label in zip(cards, labels, strict=True)]


def load_many(paths: Sequence[str | os.PathLike[str]]) -> pd.DataFrame:
    """One row per recorded metric of every run (:func:`read_runs`), in history order: the
    :meth:`LoadedScorecard.results_frame` columns with ``step`` (Int64), ``started`` and ``source``
    after ``run``. Overall rows have ``slice`` None; pivot with ``model`` (and ``test``) in the index, never
    averaged across them (see docs/reports.md, "Scorecards in pandas")."""
    import pandas as pd  # lazy: pandas, only when a table is built (never on import faithtests)

    frames = []
    for card in read_runs(paths):
        frame = card.results_frame()
        frame.insert(1, "step", card.step)
        frame.insert(2, "started", card.started)
        frame.insert(3, "source", str(card.source))
        frames.append(frame)
    columns = [*RESULT_COLUMNS[:1], *MANY_COLUMNS, *RESULT_COLUMNS[1:]]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
    out["step"] = out["step"].astype("Int64")
    return out[columns]


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
