"""The IMAVB record: one question variant of one stimulus, in canonical option order (IMAVB §2.3).

Options are always six: A–D content answers, E "The visual detail in the question is incorrect", F "The
audio detail in the question is incorrect" (App. I.1). ``correct_answer`` is a canonical letter; the
shuffles of :mod:`.shuffles` permute the displayed order and map answers back to these letters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from PIL import Image

from faithtests.models.interfaces import Audio

Split = Literal["standard_vision", "misleading_vision", "standard_audio", "misleading_audio"]
SPLITS: Final[tuple[Split, ...]] = (
    "standard_vision",
    "misleading_vision",
    "standard_audio",
    "misleading_audio",
)
#: Short split names of the paper's tables (Table 1): std_v, mis_v, std_a, mis_a.
SHORT: Final[dict[str, str]] = {
    "standard_vision": "std_v",
    "misleading_vision": "mis_v",
    "standard_audio": "std_a",
    "misleading_audio": "mis_a",
}
VISION_SPLITS: Final[tuple[Split, ...]] = ("standard_vision", "misleading_vision")
AUDIO_SPLITS: Final[tuple[Split, ...]] = ("standard_audio", "misleading_audio")
LETTERS: Final[tuple[str, ...]] = ("A", "B", "C", "D", "E", "F")
E_INDEX: Final = 4
F_INDEX: Final = 5
OPTION_E: Final = "The visual detail in the question is incorrect"
OPTION_F: Final = "The audio detail in the question is incorrect"
#: Table 14's speech subcategories of misleading audio premises (the other five are about sounds).
SPEECH_SUBCATEGORIES: Final[tuple[str, ...]] = ("speech_content", "speech_speaker", "speech_tone",
                                                "speech_context")

#: Loads the stimulus: one image (reference world) or N uniformly sampled video frames (IMAVB).
MediaLoader = Callable[[], tuple[Image.Image, ...]]
#: Loads N frames sampled uniformly within a time window (start, end) in seconds (A6/A7 trimming).
WindowLoader = Callable[[float, float], tuple[Image.Image, ...]]
#: Loads the stimulus's soundtrack, 16 kHz mono (App. J); raises where the track is missing or corrupt.
AudioLoader = Callable[[], Audio]


def is_misleading(split: str) -> bool:
    return split.startswith("misleading")


def modality(split: str) -> str:
    return "audio" if split.endswith("audio") else "vision"


@dataclass(frozen=True)
class PremiseRecord:
    """One question variant (IMAVB fields ``video_id, question, option_a … option_f, correct_answer``).

    ``stimulus_id`` groups the variants of one clip (probe folds, bootstrap unit); ``category`` is the
    question type and ``subcategory`` the misleading subcategory (App. H), ``None`` where absent.
    ``answer_window`` is the ground-truth answer timestamp (start, end) in seconds (§2.3; A6/A7 trim
    the clip to it), ``None`` where the row has none or the stimulus is an image; ``window_media``
    samples frames within a window (video stimuli only).
    """

    item_id: str
    stimulus_id: str
    split: Split
    question: str
    options: tuple[str, ...]
    correct_answer: str
    category: str | None = None
    subcategory: str | None = None
    source: str = "world"
    media: MediaLoader | None = field(default=None, compare=False, repr=False)
    answer_window: tuple[float, float] | None = None
    window_media: WindowLoader | None = field(default=None, compare=False, repr=False)
    #: The soundtrack (omni stimuli: world clips with sound, IMAVB videos); ``None`` for a silent image.
    audio: AudioLoader | None = field(default=None, compare=False, repr=False)
    #: Frames per second of ``media``'s frames as sampled (a clip's frames and its audio align in time).
    fps: float | None = None

    def __post_init__(self) -> None:
        if len(self.options) != 6:
            raise ValueError(f"{self.item_id}: IMAVB shows six options A-F, got {len(self.options)}")
        if self.correct_answer not in LETTERS:
            raise ValueError(f"{self.item_id}: correct_answer {self.correct_answer!r} is not one of A-F")

    @property
    def correct_index(self) -> int:
        return LETTERS.index(self.correct_answer)

    @property
    def misleading(self) -> bool:
        return is_misleading(self.split)

    def load_media(self) -> tuple[Image.Image, ...]:
        if self.media is None:
            raise ValueError(f"{self.item_id}: no media loader")
        return self.media()
