"""Per-item random streams and image references of the reference world.

Every item ``i`` of a generator kind draws from its own stream ``default_rng([seed, crc32(kind), i])``,
so an item depends only on (kind, seed, index): the first 10 of 1,000 items equal the 10 items of a run
of 10, and an ``image_ref`` ("world/<kind>/<seed>/<index>") names its scene without storing pixels.
"""

from __future__ import annotations

import zlib

import numpy as np


def item_rng(kind: str, seed: int, index: int) -> np.random.Generator:
    """The generator of one item: independent of how many items are drawn."""
    if index < 0 or seed < 0:
        raise ValueError(f"seed and index must be >= 0, got seed={seed}, index={index}")
    return np.random.default_rng([seed, zlib.crc32(kind.encode()), index])


def image_ref(kind: str, seed: int, index: int) -> str:
    return f"world/{kind}/{seed}/{index}"


def parse_image_ref(ref: str) -> tuple[str, int, int]:
    """(kind, seed, index) of an image ref; ValueError naming the ref if it is not one."""
    parts = ref.split("/")
    if len(parts) != 4 or parts[0] != "world" or not parts[2].isdigit() or not parts[3].isdigit():
        raise ValueError(f"not a reference-world image ref: {ref!r} (expected world/<kind>/<seed>/<index>)")
    return parts[1], int(parts[2]), int(parts[3])
