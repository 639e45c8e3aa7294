"""Where a prompt's description goes (``prompting.layout``): into the text's ``{description}`` slot, or
before the text; and its token span through each tiny VLM family's chat template covers exactly it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from faithtests.models.hf_vlm import HFVisionLanguageModel
from faithtests.models.interfaces import DESCRIPTION_SLOT, Prompt
from faithtests.models.prompting import PromptRenderError, layout, render, user_text

SLOTTED = "Look at the picture.\nDESCRIPTION:\n<<" + DESCRIPTION_SLOT + ">>\nQuestion: A or B?"


def test_description_fills_the_slot() -> None:
    text, at = layout(Prompt((), SLOTTED, description="a calm sea"))
    assert text == "Look at the picture.\nDESCRIPTION:\n<<a calm sea>>\nQuestion: A or B?"
    assert at == len("Look at the picture.\nDESCRIPTION:\n<<") and text[at : at + 10] == "a calm sea"


def test_without_a_slot_the_description_comes_first() -> None:
    assert layout(Prompt((), "A or B?", description="a calm sea")) == ("a calm sea\nA or B?", 0)
    assert layout(Prompt((), "A or B?")) == ("A or B?", -1)


@pytest.mark.parametrize(
    ("text", "description", "match"),
    [
        (SLOTTED, None, "slot but no description"),
        (SLOTTED + DESCRIPTION_SLOT, "x", "2 {description} slots"),
        (SLOTTED, " ", "description is empty"),
        ("  ", "x", "text is empty"),
    ],
)
def test_bad_layouts_are_named(text: str, description: str | None, match: str) -> None:
    with pytest.raises(PromptRenderError, match=match):
        user_text(Prompt((), text, description=description))


def test_slotted_description_span_in_every_family(
    family: str, load_tiny: Callable[..., Any], images: list[Any]
) -> None:
    """The span of a description inside the text decodes to the description, and the text around it is
    rendered unchanged (the template places the image items, the slot the description)."""
    vlm = load_tiny(family)
    assert isinstance(vlm, HFVisionLanguageModel)
    prompts = [Prompt((images[0],), SLOTTED, description="this is a happy scene"),
               Prompt((images[0],), "A or B?", description="this is a happy scene")]
    enc = vlm.encode(prompts)
    tok = vlm.processor.tokenizer
    for row in range(2):
        a, b = enc.spans.description[row]
        assert tok.decode(enc.inputs["input_ids"][row, a:b]).strip() == "this is a happy scene"
        img_start, _ = enc.spans.image[row]
        assert img_start < a  # the image items come first in these templates
    assert user_text(prompts[0]) in render(vlm.processor, prompts[0])
