"""The SPD-Faith record: an image pair (original, edited) with its ground-truth atomic edits (§3, App. A).

Each edit is one of three types on one object (``color`` / ``remove`` / ``position``) with the object's
category (a world shape or a COCO category name). ``attribute`` is what the edit changed the object to
when the source knows it (the new colour name; for ``position`` the new place, e.g. "top" in the world
or "left" for a COCO object shifted leftwards); the deterministic judge compares it when a claim states
one (App. B.2, DRF's "Attribute Error"). Subsets: ``single`` (one edit, easy / medium / hard),
``multi`` (2-5 edits), ``identical`` (no edit: a control for the symmetric questions, not part of the
paper's benchmark).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from PIL import Image

__all__ = ["DIFFICULTIES", "EDIT_TYPES", "SUBSETS", "DiffRecord", "EditTruth", "PairLoader", "Subset"]

EDIT_TYPES: Final[tuple[str, ...]] = ("color", "remove", "position")
DIFFICULTIES: Final[tuple[str, ...]] = ("easy", "medium", "hard")
Subset = Literal["single", "multi", "identical"]
SUBSETS: Final[tuple[Subset, ...]] = ("single", "multi", "identical")

#: Loads the pair (original, edited) as RGB PIL images: files opened lazily, or world renders.
PairLoader = Callable[[], tuple[Image.Image, Image.Image]]


@dataclass(frozen=True)
class EditTruth:
    """One ground-truth edit. ``box`` is (x0, y0, x1, y1) in pixels of the original image, the region the
    edit touched (for position edits: the union of where the object was and where it went), used to
    outline the edit in exemplars; ``before`` is the object's colour / place before the edit if known."""

    type: str
    category: str
    attribute: str | None = None
    before: str | None = None
    box: tuple[int, int, int, int] | None = None

    def __post_init__(self) -> None:
        if self.type not in EDIT_TYPES:
            raise ValueError(f"unknown edit type {self.type!r}; expected one of {EDIT_TYPES}")
        if not self.category.strip():
            raise ValueError("an edit needs a category")


@dataclass(frozen=True)
class DiffRecord:
    """One SPD-Faith item. ``stimulus_id`` names the original image (pairs made from one photo share it:
    the bootstrap unit); ``source`` is ``world``, ``coco`` or ``spdfaith`` (a local copy of the public
    bench); ``ref`` names the images for reports; ``n_objects`` is the original's object count (density,
    App. A) when known; ``question`` is the bench record's own question when it has one."""

    item_id: str
    stimulus_id: str
    subset: Subset
    difficulty: str | None
    edits: tuple[EditTruth, ...]
    source: str
    ref: str
    loader: PairLoader
    n_objects: int | None = None
    question: str | None = None

    def __post_init__(self) -> None:
        if self.subset not in SUBSETS:
            raise ValueError(f"unknown subset {self.subset!r}; expected one of {SUBSETS}")
        if self.difficulty is not None and self.difficulty not in DIFFICULTIES:
            raise ValueError(f"unknown difficulty {self.difficulty!r}; expected one of {DIFFICULTIES}")
        want = {"single": (1, 1), "multi": (2, 5), "identical": (0, 0)}[self.subset]
        if not want[0] <= len(self.edits) <= want[1]:
            raise ValueError(f"{self.item_id}: a {self.subset} pair has {want[0]}-{want[1]} edits, "
                             f"got {len(self.edits)}")

    @property
    def m(self) -> int:
        """The ground-truth number of differences (App. B.2's m)."""
        return len(self.edits)

    def images(self) -> tuple[Image.Image, Image.Image]:
        return self.loader()
