"""Reliability of the baseline gate and the report lifecycle (issue 16 items 1-6 and 12, issue 17 item 4):
each case names the exact message and exit status a user sees. Driven by pytester like tests/plugin/."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (inline runs restore sys.modules; numpy cannot be imported twice)
import pytest

from faithtests.cli import main as cli_main
from faithtests.scorecard.fingerprint import dataset_digest, mismatches
from faithtests.scorecard.model import MetricResult, TestRecord
from faithtests.scorecard.model import test_key as key_of
from faithtests.scorecard.scorecard import Scorecard, write_scorecard

PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio",
           "-W", "ignore::pytest.PytestAssertRewriteWarning")

# two tests, metrics without checks: only the baseline gate can fail them
SUITE = """
import json
import pathlib

import pytest

V = json.loads((pathlib.Path(__file__).parent / "values.json").read_text())

@pytest.mark.parametrize("model", [V.get("label", "clip")])
def test_acc(faith, model):
    faith.metric("acc", V["acc"])

def test_other(faith):
    faith.metric("auc", 0.7)
"""


def _setup(pytester: pytest.Pytester, acc: float = 0.9, **extra: Any) -> None:
    (pytester.path / "suites").mkdir(exist_ok=True)
    (pytester.path / "suites" / "thresholds.toml").write_text("[gate]\n")
    (pytester.path / "values.json").write_text(json.dumps({"acc": acc, **extra}))
    pytester.makepyfile(test_gate=SUITE)


def _run(pytester: pytest.Pytester, *args: str, **kw: Any) -> pytest.RunResult:
    # SUITE's metrics carry no check: gate every metric (by default only checked ones gate, issue 31)
    return pytester.runpytest(*PLUGINS, "--faith-regression-all", *args, **kw)


def _card(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _baseline(pytester: pytest.Pytester, *args: str) -> Path:
    base = pytester.path / "base" / "scorecard.json"
    assert _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline", *args).ret == 0
    return base


# -- item 1: keys independent of rootdir --------------------------------------------------------------
def test_baseline_outside_the_tree_still_matches(pytester: pytest.Pytester,
                                                  tmp_path_factory: pytest.TempPathFactory) -> None:
    """No ini file: ``--faith-baseline /elsewhere/scorecard.json`` moves pytest's rootdir up, which gave
    every node id a folder prefix ("0 regression(s), 2 new, 2 missing", exit 0 on 0.9 -> 0.6)."""
    _setup(pytester)
    assert _run(pytester).ret == 0
    outside = tmp_path_factory.mktemp("elsewhere") / "scorecard.json"
    shutil.copy(pytester.path / "faith-report" / "scorecard.json", outside)
    _setup(pytester, acc=0.6)
    # the moved rootdir also loses the default thresholds (rootdir/suites/thresholds.toml): caught by the
    # comparability check, allowed here to get at the keys
    result = _run(pytester, "--faith-baseline", str(outside), "--faith-allow-mismatch", "thresholds")
    assert f"rootdir: {pytester.path}\n" not in result.stdout.str()  # the rootdir did move
    assert result.ret == 1
    out = result.stdout.str()
    assert "0 new, 0 missing" in out and "1 regression(s)" in out
    assert ("REGRESSION gate/acc [model=clip, variant=base]: 0.900 -> 0.600 (test_gate.py::test_acc[clip])"
            in out)
    keys = [t["test"] for t in _card(pytester.path / "faith-report" / "scorecard.json")["tests"]]
    assert keys == ["test_gate.py::test_acc[clip]", "test_gate.py::test_other"]


def test_old_node_id_baseline_is_normalised(pytester: pytest.Pytester) -> None:
    _setup(pytester, acc=0.6)
    acc, other = "sub/dir/test_gate.py::test_acc[clip]", "sub/dir/test_gate.py::test_other"
    old = Scorecard(fingerprint={"seed": 0, "gate": "point"}, tests=[
        TestRecord(acc, "gate", results=[MetricResult("gate", acc, "acc", 0.9, "clip")]),
        TestRecord(other, "gate", results=[MetricResult("gate", other, "auc", 0.7)])])
    base = write_scorecard(old, pytester.path / "old.json")
    result = _run(pytester, "--faith-baseline", str(base))
    assert result.ret == 1
    assert "1 regression(s), 0 improvement(s), 0 new, 0 missing" in result.stdout.str()
    assert key_of("a\\b\\test_x.py::t[p/q::r]") == "test_x.py::t[p/q::r]" == key_of("test_x.py::t[p/q::r]")


def test_two_tests_with_one_key_are_a_usage_error(pytester: pytest.Pytester) -> None:
    for folder in ("a", "b"):
        (pytester.path / folder).mkdir()
        (pytester.path / folder / "test_same.py").write_text("def test_x(faith):\n    faith.metric('m', 1)\n")
    result = _run(pytester, "--import-mode=importlib")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("faithtests: a/test_same.py::test_x and b/test_same.py::test_x have the same result key "
            "'test_same.py::test_x' (keys are the test file's name, the test and its parameters): rename "
            "one test file or test") in result.stderr.str()


# -- item 2: a gate that compares nothing fails ---------------------------------------------------------
MISSING = ("FAIL: 1 baseline result(s) of 1 test(s) were not compared (missing from this run: a deselected "
           "test, a renamed model label or parameter):")
ALLOW = ("pass --faith-allow-missing (ini faith_allow_missing = true) if this selection is intended; "
         "exit status 1")


def test_deselected_baseline_test_fails_unless_allowed(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    base = _baseline(pytester)
    result = _run(pytester, "--faith-baseline", str(base), "-k", "acc")
    assert result.ret == 1
    result.stdout.fnmatch_lines([MISSING, "  test_other: gate/auc [[]model=-, variant=base[]]", ALLOW])
    assert _run(pytester, "--faith-baseline", str(base), "-k", "acc", "--faith-allow-missing").ret == 0
    pytester.makeini("[pytest]\nfaith_allow_missing = true\n")
    assert _run(pytester, "--faith-baseline", str(base), "-k", "acc").ret == 0


def test_renamed_model_label_does_not_skip_its_gate(pytester: pytest.Pytester) -> None:
    _setup(pytester, label="ckpt-0410")
    base = _baseline(pytester)
    _setup(pytester, acc=0.1, label="ckpt-0420")  # a big drop, hidden behind the new label
    result = _run(pytester, "--faith-baseline", str(base))
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [MISSING, "  test_acc[[]ckpt-0410[]]: gate/acc [[]model=ckpt-0410, variant=base[]]", ALLOW])


# -- item 3: comparability ------------------------------------------------------------------------------
def test_limit_mismatch_is_a_usage_error_unless_allowed(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    base = _baseline(pytester, "--faith-limit", "5")
    result = _run(pytester, "--faith-baseline", str(base), "--faith-limit", "10", "--faith-seed", "3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (f"--faith-baseline: {base} is not comparable with this run: it differs in seed (0 vs 3); "
            "limit (5 vs 10) (baseline vs run). Re-create the baseline with --faith-update-baseline, or pass "
            "--faith-allow-mismatch seed,limit to compare anyway") in result.stderr.str()
    allowed = _run(pytester, "--faith-baseline", str(base), "--faith-limit", "10", "--faith-allow-mismatch",
                   "limit")
    assert allowed.ret == 0
    assert ("warning: baseline differs in limit (5 vs 10) (allowed by --faith-allow-mismatch)"
            in allowed.stdout.str())
    assert _run(pytester, "--faith-baseline", str(base), "--faith-limit", "10", "--faith-seed", "3",
                "--faith-allow-mismatch", "all").ret == 0


def test_thresholds_and_gate_mismatch(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    base = _baseline(pytester)
    (pytester.path / "suites" / "thresholds.toml").write_text('[gate]\nacc = { op = ">=", value = 0.1 }\n')
    result = _run(pytester, "--faith-baseline", str(base), "--faith-gate", "ci")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "it differs in gate ('point' vs 'ci'); thresholds (" in err
    assert "--faith-allow-mismatch gate,thresholds to compare anyway" in err


def test_answer_mode_mismatch(pytester: pytest.Pytester) -> None:
    """A baseline of option scoring against a run of generated letters measures another thing (issue 45):
    refused unless allowed, and the run's mode is in its fingerprint."""
    _setup(pytester)
    base = _baseline(pytester)
    assert _card(base)["fingerprint"]["answer_mode"] == "auto"
    result = _run(pytester, "--faith-baseline", str(base), "--faith-answer-mode", "generated")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "it differs in answer_mode ('auto' vs 'generated')" in err
    assert "--faith-allow-mismatch answer_mode to compare anyway" in err
    assert _run(pytester, "--faith-baseline", str(base), "--faith-answer-mode", "generated",
                "--faith-allow-mismatch", "answer_mode").ret == 0


