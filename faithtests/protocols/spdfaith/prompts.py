"""SPD-Faith's questions (§3, App. B.2): the symmetric pair, the count question and the self-consistency
naming prompt, as :class:`~faithtests.models.interfaces.Prompt` values with both images, original first.

The reference VLMs are trained on exactly these prompts (``.training`` builds its examples with them).
The paper asks for the count in free text; here it is one of :data:`COUNT_WORDS` read from the answer
position's logits (no parsing), and the naming prompt is filled with the model's own count. A model
without option log-probabilities (a served one) answers by greedy generation instead, read by the
strict one-word rules :func:`parse_yes_no` and :func:`parse_count` (``models.letters``): a reply they
cannot read is counted, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from PIL import Image

from faithtests.models.interfaces import Prompt
from faithtests.models.letters import parse_word, read_first
from faithtests.world.captions import NUMBER_WORDS

SAME_QUESTION: Final = "Are the two pictures the same?"
DIFFERENT_QUESTION: Final = "Are the two pictures different?"
COUNT_QUESTION: Final = "How many differences are there between the two pictures? Answer with a number."
YES_NO: Final[tuple[str, str]] = ("Yes", "No")
#: The count answers, by value: COUNT_WORDS[n] means n differences.
COUNT_WORDS: Final[tuple[str, ...]] = tuple(NUMBER_WORDS)


def same_prompt(a: Image.Image, b: Image.Image) -> Prompt:
    return Prompt(images=(a, b), text=SAME_QUESTION)


def different_prompt(a: Image.Image, b: Image.Image) -> Prompt:
    return Prompt(images=(a, b), text=DIFFERENT_QUESTION)


def count_prompt(a: Image.Image, b: Image.Image) -> Prompt:
    return Prompt(images=(a, b), text=COUNT_QUESTION)


def find_text(n: int) -> str:
    """The self-consistency prompt (App. B.2, DRF) for the model's own count ``n`` >= 1; grammatical for
    n = 1 ("There is one difference ... find it?")."""
    if not 1 <= n < len(NUMBER_WORDS):
        raise ValueError(f"the naming prompt needs a count in 1..{len(NUMBER_WORDS) - 1}, got {n}")
    if n == 1:
        return "There is one difference in the picture. Can you find it?"
    return f"There are {NUMBER_WORDS[n]} differences in the picture. Can you find them?"


def find_prompt(a: Image.Image, b: Image.Image, n: int) -> Prompt:
    return Prompt(images=(a, b), text=find_text(n))


#: What may precede a count: "Answer: 3", "There are three differences".
_COUNT_LEAD: Final = re.compile(r"^\s*(?:(?:the\s+)?answer\s*(?:is)?\s*[:\-]?\s*)?(?:there\s+(?:are|is)\s+)?",
                                re.IGNORECASE)


def parse_yes_no(reply: str, options: Sequence[str] = YES_NO) -> int | None:
    """0 for a reply that answers Yes, 1 for No, None for anything else ("Yes, they differ." → 0; "They
    are not the same" → None; "yes" → 0: case is folded, unlike option letters)."""
    return parse_word(reply, options, fold_case=True)


def parse_count(reply: str, options: Sequence[str] = COUNT_WORDS) -> int | None:
    """The count a reply states as its first word, a number word of ``options`` or its digits ("3",
    "Three.", "There are three differences" → 3), or None ("I see three", "three or four", "7")."""
    value = {w: n for n, w in enumerate(options)} | {str(n): n for n in range(len(options))}
    return read_first(reply, value, fold_case=True, lead=_COUNT_LEAD)
