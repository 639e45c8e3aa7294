"""Progress of long model stages in the terminal (hooks only; the stages report through
:mod:`faithtests.progress`).

What is printed: ``[faith] test 3/19 ~2 min | S3E forced choice reference:vlm 120/480 (35/s, ETA 10s)``
while a stage runs and ``[faith] test 3/19 ~2 min | S3E forced choice reference:vlm 480/480 in 13s
(36/s)`` when it ends. ``test 3/19 ~2 min`` is the run: the test running (3rd of the 19 collected) and
the time left (:class:`faithtests.progress.RunProgress`: from an earlier run's durations of the same
tests at this run's pace, kept in pytest's cache under ``TIMED_KEY``; else from the finished tests'
durations, each test of the group of :func:`run_group` or, under xdist, of its ``xdist_group``;
``estimating…`` until it can be estimated). Each line fits the
terminal width: the stage's label is shortened, never the run part, the count, the rate or the ETA. A
stage shorter than ``MIN_SECONDS`` prints nothing, so fast runs and unit tests stay quiet. Nothing with
``-qq`` or ``--faith-no-progress``; results never depend on it (the run layers report, they do not
change what they compute).

- Not a terminal (a CI log, a pipe; issue 49): whole lines, fitted to ``$COLUMNS`` or 120 characters;
  a stage prints only once it has run ``LOG_MIN_SECONDS``, then at most every ``LOG_INTERVAL`` seconds
  and when it ends, so a slow run never looks hung and a fast one adds a handful of lines.

- Serial run: one line rewritten in place while the stage runs, left as its final line when it ends.
  Lines always start on a fresh line and end with a newline, so pytest's own output (test letters,
  ``[ 50%]``) goes on around them, as it does around live logging.
- Under xdist the workers have no terminal. The controller hands each worker a directory in
  ``workerinput`` (``pytest_configure_node``); a worker appends its stages' events as JSON lines to
  ``<dir>/<workerid>.jsonl`` (appends of whole lines: a reader never sees half an event), and a daemon
  thread on the controller tails those files and prints lines prefixed with the worker id. The
  controller's current terminal line is shared with test results written from the main thread, so it
  prints whole lines, at most every ``LOG_INTERVAL`` seconds per running stage (TTY or not), under a
  lock that the main thread also takes around the terminal reporter's per-test writes.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import IO, Any, Protocol

import pytest

from faithtests.plugin.distribution import group_of, model_stage
from faithtests.plugin.model_spec import ModelSpec
from faithtests.plugin.options import get_options
from faithtests.progress import ProgressEvent, RunProgress, Sink, fit_line, set_sink
from faithtests.reports.text_table import output_width

PREFIX = "[faith]"
#: A stage shorter than this prints nothing (seconds).
MIN_SECONDS = 1.0
#: Seconds between two lines of one running stage in line mode (not a TTY, or under xdist).
LOG_INTERVAL = 10.0
#: Not a TTY: a stage shorter than this prints nothing, so a log gets about one line per LOG_INTERVAL per
#: running stage however many short stages a run has (the default run: ~300 stages, most under a second).
LOG_MIN_SECONDS = 10.0
#: How often the xdist controller reads its workers' progress files (seconds).
POLL_SECONDS = 0.25
WORKERINPUT_KEY = "faith_progress_dir"
#: pytest's cache key of each test's last duration (setup + call + teardown): the next run's time left.
TIMED_KEY = "faithtests/test-seconds"
_STATE = pytest.StashKey["_State"]()


class Writer(Protocol):
    """What the printer needs of pytest's ``TerminalWriter``."""

    @property
    def fullwidth(self) -> int: ...
    @property
    def width_of_current_line(self) -> int: ...
    def write(self, msg: str, *, flush: bool = False, **markup: bool) -> None: ...
    def line(self, s: str = "", **markup: bool) -> None: ...