def test_data_mismatch_names_the_data_set(pytester: pytest.Pytester, tmp_path: Path) -> None:
    _setup(pytester)
    base = _baseline(pytester)
    card = _card(base)
    card["fingerprint"]["data"] = {"coco": {"path": "/x", "sha256": "ab" * 32, "files": 3, "bytes": 9}}
    base.write_text(json.dumps(card))
    result = _run(pytester, "--faith-baseline", str(base))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "it differs in data ({coco: abababababab} vs {}) (baseline vs run)" in result.stderr.str()
    # the digest: names, sizes and the content of annotation files; not mtimes, not the location
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "images").mkdir(parents=True)
    (a / "captions.json").write_text('{"x": 1}')
    (a / "images" / "1.jpg").write_bytes(b"\xff" * 10)
    shutil.copytree(a, b)
    os.utime(b / "captions.json", (0, 0))
    assert dataset_digest(a)["sha256"] == dataset_digest(b)["sha256"] and dataset_digest(a)["files"] == 2
    (b / "captions.json").write_text('{"x": 2}')
    assert dataset_digest(a)["sha256"] != dataset_digest(b)["sha256"]


def test_older_baseline_without_fields_is_a_note(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    base = _baseline(pytester)
    card = _card(base)
    for name in ("limit", "data", "thresholds_sha256"):
        del card["fingerprint"][name]
    base.write_text(json.dumps(card))
    result = _run(pytester, "--faith-baseline", str(base))
    assert result.ret == 0
    assert ("note: the baseline does not record limit, data, thresholds (older scorecard): unknown, "
            "not checked") in result.stdout.str()


def test_unknown_allow_mismatch_field(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    result = _run(pytester, "--faith-allow-mismatch", "seed,colour")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("--faith-allow-mismatch: unknown field(s) colour (fields: seed, limit, profile, gate, data, "
            "thresholds, answer_mode, or all)") in result.stderr.str()


# -- item 4: crashed and errored tests count -----------------------------------------------------------
def test_xdist_worker_crash_is_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_crash="""
        import os

        def test_dies(faith):
            faith.metric("m", 1.0)
            os._exit(1)

        def test_fine(faith):
            faith.metric("m", 1.0)
    """)
    base = pytester.path / "base.json"
    result = pytester.runpytest_subprocess(*PLUGINS, "-p", "xdist", "-n", "2", "--faith-baseline", str(base),
                                           "--faith-update-baseline")
    assert result.ret == 1
    sc = _card(pytester.path / "faith-report" / "scorecard.json")
    tests = {t["test"]: t for t in sc["tests"]}
    assert sc["status"] == "incomplete"
    assert tests["test_crash.py::test_dies"]["outcome"] == "crashed"
    assert tests["test_crash.py::test_dies"]["message"].startswith("crashed: worker 'gw")
    assert tests["test_crash.py::test_fine"]["outcome"] == "passed"
    out = result.stdout.str()
    assert "ERROR: 1 test(s) errored or crashed: test_crash.py::test_dies" in out
    assert f"baseline NOT updated (run incomplete): {base}" in out and not base.exists()


def test_setup_error_is_recorded_and_blocks_the_baseline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_setup="""
        import pytest

        @pytest.fixture
        def data():
            raise RuntimeError("no data")

        def test_a(faith, data):
            faith.metric("m", 1.0)

        def test_b(faith):
            faith.metric("m", 1.0)
    """)
    base = pytester.path / "base.json"
    result = _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline")
    assert result.ret == 1
    sc = _card(pytester.path / "faith-report" / "scorecard.json")
    assert sc["status"] == "incomplete"
    (errored,) = [t for t in sc["tests"] if t["outcome"] == "error"]
    assert errored["test"] == "test_setup.py::test_a" and errored["message"] == "RuntimeError: no data"
    assert f"baseline NOT updated (run incomplete): {base}" in result.stdout.str() and not base.exists()


