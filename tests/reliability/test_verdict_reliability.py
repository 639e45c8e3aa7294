"""Issue 31 items 1, 2, 3 and 8: the INSUFFICIENT verdict, the paired regression gate on checked metrics,
baselines that are never emptied silently, and merge/compare checking what they combine. Each case names
the message and exit status a user sees."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (inline runs restore sys.modules; numpy cannot be imported twice)
import pytest

from faithtests.cli import main as cli_main
from faithtests.reports.summary import model_verdicts
from faithtests.scorecard.baseline import compare
from faithtests.scorecard.model import ItemValues, MetricResult, TestRecord
from faithtests.scorecard.recording import Faith, FaithCheckFailed, FaithInsufficient
from faithtests.scorecard.scorecard import Scorecard, read_scorecard, write_scorecard
from faithtests.scorecard.thresholds import Thresholds

PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio",
           "-W", "ignore::pytest.PytestAssertRewriteWarning")
EXIT_INSUFFICIENT = 6

# PR over per-item hits (values.json), checked; "aux" recorded without a check; a third test whose
# protocol step runs out of data (raises InsufficientData, as a probe on too few stimuli does)
SUITE = """
import json
import pathlib

import pytest

from faithtests.scorecard.model import InsufficientData

V = json.loads((pathlib.Path(__file__).parent / "values.json").read_text())

@pytest.mark.parametrize("model", ["clip"])
def test_pr(faith, model):
    hits = V["hits"]
    faith.metric("PR", sum(hits) / len(hits), ci=V.get("ci"), n=len(hits),
                 per_item={f"i{k}": float(h) for k, h in enumerate(hits)})
    faith.metric("aux", V.get("aux", 0.5))
    faith.check("PR", ">=", 0.5)

def test_probe(faith):
    if V.get("probe_short"):
        raise InsufficientData("probe needs 2 classes, got 1")
    faith.metric("probe_acc", 0.9)
