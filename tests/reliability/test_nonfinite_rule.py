"""Issue 31 item 4: non-finite model outputs fail, everywhere, by one rule.

One kind vocabulary (:mod:`faithtests.scorecard.kinds`): a NaN/inf output is counted as 'non-finite
score' in every suite, with what broke as the example's detail, and the coverage rule reads that kind
(no pattern over decorated names such as "non-finite logits" or "... [base]"). Each suite is run as a
user would, on a plug-in model (``tests/reliability/nan_models.py``) that emits NaN for a fixed quarter
of its inputs (one session per plug-in model over its suites): every selected test must fail, naming the
model and its non-finite count, and count each broken item once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from faithtests.data.invalid import Counted
from faithtests.scorecard.kinds import NONFINITE, is_fatal
from faithtests.scorecard.recording import Faith
from faithtests.testing.suite_run import env_cache_args

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def test_a_nonfinite_kind_of_its_own_is_refused_where_it_is_counted() -> None:
    """Every non-finite kind is the vocabulary's NONFINITE: a protocol's own spelling ("non-finite
    logits") would slip past the fatal rule and let the model pass, so counting one raises, in a loader's
    counter and in the recorder alike (every suite run below counts through them)."""
    for spelling in ("non-finite logits", "Non-Finite score [base]", "nonfinite", "non finite score"):
        with pytest.raises(ValueError, match="a NaN or infinite output is counted as 'non-finite score'"):
            Counted().reject(spelling, "row 3")
        with pytest.raises(ValueError, match="a NaN or infinite output is counted as 'non-finite score'"):
            Faith("t.py::t", "s").invalid(spelling, 1, 4)
    counted = Counted()
    counted.reject(NONFINITE, "row 3", detail="letter logits")
    counted.reject("unparseable answer", "row 4")
    assert counted.invalid == {NONFINITE: 1, "unparseable answer": 1}
    assert Faith("t.py::t", "s").invalid(NONFINITE, 1, 4).kind == NONFINITE


def test_the_fatal_rule_reads_the_kind_not_a_pattern() -> None:
    assert is_fatal(NONFINITE)
    assert not is_fatal(f"{NONFINITE} [base]") and not is_fatal("non-finite logits")


def _run(report: Path, files: list[str], select: str, *model: str) -> tuple[int, str, dict[str, Any]]:
    # $FAITH_TEST_CACHE (CI: its main job's outputs): the wrapped reference model's rows are served (the
    # plug-in passes the store to it and breaks its answers after the call, never storing a broken one)
    cmd = [sys.executable, "-m", "pytest", *files, "-k", select, *model, "--faith-limit", "24",
           "-p", "no:cacheprovider", "-q", "--faith-report", str(report), *env_cache_args()]
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    card: dict[str, Any] = json.loads((report / "scorecard.json").read_text()) if (
        report / "scorecard.json").is_file() else {}
    return proc.returncode, out, card


VLM = ("--faith-vlm", "py:nan_models:vlm")
SCORER = ("--faith-model", "py:nan_models:scorer", "--faith-no-vlm-scorer")
SUITES = {  # suite -> (files, -k, model options)
    "invariance": (["suites/test_invariance.py"], "paraphrase_invariance and all", SCORER),
    "flip_sensitivity (LGIP)": (["suites/test_flip_sensitivity.py"], "flip_positive_rate and world-all",
                                SCORER),
    "flip_sensitivity (S3E)": (["suites/test_flip_sensitivity.py"],
                               "forced_choice_strict_correct or forced_choice_order_accuracy", VLM),
    "premise_rejection": (["suites/test_premise_rejection.py"],
                          "test_premise_accuracy and vision and base or test_balanced_accuracy and base",
                          VLM),
    # the constrained mode reads the label log-probabilities (where the plug-in's NaN is): recorded, not
    # gated (the gates use generation), and a test whose outputs were non-finite fails all the same
    "affective_conflict": (["suites/test_affective_conflict.py"],
                           "constrained and base and (test_text_bias_ratio or test_aligned_accuracy)", VLM),
    "difference_consistency": (["suites/test_difference_consistency.py"],
                               "(test_symmetric_consistency or test_difference_count) and base", VLM),
}


@pytest.fixture(scope="module")
def nan_runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``run(model) -> (exit status, output, scorecard)``: one run per plug-in model of every suite of
    :data:`SUITES` it is named for, each suite's selection kept to its own file (``-k "(test_x and
    (SELECT)) or ..."``: pytest's keywords hold the module name), memoised for this module's tests. One
    session per model, as a user runs several suites: the start-up (imports, model load) is paid once."""
    runs: dict[tuple[str, ...], tuple[int, str, dict[str, Any]]] = {}

    def run(model: tuple[str, ...]) -> tuple[int, str, dict[str, Any]]:
        if model not in runs:
            mine = [(files, select) for files, select, m in SUITES.values() if m == model]
            files = sorted({f for fs, _ in mine for f in fs})
            select = " or ".join(f"({Path(f).stem} and ({sel}))" for fs, sel in mine for f in fs)
            runs[model] = _run(tmp_path_factory.mktemp("nan") / "report", files, select, *model)
        return runs[model]

    return run


@pytest.mark.parametrize("suite", list(SUITES))
def test_a_plugin_model_emitting_nan_fails_every_check_of_each_suite(nan_runs: Any, suite: str) -> None:
    files, _, model = SUITES[suite]
    spec = model[1]
    rc, out, card = nan_runs(model)
    assert rc == 1, out[-4000:]  # test failures, never a crash or an error
    here = {Path(f).name for f in files}
    tests = [t for t in card["tests"] if t["test"].split("::")[0] in here]
    assert tests, out[-4000:]
    for t in tests:
        assert t["outcome"] == "failed", (t["test"], t["outcome"], t["message"])
        mine = [i for i in t["invalid"] if "non-finite" in i["kind"]]
        # one entry of the one kind: an item broken by NaN is counted once, never once per prompt or
        # again under a decorated name
        assert [i["kind"] for i in mine] == [NONFINITE], (t["test"], t["invalid"])
        (inv,) = mine
        assert 0 < inv["count"] < inv["total"] and inv["model"] == spec, inv
        assert len(set(inv["examples"])) == len(inv["examples"])
        assert f"model {spec} produced non-finite outputs (NaN or inf) for {inv['count']} of {inv['total']}" \
            in t["message"], t["message"]
    assert f"FAIL model {spec}:" in out


def test_a_model_nan_for_every_premise_prompt_fails_and_never_crashes(tmp_path: Path) -> None:
    """Issue 46: with no record left (every letter logit NaN), the premise tests crashed ("cannot reshape
    array of size 0", "Bal needs both vision splits"). Each check now fails, naming the model and its
    non-finite count out of every record."""
    spec = "py:nan_models:every_vlm"
    rc, out, card = _run(tmp_path / "report", ["suites/test_premise_rejection.py"],
                         "base and (test_premise_accuracy and vision or test_balanced_accuracy) "
                         "or test_prompt_variant and A4", "--faith-vlm", spec)
    assert rc == 1, out[-4000:]
    outcomes = {t["test"].split("::")[1]: t for t in card["tests"]}
    assert len(outcomes) == 4 and "error" not in out.lower().split("short test summary")[-1], out[-4000:]
    for name, t in outcomes.items():
        (inv,) = [i for i in t["invalid"] if i["kind"] == NONFINITE]
        assert inv["count"] == inv["total"] > 0 and inv["model"] == spec, inv
        # the ungated A4 variant too: a test whose model broke fails saying so (it records nothing)
        assert t["outcome"] == "failed", (name, t["message"])
        assert f"model {spec} produced non-finite outputs (NaN or inf) for {inv['count']} of {inv['total']}" \
            in t["message"], t["message"]