# -- item 5: reports never stale or clobbered ----------------------------------------------------------
def test_run_interrupted_before_any_test_supersedes_the_old_report(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    assert _run(pytester).ret == 0
    report = pytester.path / "faith-report"
    pytester.makepyfile(test_gate="def test_a(faith):\n    raise KeyboardInterrupt\n")
    result = _run(pytester, no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    old = _card(report / "scorecard.json")
    assert (old["status"], old["superseded_status"]) == ("superseded", "complete")
    assert sorted(p.name for p in report.iterdir()) == ["scorecard.json"]  # no HTML, no lock left


def test_second_run_on_one_report_dir_refuses(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    assert _run(pytester).ret == 0
    report = pytester.path / "faith-report"
    lock = report / ".faithtests.lock"
    lock.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "start": "T0"}))
    before = (report / "scorecard.json").read_bytes()
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (f"--faith-report: {report} is in use by another faithtests run (pid {os.getpid()} on host "
            f"{socket.gethostname()}, since T0); wait for it to finish or use another --faith-report DIR "
            f"(delete {lock} if that run is gone)") in result.stderr.str()
    assert (report / "scorecard.json").read_bytes() == before and lock.exists()
    result.assert_outcomes()  # no test ran


def test_stale_lock_of_a_dead_pid_is_taken_over(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    report = pytester.path / "faith-report"
    report.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock = report / ".faithtests.lock"
    lock.write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "start": "T0"}))
    result = _run(pytester)
    assert result.ret == 0
    assert (f"note: took over the stale lock {lock} of pid {dead.pid} (no longer running)"
            in result.stdout.str())
    assert not lock.exists() and _card(report / "scorecard.json")["status"] == "complete"