"""


def _setup(pytester: pytest.Pytester, **values: Any) -> None:
    (pytester.path / "suites").mkdir(exist_ok=True)
    (pytester.path / "suites" / "thresholds.toml").write_text("[coverage]\nmin_n = 10\n")
    (pytester.path / "values.json").write_text(json.dumps({"hits": [1] * 40 + [0] * 10, **values}))
    if not (pytester.path / "test_v.py").exists():
        pytester.makepyfile(test_v=SUITE)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*PLUGINS, *args)


def _card(pytester: pytest.Pytester) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((pytester.path / "faith-report" / "scorecard.json").read_text())
    return out


def _faith(**kw: Any) -> Faith:
    test = "suites/test_flip.py::test_x[world-clip]"
    return Faith(test, "flip", thresholds=Thresholds(), model="clip", **kw)


# -- item 1: INSUFFICIENT -----------------------------------------------------------------------------
def test_too_few_items_is_insufficient_and_broken_outputs_fail() -> None:
    f = _faith()
    f.metric("Delta_lex", float("nan"), n=16, higher_is_better=False)
    with pytest.raises(FaithInsufficient) as info:
        f.check("Delta_lex", "<=", 0.25, min_n=20, unit="strict-correct items")
    assert "no verdict: needs >= 20 strict-correct items, got 16" in str(info.value)
    assert f.record.results[0].verdict == "insufficient" and f.record.results[0].passed is False
    g = _faith()
    g.nonfinite([[float("nan")], [0.1]], ["a", "b"])
    g.metric("PR", 0.9, n=1)  # too few items too, but NaN outputs are broken: FAIL, never INSUFFICIENT
    with pytest.raises(FaithCheckFailed) as failed:
        g.check("PR", ">=", 0.5)
    assert not isinstance(failed.value, FaithInsufficient) and g.record.results[0].verdict == "fail"


def test_under_a_limit_a_failure_the_ci_cannot_confirm_is_insufficient() -> None:
    f = _faith(limit=16)
    f.metric("PR", 0.786, ci=(0.6, 0.93), n=70)
    with pytest.raises(FaithInsufficient, match="the 95% CI reaches past the threshold at n=70 under "
                                                "--faith-limit 16"):
        f.check("PR", ">=", 0.8)
    full = _faith()  # the whole data set: the point gate's verdict stands
    full.metric("PR", 0.786, ci=(0.6, 0.93), n=70)
    with pytest.raises(FaithCheckFailed) as info:
        full.check("PR", ">=", 0.8)
    assert not isinstance(info.value, FaithInsufficient)
    clear = _faith(limit=16)  # a failure its CI confirms is a FAIL under a limit too
    clear.metric("PR", 0.5, ci=(0.4, 0.6), n=70)
    with pytest.raises(FaithCheckFailed) as info2:
        clear.check("PR", ">=", 0.8)
    assert not isinstance(info2.value, FaithInsufficient)


def test_insufficient_run_exits_6_shows_it_everywhere_and_the_flag_accepts_it(
        pytester: pytest.Pytester) -> None:
    _setup(pytester, hits=[1, 1, 0], probe_short=True)  # PR n=3 < min_n 10; the probe step runs out of data
    result = _run(pytester)
    assert result.ret == EXIT_INSUFFICIENT
    out = result.stdout.str()
    assert "2 insufficient" in out and "failed" not in out.splitlines()[-1]
    assert "INSUFFICIENT gate" not in out  # the suite is "v"
    assert "INSUFFICIENT v/PR [model=clip, variant=base]: n=3 < min_n 10" in out
    assert "INSUFFICIENT test test_v.py::test_probe: probe needs 2 classes, got 1" in out
    assert "INSUFFICIENT model clip: 1 check(s), insufficient data 1: v/PR" in out
    assert "PASS model" not in out
    sc = _card(pytester)
    (pr,) = [r for r in sc["results"] if r["metric"] == "PR"]
    assert (pr["verdict"], pr["passed"], pr["insufficient"]) == ("insufficient", False, True)
    assert {t["test"]: t["outcome"] for t in sc["tests"]}["test_v.py::test_probe"] == "insufficient"
    html = (pytester.path / "faith-report" / "scorecard.html").read_text()
    assert ">INSUFFICIENT</span>" in html and "not enough data" in html
    accepted = _run(pytester, "--faith-allow-insufficient")
    assert accepted.ret == 0 and "accepted by --faith-allow-insufficient; not a pass" in accepted.stdout.str()
    _setup(pytester, hits=[0] * 20)  # a real FAIL: exit 1 whatever else
    assert _run(pytester, "--faith-allow-insufficient").ret == 1


# -- item 2: the default regression gate is the paired one, on checked metrics --------------------------
def _sc(hits: list[int], aux: float, *, passed: bool = True) -> Scorecard:
    t = "t.py::test_pr[clip]"
    items = ItemValues.make({f"i{k}": float(h) for k, h in enumerate(hits)})
    return Scorecard(tests=[TestRecord(t, "v", results=[
        MetricResult("v", t, "PR", sum(hits) / len(hits), "clip", n=len(hits), per_item=items, threshold=0.5,
                     op=">=", passed=passed),
        MetricResult("v", t, "aux", aux, "clip")])])


def test_unchecked_moves_are_moved_and_small_paired_moves_are_noise() -> None:
    base, small = _sc([1] * 40 + [0] * 10, 0.5), _sc([1] * 38 + [0] * 12, 0.1)
    c = compare(small, base, gate="ci", checked_only=True)
    by = {d.metric: d for d in c.deltas}
    assert by["aux"].status == "moved" and not by["aux"].gated and c.moved == [by["aux"]]
    assert by["PR"].status == "within noise" and not c.regressions  # 2 items good->bad, McNemar p 0.5
    big = _sc([1] * 10 + [0] * 40, 0.5)
    (reg,) = compare(big, base, gate="ci", checked_only=True).regressions
    assert reg.metric == "PR" and reg.basis == "paired"
    assert reg.paired is not None and reg.paired.good_to_bad == 30
    lines = model_verdicts(big.results, [reg])
    assert lines == ["FAIL model clip: 1 check(s), regressed 1: v/PR"]  # never "PASS model" with a regression


def test_pytest_gate_and_compare_list_the_same_regressions(pytester: pytest.Pytester,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    base = pytester.path / "base" / "scorecard.json"
    _setup(pytester, aux=0.5)
    assert _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline").ret == 0
    _setup(pytester, hits=[1] * 38 + [0] * 12, aux=0.1)  # noise on PR, a big move of the unchecked aux
    quiet = _run(pytester, "--faith-baseline", str(base))
    assert quiet.ret == 0, quiet.stdout.str()
    assert "moved (not gated: no threshold check) v/aux [model=clip, variant=base]: 0.500 -> 0.100" in (
        quiet.stdout.str())
    report = pytester.path / "faith-report"
    assert _card(pytester)["regressions"] == [] and cli_main(["compare", str(base), str(report)]) == 0
    assert _run(pytester, "--faith-baseline", str(base), "--faith-regression", "point",
                "--faith-regression-all").ret == 1  # the old rule, by flag: 2 point regressions
    assert {r["metric"] for r in _card(pytester)["regressions"]} == {"PR", "aux"}
    assert cli_main(["compare", str(base), str(report)]) == 1  # compare repeats the rule the run used
    _setup(pytester, hits=[1] * 20 + [0] * 30, aux=0.5)  # PR 0.8 -> 0.4 on the same items
    gated = _run(pytester, "--faith-baseline", str(base))
    assert gated.ret == 1
    pytest_regs = {(r["test"], r["metric"], r["slice"]) for r in _card(pytester)["regressions"]}
    capsys.readouterr()
    assert cli_main(["compare", str(base), str(report), "--json"]) == 1
    cli_regs = {(d["test"], d["metric"], d["slice"]) for d in json.loads(capsys.readouterr().out)["deltas"]
                if d["status"] == "regression"}
    assert pytest_regs == cli_regs == {("test_v.py::test_pr[clip]", "PR", None)}
    assert "FAIL model clip" in gated.stdout.str() and "PASS model clip" not in gated.stdout.str()


# -- item 3: baselines are never emptied or shrunk silently ----------------------------------------------
def test_update_baseline_refuses_a_failed_partial_or_insufficient_run(pytester: pytest.Pytester) -> None:
    base = pytester.path / "base" / "scorecard.json"
    _setup(pytester)
    assert _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline").ret == 0
    before = base.read_bytes()
    cases = [
        ((), {"hits": [0] * 20}, "1 test(s) failed or errored (test_v.py::test_pr[clip])"),
        (("-k", "probe"), {}, "this run produced 1 result(s), the baseline holds 3 (2 of them not produced"),
        ((), {"hits": [1, 1, 0], "probe_short": True},
         "2 INSUFFICIENT check(s) or step(s) with too little data"),
        (("-k", "nothing_matches_this"), {}, None),  # nothing ran: nothing recorded, nothing written
    ]
    for args, values, why in cases:
        _setup(pytester, **values)
        result = _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline", *args)
        assert result.ret != 0 and base.read_bytes() == before, (args, result.stdout.str())
        if why is not None:
            out = result.stdout.str()
            assert f"ERROR: baseline NOT updated, the old one is intact ({base}): " in out and why in out
    _setup(pytester)
    forced = _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline", "-k", "not probe",
                  "--faith-force-update-baseline")
    assert forced.ret == 0 and "(forced despite: this run produced 2 result(s)" in forced.stdout.str()
    assert len(read_scorecard(base).results) == 2


def test_update_baseline_refuses_a_regressed_run_and_says_when_none_was(pytester: pytest.Pytester) -> None:
    """Issue 46: a run that regressed (its checks still passing) printed "regressed 1" and "baseline
    updated" and exited 0, replacing the better baseline. Refused now, exit 1, the old one intact."""
    base = pytester.path / "base" / "scorecard.json"
    _setup(pytester, aux=0.5)
    assert _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline").ret == 0
    before = base.read_bytes()
    _setup(pytester, hits=[1] * 28 + [0] * 22, aux=0.5)  # PR 0.8 -> 0.56, still >= 0.5: a regression
    result = _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline")
    out = result.stdout.str()
    assert result.ret == 1 and base.read_bytes() == before, out
    assert (f"ERROR: baseline NOT updated, the old one is intact ({base}): 1 regression(s) against the "
            "baseline it would replace (v/PR (clip))") in out and "baseline updated" not in out
    fresh = pytester.path / "fresh" / "scorecard.json"  # a first baseline from a failing run
    _setup(pytester, hits=[0] * 20)
    first = _run(pytester, "--faith-baseline", str(fresh), "--faith-update-baseline")
    assert first.ret == 1 and not fresh.exists()
    assert f"ERROR: baseline NOT updated, none was written ({fresh}): " in first.stdout.str()


