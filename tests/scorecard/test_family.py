"""False-alarm control over the gated metrics (issue 49, item 1): the adjusted p-values against hand
computations (Holm 1979, step-down; Benjamini & Hochberg 1995, step-up), the per-metric p-value against
the CI rule it replaces, and the family on scorecards: fifty unchanged metrics with one chance
"regression" pass, a real drop among them still fails, in ``compare``, the CLI and the pytest gate."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from faithtests import cli
from faithtests.reports.comparison_text import format_comparison
from faithtests.scorecard.baseline import Tolerance, ci_classify, compare
from faithtests.scorecard.family import benjamini_hochberg, holm, regression_p, run_control
from faithtests.scorecard.model import MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard, write_scorecard


def test_holm_by_hand() -> None:
    # sorted: .005 (i3), .01 (i0), .03 (i2), .04 (i1); (m - j + 1) p_(j) = .02, .03, .06, .04; running max
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []


def test_benjamini_hochberg_by_hand() -> None:
    # m p_(j) / j = .02, .02, .04, .04; running min from the largest: .04, .04, .02, .02
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert benjamini_hochberg([0.01, 0.02]) == pytest.approx([0.02, 0.02])


def test_regression_p_by_hand() -> None:
    # gain -0.1 with its CI's good end 0.096 above it: se = 0.096 / 1.95996 = 0.04898; z = -0.1 / se
    se = 0.096 / 1.959963984540054
    assert regression_p(-0.1, -0.004, 0.0) == pytest.approx(math.erfc(0.1 / se / math.sqrt(2)))
    assert regression_p(-0.1, 0.0, 0.0) == pytest.approx(0.05)  # the CI's good end at -slack: the boundary
    assert regression_p(-0.1, -0.1, 0.05) == 0.0 and regression_p(-0.01, -0.01, 0.05) == 1.0  # no width


def test_regression_p_below_five_percent_is_the_ci_rule() -> None:
    """With one metric in the family the gate decides exactly as the CI rule did."""
    rng = np.random.default_rng(0)
    tol = Tolerance(0.02)
    for _ in range(2000):
        base, delta = float(rng.uniform(0.2, 0.8)), float(rng.normal(0, 0.05))
        lo, hi = sorted(delta + rng.normal(0, 0.05, 2))
        lo, hi = min(lo, delta), max(hi, delta)  # a percentile CI holds its point
        for higher in (True, False):
            gain, gain_hi = (delta, hi) if higher else (-delta, -lo)
            ci_rule = ci_classify(base, delta, (lo, hi), higher, tol) == "regression"
            slack = tol.allowed(base) + 1e-9 * max(1.0, abs(base))
            assert (regression_p(gain, gain_hi, slack) < 0.05) == ci_rule


def _card(values: dict[str, tuple[float, tuple[float, float]]], control: str | None = None) -> Scorecard:
    results = [MetricResult("s", f"t.py::t[{name}]", "PR", v, model="m", ci=ci, threshold=0.0, op=">=",
                            passed=True) for name, (v, ci) in values.items()]
    fp = {} if control is None else {"regression_control": control}
    return Scorecard(tests=[TestRecord(r.test, "s", results=[r]) for r in results], fingerprint=fp)


def _family(drop: float) -> tuple[Scorecard, Scorecard]:
    """Fifty checked metrics, CI half-width 0.05 in each run (unpaired se 0.0361): 48 unchanged, one that
    moved by -0.08 (z = -2.22, p = 0.027: past its CI on its own, as chance gives one in forty), and
    one that moved by ``drop``."""
    base = {f"m{i:02d}": (0.6, (0.55, 0.65)) for i in range(50)}
    cur = dict(base)
    cur["m00"] = (0.52, (0.47, 0.57))
    cur["m01"] = (0.6 + drop, (0.55 + drop, 0.65 + drop))
    return _card(base), _card(cur)


def test_a_chance_regression_among_fifty_is_noise_a_real_drop_is_not() -> None:
    base, cur = _family(drop=0.0)
    alone = compare(cur, base, gate="ci", checked_only=True, control="none")
    assert [d.label for d in alone.regressions] == ["s/PR"] and alone.regressions[0].test.endswith("[m00]")
    (held,) = [d for d in alone.deltas if d.test.endswith("[m00]")]
    assert held.p_value == pytest.approx(math.erfc(0.08 / math.hypot(0.05, 0.05) * 1.959963984540054
                                                   / math.sqrt(2)))
    for control in ("holm", "bh"):
        c = compare(cur, base, gate="ci", checked_only=True, control=control)  # type: ignore[arg-type]
        assert not c.regressions and len(c.family) == 50
        (d,) = [d for d in c.deltas if d.test.endswith("[m00]")]
        assert d.status == "within noise" and d.p_adjusted == pytest.approx(min(1.0, 50 * held.p_value))
        assert "not over the 50 gated metrics" in format_comparison(c)
    base, cur = _family(drop=-0.3)  # z = -8.3: a real drop
    for control in ("holm", "bh", "none"):
        c = compare(cur, base, gate="ci", checked_only=True, control=control)  # type: ignore[arg-type]
        assert any(d.test.endswith("[m01]") for d in c.regressions)
    assert not any(d.test.endswith("[m00]")
                   for d in compare(cur, base, gate="ci", checked_only=True, control="holm").regressions)


def test_point_gate_and_undefined_values_are_not_adjusted() -> None:
    base, cur = _family(drop=0.0)
    point = compare(cur, base, gate="point", checked_only=True, control="holm")
    assert any(d.test.endswith("[m00]") for d in point.regressions)  # no noise model: the point decides
    gone = _card({"a": (0.6, (0.5, 0.7))}), _card({"a": (None, None)})  # type: ignore[dict-item]
    (d,) = compare(gone[1], gone[0], gate="ci", control="holm").deltas
    assert d.status == "regression" and d.p_value is None


def test_cli_and_fingerprint_carry_the_control(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cur = _family(drop=0.0)
    write_scorecard(base, tmp_path / "a")
    write_scorecard(cur, tmp_path / "b")
    paired = ["--regression", "paired"]  # a card without the field was gated by the points
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), *paired]) == 0  # holm: unrecorded
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), *paired, "--control", "none"]) == 1
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), *paired, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["control"], out["family_size"]) == ("holm", 50)
    assert all(d["p_adjusted"] is not None for d in out["deltas"])
    write_scorecard(Scorecard(tests=cur.tests, fingerprint={"regression_control": "none"}), tmp_path / "c")
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "c"), *paired]) == 1  # its own control
    assert run_control({}) == "none" and run_control({}, "holm") == "holm"
    assert run_control({"regression_control": "bh"}) == "bh"


def test_an_unchecked_slice_without_data_is_listed_not_failed(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 49: on another seed a model may give no contradictory answer, so the slice that averages
    over them is not produced; that is no deselected test. A checked result, or a test that did not run,
    still fails."""
    def card(slices: tuple[str, ...], tests: tuple[str, ...] = ("t.py::t",)) -> Scorecard:
        records = []
        for test in tests:
            results = [MetricResult("s", test, "PR", 0.6, model="m", threshold=0.5, op=">=", passed=True)]
            results += [MetricResult("s", test, "cos", 0.3, model="m", slice=sl) for sl in slices]
            records.append(TestRecord(test, "s", results=results))
        return Scorecard(tests=records, fingerprint={"regression": "paired"})

    base = card(("contradictory", "consistent"), ("t.py::t", "t.py::u"))
    c = compare(card(("consistent",), ("t.py::t", "t.py::u")), base, gate="ci", checked_only=True)
    assert [d.slice for d in c.missing] == ["contradictory"] * 2 and not c.missing_gated
    write_scorecard(base, tmp_path / "a")
    write_scorecard(card(("consistent",), ("t.py::t", "t.py::u")), tmp_path / "b")
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "2 missing result(s) without a threshold check, of tests that ran" in capsys.readouterr().out
    gone = compare(card(("contradictory", "consistent")), base, gate="ci", checked_only=True)
    assert {d.test for d in gone.missing_gated} == {"t.py::u"}  # a test that did not run: every result
    checked = card(("consistent",), ("t.py::t", "t.py::u"))
    checked.tests[0].results[0] = replace(checked.tests[0].results[0], slice="other")  # PR itself absent
    assert [(d.metric, d.slice) for d in compare(checked, base, gate="ci").missing_gated] == [("PR", None)]