def test_unwritable_report_dir_fails_at_start(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    (pytester.path / "afile").write_text("")
    result = _run(pytester, "--faith-report", "afile/report")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (f"--faith-report: cannot write to {pytester.path / 'afile' / 'report'} (Not a directory); "
            "choose a writable directory with --faith-report DIR") in result.stderr.str()
    result.assert_outcomes()


# -- item 6: merge checks the shards ------------------------------------------------------------------
def _shard(path: Path, test: str, **fp: Any) -> Path:
    rec = TestRecord(test, "s", results=[MetricResult("s", test, "m", 0.5, "clip", passed=True)])
    fingerprint = {"seed": 0, "limit": None, "gate": "point", "model_specs": {"clip": "reference:clip"},
                   "data": {}, "thresholds_sha256": "aa", **fp}
    return write_scorecard(Scorecard(fingerprint=fingerprint, tests=[rec]), path)


def test_merge_refuses_shards_of_different_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _shard(tmp_path / "a.json", "test_s.py::test_a")
    b = _shard(tmp_path / "b.json", "test_s.py::test_b", seed=1)
    assert cli_main(["merge", str(a), str(b), "-o", str(tmp_path / "m")]) == 2
    assert (f"faithtests merge: error: merging {a}, {b}: {a} and {b} are not shards of one run: they differ "
            "in seed (0 vs 1)") in capsys.readouterr().err
    c = _shard(tmp_path / "c.json", "test_s.py::test_c", model_specs={"clip": "open_clip:ViT-B-32"})
    assert cli_main(["merge", str(a), str(c), "-o", str(tmp_path / "m")]) == 2
    assert "they differ in model_specs ({'clip': 'reference:clip'} vs" in capsys.readouterr().err
    d = _shard(tmp_path / "d.json", "test_s.py::test_d")
    assert cli_main(["merge", str(a), str(d), "-o", str(tmp_path / "m")]) == 0
    assert mismatches({"seed": 0}, {"seed": 0, "limit": 5}) == ([], ["limit"])


# -- item 7 (issue 17 item 4): compare gates ------------------------------------------------------------
def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    def card(pr: float, extra: float) -> Scorecard:
        tests = []
        for data in ("world", "coco"):  # one test per data set records the same metric and slice
            t = f"suites/test_flip.py::test_pr[{data}-all-clip]"
            tests.append(TestRecord(t, "flip", results=[
                MetricResult("flip", t, "PR", pr, "clip", threshold=0.5, op=">=", passed=True),
                MetricResult("flip", t, "PR", extra, "clip", slice="type=color")]))
        return Scorecard(fingerprint={"seed": 0}, tests=tests)

    a = write_scorecard(card(0.9, 0.9), tmp_path / "a.json")
    return a, write_scorecard(card(0.85, 0.1), tmp_path / "b.json")


def test_compare_gates_checked_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _two_runs(tmp_path)
    assert cli_main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "FAIL: 2 regression(s) beyond tolerance 0: exit status 1" in out
    assert "type=color" not in out  # unchecked: not compared by default
    assert "compared the checked metrics only (--all: every metric)" in out
    rows = [ln.split()[:3] for ln in out.splitlines() if ln.startswith("REGRESSION")]
    assert rows == [["REGRESSION", "test_pr[coco-all-clip]", "flip/PR"],
                    ["REGRESSION", "test_pr[world-all-clip]", "flip/PR"]]  # each key once, told apart
    assert cli_main(["compare", str(a), str(b), "--tolerance", "0.1"]) == 0
    capsys.readouterr()
    assert cli_main(["compare", str(a), str(b), "--tolerance", "0.1", "--all"]) == 1
    out = capsys.readouterr().out
    assert out.count("flip/PR[type=color]") == 2 and "FAIL: 2 regression(s) beyond tolerance 0.1" in out


# -- issue 16 item 12: a baseline that is not a scorecard --------------------------------------------------
@pytest.mark.parametrize(("content", "message"), [
    (b"\xff\xfe\x00garbage", "not a scorecard (not UTF-8 text: invalid start byte at byte 0)"),
    (b"{not json",
     "not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
])
def test_unreadable_baseline_is_a_usage_error(pytester: pytest.Pytester, content: bytes,
                                              message: str) -> None:
    _setup(pytester)
    bad = pytester.path / "bad.json"
    bad.write_bytes(content)
    result = _run(pytester, "--faith-baseline", str(bad))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--faith-baseline: {bad}: {message}" in result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


# -- found in review: each of these failed before its fix ------------------------------------------------
def test_worker_dying_in_teardown_keeps_the_recorded_results(pytester: pytest.Pytester) -> None:
    """xdist reports a crash against the test still pending, which may already have recorded: its
    results stay, marked crashed (they were replaced by an empty record)."""
    pytester.makepyfile(test_crash="""
        import os

        import pytest

        @pytest.fixture(scope="session")
        def dies_at_teardown():
            yield
            os._exit(1)

        def test_rec(faith, dies_at_teardown):
            faith.metric("m", 0.5)
    """)
    result = pytester.runpytest_subprocess(*PLUGINS, "-p", "xdist", "-n", "1")
    assert result.ret != 0
    sc = _card(pytester.path / "faith-report" / "scorecard.json")
    (rec,) = sc["tests"]
    assert rec["outcome"] == "crashed" and [r["value"] for r in rec["results"]] == [0.5]
    assert sc["status"] == "incomplete"


def test_one_key_twice_under_xdist_is_exit_4_not_an_internal_error(pytester: pytest.Pytester) -> None:
    for folder in ("a", "b"):
        (pytester.path / folder).mkdir()
        (pytester.path / folder / "test_same.py").write_text("def test_x(faith):\n    faith.metric('m', 1)\n")
    result = pytester.runpytest_subprocess(*PLUGINS, "-p", "xdist", "-n", "1", "--import-mode=importlib")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    assert "have the same result key 'test_same.py::test_x'" in out


def test_a_gate_with_no_recorded_test_fails(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    base = _baseline(pytester)
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = _run(pytester, "test_plain.py", "--faith-baseline", str(base))
    assert result.ret == 1
    result.stdout.fnmatch_lines(["FAIL: no test of this run recorded results, so none of the baseline's 2 "
                                 "result(s) was compared; pass --faith-allow-missing if this selection is "
                                 "intended; exit status 1"])
    assert _run(pytester, "test_plain.py", "--faith-baseline", str(base), "--faith-allow-missing").ret == 0


def test_the_baseline_cannot_be_this_runs_report(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    assert _run(pytester).ret == 0
    result = _run(pytester, "--faith-baseline", "faith-report")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (f"--faith-baseline {pytester.path / 'faith-report' / 'scorecard.json'} is this run's own report "
            "(--faith-report): keep the baseline in another folder") in result.stderr.str()


def test_an_incomplete_baseline_is_named(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    base = _baseline(pytester)
    card = _card(base)
    base.write_text(json.dumps({**card, "status": "interrupted"}))
    result = _run(pytester, "--faith-baseline", str(base))
    result.stdout.fnmatch_lines([f"warning: the baseline {base} is a 'interrupted' run, not a complete one: "
                                 "only what it recorded is compared"])


def test_dataset_digest_follows_linked_folders(tmp_path: Path) -> None:
    """A data folder whose annotations/ is a symlink digested to the hash of nothing: two different
    datasets laid out so compared as equal."""
    for name, text in (("one", '{"a": 1}'), ("two", '{"a": 2}')):
        (tmp_path / name / "ann").mkdir(parents=True)
        (tmp_path / name / "ann" / "captions.json").write_text(text)
        (tmp_path / f"data-{name}").mkdir()
        (tmp_path / f"data-{name}" / "annotations").symlink_to(tmp_path / name / "ann")
        (tmp_path / f"data-{name}" / ".DS_Store").write_text(name)  # not data
    (tmp_path / "data-one" / "loop").symlink_to(tmp_path / "data-one")  # walked once, never forever
    one, two = dataset_digest(tmp_path / "data-one"), dataset_digest(tmp_path / "data-two")
    assert one["files"] == two["files"] == 1
    assert one["sha256"] != two["sha256"]
