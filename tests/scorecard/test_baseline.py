"""Baseline comparison: tolerance parsing, direction-aware regressions, new/missing keys, item flips."""

from __future__ import annotations

import pytest

from faithtests.reports.comparison_text import format_comparison
from faithtests.scorecard.baseline import Tolerance, classify, compare
from faithtests.scorecard.model import MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard


def _sc(
    values: dict[str, float | None], items: dict[str, bool | float] | None = None, lower: tuple[str, ...] = ()
) -> Scorecard:
    results = [
        MetricResult(
            suite="s", test="t.py::t", metric=m, value=v, model="clip", higher_is_better=m not in lower
        )
        for m, v in values.items()
    ]
    rec = TestRecord(test="t.py::t", suite="s", results=results, items={"flips": dict(items or {})})
    return Scorecard(tests=[rec])


@pytest.mark.parametrize(
    ("text", "value", "relative", "shown"),
    [
        ("0", 0.0, False, "0"),
        ("0.01", 0.01, False, "0.01"),
        (" 5% ", 0.05, True, "5%"),
        ("2.5%", 0.025, True, "2.5%"),
        (0.2, 0.2, False, "0.2"),
    ],
)
def test_tolerance_parse(text: str | float, value: float, relative: bool, shown: str) -> None:
    tol = Tolerance.parse(text)
    assert tol.value == pytest.approx(value) and tol.relative is relative and str(tol) == shown


@pytest.mark.parametrize("bad", ["-0.1", "abc", "5 %%", "inf", "nan", "%", ""])
def test_tolerance_parse_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="tolerance"):
        Tolerance.parse(bad)


def test_tolerance_allowed() -> None:
    assert Tolerance.parse("0.05").allowed(-3.0) == 0.05
    assert Tolerance.parse("10%").allowed(-3.0) == pytest.approx(0.3)  # relative to |baseline|


@pytest.mark.parametrize(
    ("base", "cur", "hib", "tol", "status"),
    [
        (0.80, 0.70, True, "0", "regression"),
        (0.80, 0.90, True, "0", "improvement"),
        (0.80, 0.80, True, "0", "unchanged"),
        (0.10, 0.20, False, "0", "regression"),  # lower is better: going up is worse
        (0.10, 0.05, False, "0", "improvement"),
        (0.80, 0.75, True, "0.05", "unchanged"),  # exactly at the tolerance is not a regression
        (0.80, 0.749, True, "0.05", "regression"),
        (0.80, 0.77, True, "5%", "unchanged"),  # 5% of 0.80 = 0.04
        (0.80, 0.75, True, "5%", "regression"),
        (0.80, None, True, "0.5", "regression"),  # became undefined
        (None, 0.80, True, "0", "improvement"),
        (None, None, True, "0", "unchanged"),
    ],
)
def test_classify(base: float | None, cur: float | None, hib: bool, tol: str, status: str) -> None:
    assert classify(base, cur, hib, Tolerance.parse(tol)) == status


def test_compare_keys_deltas_and_flips() -> None:
    base = _sc(
        {"PR": 0.80, "E_inv": 0.10, "gone": 0.5, "same": 0.3},
        items={"a": True, "b": True, "c": False, "d": 0.50, "only_base": True},
        lower=("E_inv",),
    )
    cur = _sc(
        {"PR": 0.70, "E_inv": 0.05, "new": 0.4, "same": 0.3},
        items={"a": True, "b": False, "c": True, "d": 0.52, "only_cur": True},
        lower=("E_inv",),
    )
    c = compare(cur, base, "0.01")
    by = {d.metric: d for d in c.deltas}
    assert [d.metric for d in c.regressions] == ["PR"]
    assert by["PR"].delta == pytest.approx(-0.10) and by["PR"].label == "s/PR"
    assert [d.metric for d in c.improvements] == ["E_inv"]
    assert [d.metric for d in c.new] == ["new"] and by["new"].baseline is None
    assert [d.metric for d in c.missing] == ["gone"] and by["gone"].current is None
    assert by["same"].status == "unchanged"
    # b and c flipped; d moved 0.02 > 0.01; a unchanged; one-sided items are not flips
    assert [(f.item, f.baseline, f.current) for f in c.flips] == [
        ("b", True, False),
        ("c", False, True),
        ("d", 0.50, 0.52),
    ]
    assert c.by_key()[by["PR"].key] is by["PR"]
    js = c.to_json()
    assert js["tolerance"] == "0.01" and len(js["deltas"]) == 5 and len(js["flips"]) == 3


def test_compare_matches_by_model_and_variant() -> None:
    a = Scorecard(
        tests=[
            TestRecord(
                "t",
                "s",
                results=[
                    MetricResult("s", "t", "PR", 0.8, model="clip", variant="base"),
                    MetricResult("s", "t", "PR", 0.6, model="clip", variant="colorblind"),
                ],
            )
        ]
    )
    b = Scorecard(
        tests=[
            TestRecord(
                "t",
                "s",
                results=[
                    MetricResult("s", "t", "PR", 0.8, model="clip", variant="base"),
                    MetricResult("s", "t", "PR", 0.5, model="clip", variant="colorblind"),
                ],
            )
        ]
    )
    c = compare(b, a)
    assert [(d.variant, d.status) for d in c.deltas] == [("base", "unchanged"), ("colorblind", "regression")]


def test_format_comparison() -> None:
    base = _sc({"PR": 0.80, "gone": 0.5}, items={"b": True})
    cur = _sc({"PR": 0.70, "new": 0.4}, items={"b": False})
    text = format_comparison(compare(cur, base))
    lines = text.splitlines()
    assert lines[0].split() == [
        "status",
        "test",
        "metric",
        "model",
        "variant",
        "baseline",
        "current",
        "delta",
        "delta",
        "95%",
        "CI",
        "basis",
        "paired",
        "ci",
        "gate",
        "better",
    ]
    assert any(
        line.split()[:8] == ["REGRESSION", "t", "s/PR", "clip", "base", "0.800", "0.700", "-0.100"]
        for line in lines
    )
    assert "1 regression(s), 0 improvement(s), 1 new, 1 missing (tolerance 0, gate point)" in text
    assert "1 item(s) flipped:" in text and "t.py::t flips b: True -> False" in text
    short = format_comparison(compare(cur, cur), show_unchanged=False)
    assert "s/PR" not in short and "0 regression(s)" in short
