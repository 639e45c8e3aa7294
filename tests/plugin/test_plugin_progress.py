"""Progress lines of long model stages (faithtests.plugin.progress_report): serial, quiet, not a TTY, under
xdist, the run part, 80 columns, and results that do not depend on them. pytester's output is not a
terminal, so the runs that should print force ``terminal_is_tty`` (inline: monkeypatch; a subprocess: a
conftest that patches it before the plugin configures)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (inline runs restore sys.modules: heavy modules must be imported already)
import pytest

from faithtests.plugin import progress_report as plugin_progress
from faithtests.plugin.progress_report import Printer
from faithtests.progress import ProgressEvent

PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
           "-p", "no:anyio", "-W", "ignore::pytest.PytestAssertRewriteWarning")

# a stage of 8 items, 0.15 s each: longer than MIN_SECONDS, so its end is printed
STAGED = """
import time
import pytest
from faithtests.progress import stage

@pytest.mark.parametrize("k", range({n}))
def test_stage(k):
    with stage("demo stage", total=8, model=f"m{{k}}") as p:
        for _ in range(8):
            time.sleep({sleep})
            p.advance()
"""

RUN = r"test \d+/\d+ (estimating…|<1 min|~\d+ min) \| "
LINE = re.compile(rf"\[faith\] ({RUN})?(gw\d+ )?demo stage m\d 8/8 in \d+\.\ds \(\d+(\.\d)?/s\)$")
TTY_CONFTEST = """
import faithtests.plugin.progress_report as progress_report
progress_report.terminal_is_tty = lambda reporter: True
"""


@pytest.fixture
def tty(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inline run's terminal counts as a TTY (pytester captures it, so it is not one)."""
    monkeypatch.setattr(plugin_progress, "terminal_is_tty", lambda reporter: True)


class FakeWriter:
    def __init__(self) -> None:
        self.out = ""
        self.fullwidth = 80

    @property
    def width_of_current_line(self) -> int:
        return len(self.out.rsplit("\n", 1)[-1])

    def write(self, msg: str, *, flush: bool = False, **markup: bool) -> None:
        self.out += msg

    def line(self, s: str = "", **markup: bool) -> None:
        self.out += s + "\n"


def _event(done: int, elapsed: float, finished: bool = False) -> ProgressEvent:
    return ProgressEvent(1, "S3E forced choice", "v", done, 4, elapsed, finished, pid=9)


def test_printer_tty_rewrites_one_line_and_leaves_the_end() -> None:
    tw = FakeWriter()
    tw.out = "test_a.py ."  # pytest's letters on the current line: progress starts on a new one
    p = Printer(tw, live=True, min_seconds=1.0)
    p.update(_event(1, 0.5))  # too early: nothing
    p.update(_event(2, 2.0))
    p.update(_event(3, 3.0))
    p.update(_event(4, 4.0, finished=True))
    lines = tw.out.split("\n")
    assert lines[0] == "test_a.py ."
    assert [part.rstrip() for part in lines[1].split("\r")] == [
        "[faith] S3E forced choice v 2/4 (1.0/s, ETA 2.0s)",
        "[faith] S3E forced choice v 3/4 (1.0/s, ETA 1.0s)",
        "[faith] S3E forced choice v 4/4 in 4.0s (1.0/s)"]
    assert lines[2] == ""  # ends with a newline: pytest's next letters start a fresh line


def test_printer_lines_at_most_every_interval_and_quiet_for_short_stages() -> None:
    tw = FakeWriter()
    now = [0.0]
    p = Printer(tw, live=False, clock=lambda: now[0], interval=10.0, min_seconds=1.0)
    for t in (2.0, 9.0, 11.0, 15.0, 22.0):
        now[0] = t
        p.update(_event(1, t), "gw1")
    p.update(_event(4, 23.0, finished=True), "gw1")
    p.update(ProgressEvent(2, "fast", None, 4, 4, 0.2, True))  # under MIN_SECONDS: silent
    assert tw.out.splitlines() == ["[faith] gw1 S3E forced choice v 1/4 (11s/item, ETA 33s)",
                                   "[faith] gw1 S3E forced choice v 1/4 (22s/item, ETA 1m06s)",
                                   "[faith] gw1 S3E forced choice v 4/4 in 23s (0.2/s)"]


