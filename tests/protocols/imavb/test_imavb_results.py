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


def _heard_run() -> ChoiceRun:
    """Two clips, each with a misleading vision and a misleading audio question (golds E and F)."""
    recs = [PremiseRecord(f"{s}/{sp}", s, sp, "q?", OPTS, gold)  # type: ignore[arg-type]
            for s in ("c0", "c1") for sp, gold in (("misleading_vision", "E"), ("misleading_audio", "F"))]
    return ChoiceRun(recs, ("fixed",), np.zeros((4, 1, 6)), np.tile(np.arange(6), (4, 1, 1)), None, total=4)


def test_mis_gap_row_is_table_14s_vision_minus_audio_gap() -> None:
    """Table 14's "Vision–Audio Gap" = mis_v − mis_a: rows 0, 2 are the vision side (1.0, 0.5: mean
    0.75), rows 1, 3 the audio side (0.0, 0.5: mean 0.25), so 0.5 over n = 4 rows; recorded with the
    slice it is given, lower is better, never gated."""
    from faithtests.protocols.imavb.results import mis_gap_row

    row, empty = mis_gap_row(np.array([1.0, 0.0, 0.5, 0.5]), _heard_run(), n_resamples=200, seed=0,
                             where="fixed order")
    assert (row.name, row.value, row.n, row.slice) == ("mis_gap_vision_minus_audio", 0.5, 4, "fixed order")
    assert row.higher_is_better is False and not row.gated and empty == 0
    assert row.ci is not None and row.ci[0] <= 0.5 <= row.ci[1]


def test_lens_curves_are_the_mean_p_correct_per_layer_and_split_and_their_peaks() -> None:
    """Eq. 4 per row: P_l(correct) is the letter probability of the gold option (E for rows 0, 2; F for
    rows 1, 3). Layer 0: vision rows 0.2, 0.4 (mean 0.3), audio rows 0.1, 0.3 (0.2); layer 1: vision
    0.6, 0.8 (0.7), audio 0.5, 0.1 (0.3). Peaks: mis_v 0.7, mis_a 0.3 (n = 2 rows each)."""
    from faithtests.protocols.imavb.results import lens_curves

    lens = np.zeros((2, 4, 6))
    gold = [4, 5, 4, 5]
    for layer, values in enumerate(([0.2, 0.1, 0.4, 0.3], [0.6, 0.5, 0.8, 0.1])):
        for row, v in enumerate(values):
            lens[layer, row, gold[row]] = v
    out = lens_curves(lens, _heard_run())
    assert list(out.curves) == ["mis_v", "mis_a"]  # in SPLITS order
    assert out.curves["mis_v"] == pytest.approx([0.3, 0.7])
    assert out.curves["mis_a"] == pytest.approx([0.2, 0.3])
    assert [(r.name, r.slice, r.n) for r in out.rows] == [("lens_peak_P_correct", "mis_v", 2),
                                                          ("lens_peak_P_correct", "mis_a", 2)]
    assert [r.value for r in out.rows] == pytest.approx([0.7, 0.3])
