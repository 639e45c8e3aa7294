"""Issue 31 item 1, IMAVB: probe and PGLA steps on too few stimuli raise ``InsufficientData`` with the
reason in plain words (never scikit-learn's "n_splits=4 greater than the number of groups" or "needs
samples of at least 2 classes"), and a ``--faith-limit 2`` suite run reports them INSUFFICIENT (exit
status 6) while the base accuracy tests still give their verdicts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from faithtests.protocols.imavb.pgla import (
    check_pgla_data,
    pgla_cv,
    pgla_layer,
    pgla_min_stimuli,
    split_stimuli,
)
from faithtests.protocols.imavb.probes import cv_accuracy, group_folds
from faithtests.scorecard.model import InsufficientData
from faithtests.testing.suite_run import env_cache_args

ROOT = Path(__file__).resolve().parents[3]
EXIT_INSUFFICIENT = 6


def _rows(stimuli: list[str], which: dict[str, tuple[str, ...]] | None = None) -> tuple[list[str], list[str]]:
    """(splits, stimuli) per row: each stimulus with a standard and a misleading vision question unless
    ``which`` names its splits."""
    sp: list[str] = []
    st: list[str] = []
    for s in stimuli:
        for split in (which or {}).get(s, ("standard_vision", "misleading_vision")):
            sp.append(split)
            st.append(s)
    return sp, st


def _pgla_inputs(sp: list[str], seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = len(sp)
    mis = np.array([s.startswith("misleading") for s in sp])
    states = rng.normal(size=(2, n, 4)) + mis[None, :, None]
    logits = rng.normal(size=(n, 6))
    return states, logits, np.where(mis, 4, 0)


def test_group_folds_with_fewer_stimuli_than_folds_is_insufficient_not_a_sklearn_error() -> None:
    from sklearn.model_selection import StratifiedGroupKFold

    y, groups = [0, 1, 0, 1], ["a", "a", "b", "b"]
    with pytest.raises(ValueError, match="n_splits=4"):  # what escaped before: sklearn's own error
        list(StratifiedGroupKFold(n_splits=4).split(np.zeros(4), y, groups))
    with pytest.raises(InsufficientData) as info:
        group_folds(y, groups, what="the §4.3 probe")
    assert info.value.reason == (
        "the §4.3 probe needs >= 4 stimuli and both labels for 4-fold CV grouped by stimulus, got 2 "
        "stimuli with label(s) [0, 1]"
    )
    with pytest.raises(InsufficientData, match=r"both labels .* got 8 stimuli with label\(s\) \[0\]"):
        group_folds([0] * 8, list("abcdefgh"))
    assert len(group_folds([0, 1] * 4, list("aabbccdd"))) == 4  # enough: four folds, no error


def test_a_single_misleading_row_is_insufficient_before_the_classifier_sees_one_class() -> None:
    """A dataset whose misleading split has one row: the fold holding it leaves the classifier one
    class to train on (sklearn: "needs samples of at least 2 classes")."""
    from sklearn.linear_model import LogisticRegression

    with pytest.raises(ValueError, match="at least 2 classes"):  # what escaped before
        LogisticRegression().fit(np.zeros((3, 2)), [0, 0, 0])
    y = [0] * 8 + [1]
    with pytest.raises(InsufficientData, match=r"fold \d with \d+ test rows, training label\(s\) \[0\]"):
        folds = group_folds(y, list("abcdefghi"))
        cv_accuracy(np.random.default_rng(0).normal(size=(9, 3)), y, folds)


def test_pgla_needs_seven_stimuli() -> None:
    """2 probe-training stimuli (round(0.25·7) = 2, l*'s CV needs two) and 5 evaluation stimuli (one per
    tuning fold): 7 is the fewest; 6 gives 2 and 4."""
    assert pgla_min_stimuli() == 7
    for n in (2, 4, 6):
        sp, st = _rows([f"s{i}" for i in range(n)])
        states, logits, gold = _pgla_inputs(sp)
        reason = (f"PGLA needs >= 7 stimuli (2 to train the gate probe and choose l*, one per fold of the "
                  f"5-fold tuning), got {n}")
        with pytest.raises(InsufficientData) as info:
            pgla_layer(states, sp, st)
        assert info.value.reason == reason
        with pytest.raises(InsufficientData) as info:
            pgla_cv(states, logits, gold, sp, st)
        assert info.value.reason == reason
    sp, st = _rows([f"s{i}" for i in range(7)])
    res = pgla_cv(*_pgla_inputs(sp), sp, st)  # the boundary runs: 5 held-out folds of one stimulus
    assert len(res.configs) == 5 and len({st[int(i)] for i in res.eval_rows}) == 5


def test_pgla_without_both_labels_where_it_needs_them_is_insufficient() -> None:
    names = [f"s{i}" for i in range(12)]
    train = {s for s, t in zip(names, split_stimuli(names), strict=True) if t}
    std_only = ("standard_vision",)
    sp, st = _rows(names, {s: std_only for s in train})  # the gate probe would see one class
    with pytest.raises(InsufficientData, match="probe-training stimuli need standard and misleading rows, "
                       "got standard rows only"):
        check_pgla_data(sp, st)
    sp, st = _rows(names, {s: std_only for s in names if s not in train})  # Bal undefined on eval rows
    with pytest.raises(InsufficientData, match=r"evaluation rows need both vision splits for Bal .*, got no "
                       r"misleading_vision rows"):
        check_pgla_data(sp, st)
    # evaluation stimuli with a misleading row: one leaves the fold holding it nothing to contrast on
    # its tuning side, two leave three held-out folds without Bal (sklearn and bal_of errors before)
    ev = sorted(set(names) - train)
    sp, st = _rows(names, {s: std_only for s in ev[1:]})
    with pytest.raises(InsufficientData, match=r"PGLA's tuning needs test rows and both labels in the "
                       r"training rows of each of 5 folds, got fold \d with \d+ test rows, training label"):
        pgla_cv(*_pgla_inputs(sp), sp, st)
    sp, st = _rows(names, {s: std_only for s in ev[2:]})
    with pytest.raises(InsufficientData, match=r"PGLA's 5-fold tuning needs both vision splits in every fold "
                       r"for Bal \(Eq. 1\), got no misleading_vision rows in fold \d's held-out rows"):
        pgla_cv(*_pgla_inputs(sp), sp, st)


def test_a_limit_2_suite_run_is_insufficient_on_probes_and_pgla_while_base_verdicts_pass(
    tmp_path: Path,
) -> None:
    """``--faith-limit 2``: before, every base accuracy test errored (``_eval_rows`` ran PGLA: "ValueError:
    pgla_layer: 1 probe-training stimuli") and the gap test died in scikit-learn ("n_splits=4 greater
    than the number of groups"). Now the probe and PGLA tests are INSUFFICIENT with the reason, exit 6;
    the base tests give verdicts on all rows (min_n 1 here so that two stimuli can pass) and say why the
    ``rows=pgla_eval`` slice is missing."""
    user = tmp_path / "thresholds.toml"
    user.write_text("[coverage.premise_rejection]\nmin_n = 1\n")
    report = tmp_path / "report"
    cmd = [sys.executable, "-m", "pytest", "suites/test_premise_rejection.py", "-p", "no:cacheprovider", "-q",
           "--faith-vlm", "reference:vlm", "--faith-limit", "2", "--faith-thresholds", str(user),
           "--faith-report", str(report), *env_cache_args()]  # $FAITH_TEST_CACHE: CI's main-job outputs
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == EXIT_INSUFFICIENT, proc.stdout[-3000:] + proc.stderr[-3000:]
    card = json.loads((report / "scorecard.json").read_text())
    tests = {t["test"].split("::")[1]: t for t in card["tests"]}
    pgla = ("PGLA needs >= 7 stimuli (2 to train the gate probe and choose l*, one per fold of the 5-fold "
            "tuning), got 2")
    short = {
        "test_premise_accuracy[world-reference:vlm-standard_vision-pgla]": pgla,
        "test_premise_accuracy[world-reference:vlm-misleading_vision-pgla]": pgla,
        "test_balanced_accuracy[world-reference:vlm-pgla]": pgla,
        "test_pgla_gain[world-reference:vlm]": pgla,
        "test_representation_action_gap[world-reference:vlm]":
            "the §4.3 vision-grounded probe needs >= 4 stimuli",
    }
    # the audio half: an image-only model skips it as not applicable, saying why (never a pass)
    deaf = {t for t in tests if "_audio-" in t or t.startswith("test_probe_asymmetry")}
    assert len(deaf) == 5 and all(tests[t]["outcome"] == "skipped" for t in deaf), deaf
    assert all("not applicable: the model takes no audio" in tests[t]["message"] for t in deaf)
    assert {t for t, r in tests.items() if r["outcome"] != "passed"} - deaf == set(short), tests
    for t, reason in short.items():
        assert tests[t]["outcome"] == "insufficient" and tests[t]["message"].startswith(reason), tests[t]
    base = [t for t in tests if t.endswith("-base]") and t not in deaf]
    assert len(base) == 3
    for t in base:
        checked = [r for r in card["results"] if r["test"].endswith(t) and r["threshold"] is not None]
        assert checked and all(r["passed"] for r in checked), checked
        (note,) = [i for i in tests[t]["invalid"] if i["kind"] == "rows=pgla_eval slice not computed"]
        assert note["examples"] == [pgla]
        assert not any(r["slice"] == "rows=pgla_eval" for r in card["results"] if r["test"].endswith(t))
