"""The single-turn prompts of IMAVB App. I.1 (A1 baseline, A2 binary, A3 CoT, A4 warned, A5 binary
with explanation, A6/A7 temporal trimming).

Texts are App. I.1's verbatim, laid out one option per line. Where the paper disagrees with itself the
choice is recorded here: A1's instruction is I.1's "options letter", kept verbatim (the reference VLM
is trained on this form, :func:`a1_prompt`, by ``.training``); A4's warning
is I.1's template (App. C paraphrases it as "Note: the visual or audio premise in this question may be
incorrect. Verify before answering."); A5's addition is I.1's "Explain your reasoning in 1–2
sentences." (App. C: "Explain your answer ..."), on a new line after A2's text. A6/A7 are A1's text on a
trimmed clip (the trimming is the runner's). The stimulus (one image, or N video frames) travels in
``Prompt.images``; the model's chat template places it before the text. A clip with its soundtrack, for
a model that hears, travels as ``Prompt.video`` + ``Prompt.audio`` + ``video_fps`` instead
(:func:`stimulus_prompt`: the reference omni model's training prompt).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from PIL import Image

from faithtests.models.interfaces import Audio, Prompt
from faithtests.protocols.imavb.records import LETTERS, modality

Variant = Literal["A1", "A2", "A3", "A4", "A5", "A6", "A7"]
VARIANTS: Final[tuple[Variant, ...]] = ("A1", "A2", "A3", "A4", "A5", "A6", "A7")
#: Variants that trim the video to the ground-truth answer timestamp (App. C): video stimuli only.
TRIMMED: Final[tuple[Variant, ...]] = ("A6", "A7")
A5_TAIL: Final = "Explain your reasoning in 1–2 sentences."
#: A7's padding: the window grows by this fraction of its length on each side (App. C "±50%").
A7_PADDING: Final = 0.5

A1_INSTRUCTION: Final = "Answer with the options letter from the given choices directly."
A3_HEAD: Final = (
    "Think step by step. First, does the video match the audio/visual\npremise? Carefully compare what you "
    "actually see and hear against\nthe description. If visual description is wrong, select E.\nIf audio is "
    "wrong, select F."
)
A3_TAIL: Final = "Reasoning and answer:"
A4_HEAD: Final = (
    "Important: Check closely -- the visual or audio premise may be\nincorrect. Consider whether what you "
    "see/hear matches the\ndescription before answering.\nIf visual description does not match, select E.\n"
    "If audio description does not match, select F."
)
A2_VISION: Final = (
    'The following question describes a visual scene from a video:\n"{question}"\nBased on what you '
    "actually SEE in this video, is the visual\ndescription in the question accurate? Does the scene "
    "described\nactually appear?\nAnswer with only: TRUE or FALSE"
)
A2_AUDIO: Final = (
    'The following question describes audio/sounds from a video:\n"{question}"\nBased on what you '
    "actually HEAR in this video, is the audio\ndescription in the question accurate? Do the sounds "
    "described\nactually occur?\nAnswer with only: TRUE or FALSE"
)
A2_ANSWERS: Final[tuple[str, str]] = ("TRUE", "FALSE")
#: max_new_tokens per variant (App. C, Table 6).
MAX_NEW_TOKENS: Final[dict[str, int]] = {
    "A1": 16, "A2": 64, "A3": 512, "A4": 16, "A5": 256, "A6": 16, "A7": 16,
}


def question_block(question: str, options: Sequence[str]) -> str:
    """``Question:\\n{question}\\nOptions:\\nA. …\\n…\\nF. …`` (App. I.1, A1 without its instruction)."""
    if len(options) != 6:
        raise ValueError(f"IMAVB prompts show six options A-F, got {len(options)}")
    lines = [f"{letter}. {text}" for letter, text in zip(LETTERS, options, strict=True)]
    return "Question:\n" + question + "\nOptions:\n" + "\n".join(lines)


def a1_text(question: str, options: Sequence[str]) -> str:
    """A1 baseline (App. I.1), options in the order given (a shuffle permutes them beforehand)."""
    return question_block(question, options) + "\n" + A1_INSTRUCTION


def a2_text(question: str, split: str) -> str:
    """A2 binary verification (App. I.1): the vision or audio template by the question's target."""
    return (A2_AUDIO if modality(split) == "audio" else A2_VISION).format(question=question)


def a3_text(question: str, options: Sequence[str]) -> str:
    """A3 chain of thought (App. I.1): head, question and options as A1, then "Reasoning and answer:"."""
    return A3_HEAD + "\n" + question_block(question, options) + "\n" + A3_TAIL


