"""Typed, immutable records produced by the loaders; images are referenced, opened only on demand."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from PIL import Image, UnidentifiedImageError

from faithtests.data.images import to_rgb
from faithtests.data.load_errors import ImageLoadError, MissingImage

R = TypeVar("R")


@dataclass(frozen=True)
class ImageRef:
    """A lazily opened image file, optionally cropped to ``box`` = (left, top, right, bottom) pixels.

    ``load()`` opens and decodes the file each call and returns an 8-bit RGB image through
    :func:`faithtests.data.images.to_rgb` (16-bit scaled, alpha composited on white, palette expanded);
    a file that has gone missing, does not decode or has pixels without a defined range (float, 32-bit)
    raises :class:`ImageLoadError` naming the path.
    """

    path: Path
    box: tuple[float, float, float, float] | None = None

    def exists(self) -> bool:
        return self.path.is_file()

    def load(self) -> Image.Image:
        try:
            with Image.open(self.path) as im:
                im.load()
                rgb = to_rgb(im)
        except FileNotFoundError as e:
            raise ImageLoadError(self.path, "file not found") from e
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
            raise ImageLoadError(self.path, f"{type(e).__name__}: {e}") from e
        if self.box is not None:
            return rgb.crop(self.box)
        return rgb


@dataclass(frozen=True)
class LoadResult(Generic[R]):
    """Records whose images exist, and every record whose image is missing (reported, not dropped)."""

    source: Path
    records: tuple[R, ...]
    missing: tuple[MissingImage, ...]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[R]:
        return iter(self.records)

    @property
    def n_missing(self) -> int:
        return len(self.missing)


@dataclass(frozen=True)
class CaptionedImage:
    """An image with its human captions (COCO captions format: 5 per image)."""

    image_id: str
    image: ImageRef
    captions: tuple[str, ...]
    caption_ids: tuple[str, ...]


@dataclass(frozen=True)
class SugarCrepeItem:
    """One SugarCrepe item: a positive caption and its hard negative for one COCO image."""

    record_id: str
    split: str
    image: ImageRef
    caption: str
    negative_caption: str


@dataclass(frozen=True)
class AROItem:
    """VG-Relation / VG-Attribution item; ``image`` is cropped to the annotated bbox as ARO does.

    ``label`` is the relation name (VG-Relation) or "attr1_attr2" (VG-Attribution), ARO's slice key.
    """

    record_id: str
    subset: str
    image: ImageRef
    true_caption: str
    false_caption: str
    label: str


@dataclass(frozen=True)
class OrderItem:
    """COCO-Order: a caption and its word-order negatives (all ARO ``pre_caption``-normalised)."""

    record_id: str
    image: ImageRef
    caption: str
    negatives: tuple[str, ...]
    perturbations: tuple[str, ...]


@dataclass(frozen=True)
class WinogroundItem:
    """One Winoground example: two images, two captions; caption_k matches image_k."""

    record_id: str
    image_0: ImageRef
    image_1: ImageRef
    caption_0: str
    caption_1: str
    tag: str
    secondary_tag: str
    num_main_preds: int
    collapsed_tag: str
