"""The constant-policy battery (issue 44): every one-answer or random policy the suites' questions admit
(``faithtests/testing/policies.py``) FAILS at least one check of every suite it runs through, never all
PASS and never only INSUFFICIENT, and the check that catches it is the gate named here (the floor or
paper gate built for it). Each suite runs once, as a user runs it (a pytest subprocess, every policy a
``--faith-vlm``), at its default data size, on the tests that read the policies' answers.

The dual-encoder side (a constant and a random-weight open_clip scorer) is
``test_degenerate_scorers.py``; the deaf twin ``reference:omni-deaf`` (a trained model, not a policy)
is ``tests/protocols/imavb/test_audio_gates.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from faithtests.testing.policies import POLICIES
from faithtests.testing.suite_run import cache_args, env_cache

ROOT = Path(__file__).resolve().parents[2]
OMNI = "@reference:omni"

#: suite file -> (the tests that read the answers (-k), policy -> a check that must FAIL on it)
BATTERY: dict[str, tuple[str, dict[str, str]]] = {
    "flip_sensitivity": ("forced_choice", {
        "letter-A": "AB_accuracy[swap]", "letter-B": "AB_accuracy[orig]", "random": "strict_correct",
    }),
    "premise_rejection": ("base and (premise_accuracy or balanced_accuracy)", {
        **{f"letter-{x}": "std_v" for x in "ABCDEF"},
        "reject-visual": "std_v", "reject-audio": "std_v", "random": "std_v",
        f"letter-F{OMNI}": "std_a", f"reject-audio{OMNI}": "rejection_gap[audio]", f"random{OMNI}": "std_a",
    }),
    "affective_conflict": ("generation and base and (conflict_shares or text_bias or aligned) or unimodal", {
        **{name: "P_img[S-Opp]" for name in POLICIES if name.startswith("label-")},
        "random": "P_img[S-Opp]", "text-only": "P_img[S-Opp]", "image-only": "text_only_acc",
    }),
    "difference_consistency": ("base and (symmetric or count or naming)", {
        "yes": "contradiction_rate[difficulty=easy]", "no": "contradiction_rate[difficulty=easy]",
        "same": "DS_exist[subset=multi]", "different": "false_alarm_rate[subset=identical]",
        "count-0": "DS_count", "count-1": "DS_count[subset=multi]", "count-2": "DS_count",
        "count-5": "DS_count", "random": "contradiction_rate[difficulty=easy]",
    }),
}


def run_battery(tmp_path: Path, suite: str) -> dict[str, Any]:
    select, policies = BATTERY[suite]
    report = tmp_path / "report"
    # the inner models' outputs: CI's cache of the main job's run, else one shared by this run's policies
    cache = cache_args(env_cache() or tmp_path / "outputs")
    cmd = [sys.executable, "-m", "pytest", f"suites/test_{suite}.py", "-q", "-p", "no:cacheprovider", "-k",
           select, "--faith-report", str(report), *cache,
           *(a for name in policies for a in ("--faith-vlm", f"policy:{name}"))]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    card: dict[str, Any] = json.loads((report / "scorecard.json").read_text())
    return card


def test_a_plug_in_vlm_is_not_applicable_to_the_scorer_suites(tmp_path: Path) -> None:
    """A VLM from a plug-in answers prompts but scores no captions: the invariance suite reports its
    tests not applicable with the reason (an error per test before)."""
    report = tmp_path / "report"
    cmd = [sys.executable, "-m", "pytest", "suites/test_invariance.py", "-q", "-p", "no:cacheprovider",
           "--faith-report", str(report), "--faith-vlm", "policy:random"]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    tests = json.loads((report / "scorecard.json").read_text())["tests"]
    assert tests and {t["outcome"] for t in tests} == {"skipped"}, tests
    assert all("lacks caption log-likelihoods" in t["message"] for t in tests), tests[0]["message"]


def _name(r: dict[str, Any]) -> str:
    return r["metric"] + (f"[{r['slice']}]" if r["slice"] else "")


@pytest.mark.parametrize("suite", list(BATTERY))
def test_every_policy_fails_the_gate_built_for_it(tmp_path: Path, suite: str) -> None:
    card = run_battery(tmp_path, suite)
    _, policies = BATTERY[suite]
    wrong = {}
    for name, gate in policies.items():
        model = f"policy:{name}"
        checks = [r for r in card["results"] if r["model"] == model and r["passed"] is not None]
        failed = {_name(r): r for r in checks if r["verdict"] == "fail"}
        if gate not in failed:
            verdicts = {_name(r): r["verdict"] for r in checks}
            wrong[name] = f"{gate} did not fail (checks: {verdicts})"
        elif not failed[gate].get("gate_kind"):
            wrong[name] = f"{gate} failed without its kind (paper gate or floor)"
    assert not wrong, wrong
