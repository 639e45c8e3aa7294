"""Progress lines of long model stages (faithtests.plugin.progress_report): serial, quiet, under xdist, and
results that do not depend on them."""

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

LINE = re.compile(r"\[faith\] (gw\d+ )?demo stage m\d 8/8 in \d+\.\ds \(\d+(\.\d)?/s\)$")


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


def _progress_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("[faith]")]


def test_serial_run_prints_done_and_total(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_staged=STAGED.format(n=1, sleep=0.15))
    result = pytester.runpytest(*PLUGINS)
    result.assert_outcomes(passed=1)
    lines = _progress_lines(result)
    assert len(lines) == 1 and LINE.match(lines[0]), result.outlines


@pytest.mark.parametrize("off", [["-q"], ["--faith-no-progress"]])
def test_quiet(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, off: list[str]) -> None:
    monkeypatch.setattr(plugin_progress, "MIN_SECONDS", 0.0)  # every stage would print
    pytester.makepyfile(test_staged=STAGED.format(n=2, sleep=0))
    result = pytester.runpytest(*PLUGINS, *off)
    result.assert_outcomes(passed=2)
    assert not [line for line in result.outlines if "[faith]" in line], result.outlines
    assert _progress_lines(pytester.runpytest(*PLUGINS))  # and on without them


def test_xdist_controller_reports_for_its_workers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_staged=STAGED.format(n=2, sleep=0.15))
    result = pytester.runpytest_subprocess(*PLUGINS, "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=2)
    lines = _progress_lines(result)
    assert len(lines) == 2 and all(LINE.match(line) and " gw" in line for line in lines), result.outlines
    assert sorted(line.split(" demo stage ")[1].split()[0] for line in lines) == ["m0", "m1"]


@pytest.fixture
def _preloaded(load_tiny: Callable[..., Any]) -> None:
    """Load the tiny scorer in this process first (inline runs drop what they import; see
    test_plugin_models.py)."""
    import open_clip  # noqa: F401

    load_tiny("open_clip")


@pytest.mark.usefixtures("_preloaded")
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
    encoded = re.compile(r"\[faith\] LGIP encode open_clip:local-dir:\S+ (\d+)/\1 in ")
    assert any(encoded.match(line) for line in on.outlines), on.outlines
    assert not _progress_lines(off)
    cards = [json.loads((pytester.path / d / "scorecard.json").read_text()) for d in ("on", "off")]
    assert cards[0]["results"] and cards[0]["results"] == cards[1]["results"]
