"""faithtests.progress: rate / ETA arithmetic, formatting, and a stage's throttled reports (fake clock)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from faithtests.progress import (
    ProgressEvent,
    format_duration,
    format_event,
    get_sink,
    rate_eta,
    set_sink,
    stage,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def events() -> Iterator[list[ProgressEvent]]:
    got: list[ProgressEvent] = []
    previous = set_sink(got.append)
    yield got
    set_sink(previous)


def test_rate_and_eta() -> None:
    assert rate_eta(120, 480, 4.0) == (30.0, 12.0)
    assert rate_eta(480, 480, 16.0) == (30.0, 0.0)
    assert rate_eta(0, 480, 3.0) == (None, None)  # nothing done yet: no rate
    assert rate_eta(5, 480, 0.0) == (None, None)
    assert rate_eta(10, None, 2.0) == (5.0, None)  # no total: no ETA


def test_formatting() -> None:
    assert [format_duration(s) for s in (0.44, 12.4, 125, 3725)] == ["0.4s", "12s", "2m05s", "1h02m"]
    running = ProgressEvent(1, "S3E forced choice", "reference:vlm", 120, 480, 4.0)
    assert format_event(running) == "S3E forced choice reference:vlm 120/480 (30/s, ETA 12s)"
    done = ProgressEvent(1, "S3E forced choice", "reference:vlm", 480, 480, 16.0, finished=True)
    assert format_event(done) == "S3E forced choice reference:vlm 480/480 in 16s (30/s)"
    assert format_event(ProgressEvent(2, "x", None, 0, 10, 0.0)) == "x 0/10"
    assert format_event(ProgressEvent(2, "x", None, 3, None, 6.0)) == "x 3 (0.5/s)"
    assert format_event(ProgressEvent(2, "x", None, 1, 10, 50.0)) == "x 1/10 (50s/item, ETA 7m30s)"


def test_event_json_round_trip() -> None:
    e = ProgressEvent(7, "LGIP encode", "oc", 3, 9, 1.5, finished=True, pid=42)
    assert ProgressEvent.from_json(e.to_json()) == e
    assert e.key == (42, 7)


def test_stage_reports_start_throttled_steps_and_end(events: list[ProgressEvent]) -> None:
    clock = FakeClock()
    with stage("S3E forced choice", total=10, model="m", clock=clock, min_interval=0.25) as p:
        for _ in range(10):
            clock.now += 0.1
            p.advance()
    assert [(e.done, e.finished) for e in events] == [(0, False), (3, False), (6, False), (9, False),
                                                       (10, True)]
    assert events[-1].elapsed == pytest.approx(1.0)
    assert len({e.key for e in events}) == 1 and events[0].stage == "S3E forced choice"


def test_stage_reports_its_end_when_the_loop_raises(events: list[ProgressEvent]) -> None:
    with pytest.raises(RuntimeError), stage("x", total=4) as p:
        p.advance(2)
        raise RuntimeError("boom")
    assert events[-1].finished and events[-1].done == 2


def test_no_sink_no_reports() -> None:
    previous = set_sink(None)
    try:
        assert get_sink() is None
        with stage("x", total=3) as p:
            p.advance(3)
        assert p.done == 3
    finally:
        set_sink(previous)
