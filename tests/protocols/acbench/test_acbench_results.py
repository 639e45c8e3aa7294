"""The suite's per-slice values (``acbench.results``) against hand-computed ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

from faithtests.protocols.acbench.records import AcRecord
from faithtests.protocols.acbench.results import (
    Boot,
    accuracy_rows,
    categories,
    cecs_delta_rows,
    conflict_score_rows,
    groups,
    hits,
    share_rows,
    tbr_rows,
    where,
)
from faithtests.protocols.acbench.run import Answers

BOOT = Boot(200, 0)


def _rec(i: int, img: str, subset: str, txt: str | None) -> AcRecord:
    return AcRecord(f"r{i}", f"img{i // 2}", subset, img, txt, "a description", f"img{i // 2}")  # type: ignore[arg-type]


# two images: each one aligned (joy/joy) and one S-Opp conflict; image 2 adds an O-Obj conflict
RECS = [
    _rec(0, "amusement", "aligned", "amusement"),
    _rec(1, "amusement", "S-Opp", "sadness"),
    _rec(2, "fear", "aligned", "fear"),
    _rec(3, "fear", "S-Opp", "contentment"),
    _rec(4, "fear", "O-Obj", "anger"),
]


def _answers(pred: list[str | None]) -> Answers:
    return Answers("generation", [r.item_id for r in RECS], pred, [None] * len(pred))


def test_where_names_the_subset_and_a_non_default_mode() -> None:
    assert where(None, "generation") is None  # the paper's answer mode is the unlabelled one
    assert where("S-Opp", "generation") == "S-Opp"
    assert where("S-Opp", "constrained") == "S-Opp, mode=constrained"
    assert where(None, "constrained") == "mode=constrained"


def test_shares_and_tbr_per_subset_by_hand() -> None:
    """Conflict rows 1, 3, 4 answered sadness (text), fear (image), joy (other): P_img = P_txt = P_oth
    = 1/3 on Q_conf (Eqs. 1-3), TBR = (1/3) / (2/3) = 0.5 (Eq. 4); S-Opp alone: P_img = P_txt = 1/2,
    TBR 0.5; O-Obj alone: other only, so TBR is undefined (NaN)."""
    ans = _answers(["amusement", "sadness", "fear", "fear", "amusement"])
    rows, onehot = categories(RECS, ans)
    assert rows == [1, 3, 4]
    assert onehot.tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 1]]
    assert groups(RECS, rows) == [(None, [0, 1, 2]), ("S-Opp", [0, 1]), ("O-Obj", [2])]
    got = {(r.name, r.slice): r for r in share_rows(RECS, ans, "generation", BOOT)}
    assert got["P_img", None].value == pytest.approx(1 / 3)
    assert got["P_txt", None].value == pytest.approx(1 / 3)
    assert got["P_oth", None].value == pytest.approx(1 / 3)
    assert got["P_img", "S-Opp"].value == 0.5 and got["P_oth", "O-Obj"].value == 1.0
    assert got["P_img", None].higher_is_better and not got["P_txt", None].higher_is_better
    tbr = {subset: row for subset, row in tbr_rows(RECS, ans, "generation", BOOT)}
    assert tbr[None].value == pytest.approx(0.5) and tbr[None].slice is None  # generation: unlabelled
    assert tbr["S-Opp"].value == pytest.approx(0.5)
    assert math.isnan(tbr["O-Obj"].value) and tbr["O-Obj"].ci is None


def test_accuracy_rows_per_subset_and_deltas_by_hand() -> None:
    hit = hits(["amusement", None, "fear", "x", "y"], [r.image_emotion for r in RECS])
    assert hit.tolist() == [1, 0, 1, 0, 0]
    rows = accuracy_rows("acc", hit, RECS, "generation", BOOT, ("aligned", "S-Opp", "O-Beh"))
    assert [(r.slice, r.value, r.n) for r in rows] == [(None, 0.4, 5), ("aligned", 1.0, 2), ("S-Opp", 0.0, 2)]
    base = _answers(["amusement", "sadness", "sadness", "fear", "amusement"])
    cecs = _answers(["amusement", "amusement", "fear", "fear", "fear"])
    got = {(r.name, r.slice): r.value for r in cecs_delta_rows(RECS, base, cecs, BOOT)}
    # P_img on Q_conf: base 1/3 (row 3), CECS 3/3; aligned accuracy: base 1/2, CECS 2/2
    assert got["delta_P_img", None] == pytest.approx(2 / 3)
    assert got["delta_P_img", "S-Opp"] == pytest.approx(0.5)
    assert got["delta_P_img", "O-Obj"] == pytest.approx(1.0)
    assert got["delta_aligned_acc", None] == pytest.approx(0.5)


def test_conflict_score_rows_by_hand() -> None:
    s = np.array([0.1, 0.9, np.nan, 0.7, 0.5])  # τ = 0.6: rows 1 and 3 are steered
    got = {(r.name, r.slice): r.value for r in conflict_score_rows(RECS, s)}
    assert got["conflict_score_mean", "aligned"] == pytest.approx(0.1)  # NaN left out of the mean
    assert got["conflict_score_mean", "conflict"] == pytest.approx((0.9 + 0.7 + 0.5) / 3)
    assert got["cecs_steered_rate", "aligned"] == 0.0
    assert got["cecs_steered_rate", "conflict"] == pytest.approx(2 / 3)