class Printer:
    """Turns stage events into terminal lines (see the module docstring); ``live``: rewrite one line."""

    def __init__(self, tw: Writer, *, live: bool, clock: Callable[[], float] = time.monotonic,
                 interval: float | None = None, min_seconds: float | None = None,
                 run: Callable[[], str] | None = None, width: int | None = None) -> None:
        self.tw = tw
        self.fixed_width = width  # a log's width (text_table.output_width); None: the terminal's
        self.live = live
        self.run = run  # the run part of each line ("3/19 ~2 min"), "" for none
        self.clock = clock
        self.interval = LOG_INTERVAL if interval is None else interval
        self.min_seconds = MIN_SECONDS if min_seconds is None else min_seconds
        self._shown: str | None = None  # the live line on screen (no newline after it yet)
        self._last: dict[tuple[str, int, int], float] = {}  # stage -> when its last line was printed

    def update(self, event: ProgressEvent, who: str | None = None) -> None:
        key = (who or "", *event.key)
        if event.finished:
            self._last.pop(key, None)
            if event.elapsed >= self.min_seconds or self._shown is not None:
                self._line(self.text(event, who))
            return
        if event.elapsed < self.min_seconds:
            return
        if self.live:
            self._live(self.text(event, who))
            return
        now = self.clock()
        last = self._last.get(key)
        if (event.elapsed if last is None else now - last) >= self.interval:
            self._line(self.text(event, who))
            self._last[key] = now

    def text(self, event: ProgressEvent, who: str | None = None) -> str:
        """The line of ``event``: prefix, the run part, the worker, the stage, fitted to the width."""
        run = self.run() if self.run is not None else ""
        head = f"{PREFIX} " + (f"{run} | " if run else "") + (f"{who} " if who else "")
        return fit_line(head, event, self.width())

    def close(self) -> None:
        """End a live line left on screen (a stage that never reported its end)."""
        if self._shown is not None:
            self.tw.write("\n", flush=True)
            self._shown = None

    def width(self) -> int:
        """Characters a line may take: one less than the terminal's, so it never wraps (a log's: its
        width)."""
        return self.fixed_width if self.fixed_width is not None else max(self.tw.fullwidth - 1, 40)

    def _live(self, text: str) -> None:
        if self._shown is None:
            if self.tw.width_of_current_line != 0:
                self.tw.line()
            self.tw.write(text, flush=True)
        else:
            self.tw.write("\r" + text.ljust(len(self._shown)), flush=True)
        self._shown = text

    def _line(self, text: str) -> None:
        if self._shown is not None:
            self.tw.write("\r" + text.ljust(len(self._shown)) + "\n", flush=True)
            self._shown = None
        else:
            if self.tw.width_of_current_line != 0:
                self.tw.line()
            self.tw.write(text + "\n", flush=True)


# -- configuration -----------------------------------------------------------------------------------
class _State:
    def __init__(self, config: pytest.Config, previous: Sink | None) -> None:
        self.config = config
        self.previous = previous
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.directory: Path | None = None
        self.printer: Printer | None = None
        self.worker_file: IO[str] | None = None
        self.offsets: dict[Path, int] = {}
        self.run: RunProgress | None = None
        self.collected_nodes = 0  # xdist workers that reported their collection

    def describe_run(self) -> str:
        return self.run.describe() if self.run is not None else ""


def terminal_is_tty(reporter: Any) -> bool:
    """Whether pytest writes to a terminal (progress is shown there only)."""
    return bool(reporter.isatty())


def run_group(item: pytest.Item) -> str | None:
    """The group of a test for the run's estimate: each model it is parametrised with and the fixtures
    of the test that use it, with their parameters (:func:`.distribution.model_stage`): the tests of a
    group share what its first test computes. None without a model."""
    params: dict[str, object] = getattr(getattr(item, "callspec", None), "params", {})
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})  # pytest internals
    keys = [f"{m.label}/{model_stage(list(getattr(item, 'fixturenames', ())), defs, fixture, params)}"
            for fixture in ("faith_scorer", "faith_vlm") if isinstance(m := params.get(fixture), ModelSpec)]
    return " + ".join(keys) or None


def _wanted(config: pytest.Config) -> bool:
    return not get_options(config).no_progress and config.get_verbosity() >= -1  # on with -q, off with -qq


@pytest.hookimpl(trylast=True)  # after the terminal reporter is registered
def pytest_configure(config: pytest.Config) -> None:
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None:  # an xdist worker: report to the file the controller reads, if any
        directory = workerinput.get(WORKERINPUT_KEY)
        if isinstance(directory, str) and Path(directory).is_dir():
            state = _State(config, None)
            path = Path(directory) / f"{workerinput.get('workerid', 'gw')}.jsonl"
            state.worker_file = path.open("a", encoding="utf-8")
            state.previous = set_sink(_file_sink(state))
            config.stash[_STATE] = state
        return
    if not _wanted(config):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    tw = config.get_terminal_writer()
    state = _State(config, None)
    if terminal_is_tty(reporter):
        state.printer = Printer(tw, live=True, run=state.describe_run)
    else:  # a CI log or a pipe: whole lines, a stage's at most every LOG_INTERVAL s, none for short ones
        state.printer = Printer(tw, live=False, run=state.describe_run, min_seconds=LOG_MIN_SECONDS,
                                width=output_width(False, tw.fullwidth))
    capman = config.pluginmanager.get_plugin("capturemanager")

    def to_terminal(event: ProgressEvent) -> None:
        assert state.printer is not None
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            state.printer.update(event)

    state.previous = set_sink(to_terminal)
    config.stash[_STATE] = state
    config.pluginmanager.register(_RunTracker(state), "faithtests-progress-run")
    if hasattr(config.pluginmanager.hook, "pytest_configure_node"):  # xdist is active
        config.pluginmanager.register(_Controller(state), "faithtests-progress-controller")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    del config.stash[_STATE]
    set_sink(state.previous)
    _stop(state)
    if state.worker_file is not None:
        state.worker_file.close()
    if state.directory is not None:
        shutil.rmtree(state.directory, ignore_errors=True)