def _segments(result: pytest.RunResult) -> list[str]:
    """Every state a [faith] line was in (``outlines`` splits a live line's rewrites at "\\r" too)."""
    return [seg.rstrip() for line in result.outlines for seg in line.split("\r") if "[faith]" in seg]


def _progress_lines(result: pytest.RunResult) -> list[str]:
    """The stages' final lines (count, duration, rate)."""
    return [seg for seg in _segments(result) if re.search(r" in \d+(\.\d)?s \(", seg)]


@pytest.mark.usefixtures("tty")
def test_serial_run_prints_done_and_total(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_staged=STAGED.format(n=1, sleep=0.15))
    result = pytester.runpytest(*PLUGINS)
    result.assert_outcomes(passed=1)
    lines = _progress_lines(result)
    assert len(lines) == 1 and LINE.match(lines[0]), result.outlines
    assert lines[0].startswith("[faith] test 1/1 estimating… | demo stage m0 8/8 in ")


@pytest.mark.parametrize("off", [["-qq"], ["--faith-no-progress"], ["not a TTY"]])
def test_silent(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, off: list[str]) -> None:
    monkeypatch.setattr(plugin_progress, "MIN_SECONDS", 0.0)  # every stage would print
    pytester.makepyfile(test_staged=STAGED.format(n=2, sleep=0))
    if off == ["not a TTY"]:
        off = []  # pytester's output is captured: not a terminal
    else:
        monkeypatch.setattr(plugin_progress, "terminal_is_tty", lambda reporter: True)
    result = pytester.runpytest(*PLUGINS, *off)
    assert result.ret == 0  # (-qq prints no summary line to parse outcomes from)
    assert not [line for line in result.outlines if "[faith]" in line], result.outlines
    monkeypatch.setattr(plugin_progress, "terminal_is_tty", lambda reporter: True)
    assert _progress_lines(pytester.runpytest(*PLUGINS, "-q"))  # on a terminal, with -q too


