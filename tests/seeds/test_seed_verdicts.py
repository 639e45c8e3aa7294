"""Verdicts that do not depend on the seed (issue 44): on each of ``--faith-seed 0..9``, the default run
(``pytest suites/`` on reference:clip, reference:vlm and reference:omni) passes every gate, and each
degraded twin fails the gate it was built to fail. A gate whose good reference sits within noise of it
would flip between seeds; this sweep is how a recalibration is shown to hold.

It runs ten default runs and forty twin runs (about 25 minutes on 2 cores with ``-n 2``), so it is not
part of ``pytest tests/``: ``.ci/run`` runs it once, ``FAITH_SEED_SWEEP=1 pytest tests/seeds -n 2``
(tests/conftest.py leaves the folder out otherwise).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEEDS = range(10)
DIFFBLIND = "py:faithtests.testing.spd_degraded:diffblind"

#: (suite files and their arguments, twin -> the checks that must FAIL on it on every seed)
TWINS: list[tuple[tuple[str, ...], dict[str, set[str]]]] = [
    (("suites/test_flip_sensitivity.py", "-k", "(flip_positive_rate and color) or forced_choice",
      "--faith-model", "reference:clip-colorblind", "--faith-vlm", "reference:vlm-positionbiased",
      "--faith-no-vlm-scorer"),
     {"reference:clip-colorblind": {"PR[color]"}, "reference:vlm-positionbiased": {"AB_accuracy[swap]"}}),
    (("suites/test_affective_conflict.py", "-k", "generation and base and conflict_shares",
      "--faith-vlm", "reference:vlm-textbiased"),
     {"reference:vlm-textbiased": {"P_img[S-Opp]"}}),
    (("suites/test_premise_rejection.py", "-k", "base and (premise_accuracy or balanced_accuracy)",
      "--faith-vlm", "reference:vlm-textbiased", "--faith-vlm", "reference:omni-deaf"),
     {"reference:vlm-textbiased": {"mis_v"}, "reference:omni-deaf": {"std_a", "rejection_gap[audio]"}}),
    (("suites/test_difference_consistency.py", "-k", "base and (symmetric or count)",
      "--faith-vlm", "reference:vlm-sameprior", "--faith-vlm", DIFFBLIND),
     {"reference:vlm-sameprior": {"contradiction_rate[difficulty=easy]", "DS_exist[subset=multi]"},
      DIFFBLIND: {"DS_count"}}),
]


def run(tmp: Path, name: str, seed: int, *args: str) -> dict[str, Any]:
    report = tmp / name
    cmd = [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "--faith-seed", str(seed),
           "--faith-report", str(report), "--faith-cache", str(tmp.parent / "outputs")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=2400)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    card: dict[str, Any] = json.loads((report / "scorecard.json").read_text())
    card["exit_status"] = proc.returncode  # not a scorecard field: the run's own verdict, for the gate test
    return card


def _name(r: dict[str, Any]) -> str:
    return r["metric"] + (f"[{r['slice']}]" if r["slice"] else "")


@pytest.mark.parametrize("seed", SEEDS)
def test_good_references_pass_and_twins_fail_on_every_seed(tmp_path_factory: pytest.TempPathFactory,
                                                           seed: int) -> None:
    tmp = tmp_path_factory.mktemp(f"seed{seed}")
    default = run(tmp, "default", seed, "suites/")
    not_passed = {f"{r['model']}: {_name(r)} ({r['variant']})": (r["value"], r["threshold"], r["verdict"])
                  for r in default["results"] if r["passed"] is False}
    assert not not_passed, f"seed {seed}: the good references do not pass {not_passed}"
    bad_tests = {t["test"]: t["outcome"] for t in default["tests"]
                 if t["outcome"] not in ("passed", "skipped")}
    assert not bad_tests, f"seed {seed}: {bad_tests}"
    missed = {}
    for i, (args, twins) in enumerate(TWINS):
        card = run(tmp, f"twins{i}", seed, *args)
        for model, gates in twins.items():
            failed = {_name(r) for r in card["results"]
                      if r["model"] == model and r["variant"] == "base" and r["verdict"] == "fail"}
            if not gates <= failed:
                missed[model] = f"expected {sorted(gates)} to fail, failed {sorted(failed)}"
    assert not missed, f"seed {seed}: {missed}"


#: the default run's reference models under fixed labels, so a twin's results line up with the good one's
LABELLED = ("--faith-model", "clip=reference:clip", "--faith-vlm", "vlm=reference:vlm")
TWIN = ("--faith-model", "clip=reference:clip-colorblind", "--faith-vlm", "vlm=reference:vlm-textbiased")


def test_default_gate_passes_another_seed_fails_the_twins(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 49, item 1: under the default regression gate (paired, checked metrics, Holm over them) an
    unchanged checkpoint run on another data seed does not regress (exit 0, the seed mismatch allowed),
    while the degraded twins against the same baseline do, on the metrics they were built to fail."""
    tmp = tmp_path_factory.mktemp("gate")
    base = tmp / "seed0"
    run(tmp, "seed0", 0, "suites/", *LABELLED)
    again = run(tmp, "seed1", 1, "suites/", *LABELLED, "--faith-baseline", str(base),
                "--faith-allow-mismatch", "seed")
    assert again["regressions"] == [], [(r["test"], r["metric"], r["slice"]) for r in again["regressions"]]
    assert again["exit_status"] == 0  # nor a missing result: a slice without data on seed 1 is not gated
    twin = run(tmp, "twin", 0, "suites/", *TWIN, "--faith-baseline", str(base))
    regressed = {(r["model"], _name(r)) for r in twin["regressions"]}
    assert {("clip", "PR[color]"), ("vlm", "mis_v")} <= regressed, sorted(regressed)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_quick_profile_gives_every_check_a_verdict(tmp_path_factory: pytest.TempPathFactory,
                                                       seed: int) -> None:
    """Issue 49, item 2: ``--faith-profile quick`` on the good references exits 0 on every seed (every
    check with enough items for a verdict, and that verdict a pass)."""
    card = run(tmp_path_factory.mktemp(f"quick{seed}"), "quick", seed, "suites/", "--faith-profile", "quick")
    assert card["exit_status"] == 0, {f"{r['model']}: {_name(r)}": (r["value"], r["verdict"], r["coverage"])
                                      for r in card["results"] if r["passed"] is False}
    assert card["fingerprint"]["profile"] == "quick" and card["fingerprint"]["limit"] == 24


def test_a_quick_run_is_a_baseline_for_quick_runs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A quick run can be written as a baseline (nothing INSUFFICIENT refuses it) and gates another
    quick run; a default run is refused against it (limit and profile differ)."""
    tmp = tmp_path_factory.mktemp("quickbase")
    base = tmp / "base" / "scorecard.json"
    first = run(tmp, "first", 0, "suites/", "--faith-profile", "quick", "--faith-baseline", str(base),
                "--faith-update-baseline")
    assert first["exit_status"] == 0 and base.is_file()
    again = run(tmp, "again", 1, "suites/", "--faith-profile", "quick", "--faith-baseline", str(base),
                "--faith-allow-mismatch", "seed")
    assert again["exit_status"] == 0 and again["regressions"] == []