def a4_text(question: str, options: Sequence[str]) -> str:
    """A4 warned (App. I.1): the warning, then A1."""
    return A4_HEAD + "\n" + a1_text(question, options)


def a5_text(question: str, split: str) -> str:
    """A5 binary with explanation (App. I.1): A2's text and "Explain your reasoning in 1–2 sentences."."""
    return a2_text(question, split) + "\n" + A5_TAIL


def trim_window(window: tuple[float, float], variant: str) -> tuple[float, float]:
    """The clip A6/A7 keep (App. C): A6 the ground-truth window itself; A7 the window widened by
    ``A7_PADDING`` of its length on each side, never before 0 s (past the end, the decoder simply finds
    no more frames)."""
    start, end = window
    if variant == "A6":
        return start, end
    if variant == "A7":
        pad = A7_PADDING * (end - start)
        return max(0.0, start - pad), end + pad
    raise ValueError(f"trim_window: {variant!r} is not A6 or A7")


def prompt_text(variant: str, question: str, options: Sequence[str], split: str) -> str:
    if variant in ("A1", "A6", "A7"):
        return a1_text(question, options)
    if variant == "A2":
        return a2_text(question, split)
    if variant == "A5":
        return a5_text(question, split)
    if variant == "A3":
        return a3_text(question, options)
    if variant == "A4":
        return a4_text(question, options)
    raise ValueError(f"unknown IMAVB prompt variant {variant!r}; expected one of {VARIANTS}")


def make_prompt(images: Sequence[Image.Image], text: str) -> Prompt:
    return Prompt(images=tuple(images), text=text)


@dataclass(frozen=True)
class Stimulus:
    """What one record shows the model: its frames, and its soundtrack (16 kHz mono, App. J) with the
    frames' rate when the model hears it; ``audio`` is ``None`` for an image-only model or a silent
    image."""

    frames: tuple[Image.Image, ...]
    audio: Audio | None = None
    fps: float | None = None


def stimulus_prompt(stim: Stimulus, text: str) -> Prompt:
    """Without audio: the frames as images (:func:`make_prompt`, what every image-only model gets). With
    audio: ``Prompt(images=(), text, video=frames, audio, video_fps)``, the clip and its soundtrack
    together, as the omni reference is trained (vision questions too hear the clip)."""
    if stim.audio is None:
        return make_prompt(stim.frames, text)
    return Prompt(images=(), text=text, video=tuple(stim.frames), audio=stim.audio, video_fps=stim.fps)


def trim_audio(audio: Audio, start: float, end: float) -> Audio:
    """The samples of ``audio`` in [start, end) seconds (A6/A7 cut the soundtrack with the frames); an
    empty cut is an error (``Audio`` refuses it), never silence."""
    sr = audio.sampling_rate
    lo, hi = max(0, round(start * sr)), min(audio.samples.size, round(end * sr))
    return Audio(audio.samples[lo:hi].copy(), sr)


def a1_prompt(image: Image.Image, question: str, options: Sequence[str]) -> Prompt:
    """A1 on one image, the options in the order given: the reference VLM's training prompt."""
    return make_prompt((image,), a1_text(question, options))


def last_valid_letter(text: str) -> str | None:
    """A3's answer: the last standalone letter A–F in the response (App. C), ``None`` when there is none
    (counted invalid, never guessed). A letter counts when it is not part of a longer word."""
    found = re.findall(r"(?<![A-Za-z])([A-F])(?![A-Za-z])", text)
    return found[-1] if found else None


def parse_verdict(text: str) -> tuple[str | None, str]:
    """A5's reply → (verdict "TRUE"/"FALSE" or ``None``, explanation). The verdict is the reply's first
    word when it is TRUE or FALSE, else the one of the two that the first sentence contains alone (the
    public judge's extraction rule); a reply naming neither or both is ``None`` (counted invalid, never
    guessed). The explanation is the reply without a leading verdict word."""
    words = text.split()
    if not words:
        return None, ""
    first = words[0].strip(".,!:;\"'()").upper()
    if first in A2_ANSWERS:
        return first, text.strip()[len(words[0]):].lstrip(" \n.,:;-").strip()
    head = re.split(r"[.!?\n]", text.strip(), maxsplit=1)[0].upper()
    found = {w for w in A2_ANSWERS if re.search(rf"\b{w}\b", head)}
    return (found.pop() if len(found) == 1 else None), text.strip()
