"""Resolve a reference-world ``image_ref`` ("world/<kind>/<seed>/<index>") back to its image(s)."""

from __future__ import annotations

from PIL import Image

from faithtests.world.edits import pair_item
from faithtests.world.ids import parse_image_ref
from faithtests.world.items import caption_scene, foil_scene
from faithtests.world.mood import mood_item
from faithtests.world.premise import premise_item
from faithtests.world.render import render

KINDS: tuple[str, ...] = ("caption", "s3e", "mood", "premise", "pair")


def resolve_image_ref(ref: str) -> Image.Image:
    """The image of a single-image item; a pair ref resolves with :func:`resolve_pair_ref`."""
    kind, seed, index = parse_image_ref(ref)
    if kind == "caption":
        return render(caption_scene(seed, index))
    if kind == "s3e":
        return render(foil_scene(seed, index)[0])
    if kind == "mood":
        return mood_item(seed, index).image()
    if kind == "premise":
        return render(premise_item(seed, index).scene)
    if kind == "pair":
        raise ValueError(f"{ref!r} names an image pair; use resolve_pair_ref")
    raise ValueError(f"image ref {ref!r}: unknown kind {kind!r} (known: {', '.join(KINDS)})")


def resolve_pair_ref(ref: str) -> tuple[Image.Image, Image.Image]:
    kind, seed, index = parse_image_ref(ref)
    if kind != "pair":
        raise ValueError(f"{ref!r} is not a pair ref (world/pair/<seed>/<index>)")
    return pair_item(seed, index).images()
