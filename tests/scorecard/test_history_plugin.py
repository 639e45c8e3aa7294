"""The plugin's side of history across checkpoints: ``--faith-run-name`` / ``--faith-step`` (ini too)
recorded as the scorecard's ``run``, and default report folders that never collide (pytester runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (inline runs restore sys.modules; numpy cannot be imported twice)
import pytest

PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio",
           "-W", "ignore::pytest.PytestAssertRewriteWarning")
SUITE = """
def test_m(faith):
    faith.metric("acc", 0.9)
    faith.check("acc", ">=", 0.5)
"""


def _card(folder: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((folder / "scorecard.json").read_text())
    return out


def test_run_name_and_step_are_recorded_and_default_folders_do_not_collide(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a=SUITE)
    report = pytester.path / "faith-report"
    assert pytester.runpytest(*PLUGINS, "--faith-model", "cand=reference:clip").ret == 0
    first = _card(report)["run"]
    assert (first["name"], first["step"]) == ("cand", None) and first["started"].endswith("+00:00")
    # another checkpoint (another step): its own folder, the first report intact
    step = pytester.runpytest(*PLUGINS, "--faith-model", "cand=reference:clip", "--faith-step", "200")
    assert step.ret == 0
    assert _card(report / "cand-step-200")["run"]["step"] == 200 and _card(report)["run"] == first
    # another run name: its own folder; the same run again: its own folder again (replaced)
    assert pytester.runpytest(*PLUGINS, "--faith-run-name", "my run:2").ret == 0
    assert _card(report / "my-run-2")["run"]["name"] == "my run:2"
    assert pytester.runpytest(*PLUGINS, "--faith-model", "cand=reference:clip").ret == 0
    assert _card(report)["run"]["started"] >= first["started"] and _card(report)["status"] == "complete"
    assert sorted(p.name for p in report.iterdir() if p.is_dir()) == ["cand-step-200", "my-run-2"]
    # an explicit --faith-report is used as given
    assert pytester.runpytest(*PLUGINS, "--faith-run-name", "x", "--faith-report", "out").ret == 0
    assert _card(pytester.path / "out")["run"]["name"] == "x"


def test_ini_run_name_and_step(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a=SUITE)
    pytester.makeini("[pytest]\nfaith_run_name = nightly\nfaith_step = 7\n")
    assert pytester.runpytest(*PLUGINS).ret == 0
    run = _card(pytester.path / "faith-report")["run"]
    assert (run["name"], run["step"]) == ("nightly", 7)


def test_a_bad_step_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a=SUITE)
    result = pytester.runpytest(*PLUGINS, "--faith-step", "-1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--faith-step: -1 must be >= 0" in result.stderr.str()
    result = pytester.runpytest(*PLUGINS, "--faith-step", "ten")
    assert "--faith-step: 'ten' is not an integer" in result.stderr.str()
