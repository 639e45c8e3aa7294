"""SPD-Faith answered by generation (a model without option log-probabilities, or ``--faith-answer-mode
generated``): the one-word reading rules, the counted replies, and the gates against every one-answer
reply policy on the reference world's pairs (each must fail the gate its thresholds.toml comment names;
a model that answers truthfully passes them all).

The in-process reference VLM's generated answers equal its scored ones on every base result (checked
when this was introduced: ``faithtests compare --all`` between the two modes, 195 results unchanged);
CI's served benchmark (``bench_served --server serve``) checks the same through a real server."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from faithtests.models.errors import NotApplicable
from faithtests.models.interfaces import Hooks, Prompt
from faithtests.protocols import load_suite_thresholds
from faithtests.protocols.spdfaith.judge import world_judge
from faithtests.protocols.spdfaith.prompts import (
    COUNT_QUESTION,
    COUNT_WORDS,
    DIFFERENT_QUESTION,
    SAME_QUESTION,
    parse_count,
    parse_yes_no,
)
from faithtests.protocols.spdfaith.results import answered, counted, counts, symmetric
from faithtests.protocols.spdfaith.run import NO_COUNT, NO_NAMING, NO_YES_NO, Answers, run_variant, usable
from faithtests.protocols.spdfaith.sources import world_records
from faithtests.stats import Boot

GATES = load_suite_thresholds(Path(__file__).resolve().parents[3] / "suites/thresholds.toml",
                              default_required=True).entries("difference_consistency")
BOOT = Boot(100, 0)
DATA = usable(world_records(50, seed=0))  # ten of each slot: single easy / medium / hard, multi, identical


@pytest.mark.parametrize(("reply", "expected"), [
    ("Yes", 0), ("yes.", 0), ("No, they differ.", 1), ("Answer: No", 1), (" YES", 0)])
def test_a_yes_or_no_reply_is_read(reply: str, expected: int) -> None:
    assert parse_yes_no(reply) == expected


@pytest.mark.parametrize("reply", ["They are not the same.", "Yes or no", "yes, no", "", "Maybe"])
def test_a_reply_that_is_neither_yes_nor_no_is_never_guessed(reply: str) -> None:
    assert parse_yes_no(reply) is None


@pytest.mark.parametrize(("reply", "expected"), [
    ("3", 3), ("Three.", 3), ("There are three differences.", 3), ("there is one difference", 1),
    ("Answer: 2", 2), ("3 (three)", 3), ("zero", 0)])
def test_a_stated_count_is_read(reply: str, expected: int) -> None:
    assert parse_count(reply) == expected


@pytest.mark.parametrize("reply", ["I see three", "three or four", "7", "many", "", "2, 3"])
def test_a_reply_without_one_count_is_never_guessed(reply: str) -> None:
    assert len(COUNT_WORDS) == 7 and parse_count(reply) is None


class Replies:
    """A model that only generates: ``answer(prompt, true count)`` per prompt."""

    spec = "replies"
    num_layers = 0

    def __init__(self, answer: Callable[[str, int], str]) -> None:
        self.answer = answer
        self.calls: list[int] = []

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> list[str]:
        assert hooks is None  # generated answers run no SAGE hooks
        self.calls.append(max_new_tokens)
        return [self.answer(p.text, _TRUE_M[id(p.images[0])]) for p in prompts]


_TRUE_M = {id(a): r.m for r, (a, _) in zip(DATA.records, DATA.pairs, strict=True)}


def truthful(text: str, m: int) -> str:
    if text == SAME_QUESTION:
        return "No." if m else "Yes."
    if text == DIFFERENT_QUESTION:
        return "Yes, they differ." if m else "No"
    if text == COUNT_QUESTION:
        return f"There are {COUNT_WORDS[m]} differences."
    return "1. The red circle at the top left changed colour to blue."


def _answers(answer: Callable[[str, int], str]) -> Answers:
    return run_variant(Replies(answer), DATA, "base", world_judge(), generated="test")  # type: ignore[arg-type]


def _value(rows: Sequence[object], name: str, where: str | None) -> float:
    return next(float(r.value) for r in rows if r.name == name and r.slice == where)  # type: ignore[attr-defined]


def _fails(name: str, value: float) -> bool:
    g = GATES[name]
    return value > g.value if g.op == "<=" else value < g.value


def test_truthful_replies_pass_every_symmetric_and_count_gate() -> None:
    ans = _answers(truthful)
    assert ans.states_same.shape == (0, len(DATA.records), 0)  # generated: no layer read
    assert sorted(ans.counted.invalid) == [NO_NAMING] and ans.counted.invalid[NO_NAMING] == 10
    sym = symmetric(DATA.records, ans, answered(ans), BOOT).metrics
    for level in ("easy", "medium", "hard"):
        assert _value(sym, "contradiction_rate", f"difficulty={level}") == 0.0
    assert _value(sym, "DS_exist", "subset=multi") == 1.0
    assert _value(sym, "false_alarm_rate", "subset=identical") == 0.0
    got = counts(DATA.records, ans, counted(DATA.records, ans, edited=True), BOOT).metrics
    assert _value(got, "DS_count", None) == 1.0 and _value(got, "DQR", "subset=multi") == 1.0


@pytest.mark.parametrize(("policy", "gate", "where"), [
    (lambda t, m: "Yes", "contradiction_rate", "difficulty=easy"),
    (lambda t, m: "No", "contradiction_rate", "difficulty=hard"),
    (lambda t, m: "Yes" if t == SAME_QUESTION else "No", "DS_exist", "subset=multi"),
    (lambda t, m: "No" if t == SAME_QUESTION else "Yes", "false_alarm_rate", "subset=identical"),
], ids=["yes", "no", "same", "different"])
def test_every_one_answer_policy_fails_its_symmetric_gate(
        policy: Callable[[str, int], str], gate: str, where: str) -> None:
    ans = _answers(policy)
    sym = symmetric(DATA.records, ans, answered(ans), BOOT).metrics
    assert _fails(gate, _value(sym, gate, where)), (gate, where, _value(sym, gate, where))


@pytest.mark.parametrize(("n", "where"), [(1, "subset=multi"), (2, None), (5, None)])
def test_every_constant_count_fails_a_count_floor(n: int, where: str | None) -> None:
    ans = _answers(lambda t, m: str(n) if t == COUNT_QUESTION else truthful(t, m))
    got = counts(DATA.records, ans, counted(DATA.records, ans, edited=True), BOOT).metrics
    assert _fails("DS_count", _value(got, "DS_count", where)), (n, where, _value(got, "DS_count", where))


def test_unread_replies_are_counted_and_left_out() -> None:
    """Every pair answered "Maybe" to "same?" and given no count: each is counted once per kind with its
    reply as the example, none enters a metric (the suite then fails the test: nothing to score), and no
    naming prompt is asked."""
    model = Replies(lambda t, m: "Maybe" if t in (SAME_QUESTION, COUNT_QUESTION) else truthful(t, m))
    ans = run_variant(model, DATA, "base", world_judge(), generated="test")  # type: ignore[arg-type]
    n = len(DATA.records)
    assert ans.counted.invalid == {NO_YES_NO: n, NO_COUNT: n}
    assert ans.counted.examples[NO_YES_NO][0].endswith("'Maybe'")
    assert answered(ans) == [] and counted(DATA.records, ans, edited=False) == []
    assert model.calls == [8, 8, 8] and all(r is None for r in ans.replies)  # 3 questions, no naming


def test_a_pair_with_both_replies_unread_is_counted_once() -> None:
    """A pair whose two symmetric replies are both unread is one pair left out, counted once."""
    symmetric_q = (SAME_QUESTION, DIFFERENT_QUESTION)
    ans = _answers(lambda t, m: "?" if t in symmetric_q and m == 0 else truthful(t, m))
    identical = [i for i, r in enumerate(DATA.records) if r.m == 0]
    assert ans.counted.invalid[NO_YES_NO] == len(identical) == 10
    assert ans.no_reply is not None and np.flatnonzero(ans.no_reply).tolist() == identical
    assert set(answered(ans)) == set(range(len(DATA.records))) - set(identical)


def test_sage_is_not_applicable_to_generated_answers() -> None:
    with pytest.raises(NotApplicable, match="SAGE steers option logits"):
        run_variant(Replies(truthful), DATA, "sage", world_judge(), generated="test")  # type: ignore[arg-type]
