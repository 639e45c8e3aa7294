"""Prompts of the reference VLMs' generic grounding tasks (no protocol's): single-caption verification,
slot questions and captioning, as :class:`~faithtests.models.interfaces.Prompt` values.

Each protocol's prompts are defined once, in ``faithtests/protocols/<p>/prompts.py``; the reference VLMs
are trained on those (``faithtests/protocols/<p>/training.py``) and on these.
"""

from __future__ import annotations

from PIL import Image

from faithtests.models.interfaces import Prompt

CAPTION_QUESTION = "Describe the image."
VERIFY_TEMPLATE = 'Does this caption match the image? Answer Yes or No.\nCaption: "{c}"'


def verify_prompt(image: Image.Image, caption: str) -> Prompt:
    """Single-caption verification (P("Yes") makes a generative VLM a scorer of the caption)."""
    return Prompt(images=(image,), text=VERIFY_TEMPLATE.format(c=caption))


def slot_prompt(image: Image.Image, where: str) -> Prompt:
    """"What is on the left?": a one-hop grounding question (reference-VLM training aid)."""
    return Prompt(images=(image,), text=f"What is {where}?")


def caption_prompt(image: Image.Image) -> Prompt:
    return Prompt(images=(image,), text=CAPTION_QUESTION)