def test_a_log_gets_whole_lines_of_long_stages_at_a_bounded_rate(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 49: output that is not a terminal (pytester's, as a CI log's) gets progress lines: whole
    lines (no carriage return), only for stages that ran ``LOG_MIN_SECONDS``, at most one per
    ``LOG_INTERVAL`` per stage plus its end, each with the run part, fitted to 120 columns."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(plugin_progress, "LOG_MIN_SECONDS", 0.3)
    monkeypatch.setattr(plugin_progress, "LOG_INTERVAL", 0.5)
    pytester.makepyfile(test_staged=STAGED.format(n=2, sleep=0.15), test_quick=STAGED.format(n=1, sleep=0))
    result = pytester.runpytest(*PLUGINS, "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    lines = [line for line in result.outlines if "[faith]" in line]
    assert not any("\r" in line for line in lines) and all(len(line) <= 120 for line in lines), lines
    ends = [line for line in lines if " 8/8 in " in line]
    assert sorted(line.split("demo stage ")[1].split()[0] for line in ends) == ["m0", "m1"], lines  # ~1.2 s
    running = [line for line in lines if "ETA" in line]
    assert 2 <= len(running) <= 6, lines  # ~1.2 s at one line per 0.5 s: 2 per stage (3 on a slow machine)
    assert all(re.match(r"\[faith\] test \d/3 ", line) for line in lines), lines


@pytest.mark.usefixtures("tty")
def test_the_run_part_counts_tests_and_estimates_from_finished_ones(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_staged=STAGED.format(n=3, sleep=0.15))
    result = pytester.runpytest(*PLUGINS, "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    segs = _segments(result)
    # test 1 of 3 runs with nothing finished; tests 2 and 3 after: ~1.2 s each, so under a minute left
    assert any(s.startswith("[faith] test 1/3 estimating… | demo stage m0 ") for s in segs), segs
    assert any(s.startswith("[faith] test 2/3 <1 min | demo stage m1 ") for s in segs), segs
    assert any(s.startswith("[faith] test 3/3 <1 min | demo stage m2 8/8 in ") for s in segs), segs


LONG = """
import time
from faithtests.progress import stage

def test_long_names():
    with stage("IMAVB A3: generate (chain of thought, up to 512 new tokens per question)", total=6,
               model="hf:/checkpoints/run-7/Qwen2-VL-7B-Instruct-step-12000") as p:
        for _ in range(6):
            time.sleep(0.1)
            p.advance()
"""


@pytest.mark.usefixtures("tty")
def test_lines_fit_80_columns_and_keep_the_eta(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(plugin_progress, "MIN_SECONDS", 0.0)
    pytester.makepyfile(test_long=LONG)
    result = pytester.runpytest(*PLUGINS)
    result.assert_outcomes(passed=1)
    segs = _segments(result)
    assert len(segs) >= 3 and all(len(s) <= 79 for s in segs), segs
    running, final = segs[1:-1], segs[-1]
    assert running and all(re.search(r"\d/6 \(\d+(\.\d)?/s, ETA \d+\.\ds\)$", s) for s in running), segs
    assert re.search(r" 6/6 in \d+\.\ds \(\d+(\.\d)?/s\)$", final), final
    assert all(s.startswith("[faith] test 1/1 estimating… | IMAVB A3") and "…" in s[30:] for s in segs), segs


def test_xdist_controller_reports_for_its_workers(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TTY_CONFTEST)
    pytester.makepyfile(test_staged=STAGED.format(n=2, sleep=0.15))
    result = pytester.runpytest_subprocess(*PLUGINS, "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=2)
    lines = _progress_lines(result)
    assert len(lines) == 2 and all(LINE.match(line) and " gw" in line for line in lines), result.outlines
    assert sorted(line.split(" demo stage ")[1].split()[0] for line in lines) == ["m0", "m1"]
    assert all(line.startswith("[faith] test ") for line in lines)  # the controller's run part


@pytest.fixture
def _preloaded(load_tiny: Callable[..., Any]) -> None:
    """Load the tiny scorer in this process first (inline runs drop what they import; see
    test_plugin_models.py)."""
    import open_clip  # noqa: F401

    load_tiny("open_clip")


@pytest.mark.usefixtures("_preloaded", "tty")
def test_results_do_not_depend_on_progress(
    pytester: pytest.Pytester, tiny_dir: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(__file__).resolve().parents[2]
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "thresholds.toml").write_text((root / "suites/thresholds.toml").read_text())
    pytester.makepyfile(test_invariance=(root / "suites/test_invariance.py").read_text())
    monkeypatch.setattr(plugin_progress, "MIN_SECONDS", 0.0)
    args = (*PLUGINS, "--faith-model", f"oc=open_clip:local-dir:{tiny_dir('open_clip')}",
            "--faith-limit", "6", "--faith-batch-size", "2")
    on = pytester.runpytest(*args, "--faith-report", "on")
    off = pytester.runpytest(*args, "--faith-report", "off", "--faith-no-progress")
    encoded = re.compile(rf"\[faith\] {RUN}LGIP encode \S+ (\d+)/\2 in ")
    assert any(encoded.match(line) for line in on.outlines), on.outlines
    assert not _progress_lines(off)
    cards = [json.loads((pytester.path / d / "scorecard.json").read_text()) for d in ("on", "off")]
    assert cards[0]["results"] and cards[0]["results"] == cards[1]["results"]


def test_run_group_is_the_model_and_its_fixtures_that_use_it() -> None:
    from types import SimpleNamespace as NS

    from faithtests.plugin.model_spec import ModelSpec

    defs = {"premise_data": [NS(argnames=("request", "faith_vlm"))], "faith_vlm": [NS(argnames=())],
            "faith": [NS(argnames=("request",))]}

    def item(**params: object) -> Any:
        return NS(callspec=NS(params=params), _fixtureinfo=NS(name2fixturedefs=defs),
                  fixturenames=["faith", "premise_data", "faith_vlm"])

    vlm = ModelSpec("ref", "reference:vlm", "vlm", "vlm")
    assert plugin_progress.run_group(item(faith_vlm=vlm, premise_data="world")) == "ref/premise_data"
    assert plugin_progress.run_group(item(faith_vlm=vlm)) == plugin_progress.run_group(item(faith_vlm=vlm))
    assert plugin_progress.run_group(item()) is None  # no model: no group
