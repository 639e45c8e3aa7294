"""The suite's per-slice values (``spdfaith.results``) against hand-computed ones."""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.data.invalid import Counted
from faithtests.protocols.spdfaith.judge import JudgedClaim, Judgement
from faithtests.protocols.spdfaith.records import DiffRecord, EditTruth
from faithtests.protocols.spdfaith.results import (
    Boot,
    answered,
    counted,
    counts,
    groups,
    naming,
    sage_deltas,
    symmetric,
)
from faithtests.protocols.spdfaith.run import Answers

BOOT = Boot(200, 0)
CAR, DOG = EditTruth("color", "car"), EditTruth("remove", "dog")


def _rec(i: int, subset: str, difficulty: str | None, edits: tuple[EditTruth, ...]) -> DiffRecord:
    return DiffRecord(f"p{i}", f"img{i}", subset, difficulty, edits, "world", f"p{i}", lambda: None)  # type: ignore[arg-type, return-value]


RECS = [
    _rec(0, "single", "easy", (CAR,)),
    _rec(1, "single", "hard", (DOG,)),
    _rec(2, "multi", None, (CAR, DOG)),
    _rec(3, "identical", None, ()),
]


def _judged(*claims: tuple[str, str, bool]) -> Judgement:
    return Judgement(tuple(JudgedClaim(t, c, None, f"{t} {c}") for t, c, _ in claims),
                     tuple(0 if hit else None for _, _, hit in claims), 0, "test")


def _answers(p_same: list[float], p_diff: list[float], count: list[int],
             judgements: list[Judgement | None]) -> Answers:
    n = len(p_same)
    states = np.ones((2, n, 3), dtype=np.float32)
    return Answers("base", np.array(p_same), np.array(p_diff), states, states.copy(), np.array(count),
                   np.zeros((n, 6)), [None] * n, judgements, Counted(), "test")


def test_groups_cut_subsets_difficulties_types_and_m() -> None:
    got = dict(groups(RECS, [0, 1, 2, 3]))
    assert got[None] == [0, 1, 2, 3]
    assert got["subset=single"] == [0, 1] and got["subset=multi"] == [2] and got["subset=identical"] == [3]
    assert got["difficulty=easy"] == [0] and got["difficulty=hard"] == [1] and "difficulty=medium" not in got
    assert got["type=color"] == [0] and got["type=remove"] == [1] and got["edits=2"] == [2]


def test_symmetric_by_hand() -> None:
    """Pair 0: No to "same?", Yes to "different?" (consistent); pair 1: Yes to both (contradictory);
    pair 2: consistent; pair 3 (identical): Yes / No, consistent. Contradiction rate 1/4; CR (Eq. 13
    weights +1, -1, +1, +1 normalised (w + 1) / 2) = (1 + 0 + 1 + 1) / 4; DS_exist over the three edited
    pairs = 2/3 (pair 1 said "same")."""
    ans = _answers([0.1, 0.9, 0.2, 0.8], [0.9, 0.9, 0.7, 0.1], [1, 1, 2, 0], [None] * 4)
    rows = answered(ans)
    assert rows == [0, 1, 2, 3]
    sym = symmetric(RECS, ans, rows, BOOT)
    assert sym.contradiction.tolist() == [False, True, False, False]
    got = {(r.name, r.slice): r for r in sym.metrics}
    rate = got["contradiction_rate", None]
    assert rate.value == 0.25 and not rate.higher_is_better and rate.per_item is not None
    assert got["contradiction_rate", "difficulty=hard"].value == 1.0
    assert got["CR", None].value == pytest.approx(0.75)
    assert got["DS_exist", None].value == pytest.approx(2 / 3) and got["DS_exist", None].n == 3
    assert ("DS_exist", "subset=identical") not in got
    assert got["yes_rate_same", None].value == 0.5
    # the identical-pair control: pair 3 said Yes to "same?" and No to "different?": no false alarm
    alarm = got["false_alarm_rate", "subset=identical"]
    assert alarm.value == 0.0 and alarm.n == 1 and not alarm.higher_is_better
    assert ("false_alarm_rate", "subset=single") not in got  # defined on identical pairs only


def test_false_alarm_rate_by_hand() -> None:
    """The identical pair answered No to "same?" and Yes to "different?" (DS_exist's success on an
    edited pair) is a false alarm: false_alarm_rate over the one identical pair = 1; the edited pairs'
    answers do not enter it."""
    ans = _answers([0.1, 0.9, 0.2, 0.3], [0.9, 0.9, 0.7, 0.6], [1, 1, 2, 1], [None] * 4)
    got = {(r.name, r.slice): r for r in symmetric(RECS, ans, answered(ans), BOOT).metrics}
    assert got["false_alarm_rate", None].value == 1.0 and got["false_alarm_rate", None].n == 1
    assert got["false_alarm_rate", "subset=identical"].value == 1.0


def test_counts_naming_and_sage_by_hand() -> None:
    """Counts n = (1, 2, 3, 0) against m = (1, 1, 2, 0): DQR (Eq. 8) on the edited pairs = 1/3,
    DS_count (Eq. 9) = (1 + 0 + 0.5) / 3; the identical pair counted zero. Naming: pair 0 claims a car
    colour (hit), pair 2 a car colour (hit) and a dog colour (miss): TF1 (Eq. 10, multiset per pair)
    = 2·(1 + 0 + 1) / ((1 + 1) + (0 + 1) + (2 + 2)) = 4/7 over pairs 0-2 (pair 1 claims nothing: its
    edit a miss), DRF (Eq. 15) = (1 + 0.5) / 2 over the pairs with a claim."""
    j0 = _judged(("color", "car", True))
    j2 = _judged(("color", "car", True), ("color", "dog", False))
    ans = _answers([0.1] * 4, [0.9] * 4, [1, 2, 3, 0], [j0, None, j2, None])
    rows = counted(RECS, ans, edited=True)
    assert rows == [0, 1, 2] and counted(RECS, ans, edited=False) == [0, 1, 2, 3]
    c = counts(RECS, ans, rows, BOOT)
    got = {(r.name, r.slice): r.value for r in c.metrics}
    assert got["DQR", None] == pytest.approx(1 / 3)
    assert got["DS_count", None] == pytest.approx(0.5)
    assert got["identical_counted_zero", None] == 1.0
    nm = naming(RECS, ans, [0, 1, 2], BOOT)
    got = {(r.name, r.slice): r.value for r in nm.metrics}
    assert got["TF1", "judge=test"] == pytest.approx(4 / 7)
    assert got["DRF", "judge=test"] == pytest.approx(0.75)
    assert got["DQR_code_listed", "judge=test"] == pytest.approx((1 / 1 + 2 / 2) / 2)
    assert nm.claims == 3 and nm.unparseable == 0
    sage = _answers([0.1, 0.9, 0.1, 0.9], [0.9, 0.9, 0.9, 0.1], [1, 1, 2, 0],
                    [j0, None, _judged(("color", "car", True), ("remove", "dog", True)), None])
    base = _answers([0.1, 0.9, 0.9, 0.9], [0.9, 0.9, 0.9, 0.1], [1, 2, 3, 0], [j0, None, j2, None])
    delta = {r.name: r.value for r in sage_deltas(RECS, base, sage, BOOT)}
    assert delta["delta_contradiction_rate"] == pytest.approx(-0.25)  # pair 2 no longer contradicts
    assert delta["delta_DS_count"] == pytest.approx((0 + 1 + 0.5) / 3)
    assert delta["delta_DRF"] == pytest.approx((0 + 0.5) / 2)
