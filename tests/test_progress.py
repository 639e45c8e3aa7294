"""faithtests.progress: rate / ETA arithmetic, formatting, and a stage's throttled reports (fake clock)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from faithtests import progress
from faithtests.progress import (
    ProgressEvent,
    RunProgress,
    call_reported,
    call_share,
    fit_line,
    format_duration,
    format_event,
    format_left,
    get_sink,
    label,
    model_call,
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


# -- nesting, labels, model calls ---------------------------------------------------------------------
def test_a_nested_stage_is_silent_and_labels_name_stages(events: list[ProgressEvent]) -> None:
    with label("IMAVB A3"), stage("outer", total=2) as outer:
        with stage("inner", total=5) as inner:  # a model call inside a protocol loop: covered by outer
            inner.advance(5)
            assert not inner.reported
        outer.advance(2)
    assert {e.stage for e in events} == {"IMAVB A3: outer"}
    assert events[-1].finished and events[-1].done == 2
    with stage("after", total=1):  # the stack unwound: the next top-level stage reports again
        pass
    assert events[-1].stage == "after"


def test_call_share_reaches_the_model_call_only(events: list[ProgressEvent], monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    monkeypatch.setattr(progress, "MIN_INTERVAL", 0.0)
    call_share(1, 2)  # outside any model call: nothing to update, no error
    with stage("protocol loop", total=3) as loop:
        call_share(1, 2)  # a protocol's stage is never moved by a model loop's share
        assert loop.done == 0
    events.clear()
    with model_call("generate", 10, model="m"):
        assert call_reported()
        call_share(1, 4)  # a quarter of the call: 2.5 of 10 items
        call_share(1, 8)  # never backwards
        call_share(3, 4)
        call_share(5, 4)  # capped at the total
    assert [e.done for e in events] == [0, 2.5, 7.5, 10, 10]
    assert format_event(events[1]) == "generate m 2/10" + format_event(events[1]).split("2/10")[1]


def test_fit_line_keeps_head_count_rate_and_eta_at_80_columns() -> None:
    head = "[faith] test 12/140 estimating… | "
    long = ProgressEvent(1, "IMAVB A3: generate (chain of thought, up to 512 tokens)",
                         "hf:/checkpoints/run-7/Qwen2-VL-7B-Instruct-step-12000", 1234, 20480, 61.7)
    line = fit_line(head, long, 79)
    tail = "1234/20480 (20/s, ETA 16m02s)"  # 1234 / 61.7 s = 20/s; 19246 left / 20 = 962 s
    assert len(line) <= 79 and line.startswith(head) and line.endswith(tail)
    assert "IMAVB" in line and "-12000" in line and "…" in line  # both halves cut, neither dropped
    short = ProgressEvent(1, "IMAVB A1 choice", "reference:vlm", 16, 40, 1.25)
    assert fit_line(head, short, 200) == head + "IMAVB A1 choice reference:vlm 16/40 (13/s, ETA 1.9s)"
    # 79 - 34 (head) - 22 (tail) - 1 = 22 for the label: the model whole, the stage name its first 8
    assert fit_line(head, short, 79) == head + "IMAVB A… reference:vlm 16/40 (13/s, ETA 1.9s)"
    nomodel = ProgressEvent(1, "all-MiniLM-L6-v2 sentence embeddings of the question texts", None, 3, 9, 3.0)
    line = fit_line("[faith] ", nomodel, 40)
    assert line == "[faith] all-MiniL… 3/9 (1.0/s, ETA 6.0s)" and len(line) == 40


# -- the run line ---------------------------------------------------------------------------------------
def test_run_progress_counts_and_estimates_by_hand() -> None:
    clock = FakeClock()
    clock.now = 0.0
    groups = {"a1": "A", "a2": "A", "a3": "A", "b1": "B", "b2": "B", "c1": "C", "x": None}
    run = RunProgress(groups, clock=clock)
    assert run.total == 7 and run.describe() == "test 1/7 estimating…"  # nothing finished: no guess
    run.start("a1")
    run.add("a1", 50.0, last=False)  # setup: the model loads, the group's fixture runs
    run.add("a1", 10.0, last=False)  # call
    run.add("a1", 0.0, last=True)  # a1 (A's first test) took 60 s
    assert run.is_first("a1") and run.seconds_left() is None  # no test of the other kind finished yet
    run.start("a2")
    clock.now = 4.0
    assert run.seconds_left() is None and run.describe() == "test 2/7 estimating…"
    run.add("a2", 4.0, last=True)  # a2, a later test of A, took 4 s
    assert run.seconds_left() is None  # one group's first test (it also loaded the model) is no guide
    run.start("b1")
    run.add("b1", 40.0, last=True)  # B's first: the first kind's mean is (60 + 40) / 2 = 50
    # left: C's first (50) + a3, b2, x (3 x 4) = 62 s
    assert run.seconds_left() == pytest.approx(62.0) and run.describe() == "test 3/7 ~1 min"
    clock.now = 20.0
    run.start("c1")  # C's first test
    clock.now = 30.0  # c1 has run 10 s of its expected 50: 40 + 3 x 4 = 52
    assert run.seconds_left() == pytest.approx(52.0) and run.describe() == "test 4/7 <1 min"
    run.add("c1", 45.0, last=False)  # its setup took 45 s (more than the clock says): 5 + 12 = 17
    assert run.seconds_left() == pytest.approx(17.0)
    run.workers = 2  # xdist: the work left is shared
    assert run.seconds_left() == pytest.approx(8.5)
    run.start("not collected")  # unknown ids are ignored
    assert run.position() == 4
    assert [format_left(s) for s in (59, 61, 150, 5340, 5400, 7500)] == [
        "<1 min", "~1 min", "~2 min", "~89 min", "~1h30m", "~2h05m"]
    assert RunProgress({}).describe() == ""  # no tests: no run part


def test_run_progress_from_an_earlier_run_at_this_runs_pace() -> None:
    """Issue 49: with every test timed by an earlier run, time left is their earlier durations scaled by
    how much slower this run finished the same tests (its pace), less what a running test used."""
    clock = FakeClock()
    clock.now = 0.0
    groups = {"a1": "A", "a2": "A", "b1": "B", "x": None}
    previous = {"a1": 30.0, "a2": 2.0, "b1": 20.0, "x": 1.0, "gone": 99.0}  # "gone": no longer collected
    run = RunProgress(groups, clock=clock, previous=previous)
    assert run.seconds_left() == pytest.approx(53.0)  # nothing finished: pace 1, 30 + 2 + 20 + 1
    run.start("a1")
    run.add("a1", 60.0, last=True)  # twice as slow as before: pace 2
    assert run.pace() == pytest.approx(2.0) and run.seconds_left() == pytest.approx((2 + 20 + 1) * 2.0)
    clock.now = 10.0
    run.start("b1")
    clock.now = 25.0  # b1 has used 15 s of its expected 40
    assert run.seconds_left() == pytest.approx(4 + 25 + 2)
    untimed = RunProgress({**groups, "new": None}, clock=clock, previous=previous)
    untimed.start("a1")
    untimed.add("a1", 60.0, last=True)
    assert untimed.seconds_left() is None  # a test never timed: the kinds' means, not learnt yet


# -- every model call of the HF adapter reports (tiny model, 3 batches of 2) ------------------------------
@pytest.fixture
def reported(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ProgressEvent]]:
    monkeypatch.setattr(progress, "MIN_INTERVAL", 0.0)  # every advance reports
    got: list[ProgressEvent] = []
    previous = set_sink(got.append)
    yield got
    set_sink(previous)


def _prompts(n: int = 6) -> list[Any]:
    from PIL import Image

    from faithtests.models.interfaces import Prompt

    colours = ["red", "green", "blue", "white", "black", "yellow", "purple"]
    return [Prompt((Image.new("RGB", (32, 32), colours[i % 7]),), f"Is it {colours[i % 7]}? A or B")
            for i in range(n)]


CALLS: dict[str, Callable[[Any, list[Any]], object]] = {
    "option logits": lambda vlm, ps: vlm.decide(ps, ["A", "B"]),
    "states": lambda vlm, ps: vlm.states(ps),
    "next-token logits": lambda vlm, ps: vlm.next_token_logits(ps),
    "answer log-probs": lambda vlm, ps: vlm.answer_logprob(ps, ["A", "B"]),
    "caption log-likelihood": lambda vlm, ps: vlm.caption_logprob([p.images[0] for p in ps], ["a"] * 6),
    "attentions": lambda vlm, ps: vlm.attentions(ps),
    "generate": lambda vlm, ps: vlm.generate(ps, 6),
}


@pytest.mark.parametrize("name", CALLS)
def test_each_model_call_reports_along_the_way(name: str, load_tiny: Callable[..., Any],
                                               reported: list[ProgressEvent]) -> None:
    vlm = load_tiny("llava", batch_size=2, prefix_cache=False)
    CALLS[name](vlm, _prompts())
    mine = [e for e in reported if e.stage == name]
    assert mine and mine[0].done == 0 and mine[0].total == 6 and mine[0].model == vlm.spec
    assert mine[-1].finished and mine[-1].done == 6 and len({e.key for e in mine}) == 1
    inside = [e.done for e in mine[1:-1]]
    assert any(0 < d < 6 for d in inside), inside  # the batches (or decoding steps) reported
    assert inside == sorted(inside)
    if name == "generate":  # within a batch: a share per decoding step, not only per batch
        assert any(d != int(d) for d in inside), inside


def test_the_logit_lens_reports_its_chunks(reported: list[ProgressEvent], load_tiny: Callable[..., Any]
                                           ) -> None:
    from faithtests.models.lens import lens_probs

    vlm = load_tiny("llava")
    states = vlm.states(_prompts(5))  # [L, 5, D]: 2 layers x 5 rows = 10 flat rows, chunks of 4
    reported.clear()
    with model_call("logit lens", 5, model="m"):
        lens_probs(vlm.model, states, [0, 1], chunk=4)
    assert [round(e.done, 2) for e in reported] == [0, 2.0, 4.0, 5, 5]  # 4, 8, 10 of 10 rows
    assert reported[-1].finished
    reported.clear()
    vlm.lens_probs(states, ["A", "B"])  # through the adapter: its own stage
    assert reported[0].stage == "logit lens" and reported[-1].finished and reported[-1].done == 5


def test_generation_is_the_same_with_and_without_progress(load_tiny: Callable[..., Any],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    vlm = load_tiny("llava", batch_size=2, prefix_cache=False)
    quiet = vlm.generate(_prompts(), 6)
    monkeypatch.setattr(progress, "MIN_INTERVAL", 0.0)
    got: list[ProgressEvent] = []
    previous = set_sink(got.append)
    try:
        shown = vlm.generate(_prompts(), 6)
    finally:
        set_sink(previous)
    assert len(got) > 4 and shown == quiet


# -- protocol stages: a loop of many small model calls reports as one stage ------------------------------
class _PerCallVLM:
    """Answers like an adapter whose every call is its own (nested, so silent) progress stage."""

    spec = "fake:vlm"

    def answer_logprob(self, prompts: list[Any], answers: list[str], hooks: Any = None) -> Any:
        import torch

        with model_call("answer log-probs", len(prompts), model=self.spec):
            return torch.zeros(len(prompts), len(answers))

    def generate(self, prompts: list[Any], max_new_tokens: int = 32, hooks: Any = None) -> list[str]:
        with model_call("generate", len(prompts), model=self.spec):
            return ["joy"] * len(prompts)


def test_a_protocol_loop_of_calls_is_one_stage(reported: list[ProgressEvent]) -> None:
    from faithtests.models.interfaces import Prompt
    from faithtests.protocols.acbench.run import answer

    prompts = [Prompt((), f"q{i}") for i in range(5)]
    answer(_PerCallVLM(), prompts, [str(i) for i in range(5)], "constrained")  # type: ignore[arg-type]
    assert {e.stage for e in reported} == {"AC constrained"}  # the calls inside are silent
    assert [e.done for e in reported] == [0, 1, 2, 3, 4, 5, 5] and reported[-1].finished
    reported.clear()
    answer(_PerCallVLM(), prompts, [str(i) for i in range(5)], "generation")  # type: ignore[arg-type]
    # one call for all prompts: the model's own stage reports, named by the protocol's label
    assert {e.stage for e in reported} == {"AC generation: generate"}


def test_probe_cross_validation_reports_per_layer_and_per_outer_fold(reported: list[ProgressEvent]) -> None:
    import numpy as np

    from faithtests.protocols.imavb.probes import group_folds, layer_curve, nested_peak

    rng = np.random.default_rng(0)
    y = np.tile([0, 1], 40)
    groups = [f"s{i // 2}" for i in range(80)]
    states = rng.normal(size=(3, 80, 4)) + y[None, :, None]
    folds = group_folds(y, groups, seed=0)
    layer_curve(states, y, folds)
    assert [(e.stage, e.done) for e in reported] == [("IMAVB probes/layer", d) for d in (0, 1, 2, 3, 3)]
    reported.clear()
    nested_peak(states, y, groups, folds)  # its inner per-layer curves are nested: silent
    assert {e.stage for e in reported} == {"IMAVB nested l*"}
    assert reported[-1].finished and reported[-1].done == len(folds) == 4


def test_a_model_load_is_a_stage_named_by_its_spec(reported: list[ProgressEvent],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's loads report: a checkpoint loading for minutes is not a silent gap."""
    from faithtests.plugin import model_fixtures

    seen: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(model_fixtures, "load_model", lambda spec, **kw: seen.append((spec, kw)) or "model")
    assert model_fixtures.loading("hf:/ckpt", device="cpu", batch_size=4) == "model"
    assert seen == [("hf:/ckpt", {"device": "cpu", "batch_size": 4})]
    mine = [e for e in reported if e.stage == "loading"]
    assert [e.finished for e in mine] == [False, True] and {e.model for e in mine} == {"hf:/ckpt"}
