"""The pytest plugin end to end, driven by pytester: example suites whose metrics come from fixed
arrays, run inline (fast) unless a real subprocess is the point of the test."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (inline runs restore sys.modules; numpy cannot be imported twice)
import pytest

THRESHOLDS = """
[flip]
PR = { op = ">=", value = 0.80, family = { siglip = 0.45 } }
"PR[color]" = { op = ">=", value = 0.70 }
"""

# A suite whose PR comes from a fixed hit array (values.json, so a run can be re-seeded with a regression).
FLIP_SUITE = """
import json
import os
import pathlib

import numpy as np
import pytest

DATA = json.loads((pathlib.Path(__file__).parent / "values.json").read_text())


@pytest.mark.parametrize("model", ["clip"])
def test_pr(faith, model):
    hits = np.array(DATA["hits"], dtype=float)
    faith.metric("PR", hits.mean(), ci=tuple(DATA["ci"]), n=hits.size)
    faith.metric("PR", hits[:5].mean(), slice="color")
    faith.items("flips", {f"item{i}": bool(h) for i, h in enumerate(hits)})
    faith.check("PR", slice="color")
    faith.check("PR")
"""

HITS_09 = {"hits": [1, 1, 1, 1, 0, 1, 1, 1, 1, 1], "ci": [0.7, 1.0]}  # PR 0.9, PR[color] 0.8


# unrelated plugins off: inline runs restore sys.modules, so each run would re-import hypothesis (~1 s)
PLUGINS = (
    "-p",
    "faithtests.plugin",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:hypothesispytest",
    "-p",
    "no:anyio",
)


def _setup(pytester: pytest.Pytester, values: dict[str, Any] = HITS_09, suite: str = FLIP_SUITE) -> None:
    (pytester.path / "suites").mkdir(exist_ok=True)
    (pytester.path / "suites" / "thresholds.toml").write_text(THRESHOLDS)
    (pytester.path / "values.json").write_text(json.dumps(values))
    pytester.makepyfile(test_flip=suite)


def _run(pytester: pytest.Pytester, *args: str, **kw: Any) -> pytest.RunResult:
    # the plugin is imported already in this process, so inline runs cannot assertion-rewrite it
    quiet = ("-W", "ignore::pytest.PytestAssertRewriteWarning")
    return pytester.runpytest(*PLUGINS, *quiet, *args, **kw)


def _scorecard(pytester: pytest.Pytester, report: str = "faith-report") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / report / "scorecard.json").read_text())
    return data


def test_pass_writes_scorecard_and_summary(pytester: pytest.Pytester,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a log as wide as the table (at 120 its value column wraps)
    _setup(pytester)
    pytester.makepyfile(
        test_other="""
        import pytest

        @pytest.mark.suite("premise")
        def test_marked_only():
            pass

        def test_plain():
            pass
    """
    )
    result = _run(pytester)
    assert result.ret == 0
    sc = _scorecard(pytester)
    assert sc["schema_version"] == 1 and sc["status"] == "complete"
    fp = sc["fingerprint"]
    assert fp["packages"]["pytest"] == pytest.__version__ and fp["seed"] == 0
    assert {"python", "platform", "device", "dtype", "models", "git_commit", "start", "end", "argv"} <= set(
        fp
    )
    by = {(r["metric"], r["slice"]): r for r in sc["results"]}
    pr = by[("PR", None)]
    assert pr == {
        "suite": "flip",
        "test": "test_flip.py::test_pr[clip]",
        "metric": "PR",
        "value": 0.9,
        "model": "clip",
        "variant": "base",
        "ci": [0.7, 1.0],
        "n": 10,
        "higher_is_better": True,
        "slice": None,
        "threshold": 0.8,
        "op": ">=",
        "passed": True,
        "gate": "point",
        "ci_note": None,
        "coverage": None,
        "insufficient": False,
        "gate_kind": None,  # this project's thresholds file says no kind (suites/thresholds.toml does)
        "gate_note": None,
        "inconclusive": True,  # CI [0.7, 1.0] straddles 0.8: a pass under gate point, flagged
        "detectable_diff": 0.2,
        "verdict": "pass",
    }
    assert by[("PR", "color")]["value"] == 0.8 and by[("PR", "color")]["threshold"] == 0.7
    assert (by[("PR", "color")]["inconclusive"], by[("PR", "color")]["detectable_diff"]) == (None, None)
    tests = {t["test"]: t for t in sc["tests"]}
    # the suite-marked test is recorded (suite from the marker); the plain unit test is not
    assert set(tests) == {"test_flip.py::test_pr[clip]", "test_other.py::test_marked_only"}
    assert tests["test_other.py::test_marked_only"]["suite"] == "premise"
    assert tests["test_flip.py::test_pr[clip]"]["items"]["flips | clip | base"]["item4"] is False
    assert (pytester.path / "faith-report" / "scorecard.html").stat().st_size > 1000
    out = result.stdout.str()
    assert f"report: {pytester.path / 'faith-report' / 'scorecard.json'}" in out
    result.stdout.re_match_lines(
        [r"flip\s+-\s+test_pr\s+PR\s+clip\s+base\s+0\.900 \[0\.700, 1\.000\]\s+10\s+>= 0\.800\s+"
         r"pass \(inconclusive\)\s+±0\.200$"]
    )
    assert "2 check(s), 0 failed, 1 inconclusive" in out


def test_plain_unit_tests_write_no_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a():\n    assert 1\n")
    assert _run(pytester).ret == 0
    assert not (pytester.path / "faith-report").exists()


def test_threshold_failure_message(pytester: pytest.Pytester) -> None:
    _setup(pytester, {"hits": [1, 1, 1, 1, 1, 0, 0, 1, 0, 0], "ci": [0.5, 0.7]})  # PR 0.6, color 1.0
    result = _run(pytester)
    assert result.ret == 1
    msg = "flip/PR = 0.600 (95% CI 0.500–0.700, n=10) fails >= 0.800 (gate=point) [model=clip, variant=base]"
    assert msg in result.stdout.str()
    sc = _scorecard(pytester)
    (test,) = sc["tests"]
    assert test["outcome"] == "failed" and test["message"] == msg
    verdicts = {(r["metric"], r["slice"]): r["passed"] for r in sc["results"]}
    assert verdicts == {("PR", None): False, ("PR", "color"): True}
    result.stdout.re_match_lines([r"flip\s+-\s+test_pr\s+PR\s+clip\s+base\s+0\.600.*>= 0\.800\s+FAIL"])


def test_every_check_is_judged_before_the_test_fails(pytester: pytest.Pytester) -> None:
    """Issue 44: a failed check never hides a later one. Both checks fail (PR[color] 0.4 < 0.7, then
    PR 0.6 < 0.8): both verdicts reach the scorecard and the failure names both, in check order; a line
    after the checks still runs (the recorder fails the test once the function returns)."""
    suite = FLIP_SUITE + "    (pathlib.Path(__file__).parent / 'after.txt').write_text('ran')\n"
    _setup(pytester, {"hits": [1, 1, 0, 0, 0, 1, 1, 1, 1, 0], "ci": [0.5, 0.7]}, suite)
    result = _run(pytester)
    assert result.ret == 1 and (pytester.path / "after.txt").read_text() == "ran"
    sc = _scorecard(pytester)
    verdicts = {(r["metric"], r["slice"]): r["verdict"] for r in sc["results"]}
    assert verdicts == {("PR", None): "fail", ("PR", "color"): "fail"}
    (test,) = sc["tests"]
    first, second = test["message"].splitlines()
    assert first.startswith("flip/PR[color] = 0.400") and second.startswith("flip/PR = 0.600")


def test_unknown_threshold_key_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    (pytester.path / "mine.toml").write_text("[flip]\nPRR = 0.9\n")
    result = _run(pytester, "--faith-thresholds", "mine.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "unknown metric key 'PRR'" in err and "mine.toml" in err and "did you mean 'PR'?" in err
    assert not (pytester.path / "faith-report").exists()
    # a user file that merges cleanly tightens the threshold and fails the test
    (pytester.path / "mine.toml").write_text("[flip]\nPR = { value = 0.95 }\n")
    result = _run(pytester, "--faith-thresholds", "mine.toml")
    assert result.ret == 1 and "fails >= 0.950" in result.stdout.str()


def test_user_file_sets_a_declared_slice_and_rejects_a_typo(pytester: pytest.Pytester) -> None:
    """A slice the defaults declare (``slices``) but give no entry of its own uses the metric's value
    until a user file sets ``PR[color]``; a misspelt slice is a usage error, never silently ignored."""
    _setup(pytester)  # PR 0.9, PR[color] 0.8
    (pytester.path / "suites" / "thresholds.toml").write_text(
        '[flip]\nPR = { op = ">=", value = 0.75, slices = ["color"] }\n')
    assert _run(pytester).ret == 0
    thresholds = {r["slice"]: r["threshold"] for r in _scorecard(pytester)["results"]}
    assert thresholds == {None: 0.75, "color": 0.75}
    (pytester.path / "mine.toml").write_text('[flip]\n"PR[color]" = 0.85\n')
    result = _run(pytester, "--faith-thresholds", "mine.toml")
    assert result.ret == 1
    assert "flip/PR[color] = 0.800 fails >= 0.850 (gate=point)" in result.stdout.str()
    (pytester.path / "mine.toml").write_text('[flip]\n"PR[colour]" = 0.85\n')
    result = _run(pytester, "--faith-thresholds", "mine.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "unknown slice 'colour' of PR" in err and "mine.toml" in err and "did you mean 'PR[color]'?" in err


def test_inconclusive_point_pass_is_flagged_in_json_html_and_summary(pytester: pytest.Pytester) -> None:
    """Under gate point a check whose CI straddles the threshold passes (exit 0) but is flagged; a CI
    clear of the threshold is a clean pass."""
    _setup(pytester, {"hits": [1] * 17 + [0] * 3, "ci": [0.75, 0.95]})  # PR 0.85, CI straddles 0.80
    result = _run(pytester)
    assert result.ret == 0
    (r,) = [r for r in _scorecard(pytester)["results"] if r["slice"] is None]
    assert (r["passed"], r["inconclusive"], r["detectable_diff"]) == (True, True, 0.1)
    html = (pytester.path / "faith-report" / "scorecard.html").read_text()
    assert '<span class="badge inconclusive"' in html and "detects ±0.100" in html
    assert "1 inconclusive" in html
    result.stdout.re_match_lines([r"suite: flip · dataset: - · test: test_pr · model: clip · variant: base$",
                                  r"PR\s+0\.850 .*>= 0\.800\s+pass \(inconclusive\)\s+±0\.100$"])
    assert "inconclusive: the 95% CI straddles the threshold" in result.stdout.str()
    _setup(pytester, {"hits": [1] * 17 + [0] * 3, "ci": [0.81, 0.89]})  # clear of 0.80: conclusive
    assert _run(pytester).ret == 0
    (r,) = [r for r in _scorecard(pytester)["results"] if r["slice"] is None]
    assert (r["passed"], r["inconclusive"], r["detectable_diff"]) == (True, False, 0.04)
    html = (pytester.path / "faith-report" / "scorecard.html").read_text()
    assert '<span class="badge inconclusive"' not in html


def test_ci_gate_point_passes_ci_fails(pytester: pytest.Pytester) -> None:
    _setup(pytester, {"hits": [1] * 17 + [0] * 3, "ci": [0.75, 0.95]})  # PR 0.85, CI lo 0.75 < 0.80
    assert _run(pytester).ret == 0
    result = _run(pytester, "--faith-gate", "ci")
    assert result.ret == 1
    assert (
        "flip/PR = 0.850 (95% CI 0.750–0.950, n=20) fails >= 0.800 (gate=ci, bound 0.750, inconclusive: "
        "the CI straddles the threshold)" in result.stdout.str()
    )
    r = next(r for r in _scorecard(pytester)["results"] if r["slice"] is None)
    assert (r["gate"], r["passed"]) == ("ci", False)
    # the ini equivalent
    pytester.makeini("[pytest]\nfaith_gate = ci\n")
    assert _run(pytester).ret == 1


_run_any = _run


def test_baseline_gate_and_update(pytester: pytest.Pytester) -> None:
    _setup(pytester, {"hits": [1] * 17 + [0] * 3, "ci": [0.8, 0.9]})  # PR 0.85

    def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:  # the point/tolerance rule (by flag)
        return _run_any(pytester, "--faith-regression", "point", *args)

    base = pytester.path / "base" / "scorecard.json"
    missing = _run(pytester, "--faith-baseline", str(base))
    assert missing.ret == pytest.ExitCode.USAGE_ERROR and "does not exist" in missing.stderr.str()
    created = _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline")
    assert created.ret == 0 and base.exists()
    before = base.read_bytes()

    # seed a regression: PR 0.85 -> 0.82, still above its 0.80 threshold, so every test passes
    (pytester.path / "values.json").write_text(json.dumps({"hits": [1] * 41 + [0] * 9, "ci": [0.81, 0.9]}))
    result = _run(pytester, "--faith-baseline", str(base))
    assert result.ret == 1
    assert result.parseoutcomes() == {"passed": 1}
    out = result.stdout.str()
    assert "REGRESSION flip/PR [model=clip, variant=base]: 0.850 -> 0.820" in out
    assert "1 regression(s)" in out
    regs = _scorecard(pytester)["regressions"]
    assert [(r["metric"], r["slice"], r["status"]) for r in regs] == [("PR", None, "regression")]
    assert base.read_bytes() == before  # never overwritten without the flag

    assert _run(pytester, "--faith-baseline", str(base), "--faith-tolerance", "0.05").ret == 0
    assert _run(pytester, "--faith-baseline", str(base), "--faith-tolerance", "5%").ret == 0  # 0.0425
    assert _run(pytester, "--faith-baseline", str(base), "--faith-tolerance", "2%").ret == 1  # 0.017

    # a regressed run never replaces the better baseline unless forced (issue 46)
    refused = _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline")
    assert refused.ret == 1 and base.read_bytes() == before
    assert "1 regression(s) against the baseline it would replace (flip/PR (clip))" in refused.stdout.str()
    updated = _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline",
                   "--faith-force-update-baseline")
    assert updated.ret == 0 and "baseline updated" in updated.stdout.str()
    values = {r["slice"]: r["value"] for r in json.loads(base.read_text())["results"]}
    assert values[None] == pytest.approx(0.82)
    assert _run(pytester, "--faith-baseline", str(base)).ret == 0


def test_selecting_nothing_says_what_to_check_with_the_real_exit_status(pytester: pytest.Pytester) -> None:
    """Issue 49, item 6: a -k that selects nothing exited 5 with no hint, and with --faith-baseline the
    plugin printed "exit status 1" while pytest exited 5. Every status a note names is the final one."""
    from faithtests.plugin.lifecycle import EXIT_STATUS, final_notes

    _setup(pytester)
    base = pytester.path / "base" / "scorecard.json"
    assert _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline").ret == 0
    plain = _run(pytester, "-k", "no_such_test")
    out = plain.stdout.str()
    assert plain.ret == pytest.ExitCode.NO_TESTS_COLLECTED, out
    assert "ERROR: no test selected (all 1 collected test(s) were deselected): check the -k / -m " in out
    assert "`pytest suites/ --collect-only -q`" in out and out.count("exit status 5") == 1
    gated = _run(pytester, "--faith-baseline", str(base), "-k", "no_such_test")
    out = gated.stdout.str()
    assert gated.ret == pytest.ExitCode.NO_TESTS_COLLECTED, out
    assert "none of the baseline's 2 result(s) was compared" in out and "exit status 5" in out
    assert "exit status 1" not in out
    assert final_notes([f"FAIL: 1 regression(s): {EXIT_STATUS}", "note"], 4) == [
        "FAIL: 1 regression(s): exit status 4", "note"]


def test_gpu_marker_autoskip(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(
        test_gpu="""
        import pytest

        @pytest.mark.gpu
        @pytest.mark.suite("heavy")
        def test_needs_gpu():
            pass

        @pytest.mark.slow
        def test_cpu():
            pass
    """
    )
    fake = types.ModuleType("torch")
    cuda = {"available": False}
    fake.cuda = types.SimpleNamespace(is_available=lambda: cuda["available"])  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", fake)  # simulate the machine regardless of its hardware

    result = _run(pytester, "--strict-markers", "-rs")
    assert result.ret == 0
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_gpu.py:*: CUDA not available"])
    (rec,) = _scorecard(pytester)["tests"]
    assert (rec["suite"], rec["outcome"], rec["message"]) == ("heavy", "skipped", "CUDA not available")

    cuda["available"] = True
    _run(pytester, "--strict-markers").assert_outcomes(passed=2)


def test_interrupted_run_writes_partial_scorecard_atomically(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_stop="""
        def test_a(faith):
            faith.metric("m", 0.5)

        def test_b(faith):
            faith.metric("m", 0.7)
            raise KeyboardInterrupt

        def test_c(faith):
            faith.metric("m", 0.9)
    """
    )
    report = pytester.path / "faith-report"
    report.mkdir()
    old = report / "scorecard.json"
    old.write_text('{"schema_version": 1, "status": "complete", "tests": [{"test": "old", "suite": "s"}]}')
    # A hard link keeps the old inode alive, so the filesystem cannot give its number to the new file (it did
    # once in CI); a rename leaves the link with the old text, an in-place rewrite would change it.
    kept = pytester.path / "old-scorecard.json"
    os.link(old, kept)
    old_text = old.read_text()
    base = pytester.path / "base.json"
    result = _run(pytester, "--faith-baseline", str(base), "--faith-update-baseline", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    sc = _scorecard(pytester)
    assert sc["status"] == "interrupted"
    assert [t["test"] for t in sc["tests"]] == ["test_stop.py::test_a"]
    assert kept.read_text() == old_text and not os.path.samefile(old, kept)  # renamed over, not rewritten
    assert sorted(p.name for p in report.iterdir()) == ["scorecard.html", "scorecard.json"]  # no temp files
    assert not base.exists() and "baseline NOT updated (run interrupted)" in result.stdout.str()


def test_option_errors_and_values(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a():\n    pass\n")
    for args, text in [
        (("--faith-data", "coco"), "--faith-data: 'coco' is not NAME=PATH"),
        (("--faith-data", "a=x", "--faith-data", "a=y"), "dataset 'a' given twice"),
        (("--faith-data", "sugarcrepe=x"), "sugarcrepe=... needs the COCO images too"),
        (("--faith-tolerance", "abc"), "--faith-tolerance: tolerance 'abc'"),
        (("--faith-limit", "0"), "--faith-limit: 0 must be >= 1"),
        (("--faith-seed", "x"), "--faith-seed: 'x' is not an integer"),
        (("--faith-model", "a=reference:clip", "--faith-vlm", "a=reference:vlm"), "label(s) used twice: a"),
        (("--faith-update-baseline",), "--faith-update-baseline needs --faith-baseline"),
    ]:
        result = _run(pytester, *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, args
        assert text in result.stderr.str(), (args, result.stderr.str())

    (pytester.path / "data" / "coco" / "annotations").mkdir(parents=True)  # --faith-data paths must exist
    pytester.makeini("""
        [pytest]
        faith_model =
            ref=reference:clip
            open_clip:ViT-B-32@laion2b_s34b_b79k
        faith_seed = 7
        faith_data = coco=data/coco
    """)
    pytester.makepyfile(
        test_opts="""
        from pathlib import Path
        from faithtests.plugin.options import ModelSpec, get_options

        def test_options(request):
            o = get_options(request.config)
            assert o.models == (ModelSpec("ref", "reference:clip"),
                                ModelSpec("open_clip:ViT-B-32@laion2b_s34b_b79k",
                                          "open_clip:ViT-B-32@laion2b_s34b_b79k"))
            assert o.vlms == (ModelSpec("v", "reference:vlm", "vlm", "vlm"),)
            assert o.seed == 7 and o.limit == 5 and o.gate == "point"
            assert o.data == {"coco": (Path(request.config.inipath).parent / "data/coco").resolve()}
            assert o.tolerance.relative and abs(o.tolerance.value - 0.05) < 1e-12
            assert o.report_dir == (Path.cwd() / "out").resolve()
    """
    )
    result = _run(
        pytester,
        "test_opts.py",
        "--faith-vlm",
        "v=reference:vlm",
        "--faith-limit",
        "5",
        "--faith-tolerance",
        "5%",
        "--faith-report",
        "out",
    )
    result.assert_outcomes(passed=1)


def test_model_info_teardown_error_and_missing_renderer(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest("""
        import pytest
        from faithtests.plugin.options import register_model_info

        @pytest.fixture(scope="session")
        def clip(pytestconfig):
            register_model_info(pytestconfig, "clip", {"spec": "reference:clip", "sha256": "abc"})
            return "clip"

        @pytest.fixture
        def broken_teardown():
            yield
            raise RuntimeError("cleanup failed")
    """)
    pytester.makepyfile(
        test_m="""
        def test_uses_model(faith, clip):
            faith.bind(model=clip)
            faith.metric("acc", 1.0)

        def test_teardown(faith, broken_teardown):
            faith.metric("acc", 0.5)
    """
    )
    report = pytester.path / "faith-report"
    report.mkdir()
    (report / "scorecard.html").write_text("stale")
    monkeypatch.setitem(sys.modules, "faithtests.reports.html", None)  # renderer absent
    result = _run(pytester)
    assert result.ret == 1
    sc = _scorecard(pytester)
    assert sc["fingerprint"]["models"] == {"clip": {"spec": "reference:clip", "sha256": "abc"}}
    tests = {t["test"]: t for t in sc["tests"]}
    assert tests["test_m.py::test_uses_model"]["outcome"] == "passed"
    td = tests["test_m.py::test_teardown"]
    assert td["outcome"] == "error" and "teardown: RuntimeError: cleanup failed" in td["message"]
    assert "HTML renderer not available" in result.stdout.str()
    assert not (report / "scorecard.html").exists()  # a stale page must not contradict the JSON


def test_plugin_module_does_not_import_torch(pytester: pytest.Pytester) -> None:
    code = "import sys, faithtests.plugin; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
    # nor does a whole run without gpu-marked tests (a real subprocess: this process may have torch)
    pytester.makepyfile("""
        import sys

        def test_no_torch(faith):
            faith.metric("m", 1.0)
            assert "torch" not in sys.modules
    """)
    result = pytester.runpytest_subprocess("-p", "faithtests.plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_repo_conftest_and_entry_point_register_once(pytestconfig: pytest.Config) -> None:
    root = Path(__file__).resolve().parents[2]
    tree = ast.parse((root / "conftest.py").read_text())
    (plugins,) = [
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in n.targets)
    ]
    assert plugins == ["faithtests.plugin"]
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="pytest11") if e.value.startswith("faithtests")]
    assert ep.name == ep.value == "faithtests.plugin"  # same name as the module: registered once
    # and this very session (root conftest + entry point) holds exactly one instance of each module
    import faithtests.plugin
    import faithtests.plugin.model_fixtures
    import faithtests.plugin.pytest_hooks

    for module in (faithtests.plugin, faithtests.plugin.pytest_hooks, faithtests.plugin.model_fixtures):
        registered = [p for p in pytestconfig.pluginmanager.get_plugins() if p is module]
        assert len(registered) == 1, module.__name__
    # each protocol's fixtures module is named by its manifest (found on disk) and registered by the plugin
    from faithtests.protocols import fixture_plugins

    assert fixture_plugins() == tuple(f"faithtests.protocols.{p}.fixtures"
                                      for p in ("acbench", "imavb", "lgip", "s3e", "spdfaith"))
    for name in fixture_plugins():
        assert pytestconfig.pluginmanager.get_plugin(name) is not None, name


def test_threshold_family_is_what_the_model_declares_in_its_role(pytester: pytest.Pytester) -> None:
    """One label, two roles: a --faith-vlm used as a scorer declares its score kind
    (``caption_mean_logprob``), so its checks use that family's threshold, while the same label in the
    VLM role gets the default. The label itself ("siglip-v") is never parsed for a family."""
    (pytester.path / "suites").mkdir(exist_ok=True)
    (pytester.path / "suites" / "thresholds.toml").write_text(
        '[invariance]\nE_inv = { op = "<=", value = 0.05, '
        'family = { caption_mean_logprob = 1.5, siglip = 9.0 } }\n')
    pytester.makepyfile(test_inv="""
        import pytest
        from faithtests.plugin.options import ModelSpec, register_model_info

        VLM = ModelSpec.parse("siglip-v=hf:/ckpt", "vlm")
        pytestmark = pytest.mark.suite("invariance")

        @pytest.mark.parametrize("faith_scorer", [VLM.as_scorer(), VLM], ids=["as_scorer", "as_vlm"])
        def test_a(faith, faith_scorer, request):
            register_model_info(request.config, "siglip-v",
                                {"family": "llava", "score": "caption_mean_logprob"}, role="scorer")
            register_model_info(request.config, "siglip-v", {"family": "llava"}, role="vlm")
            faith.metric("E_inv", 0.64, higher_is_better=False)
            faith.check("E_inv")
    """)
    result = _run(pytester, "-p", "no:faithtests.plugin.model_fixtures")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*invariance/E_inv = 0.640 fails <= 0.050*model=siglip-v*"])
