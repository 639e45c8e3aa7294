"""The prompt texts of the five protocols, as :class:`~faithtests.models.interfaces.Prompt` values.

The reference VLMs are trained on exactly these texts (rendered through their processor's chat template,
image items first), so a suite that builds its prompts here asks them in the form they learnt. Sources:
S3E App. A (A/B choice), IMAVB App. I.1 A1 (premise questions; the paper's "options letter" wording,
which SPEC §3 restates as "option's letter"), AC-Bench App. C.3 (emotion reasoning, image-only,
text-only), SPD-Faith §3 / App. B.2 (same / different, count, "There are {n} differences ...").
"""

from __future__ import annotations

from collections.abc import Sequence

from PIL import Image

from faithtests.models.interfaces import DESCRIPTION_SLOT, Prompt
from faithtests.protocols.s3e.prompts import S3E_TEMPLATE as S3E_TEMPLATE
from faithtests.protocols.s3e.prompts import s3e_prompt as s3e_prompt
from faithtests.protocols.spdfaith.prompts import COUNT_QUESTION as COUNT_QUESTION
from faithtests.protocols.spdfaith.prompts import DIFFERENT_QUESTION as DIFFERENT_QUESTION
from faithtests.protocols.spdfaith.prompts import SAME_QUESTION as SAME_QUESTION
from faithtests.protocols.spdfaith.prompts import YES_NO as YES_NO
from faithtests.protocols.spdfaith.prompts import count_prompt as count_prompt
from faithtests.protocols.spdfaith.prompts import different_prompt as different_prompt
from faithtests.protocols.spdfaith.prompts import find_prompt as find_prompt
from faithtests.protocols.spdfaith.prompts import find_text as find_text
from faithtests.protocols.spdfaith.prompts import same_prompt as same_prompt
from faithtests.world.mood import EMOTIONS

AB_LETTERS: tuple[str, str] = ("A", "B")

IMAVB_INSTRUCTION = "Answer with the options letter from the given choices directly."

_LABELS = "[" + ", ".join(EMOTIONS) + "]"
EMOTION_TASK = (
    "You will receive an image and a textual description. The description may be incomplete, biased, "
    "or emotionally misleading.\nYour task:\nIdentify the ONE emotion that a typical viewer would MOST "
    "LIKELY feel\nafter reading the description and looking at the image.\nUse ONLY ONE of the following "
    f"emotion labels, in lowercase:\n{_LABELS}\nIMAGE + DESCRIPTION:\n"
)
#: The description's place (App. C.3: between "IMAGE + DESCRIPTION:" and "Question:"), its
#: ``{description}`` slot filled from ``Prompt.description`` by the adapter (its own token span).
EMOTION_DESCRIPTION = '<desc_start>\n"""' + DESCRIPTION_SLOT + '"""\n<desc_end>\n'
EMOTION_QUESTION = (
    "Question:\nWhat is the main emotion a typical viewer would feel?\n"
    "Respond ONLY with the emotion word, in lowercase. No explanation."
)
IMAGE_ONLY_EMOTION = (
    "You will receive an image.\nYour task:\nIdentify the ONE emotion that a typical viewer would MOST "
    "LIKELY feel\nwhen seeing this image.\nUse ONLY ONE of the following emotion labels, in lowercase:\n"
    f"{_LABELS}\nNo textual description is provided for this image.\nYou MUST decide the emotion based "
    "ONLY on the visual content of the image.\n" + EMOTION_QUESTION
)
TEXT_ONLY_EMOTION = (
    "You will be given ONE short text that describes a situation or scene.\nYour task:\nIdentify the ONE "
    "emotion that a typical reader would MOST LIKELY feel\nbased on this text description.\nUse ONLY ONE "
    f"of the following emotion labels, in lowercase:\n{_LABELS}\n\nText description:\n"
    '"""{description}"""\n\nQuestion:\nWhat is the main emotion a typical reader would feel?\n'
    "Respond ONLY with the emotion word, in lowercase. No explanation."
)

CAPTION_QUESTION = "Describe the image."
VERIFY_TEMPLATE = 'Does this caption match the image? Answer Yes or No.\nCaption: "{c}"'


def imavb_text(question: str, options: Sequence[str]) -> str:
    if len(options) != 6:
        raise ValueError(f"IMAVB prompts show six options A-F, got {len(options)}")
    lines = [f"{letter}. {text}" for letter, text in zip("ABCDEF", options, strict=True)]
    return "Question:\n" + question + "\nOptions:\n" + "\n".join(lines) + "\n" + IMAVB_INSTRUCTION


def imavb_prompt(image: Image.Image, question: str, options: Sequence[str]) -> Prompt:
    """IMAVB App. I.1 A1 with the options in the order given (a suite shuffles them and maps back)."""
    return Prompt(images=(image,), text=imavb_text(question, options))


def emotion_prompt(image: Image.Image, description: str) -> Prompt:
    """AC-Bench emotion reasoning prompt (App. C.3 layout): the description travels in
    ``Prompt.description`` (its own token span) and the adapter fills the text's slot with it, between
    "IMAGE + DESCRIPTION:" and "Question:"; the image goes where the chat template puts image items."""
    return Prompt(images=(image,), text=EMOTION_TASK + EMOTION_DESCRIPTION + EMOTION_QUESTION,
                  description=description)


def image_only_emotion_prompt(image: Image.Image) -> Prompt:
    return Prompt(images=(image,), text=IMAGE_ONLY_EMOTION)


def text_only_emotion_prompt(description: str) -> Prompt:
    return Prompt(images=(), text=TEXT_ONLY_EMOTION.format(description=description))


def verify_prompt(image: Image.Image, caption: str) -> Prompt:
    """Single-caption verification (P("Yes") makes a generative VLM a scorer, SPEC "Common vocabulary")."""
    return Prompt(images=(image,), text=VERIFY_TEMPLATE.format(c=caption))


def slot_prompt(image: Image.Image, where: str) -> Prompt:
    """"What is on the left?": a one-hop grounding question (reference-VLM training aid)."""
    return Prompt(images=(image,), text=f"What is {where}?")


def caption_prompt(image: Image.Image) -> Prompt:
    return Prompt(images=(image,), text=CAPTION_QUESTION)
