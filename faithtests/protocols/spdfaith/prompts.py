"""SPD-Faith's questions (§3, App. B.2): the symmetric pair, the count question and the self-consistency
naming prompt, as :class:`~faithtests.models.interfaces.Prompt` values with both images, original first.

The reference VLMs are trained on exactly these prompts (``.training`` builds its examples with them).
The paper asks for the count in free text; here it is one of :data:`COUNT_WORDS` read from the answer
position's logits (no parsing), and the naming prompt is filled with the model's own count.
"""

from __future__ import annotations

from typing import Final

from PIL import Image

from faithtests.models.interfaces import Prompt
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
