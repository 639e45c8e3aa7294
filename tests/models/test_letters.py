"""Generated option letters (``faithtests.models.letters``): the strict parser, the answer mode a model
gets, and the indicator scores the protocols read."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from faithtests.models.interfaces import Hooks, Prompt
from faithtests.models.letters import LETTER_TOKENS, generated_by, generated_choice, parse_letter

AB = ("A", "B")
LETTERS = tuple("ABCDEF")


@pytest.mark.parametrize(("reply", "expected"), [
    ("A", 0), (" B", 1), ("(B)", 1), ("B.", 1), ("B: the red cup", 1), ("Answer: B", 1),
    ("The answer is B.", 1), ("**B**", 1), ("option B", 1), ("answer:B", 1),
])
def test_a_reply_that_opens_with_one_letter_is_that_option(reply: str, expected: int) -> None:
    assert parse_letter(reply, AB) == expected


@pytest.mark.parametrize("reply", ["", "   ", "I think B", "A or B", "b", "a cat", "AB", "C", "Both",
                                   "The answer is", "Bob", "A, B", "A/B"])
def test_a_reply_naming_no_option_is_never_guessed(reply: str) -> None:
    assert parse_letter(reply, AB) is None


def test_six_letters_and_a_letter_outside_the_options() -> None:
    assert parse_letter("E. The visual detail is not present", LETTERS) == 4
    assert parse_letter("G", LETTERS) is None


class _Scored:
    spec = "scored"

    def lacks(self, feature: str) -> str:
        return ""


class _Unscored(_Scored):
    spec = "unscored"

    def lacks(self, feature: str) -> str:
        return "the endpoint returned no top_logprobs" if feature == "logprobs" else ""


def test_the_answer_mode_of_a_model() -> None:
    assert generated_by(_Scored(), "auto") == ""
    assert generated_by(object(), "auto") == ""  # a plug-in model that says nothing is scored
    assert generated_by(_Unscored(), "auto") == (
        "no option log-probabilities: the endpoint returned no top_logprobs")
    assert generated_by(_Scored(), "generated") == "--faith-answer-mode generated"
    with pytest.raises(ValueError, match="not one of"):
        generated_by(_Scored(), "sampled")


class _Replies:
    spec = "replies"

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies, self.asked = list(replies), 0

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> list[str]:
        assert max_new_tokens == LETTER_TOKENS
        self.asked += len(prompts)
        return self.replies[:len(prompts)]


def test_indicator_scores_and_a_reply_without_a_letter() -> None:
    prompts = [Prompt(images=(), text=f"q{i}") for i in range(3)]
    choice = generated_choice(_Replies(["B", "no idea", "A."]), prompts, AB)  # type: ignore[arg-type]
    assert choice.chosen.tolist() == [1, -1, 0] and choice.unparsed.tolist() == [False, True, False]
    np.testing.assert_array_equal(choice.indicators(), [[0, 1], [0, 0], [1, 0]])
    assert choice.replies == ["B", "no idea", "A."]
    empty = _Replies([])
    assert generated_choice(empty, [], AB).indicators().shape == (0, 2) and empty.asked == 0  # type: ignore[arg-type]
