"""Progress of long model stages: items done / total, rate and ETA, reported to a process-wide sink.

A run layer (``protocols/*/run.py``) wraps its model loop::

    with stage("forced choice", total=len(records), model=vlm.spec) as p:
        for chunk in chunks:
            ...
            p.advance(len(chunk))

and never prints. The sink is a no-op until someone installs one (:func:`set_sink`), so library use
stays silent; the pytest plugin (:mod:`faithtests.plugin.progress_report`) installs one that writes to the
terminal, or under xdist to a file the controller reads. A stage reports when it starts, at most once
per ``min_interval`` seconds while it advances (so an ``advance`` per item costs a clock read), and
always when it ends, with ``finished=True`` (also when the loop raised). Stdlib only: this module sits
in the bottom layer, beside :mod:`faithtests.config`.

Stages nest: the models layer makes each model call a stage (:func:`model_call`) whose loops below it
(batches, ``generate``'s decoding steps, attention captures, the logit lens's chunks) report the share
done (:func:`call_share`), and a protocol makes its loop over many small calls a stage. A stage started
while another runs on the same thread is silent (its parent's report covers it), so a loop of small
calls never prints a line per call. :func:`label` names what a block of calls is for ("IMAVB A3"),
prefixed to the stages started inside it. :class:`RunProgress` is the run-level count and ETA (the
plugin feeds it test by test); :func:`fit_line` fits a report to the terminal's width.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

Clock = Callable[[], float]
Sink = Callable[["ProgressEvent"], None]

#: Default throttle: at most this many seconds between two reports of one stage (start and end excepted).
MIN_INTERVAL = 0.25

_sink: Sink | None = None
_ids = itertools.count(1)
_local = threading.local()  # per thread: the running stages (outermost first) and the open labels


@dataclass(frozen=True)
class ProgressEvent:
    """One report of a stage; ``id`` is unique within the process (a stage's reports share it)."""

    id: int
    stage: str
    model: str | None
    done: float  # items done; a model call's stage counts fractions of an item (shown whole)
    total: int | None
    elapsed: float  # seconds since the stage started (monotonic clock)
    finished: bool = False
    pid: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProgressEvent:
        return cls(
            id=int(data["id"]),
            stage=str(data["stage"]),
            model=None if data.get("model") is None else str(data["model"]),
            done=float(data["done"]),
            total=None if data.get("total") is None else int(data["total"]),
            elapsed=float(data["elapsed"]),
            finished=bool(data.get("finished", False)),
            pid=int(data.get("pid", 0)),
        )

    @property
    def key(self) -> tuple[int, int]:
        """Identifies the stage across processes."""
        return (self.pid, self.id)


def rate_eta(done: float, total: int | None, elapsed: float) -> tuple[float | None, float | None]:
    """(items per second, seconds left): ``None`` where not yet defined (nothing done, no time passed,
    or no total for the ETA). The ETA assumes the rate so far holds."""
    if done <= 0 or elapsed <= 0:
        return None, None
    rate = done / elapsed
    if total is None:
        return rate, None
    return rate, max(total - done, 0) / rate


def format_duration(seconds: float) -> str:
    """``0.4s``, ``12s``, ``2m05s``, ``1h02m``."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def format_rate(rate: float) -> str:
    if rate >= 10:
        return f"{rate:.0f}/s"
    if rate >= 0.1:
        return f"{rate:.1f}/s"
    return f"{1 / rate:.0f}s/item" if rate > 0 else "0/s"


def event_parts(event: ProgressEvent) -> tuple[str, str]:
    """(label, tail) of a report: the label (stage and model) may be shortened to fit a line, the tail
    (count, rate, ETA) never is."""
    name = f"{event.stage} {event.model}" if event.model else event.stage
    count = f"{int(event.done)}/{event.total}" if event.total is not None else str(int(event.done))
    rate, eta = rate_eta(event.done, event.total, event.elapsed)
    if event.finished:
        tail = f"{count} in {format_duration(event.elapsed)}"
        return name, tail + (f" ({format_rate(rate)})" if rate is not None else "")
    parts = [format_rate(rate)] if rate is not None else []
    if eta is not None:
        parts.append(f"ETA {format_duration(eta)}")
    return name, count + (f" ({', '.join(parts)})" if parts else "")


def format_event(event: ProgressEvent) -> str:
    """``forced choice reference:vlm 120/480 (35/s, ETA 10s)``; when finished
    ``forced choice reference:vlm 480/480 in 13s (36/s)``."""
    return " ".join(event_parts(event))


def shorten(text: str, room: int, *, keep_end: bool = False) -> str:
    """``text`` in at most ``room`` characters, cut with "…" (at its start when ``keep_end``)."""
    if len(text) <= room:
        return text
    if room <= 1:
        return "…"[:room]
    return "…" + text[len(text) - room + 1 :] if keep_end else text[: room - 1] + "…"


def fit_line(head: str, event: ProgressEvent, width: int) -> str:
    """``head`` + the event's label + its tail in at most ``width`` characters: the label is shortened
    (the model spec keeps its end, where a path names the checkpoint; then the stage name keeps its
    start), never the head or the tail (count, rate, ETA)."""
    label, tail = event_parts(event)
    room = width - len(head) - len(tail) - 1
    if len(label) <= room:
        return f"{head}{label} {tail}"
    if event.model and room >= 12:  # both halves stay readable: at least ~5 characters each
        # the model whole when the stage name keeps 8 characters; else each gets about half
        model_room = len(event.model) if len(event.model) <= room - 9 else max(room - len(event.stage) - 1,
                                                                                room // 2)
        model = shorten(event.model, model_room, keep_end=True)
        label = f"{shorten(event.stage, room - len(model) - 1)} {model}"
    else:
        label = shorten(label, max(room, 1))
    return f"{head}{label} {tail}"


def set_sink(sink: Sink | None) -> Sink | None:
    """Install the process-wide sink (``None``: report nothing); returns the previous one."""
    global _sink
    previous, _sink = _sink, sink
    return previous


def get_sink() -> Sink | None:
    return _sink


def _stack() -> list[Stage]:
    stack: list[Stage] | None = getattr(_local, "stages", None)
    if stack is None:
        stack = _local.stages = []
    return stack


def _labels() -> list[str]:
    labels: list[str] | None = getattr(_local, "labels", None)
    if labels is None:
        labels = _local.labels = []
    return labels


@contextmanager
def label(text: str) -> Iterator[None]:
    """Name what the stages started inside this block are for: ``with label("IMAVB A3"): vlm.generate(...)``
    reports ``IMAVB A3: generate ...``. Labels nest (joined with ": ")."""
    labels = _labels()
    labels.append(text)
    try:
        yield
    finally:
        labels.pop()


class Stage:
    """A running stage: call :meth:`advance` as items complete."""

    def __init__(self, name: str, total: int | None, model: str | None, sink: Sink | None,
                 clock: Clock, min_interval: float) -> None:
        self.name = name
        self.total = total
        self.model = model
        self.done: float = 0
        self._sink = sink
        self._clock = clock
        self._min_interval = min_interval
        self._id = next(_ids)
        self._start = clock()
        self._last = self._start
        self._emit(finished=False, now=self._start)

    @property
    def reported(self) -> bool:
        """Whether this stage reports (a sink was installed and it is not nested in another stage)."""
        return self._sink is not None

    def advance(self, n: float = 1) -> None:
        self.done += n
        if self._sink is None:
            return
        now = self._clock()
        if now - self._last >= self._min_interval:
            self._emit(finished=False, now=now)

    def finish(self) -> None:
        self._emit(finished=True, now=self._clock())

    def _emit(self, *, finished: bool, now: float) -> None:
        if self._sink is None:
            return
        self._last = now
        self._sink(ProgressEvent(self._id, self.name, self.model, self.done, self.total,
                                 now - self._start, finished, os.getpid()))


@contextmanager
def stage(name: str, total: int | None = None, *, model: str | None = None, clock: Clock = time.monotonic,
          min_interval: float | None = None) -> Iterator[Stage]:
    """A stage of ``total`` items reported to the current sink (looked up once, at the start); silent
    when started inside another stage of this thread (module doc). Its name carries the open
    :func:`label` s. ``min_interval``: :data:`MIN_INTERVAL` when None (read at the start)."""
    stack = _stack()
    full = ": ".join([*_labels(), name])
    interval = MIN_INTERVAL if min_interval is None else min_interval
    s = Stage(full, total, model, None if stack else _sink, clock, interval)
    stack.append(s)
    try:
        yield s
    finally:
        stack.pop()
        s.finish()


@contextmanager
def model_call(name: str, total: int, *, model: str | None = None) -> Iterator[Stage]:
    """A stage for one model call of ``total`` items whose loops (batches, decoding steps, chunks) live
    below the caller: they report through :func:`call_share`, which reaches this stage only (never a
    protocol's stage around the call)."""
    previous = getattr(_local, "call", None)
    with stage(name, total, model=model) as s:
        _local.call = s
        try:
            yield s
        finally:
            _local.call = previous


R = TypeVar("R")
#: Stage names of the model adapters' call kinds (their output-store kinds: ``decide('A', 'B')``, ...).
CALL_NAMES = {"decide": "option logits", "next_token": "next-token logits",
              "answer_logprob": "answer log-probs", "caption_logprob": "caption log-likelihood",
              "lens": "logit lens", "caption_tokens": "caption tokens"}


def call_name(kind: str) -> str:
    """``decide('A', 'B')`` → "option logits", ``decide()`` → "states", ``generate32`` → "generate"."""
    base = kind.split("(")[0].rstrip("0123456789")
    return "states" if kind == "decide()" else CALL_NAMES.get(base, base)


def counted_call(compute: Callable[[list[int]], R], name: str, model: str | None) -> Callable[[list[int]], R]:
    """``compute(rows)`` run as a :func:`model_call` of ``len(rows)`` items."""
    def run(rows: list[int]) -> R:
        with model_call(name, len(rows), model=model):
            return compute(rows)

    return run


def call_reported() -> bool:
    """Whether the innermost :func:`model_call` of this thread reports to a sink (a model loop may skip
    the work of observing its steps when nobody reads them)."""
    s: Stage | None = getattr(_local, "call", None)
    return s is not None and s.reported


def call_share(done: float, of: float) -> None:
    """The innermost :func:`model_call` of this thread is ``done / of`` complete (no-op outside one):
    e.g. 3 of a call's 8 batches, or a fraction of a batch's decoding steps. Cheap: a clock read."""
    s: Stage | None = getattr(_local, "call", None)
    if s is not None and s.total is not None and of > 0:
        target = s.total * min(done / of, 1.0)
        if target > s.done:
            s.advance(target - s.done)


# -- the run: its model stages, how many are done, how long the rest may take ---------------------------
def format_left(seconds: float) -> str:
    """Run-level time left, coarse on purpose (it is an estimate): ``<1 min``, ``~2 min``, ``~1h05m``."""
    if seconds < 60:
        return "<1 min"
    minutes = round(seconds / 60)
    return f"~{minutes} min" if minutes < 90 else f"~{minutes // 60}h{minutes % 60:02d}m"


#: Finished tests of a kind (a group's first, the rest) before its mean predicts others: a group's first
#: test pays what the group shares and the first of all also loads the model, so one is no guide.
MIN_LEARNT = {True: 2, False: 1}


class RunProgress:
    """Run-level progress: the collected tests, each in the *group* ``groups[test]`` of tests that share a
    model's computation (the plugin: the model and the fixtures of the test that use it; ``None``: no
    group). The first test of a group to start pays for what its group shares (loading, the protocol
    fixture's pass), so tests fall into two kinds: a group's first and the rest.

    Time left, from completed work: when every test still to run was timed by an earlier run of this
    checkout (``previous``: test id -> seconds, the plugin keeps them in pytest's cache), their earlier
    durations scaled by this run's :meth:`pace` (how much slower or faster the tests finished so far
    ran than then). Otherwise each test not finished is expected to take the mean duration (setup +
    call + teardown) of the finished tests of its kind (a group not started yet brings one first test
    and the rest), less what it has used if it is running (never below zero). Either is divided by
    ``workers`` (xdist). ``None`` ("estimating…") while a kind still to run has fewer than
    :data:`MIN_LEARNT` finished tests to learn from. Replayed on the default run's durations
    (``benchmarks/bench_run_eta.py``): see its results for how far each estimate was off.
    """

    def __init__(self, groups: Mapping[str, str | None], *, workers: int = 1, clock: Clock = time.monotonic,
                 noun: str = "test", previous: Mapping[str, float] | None = None) -> None:
        self.groups = dict(groups)
        self.previous = {t: float(s) for t, s in (previous or {}).items() if t in self.groups}
        self.total = len(self.groups)
        self.workers = max(1, workers)
        self.clock = clock
        self.noun = noun
        self.first: dict[str, str] = {}  # group -> its first test to start
        self.started: dict[str, float] = {}  # test -> when it started (clock)
        self.spent: dict[str, float] = {}  # test -> seconds of its finished phases
        self.durations: dict[str, float] = {}  # finished test -> its seconds

    def start(self, test: str) -> None:
        if test in self.groups and test not in self.started:
            self.started[test] = self.clock()
            if (g := self.groups[test]) is not None:
                self.first.setdefault(g, test)

    def add(self, test: str, seconds: float, *, last: bool) -> None:
        """A phase of ``test`` took ``seconds``; ``last``: it was the test's teardown."""
        if test not in self.groups:
            return
        self.spent[test] = self.spent.get(test, 0.0) + max(float(seconds), 0.0)
        if last:
            self.durations[test] = self.spent[test]

    def is_first(self, test: str) -> bool:
        g = self.groups.get(test)
        return g is not None and self.first.get(g) == test

    def position(self) -> int:
        """How many tests have started (the running one included)."""
        return len(self.started)

    def pace(self) -> float:
        """This run's seconds per second of the earlier run, over the finished tests both timed (1.0
        before one finishes): the earlier durations scaled by it predict the rest on this machine."""
        timed = [t for t in self.durations if t in self.previous]
        before = sum(self.previous[t] for t in timed)
        return sum(self.durations[t] for t in timed) / before if before > 0 else 1.0

    def seconds_left(self) -> float | None:
        todo = [t for t in self.groups if t not in self.durations]
        if self.previous and all(t in self.previous for t in todo):  # every test timed before (below)
            return self._from_previous(todo)
        return self._from_kinds(todo)

    def _means(self) -> dict[bool, float]:
        """The mean duration of each kind (a group's first test: True) learnt enough (MIN_LEARNT)."""
        kinds: dict[bool, list[float]] = {True: [], False: []}
        for test, seconds in self.durations.items():
            kinds[self.is_first(test)].append(seconds)
        return {k: sum(v) / len(v) for k, v in kinds.items() if len(v) >= MIN_LEARNT[k]}

    def _from_kinds(self, todo: list[str]) -> float | None:
        """Time left from this run's finished tests of each kind (class doc); None until learnt."""
        mean = self._means()
        new_groups = {g for t in todo if (g := self.groups[t]) is not None and g not in self.first}
        waiting = sum(1 for t in todo if t not in self.started)
        need = {True: float(len(new_groups)), False: float(waiting - len(new_groups))}
        now, left = self.clock(), 0.0
        for test in (t for t in todo if t in self.started):  # running: what it has not used yet
            kind = self.is_first(test)
            if kind not in mean:
                return None
            used = max(now - self.started[test], self.spent.get(test, 0.0))
            left += max(mean[kind] - used, 0.0)
        for kind, count in need.items():
            if count:
                if kind not in mean:
                    return None
                left += count * mean[kind]
        return left / self.workers

    def _from_previous(self, todo: list[str]) -> float:
        """Time left from the earlier run's durations of the tests still to run, at this run's pace; a
        running test's used time is taken off its own expectation."""
        pace, now, left = self.pace(), self.clock(), 0.0
        for test in todo:
            expected = self.previous[test] * pace
            if test in self.started:
                expected -= max(now - self.started[test], self.spent.get(test, 0.0))
            left += max(expected, 0.0)
        return left / self.workers

    def describe(self) -> str:
        """``test 7/19 ~2 min`` (time left; ``estimating…`` until it can be estimated); "" without tests.
        Short: it leads every progress line."""
        if not self.total:
            return ""
        left = self.seconds_left()
        when = "estimating…" if left is None else format_left(left)
        return f"{self.noun} {min(max(self.position(), 1), self.total)}/{self.total} {when}"
