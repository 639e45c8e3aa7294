"""The AC-Bench record: one image with its emotion y_img and at most one description with y_txt (§3, §4.1).

Subsets (§3.2, Fig. 2a; the short names of Table 2): ``aligned`` (EA), ``S-Adj`` / ``S-Opp`` (subjective
conflict, adjacent / opposite emotion, facts kept), ``O-Obj`` / ``O-Attr`` / ``O-Beh`` (objective conflict,
one factual axis distorted), and ``image-only`` for an image without a description (EmoSet items; the
image-only baseline of §4.1 / App. C.1). The emotion labels are the reference world's (EmoSet's eight,
in the order the App. C.3 prompts list them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from PIL import Image

from faithtests.protocols.acbench.stimuli import DESCRIPTION_SUBSETS
from faithtests.world.emotion import EMOTIONS

__all__ = [
    "CONFLICT_SUBSETS",
    "DESCRIBED_SUBSETS",
    "EMOTIONS",
    "SUBSETS",
    "WORLD_SUBSETS",
    "AcRecord",
    "ImageLoader",
    "Subset",
]

Subset = Literal["aligned", "S-Adj", "S-Opp", "O-Obj", "O-Attr", "O-Beh", "image-only"]
#: The subsets with a description, in the paper's order (Table 2 reads them left to right, Aln last).
DESCRIBED_SUBSETS: Final[tuple[Subset, ...]] = ("aligned", "S-Adj", "S-Opp", "O-Obj", "O-Attr", "O-Beh")
CONFLICT_SUBSETS: Final[tuple[Subset, ...]] = DESCRIBED_SUBSETS[1:]
SUBSETS: Final[tuple[Subset, ...]] = (*DESCRIBED_SUBSETS, "image-only")

#: The reference world's subset names (``stimuli.DESCRIPTION_SUBSETS``) → the paper's.
WORLD_SUBSETS: Final[dict[str, Subset]] = dict(zip(DESCRIPTION_SUBSETS, DESCRIBED_SUBSETS, strict=True))

#: Loads the record's image (an RGB PIL image): a file opened lazily, or a reference-world render.
ImageLoader = Callable[[], Image.Image]


@dataclass(frozen=True)
class AcRecord:
    """One AC-Bench instance x = (I, T) with y_img and y_txt (§4.1 "Task Formalization").

    ``stimulus_id`` names the image (the six descriptions of one image share it: the bootstrap unit);
    ``image`` is the image's path or world reference (for reports); ``loader`` opens it. An image-only
    record has neither description nor ``text_emotion``; an aligned record has y_txt = y_img and every
    conflict subset y_txt ≠ y_img (AC-Bench's generation targets the adjacent / opposite emotion, App. C.3),
    so ``conflict`` (membership of Q_conf, §4.1) agrees with the subset.
    """

    item_id: str
    stimulus_id: str
    subset: Subset
    image_emotion: str
    text_emotion: str | None
    description: str | None
    image: str
    source: str = "world"
    #: EmoSet attribute annotations (brightness, colorfulness, scene, object, ...), as strings
    attributes: tuple[tuple[str, str], ...] = ()
    loader: ImageLoader | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        where = f"AcRecord {self.item_id!r}"
        if self.subset not in SUBSETS:
            raise ValueError(f"{where}: unknown subset {self.subset!r}; expected one of {SUBSETS}")
        for name, label in (("image_emotion", self.image_emotion), ("text_emotion", self.text_emotion)):
            if label is not None and label not in EMOTIONS:
                raise ValueError(f"{where}: {name} {label!r} is not one of {EMOTIONS}")
        if self.subset == "image-only":
            if self.description is not None or self.text_emotion is not None:
                raise ValueError(f"{where}: an image-only record has no description and no text_emotion")
            return
        if self.description is None or not self.description.strip():
            raise ValueError(f"{where}: subset {self.subset} needs a non-empty description")
        if self.text_emotion is None:
            raise ValueError(f"{where}: subset {self.subset} needs text_emotion (y_txt)")
        if (self.subset == "aligned") == (self.text_emotion != self.image_emotion):
            raise ValueError(
                f"{where}: subset {self.subset} with y_img={self.image_emotion!r}, "
                f"y_txt={self.text_emotion!r} (aligned needs y_txt = y_img, a conflict subset y_txt != y_img)"
            )

    @property
    def conflict(self) -> bool:
        """x ∈ Q_conf, i.e. y_img ≠ y_txt (§4.1); False for image-only records (no y_txt)."""
        return self.text_emotion is not None and self.text_emotion != self.image_emotion

    def load_image(self) -> Image.Image:
        """The image; a file that has gone missing or does not decode raises ``ImageLoadError``
        (decoding is deferred to here: the loaders only check that the file exists)."""
        if self.loader is None:
            raise ValueError(f"{self.item_id}: no image loader")
        return self.loader()
