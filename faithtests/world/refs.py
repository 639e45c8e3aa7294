"""Resolve a reference-world ``image_ref`` ("world/<kind>/<seed>/<index>") back to its image(s).

Each item generator registers its kind where it is defined (``register_image_kind`` /
``register_pair_kind`` at import of its module), so this module names no generator: a ref of a kind
whose module was never imported is an unknown kind.
"""

from __future__ import annotations

from collections.abc import Callable

from PIL import Image

from faithtests.world.ids import parse_image_ref

ImageOf = Callable[[int, int], Image.Image]
PairOf = Callable[[int, int], tuple[Image.Image, Image.Image]]

_IMAGES: dict[str, ImageOf] = {}
_PAIRS: dict[str, PairOf] = {}


def register_image_kind(kind: str, image: ImageOf) -> None:
    """``image(seed, index)`` renders item ``index`` of the single-image stream ``kind``."""
    _IMAGES[kind] = image


def register_pair_kind(kind: str, images: PairOf) -> None:
    """``images(seed, index)`` renders the two images of pair ``index`` of stream ``kind``."""
    _PAIRS[kind] = images


def known_kinds() -> tuple[str, ...]:
    return (*_IMAGES, *_PAIRS)


def resolve_image_ref(ref: str) -> Image.Image:
    """The image of a single-image item; a pair ref resolves with :func:`resolve_pair_ref`."""
    kind, seed, index = parse_image_ref(ref)
    if kind in _IMAGES:
        return _IMAGES[kind](seed, index)
    if kind in _PAIRS:
        raise ValueError(f"{ref!r} names an image pair; use resolve_pair_ref")
    raise ValueError(f"image ref {ref!r}: unknown kind {kind!r} (known: {', '.join(known_kinds())})")


def resolve_pair_ref(ref: str) -> tuple[Image.Image, Image.Image]:
    kind, seed, index = parse_image_ref(ref)
    if kind not in _PAIRS:
        raise ValueError(f"{ref!r} is not a pair ref (world/<pair kind>/<seed>/<index>; pair kinds: "
                         f"{', '.join(_PAIRS)})")
    return _PAIRS[kind](seed, index)