# -- the run line: run stages known at collection, followed test by test ---------------------------------
class _RunTracker:
    """Registered where the progress is printed (serial run, or the xdist controller)."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # an xdist controller collects nothing: its workers' ids come below
            self.state.run = RunProgress({item.nodeid: run_group(item) for item in session.items},
                                         previous=_timed(self.state.config))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        state = self.state
        state.collected_nodes += 1
        if state.run is None:  # every worker collects the same tests; their ids end with the group
            state.run = RunProgress({i: group_of(i) for i in ids}, previous=_timed(state.config))
        state.run.workers = state.collected_nodes

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Keep this run's test durations for the next run's time left (pytest's cache, merged)."""
        cache, run = getattr(session.config, "cache", None), self.state.run
        if cache is not None and run is not None and run.durations:
            cache.set(TIMED_KEY, {**_timed(session.config), **run.durations})

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if self.state.run is not None:
            self.state.run.start(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.state.run is not None:
            self.state.run.add(report.nodeid, report.duration, last=report.when == "teardown")


def _timed(config: pytest.Config) -> dict[str, float]:
    """Test id -> seconds of the earlier runs in this checkout ({} without pytest's cache)."""
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    recorded = cache.get(TIMED_KEY, {}) if cache is not None else {}
    return {str(k): float(v) for k, v in recorded.items() if isinstance(v, (int, float))} if isinstance(
        recorded, dict) else {}


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is not None:
        _stop(state)


# -- xdist: workers write, the controller reads ------------------------------------------------------
def _file_sink(state: _State) -> Sink:
    def write(event: ProgressEvent) -> None:
        if state.worker_file is None:
            return
        try:
            state.worker_file.write(json.dumps(event.to_json()) + "\n")
            state.worker_file.flush()
        except OSError:  # progress must never break a run: stop reporting instead
            state.worker_file = None

    return write


class _Controller:
    """Registered on the xdist controller only (its hooks are xdist's)."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def pytest_configure_node(self, node: Any) -> None:
        state = self.state
        if state.directory is None:
            state.directory = Path(tempfile.mkdtemp(prefix="faith-progress-"))
            assert state.printer is not None
            state.printer.live = False  # the terminal line is shared with the main thread's writes
            state.thread = threading.Thread(target=_poll, args=(state,), name="faith-progress", daemon=True)
            state.thread.start()
        node.workerinput[WORKERINPUT_KEY] = str(state.directory)

    # the terminal reporter's per-test writes and the poller's lines never interleave
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        with self.state.lock:
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> Generator[None, None, None]:
        with self.state.lock:
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> Generator[None, None, None]:
        with self.state.lock:
            return (yield)


def _read_new(state: _State) -> list[tuple[str, ProgressEvent]]:
    """Whole lines appended since the last read, as (worker id, event)."""
    assert state.directory is not None
    out: list[tuple[str, ProgressEvent]] = []
    for path in sorted(state.directory.glob("*.jsonl")):
        offset = state.offsets.get(path, 0)
        try:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            continue
        end = data.rfind(b"\n") + 1
        state.offsets[path] = offset + end
        for raw in data[:end].splitlines():
            try:
                out.append((path.stem, ProgressEvent.from_json(json.loads(raw))))
            except (ValueError, KeyError, TypeError):
                continue  # not ours to fail on: a progress line is never worth an error
    return out


def _drain(state: _State) -> None:
    events = _read_new(state)
    if not events or state.printer is None:
        return
    latest: dict[tuple[str, int, int], tuple[str, ProgressEvent]] = {}
    for who, event in events:  # per stage, its end or else its latest report
        key = (who, *event.key)
        if key not in latest or not latest[key][1].finished:
            latest[key] = (who, event)
    with state.lock:
        for who, event in latest.values():
            state.printer.update(event, who)


def _poll(state: _State) -> None:
    while not state.stop.wait(POLL_SECONDS):
        _drain(state)


def _stop(state: _State) -> None:
    """Stop the poller after a last read (so every finished stage is printed), end any live line."""
    if state.thread is not None:
        state.stop.set()
        state.thread.join(timeout=5)
        state.thread = None
        _drain(state)
    if state.printer is not None:
        state.printer.close()
