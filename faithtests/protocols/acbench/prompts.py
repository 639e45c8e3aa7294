"""AC-Bench prompts (App. C.3) and the CECS conflict probe (§5.1), as ``Prompt`` values; the answer parser.

The three App. C.3 texts are defined here once; the reference VLM is trained on these very prompts
(``.training`` builds its examples with them).
The emotion-reasoning prompt carries the description in ``Prompt.description`` (its own token span, the
T_desc of §4.2 and Eq. 22); the adapter writes it into the text's ``{description}`` slot, in triple
quotes between ``<desc_start>`` and ``<desc_end>`` after "IMAGE + DESCRIPTION:", as App. C.3 lays it out. The
image goes where the model's chat template puts image items (App. C.3 shows ``<image>`` after the first
sentence; a template places it, the text does not). The CECS probe has no slot: its description comes
before the probe text.

The probe prompt P_probe: §5.1 refers to the appendix for its text, which the appendix does not give.
Eq. 5 reads the conflict score as the probability of "No", so the probe asks whether image and
description *agree* (Yes = consistent, No = conflict), asks for the verdict as the first token, and
invites the reasoning §5.1 describes ("preliminary internal reasoning without being explicitly
consumed") by naming the two judgements to make before answering.

Answers: :func:`parse_label` is strict; anything that is not clearly one of
the eight labels is ``None`` (§4.1's "other"), never mapped to the nearest label.
"""

from __future__ import annotations

import re
from typing import Final

from PIL import Image

from faithtests.models.interfaces import DESCRIPTION_SLOT, Prompt
from faithtests.world.emotion import EMOTIONS

_LABELS = "[" + ", ".join(EMOTIONS) + "]"
EMOTION_TASK: Final = (
    "You will receive an image and a textual description. The description may be incomplete, biased, "
    "or emotionally misleading.\nYour task:\nIdentify the ONE emotion that a typical viewer would MOST "
    "LIKELY feel\nafter reading the description and looking at the image.\nUse ONLY ONE of the following "
    f"emotion labels, in lowercase:\n{_LABELS}\nIMAGE + DESCRIPTION:\n"
)
#: The description's place (App. C.3: between "IMAGE + DESCRIPTION:" and "Question:"), its
#: ``{description}`` slot filled from ``Prompt.description`` by the adapter (its own token span).
EMOTION_DESCRIPTION: Final = '<desc_start>\n"""' + DESCRIPTION_SLOT + '"""\n<desc_end>\n'
EMOTION_QUESTION: Final = (
    "Question:\nWhat is the main emotion a typical viewer would feel?\n"
    "Respond ONLY with the emotion word, in lowercase. No explanation."
)
IMAGE_ONLY_EMOTION: Final = (
    "You will receive an image.\nYour task:\nIdentify the ONE emotion that a typical viewer would MOST "
    "LIKELY feel\nwhen seeing this image.\nUse ONLY ONE of the following emotion labels, in lowercase:\n"
    f"{_LABELS}\nNo textual description is provided for this image.\nYou MUST decide the emotion based "
    "ONLY on the visual content of the image.\n" + EMOTION_QUESTION
)
TEXT_ONLY_EMOTION: Final = (
    "You will be given ONE short text that describes a situation or scene.\nYour task:\nIdentify the ONE "
    "emotion that a typical reader would MOST LIKELY feel\nbased on this text description.\nUse ONLY ONE "
    f"of the following emotion labels, in lowercase:\n{_LABELS}\n\nText description:\n"
    '"""{description}"""\n\nQuestion:\nWhat is the main emotion a typical reader would feel?\n'
    "Respond ONLY with the emotion word, in lowercase. No explanation."
)
PROBE_TEXT: Final = (
    "You will receive an image and a textual description.\nBefore answering, think it through: which ONE "
    "emotion would a typical viewer feel from the image alone, and which ONE emotion does the description "
    f"alone convey? Use the emotion labels {_LABELS}.\nQuestion:\nDo the image and the description convey "
    "the same emotion?\nAnswer with Yes or No first."
)
#: The probe's verbalizers (v_yes, v_no of Eq. 5), in the order ``option_logits`` returns them.
YES_NO: Final[tuple[str, str]] = ("Yes", "No")


def emotion_prompt(image: Image.Image, description: str) -> Prompt:
    """App. C.3 "Emotion Reasoning Prompt" (aligned and conflict settings)."""
    return Prompt(images=(image,), text=EMOTION_TASK + EMOTION_DESCRIPTION + EMOTION_QUESTION,
                  description=description)


def image_only_emotion_prompt(image: Image.Image) -> Prompt:
    """App. C.3 "Image-only Emotion Prompt": the f_θ(I) baseline."""
    return Prompt(images=(image,), text=IMAGE_ONLY_EMOTION)


def text_only_emotion_prompt(description: str) -> Prompt:
    """App. C.3 "Text-only Emotion Prompt": the f_θ(T) baseline (no image)."""
    return Prompt(images=(), text=TEXT_ONLY_EMOTION.format(description=description))


def probe_prompt(image: Image.Image, description: str) -> Prompt:
    """CECS P_probe (§5.1, module doc): score it with ``option_logits(..., YES_NO)`` and
    ``cecs.conflict_score(logits[:, 0], logits[:, 1])``."""
    return Prompt(images=(image,), text=PROBE_TEXT, description=description)


_WORD = re.compile(r"\b(" + "|".join(EMOTIONS) + r")\b")
_TRAILING = ".,;:!?\"'`)]} \t\n"


def parse_label(text: str | None) -> str | None:
    """The emotion label of a generated answer, or None ("other", §4.1).

    The text is stripped, lowercased and its trailing punctuation removed; it is a label if it then is
    exactly one of the eight labels, or contains exactly one distinct label as a whole word ("the
    emotion is awe." → awe; "fearful", "awe or fear", "" → None)."""
    if text is None:
        return None
    t = text.strip().lower().rstrip(_TRAILING)
    if t in EMOTIONS:
        return t
    found = set(_WORD.findall(t))
    return found.pop() if len(found) == 1 else None
