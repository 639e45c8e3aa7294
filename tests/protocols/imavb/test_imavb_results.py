"""The suite's per-run values (``imavb.results``) against hand-computed ones."""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols.imavb.records import PremiseRecord
from faithtests.protocols.imavb.results import a1_correct, item_correct, run_scores, shuffled, stimuli, ties
from faithtests.protocols.imavb.run import ChoiceRun

OPTS = ("a", "b", "c", "d", "The visual detail in the question is incorrect", "audio")


def _run() -> ChoiceRun:
    """Two stimuli, a standard (gold A) and a misleading (gold E) variant each; orders: fixed + 2
    shuffles. Logits put the top on the listed letter per order (a tie on s1's misleading, shuffle 2)."""
    recs = [PremiseRecord(f"{s}/{sp}", s, sp, "q?", OPTS, gold)  # type: ignore[arg-type]
            for s in ("s0", "s1") for sp, gold in (("standard_vision", "A"), ("misleading_vision", "E"))]
    tops = [[0, 0, 1], [4, 4, 4], [0, 1, 1], [4, 0, -1]]  # -1: A and E tied on top
    logits = np.zeros((4, 3, 6))
    for i, row in enumerate(tops):
        for o, top in enumerate(row):
            if top < 0:
                logits[i, o, [0, 4]] = 1.0
            else:
                logits[i, o, top] = 1.0
    return ChoiceRun(recs, ("fixed", 0, 1), logits, np.tile(np.arange(6), (4, 3, 1)), None, total=4)


def test_correctness_by_order_and_shuffle_mean() -> None:
    run = _run()
    c = item_correct(run)
    assert c.tolist() == [[True, True, False], [True, True, True], [True, False, False], [True, False, False]]
    assert shuffled(c).tolist() == [0.5, 1.0, 0.0, 0.0]  # the fixed order (column 0) left out
    rows = np.array([1, 3])
    assert a1_correct(run, rows, fixed_order=True).tolist() == [1.0, 1.0]
    assert a1_correct(run, rows, fixed_order=False).tolist() == [1.0, 0.0]
    t = ties(run, np.ones(4, dtype=bool))
    assert (t.n, t.total, t.items) == (1, 12, ["s1/misleading_vision"])
    assert stimuli(run) == {"s0", "s1"} and stimuli(run, [0, 1]) == {"s0"}


def test_run_scores_give_split_accuracies_and_bal() -> None:
    """std_v = (0.5 + 0) / 2, mis_v = (1 + 0) / 2, Bal (Eq. 1) = ½(0.25 + 0.5); on rows 0-1 only
    (stimulus s0): 0.5 and 1."""
    run = _run()
    ss = run_scores(shuffled(item_correct(run)), run, None, n_resamples=100, seed=0)
    assert ss.acc == {"standard_vision": 0.25, "misleading_vision": 0.5}
    assert ss.bal == pytest.approx(0.375)
    ev = run_scores(shuffled(item_correct(run)), run, np.array([0, 1]), n_resamples=100, seed=0)
    assert ev.acc == {"standard_vision": 0.5, "misleading_vision": 1.0}