def test_a_nan_baseline_value_is_an_error_naming_the_key(pytester: pytest.Pytester) -> None:
    base = pytester.path / "base" / "scorecard.json"
    _setup(pytester)
    assert _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline").ret == 0
    text = re.sub(r'"value": ?0\.8,', '"value": NaN,', base.read_text())  # indented or compact JSON
    assert "NaN" in text
    base.write_text(text)
    result = _run(pytester, "--faith-baseline", str(base))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (f"--faith-baseline: {base}: result test_v.py::test_pr[clip] v/PR (model clip, variant base): "
            "value nan is not a finite number (undefined is null)") in result.stderr.str()


# -- item 8: merge and compare check what they combine ---------------------------------------------------
def _shard(path: Path, test: str, sha: str, status: str = "complete") -> Path:
    rec = TestRecord(test, "s", results=[MetricResult("s", test, "m", 0.5, "clip", passed=True)])
    fp = {"seed": 0, "limit": None, "gate": "point", "model_specs": {"clip": "open_clip:x"}, "data": {},
          "thresholds_sha256": "aa", "models": {"clip": {"spec": "open_clip:x", "checkpoint_sha256": sha}}}
    return write_scorecard(Scorecard(fingerprint=fp, tests=[rec], status=status), path)


def test_merge_refuses_two_checkpoints_under_one_label_and_a_superseded_shard(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _shard(tmp_path / "a.json", "t.py::a", "1" * 64)
    b = _shard(tmp_path / "b.json", "t.py::b", "2" * 64)
    assert cli_main(["merge", str(a), str(b), "-o", str(tmp_path / "m")]) == 2
    assert (f"{a} and {b} are not shards of one run: model 'clip' has checkpoint sha256 111111111111 in one "
            "and 222222222222 in the other") in capsys.readouterr().err
    c = _shard(tmp_path / "c.json", "t.py::c", "1" * 64, status="superseded")
    assert cli_main(["merge", str(a), str(c), "-o", str(tmp_path / "m")]) == 2
    assert f"{c} is superseded: a newer run on its report directory started" in capsys.readouterr().err
    d = _shard(tmp_path / "d.json", "t.py::d", "1" * 64)
    assert cli_main(["merge", str(a), str(d), "-o", str(tmp_path / "m")]) == 0


def test_compare_fails_on_missing_results_unless_allowed(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    full = _sc([1] * 40 + [0] * 10, 0.5)
    # the checked PR missing from a test that ran fails; the unchecked aux alone would not (issue 49: a
    # slice without data on another seed), test_family.py covers that
    part = Scorecard(tests=[TestRecord("t.py::test_pr[clip]", "v", results=full.tests[0].results[1:])])
    a, b = write_scorecard(full, tmp_path / "a.json"), write_scorecard(part, tmp_path / "b.json")
    assert cli_main(["compare", str(a), str(b)]) == 1
    assert ("FAIL: 1 baseline result(s) of 1 test(s) are missing from B: t.py::test_pr[clip]; exit status 1 "
            "(--allow-missing if B is a partial selection)") in capsys.readouterr().out
    assert cli_main(["compare", str(a), str(b), "--allow-missing"]) == 0
