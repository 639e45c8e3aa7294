"""Progress of long model stages: items done / total, rate and ETA, reported to a process-wide sink.

A run layer (``protocols/*/run.py``) wraps its model loop::

    with stage("forced choice", total=len(records), model=vlm.spec) as p:
        for chunk in chunks:
            ...
            p.advance(len(chunk))

and never prints. The sink is a no-op until someone installs one (:func:`set_sink`), so library use
stays silent; the pytest plugin (:mod:`faithtests.plugin.progress`) installs one that writes to the
terminal, or under xdist to a file the controller reads. A stage reports when it starts, at most once
per ``min_interval`` seconds while it advances (so an ``advance`` per item costs a clock read), and
always when it ends, with ``finished=True`` (also when the loop raised). Stdlib only: this module sits
in the bottom layer, beside :mod:`faithtests.config`.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

Clock = Callable[[], float]
Sink = Callable[["ProgressEvent"], None]

#: Default throttle: at most this many seconds between two reports of one stage (start and end excepted).
MIN_INTERVAL = 0.25

_sink: Sink | None = None
_ids = itertools.count(1)


@dataclass(frozen=True)
class ProgressEvent:
    """One report of a stage; ``id`` is unique within the process (a stage's reports share it)."""

    id: int
    stage: str
    model: str | None
    done: int
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
            done=int(data["done"]),
            total=None if data.get("total") is None else int(data["total"]),
            elapsed=float(data["elapsed"]),
            finished=bool(data.get("finished", False)),
            pid=int(data.get("pid", 0)),
        )

    @property
    def key(self) -> tuple[int, int]:
        """Identifies the stage across processes."""
        return (self.pid, self.id)


def rate_eta(done: int, total: int | None, elapsed: float) -> tuple[float | None, float | None]:
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


def format_event(event: ProgressEvent) -> str:
    """``forced choice reference:vlm 120/480 (35/s, ETA 10s)``; when finished
    ``forced choice reference:vlm 480/480 in 13s (36/s)``."""
    name = f"{event.stage} {event.model}" if event.model else event.stage
    count = f"{event.done}/{event.total}" if event.total is not None else str(event.done)
    rate, eta = rate_eta(event.done, event.total, event.elapsed)
    if event.finished:
        tail = f" in {format_duration(event.elapsed)}"
        return f"{name} {count}{tail}" + (f" ({format_rate(rate)})" if rate is not None else "")
    parts = [format_rate(rate)] if rate is not None else []
    if eta is not None:
        parts.append(f"ETA {format_duration(eta)}")
    return f"{name} {count}" + (f" ({', '.join(parts)})" if parts else "")


def set_sink(sink: Sink | None) -> Sink | None:
    """Install the process-wide sink (``None``: report nothing); returns the previous one."""
    global _sink
    previous, _sink = _sink, sink
    return previous


def get_sink() -> Sink | None:
    return _sink


class Stage:
    """A running stage: call :meth:`advance` as items complete."""

    def __init__(self, name: str, total: int | None, model: str | None, sink: Sink | None,
                 clock: Clock, min_interval: float) -> None:
        self.name = name
        self.total = total
        self.model = model
        self.done = 0
        self._sink = sink
        self._clock = clock
        self._min_interval = min_interval
        self._id = next(_ids)
        self._start = clock()
        self._last = self._start
        self._emit(finished=False, now=self._start)

    def advance(self, n: int = 1) -> None:
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
          min_interval: float = MIN_INTERVAL) -> Iterator[Stage]:
    """A stage of ``total`` items reported to the current sink (looked up once, at the start)."""
    s = Stage(name, total, model, _sink, clock, min_interval)
    try:
        yield s
    finally:
        s.finish()
