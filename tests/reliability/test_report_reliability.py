"""Reliability corpus (engineer T): coverage verdicts, undefined CIs, non-finite model outputs, thresholds
file errors, dataset-naming ids and the terminal summary. One test per case, exact messages."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from faithtests.reports.summary import summary_lines
from faithtests.scorecard.coverage import DatasetCoverage, coverage_line, input_coverage
from faithtests.scorecard.gate_kinds import ThresholdError
from faithtests.scorecard.model import InvalidCount, MetricResult, TestRecord
from faithtests.scorecard.recording import Faith, FaithCheckFailed, FaithInsufficient, ThresholdDirectionError
from faithtests.scorecard.scorecard import Scorecard
from faithtests.scorecard.thresholds import Thresholds, load_thresholds
from faithtests.stats import bootstrap_ci, cluster_bootstrap_ci

DEFAULTS = """
[coverage]
min_valid_fraction = 0.5
min_n = 10
[coverage.premise]
min_n = 2

[flip]
PR = { op = ">=", value = 0.70 }
E_inv = { op = "<=", value = 0.05 }

[premise]
acc = { op = ">=", value = 0.5 }
"""


@pytest.fixture
def th(tmp_path: Path) -> Thresholds:
    p = tmp_path / "defaults.toml"
    p.write_text(DEFAULTS, encoding="utf-8")
    return load_thresholds(p)


def _faith(th: Thresholds, suite: str = "flip", **kw: object) -> Faith:
    return Faith(f"suites/test_{suite}.py::test_x[world-clip]", suite, thresholds=th, model="clip", **kw)  # type: ignore[arg-type]


def _src(th: Thresholds) -> str:
    return th.files[0]


# -- 16.8 coverage is a verdict ------------------------------------------------------------------------
def test_78_of_79_images_missing_fails_the_check(th: Thresholds) -> None:
    f = _faith(th)
    f.invalid("missing image", 78, total=79)
    f.metric("PR", 1.0, ci=(1.0, 1.0), n=12)
    with pytest.raises(FaithCheckFailed) as info:
        f.check("PR")
    assert str(info.value) == (
        "flip/PR = 1.000 (95% CI 1.000–1.000, n=12) passes >= 0.700 but has no verdict: only 1 of 79 inputs "
        f"valid (1.3%; 78 missing image) < min_valid_fraction 0.5 [coverage rule from {_src(th)}] "
        "[model=clip, variant=base]"
    )
    assert f.record.results[0].passed is False


def test_too_small_n_fails_the_check(th: Thresholds) -> None:
    f = _faith(th)
    f.metric("PR", 0.9, n=3)
    with pytest.raises(FaithCheckFailed) as info:
        f.check("PR")
    assert str(info.value) == (
        "flip/PR = 0.900 (n=3) passes >= 0.700 but has no verdict: n=3 < min_n 10 (too few items for a "
        f"verdict) [coverage rule from {_src(th)}] [model=clip, variant=base]"
    )


def test_coverage_rule_is_overridable_per_suite(th: Thresholds) -> None:
    assert (th.coverage("premise").min_n, th.coverage("premise").min_valid_fraction) == (2, 0.5)
    assert th.coverage("flip").min_n == 10
    f = _faith(th, suite="premise")
    f.metric("acc", 0.9, n=3)
    assert f.check("acc").passed is True


def test_coverage_of_another_model_does_not_count(th: Thresholds) -> None:
    f = _faith(th)
    f.bind(model="other")
    f.invalid("unparseable answer", 9, total=10)
    f.bind(model="clip")
    f.metric("PR", 0.9, n=10)
    assert f.check("PR").passed is True


def test_coverage_table_unknown_field(tmp_path: Path, th: Thresholds) -> None:
    user = tmp_path / "mine.toml"
    user.write_text("[coverage]\nmin_valid = 0.9\n", encoding="utf-8")
    with pytest.raises(ThresholdError) as info:
        load_thresholds(Path(_src(th)), user)
    assert str(info.value) == (
        f"{user}: [coverage]: unknown field(s) min_valid (allowed: min_valid_fraction, min_n); "
        "did you mean 'min_valid_fraction'?"
    )


def test_coverage_table_unknown_suite(tmp_path: Path, th: Thresholds) -> None:
    user = tmp_path / "mine.toml"
    user.write_text("[coverage.flp]\nmin_n = 5\n", encoding="utf-8")
    with pytest.raises(ThresholdError) as info:
        load_thresholds(Path(_src(th)), user)
    assert (
        str(info.value)
        == f"{user}: [coverage]: unknown suite 'flp' (suites: flip, premise); did you mean 'flip'?"
    )


def test_coverage_fraction_out_of_range(tmp_path: Path, th: Thresholds) -> None:
    user = tmp_path / "mine.toml"
    user.write_text("[coverage]\nmin_valid_fraction = 1.5\n", encoding="utf-8")
    with pytest.raises(ThresholdError) as info:
        load_thresholds(Path(_src(th)), user)
    assert str(info.value) == f"{user}: [coverage]: min_valid_fraction 1.5 is not in [0, 1]"


def test_user_coverage_override_merges(tmp_path: Path, th: Thresholds) -> None:
    user = tmp_path / "mine.toml"
    user.write_text("[coverage]\nmin_n = 30\n", encoding="utf-8")
    merged = load_thresholds(Path(_src(th)), user)
    rule = merged.coverage("flip")
    assert (rule.min_n, rule.min_valid_fraction, rule.source) == (30, 0.5, str(user))


def test_single_cluster_ci_is_undefined_not_zero_width(th: Thresholds) -> None:
    ci = cluster_bootstrap_ci([1.0, 1.0, 0.0], ["img1"] * 3)
    assert all(math.isnan(v) for v in ci) and getattr(ci, "reason", "") == "undefined (n clusters 1 < 2)"
    assert getattr(bootstrap_ci([0.4]), "reason", "") == "undefined (n items 1 < 2)"
    f = _faith(th)
    r = f.metric("PR", 0.9, ci=ci, n=12)
    assert (r.ci, r.ci_note) == (None, "undefined (n clusters 1 < 2)")
    assert f.check("PR").passed is True  # gate point: the value decides


def test_undefined_ci_is_insufficient_under_the_ci_gate(th: Thresholds) -> None:
    """Issue 31 item 1: an undefined CI under gate ci is no verdict (INSUFFICIENT, never a pass)."""
    f = _faith(th, gate="ci")
    f.metric("PR", 0.9, ci=cluster_bootstrap_ci([1.0, 1.0], ["img1", "img1"]), n=12)
    with pytest.raises(FaithInsufficient) as info:
        f.check("PR")
    assert str(info.value) == (
        "flip/PR = 0.900 (95% CI undefined (n clusters 1 < 2), n=12) passes >= 0.700 but has no verdict: "
        "CI undefined (n clusters 1 < 2): no bound to compare [model=clip, variant=base]"
    )
    r = f.record.results[0]
    assert (r.passed, r.insufficient, r.verdict) == (False, True, "insufficient")


# -- 16.11 non-finite model outputs ---------------------------------------------------------------------
def test_nonfinite_scores_are_counted_per_item_and_fail(th: Thresholds) -> None:
    f = _faith(th)
    scores = np.array([[0.1, 0.2], [np.nan, 0.3], [0.2, np.inf]] + [[0.5, 0.1]] * 9)
    ok = f.nonfinite(scores, [f"img{i}" for i in range(12)])
    assert ok.tolist() == [True, False, False] + [True] * 9
    assert f.record.invalid[0] == InvalidCount("non-finite score", 2, 12, ["img1", "img2"], "clip", "base")
    f.metric("PR", 0.9, n=10)
    with pytest.raises(FaithCheckFailed) as info:
        f.check("PR")
    assert str(info.value) == (
        "flip/PR = 0.900 (n=10) passes >= 0.700 but has no verdict: model clip produced non-finite outputs "
        "(NaN or inf) for 2 of 12 items (e.g. img1, img2; kind 'non-finite score'): its outputs are broken "
        "(an overflowing dtype such as float16, or bad weights), so no verdict can be given "
        f"[coverage rule from {_src(th)}] [model=clip, variant=base]"
    )


def test_infinite_metric_value_is_undefined_and_says_why(th: Thresholds) -> None:
    f = _faith(th)
    assert f.metric("PR", math.inf, n=12).value is None
    with pytest.raises(FaithCheckFailed) as info:
        f.check("PR")
    assert str(info.value) == (
        "flip/PR = inf (non-finite: the model's outputs overflowed) (n=12) fails >= 0.700 (gate=point) "
        "[model=clip, variant=base]"
    )


# -- 16.12 thresholds file errors -----------------------------------------------------------------------
def test_non_utf8_thresholds_file(tmp_path: Path, th: Thresholds) -> None:
    user = tmp_path / "latin1.toml"
    user.write_bytes(
        "[flip]\n# seuil: 0,7 \u2014 r\u00e9f\u00e9rence\nPR = 0.8\n".encode("latin-1", "replace")
    )
    with pytest.raises(ThresholdError) as info:
        load_thresholds(Path(_src(th)), user)
    assert str(info.value) == (
        f"{user}: not UTF-8 text (byte 0xe9 at offset 23); TOML files must be UTF-8: re-save the thresholds "
        "file as UTF-8"
    )


def test_user_op_contradicting_the_direction_is_a_load_error(tmp_path: Path, th: Thresholds) -> None:
    user = tmp_path / "mine.toml"
    user.write_text('[flip]\nE_inv = { op = ">=", value = 0.05 }\n', encoding="utf-8")
    with pytest.raises(ThresholdError) as info:
        load_thresholds(Path(_src(th)), user)
    assert str(info.value) == (
        f"{user}: [flip] E_inv: op '>=' contradicts the metric's direction: E_inv is lower-is-better "
        f"('<=' in {_src(th)}); a threshold may change its value, not which way is better"
    )


def test_op_contradicting_recorded_direction_is_a_check_error(th: Thresholds) -> None:
    f = _faith(th)
    f.metric("E_inv", 0.01, n=12)  # recorded higher-is-better (the default), thresholds say <=
    with pytest.raises(ThresholdDirectionError) as info:
        f.check("E_inv")
    assert str(info.value) == (
        f"flip/E_inv: threshold op '<=' (from {_src(th)}) contradicts the metric's direction: E_inv is "
        "recorded as higher-is-better, so use >="
    )


# -- 17.3 / 17.5 the terminal summary and honest counts ------------------------------------------------
def _record(test: str, dataset: str, model: str, missing: int, *results: MetricResult) -> TestRecord:
    inv = [InvalidCount("missing image", missing, 7347, model=model)] if missing else []
    return TestRecord(
        test=test, suite="flip_sensitivity", results=list(results), invalid=inv, dataset=dataset
    )


def _scorecard() -> Scorecard:
    def pr(test: str, model: str, value: float, passed: bool) -> MetricResult:
        return MetricResult(
            "flip_sensitivity",
            test,
            "PR",
            value,
            model=model,
            n=47,
            op=">=",
            threshold=0.7,
            passed=passed,
            gate="point",
        )

    t1 = "suites/test_flip_sensitivity.py::test_flip_positive_rate[sugarcrepe-all-clip]"
    t2 = "suites/test_flip_sensitivity.py::test_flip_positive_rate[sugarcrepe-all-vlm]"
    t3 = "suites/test_flip_sensitivity.py::test_flip_strength_bins[sugarcrepe-weak-clip]"
    return Scorecard(
        fingerprint={},
        tests=[
            _record(t1, "sugarcrepe", "clip", 7300, pr(t1, "clip", 0.9, True)),
            _record(t2, "sugarcrepe", "vlm", 7300, pr(t2, "vlm", 0.5, False)),
            _record(t3, "sugarcrepe", "clip", 7300),
        ],
    )


def test_missing_inputs_counted_once_per_dataset() -> None:
    assert input_coverage(_scorecard()) == [
        DatasetCoverage(
            "sugarcrepe",
            "missing image",
            7300,
            7347,
            tests=(
                "suites/test_flip_sensitivity.py::test_flip_positive_rate[sugarcrepe-all-clip]",
                "suites/test_flip_sensitivity.py::test_flip_positive_rate[sugarcrepe-all-vlm]",
                "suites/test_flip_sensitivity.py::test_flip_strength_bins[sugarcrepe-weak-clip]",
            ),
        )
    ]
    assert coverage_line(input_coverage(_scorecard())[0]) == (
        "coverage sugarcrepe: 7300 of 7347 inputs missing image (99.4%)"
    )


def test_model_dependent_counts_stay_per_model() -> None:
    sc = Scorecard(
        fingerprint={},
        tests=[
            TestRecord(
                "a::t[world-clip]", "s", invalid=[InvalidCount("tie", 3, 64, model="clip")], dataset="world"
            ),
            TestRecord(
                "a::t[world-vlm]", "s", invalid=[InvalidCount("tie", 5, 64, model="vlm")], dataset="world"
            ),
        ],
    )
    assert [(c.model, c.missing) for c in input_coverage(sc)] == [("clip", 3), ("vlm", 5)]


def test_summary_names_dataset_and_test_ends_with_verdicts_and_report() -> None:
    lines = summary_lines(_scorecard(), [Path("out/scorecard.json")], None, [])
    assert lines[1].split() == [
        "suite",
        "dataset",
        "test",
        "metric",
        "model",
        "variant",
        "value",
        "[CI]",
        "n",
        "threshold",
        "result",
        "±detectable",
    ]
    assert lines[2].split()[:4] == ["flip_sensitivity", "sugarcrepe", "test_flip_positive_rate", "PR"]
    assert lines[-4:] == [
        "coverage sugarcrepe: 7300 of 7347 inputs missing image (99.4%)",
        "PASS model clip: 1 check(s), all passed",
        "FAIL model vlm: 1 check(s), failed 1: flip_sensitivity/PR",
        "report: out/scorecard.json",
    ]


def test_summary_shows_undefined_ci_and_coverage_failure() -> None:
    r = MetricResult(
        "flip",
        "a::t[world-clip]",
        "PR",
        0.9,
        model="clip",
        n=3,
        op=">=",
        threshold=0.7,
        passed=False,
        gate="point",
        ci_note="undefined (n clusters 1 < 2)",
        coverage="n=3 < min_n 10 (too few items for a verdict) [coverage rule from t.toml]",
    )
    sc = Scorecard(
        fingerprint={}, tests=[TestRecord("a::t[world-clip]", "flip", results=[r], dataset="world")]
    )
    lines = summary_lines(sc, [], None, [])
    assert "0.900 [CI undefined (n clusters 1 < 2)]" in lines[2] and "FAIL (coverage)" in lines[2]
    assert lines[3] == (
        "FAIL coverage flip/PR [model=clip, variant=base]: n=3 < min_n 10 (too few items for a "
        "verdict) [coverage rule from t.toml]"
    )
    assert lines[-1] == "report: (not written)"


def test_invalid_kinds_out_of_one_total_add_up() -> None:
    """30% missing images and 30% unparseable answers leave 40% valid: below 0.5, although each kind
    alone leaves 70% (the rule read each kind on its own)."""
    from faithtests.scorecard.coverage import coverage_problem
    from faithtests.scorecard.model import InvalidCount, MetricResult
    from faithtests.scorecard.thresholds import CoverageRule

    r = MetricResult("flip", "t.py::t", "PR", 0.9, model="clip", n=40, op=">=", threshold=0.7)
    invalid = [InvalidCount("missing image", 30, total=100, model="clip"),
               InvalidCount("unparseable answer", 30, total=100, model="clip")]
    why = coverage_problem(r, invalid, CoverageRule(min_valid_fraction=0.5, min_n=10, source="F"))
    assert why == ("only 40 of 100 inputs valid (40.0%; 30 missing image + 30 unparseable answer) "
                   "< min_valid_fraction 0.5 [coverage rule from F]")
