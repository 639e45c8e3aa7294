"""Scenes of the reference world: exact ground truth for every item type (docs/architecture.md, "The
reference world").

A scene is a background (brightness x warmth) and a list of flat shapes. Each shape has a shape name, a
colour, a size class, a position slot (left/right/top/bottom/center: five cells of a 3x3 grid) and an
exact pixel centre, so the ground truth is both symbolic (for captions, questions, emotions, edits) and
geometric (for pixel checks of edits). Captions talk about *groups*: shapes of equal shape, colour, size
and slot, counted ("two small red circles on the left").

Every random choice takes an explicit ``numpy.random.Generator``; nothing here reads global state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "cross")
COLOURS: tuple[str, ...] = ("red", "green", "blue", "yellow", "purple")
POSITIONS: tuple[str, ...] = ("left", "top", "center", "bottom", "right")  # caption order: reading order
SIZES: tuple[str, ...] = ("small", "large")
BRIGHTNESS: tuple[str, ...] = ("dark", "bright")
WARMTH: tuple[str, ...] = ("warm", "cool")

#: "calm" and "sharp" shape families drive the emotion rule (faithtests.world.emotion).
SHAPE_FAMILY: dict[str, str] = {"circle": "calm", "square": "calm", "triangle": "sharp", "cross": "sharp"}

CANVAS = 96  # rendered image side in pixels
CELL = CANVAS // 3  # a position slot is one cell of a 3x3 grid
SIZE_PX: dict[str, int] = {"small": 9, "large": 15}  # side of the shape's bounding box
#: (column, row) of each slot's cell; the four corner cells are never used, so "left" is unambiguous.
SLOT_CELL: dict[str, tuple[int, int]] = {
    "left": (0, 1), "top": (1, 0), "center": (1, 1), "bottom": (1, 2), "right": (2, 1),
}
#: Shapes sit in distinct quadrants (16 x 16 px) of their slot's cell, so they never overlap, and each
#: lies inside one 16 px patch of a patch-16 vision transformer: tiny reference models learn shapes fast.
MAX_PER_SLOT = 4
QUADRANT = CELL // 2


@dataclass(frozen=True)
class WorldObject:
    """One drawn shape. ``oid`` is stable across edits so an edit can name the object it changed."""

    oid: int
    shape: str
    colour: str
    size: str
    position: str
    cx: int  # pixel centre
    cy: int

    def __post_init__(self) -> None:
        for field_name, value, allowed in (
            ("shape", self.shape, SHAPES), ("colour", self.colour, COLOURS),
            ("size", self.size, SIZES), ("position", self.position, POSITIONS),
        ):
            if value not in allowed:
                raise ValueError(f"WorldObject.{field_name}={value!r} is not one of {allowed}")

    @property
    def bbox(self) -> tuple[int, int, int, int]:
        """Half-open pixel box (x0, y0, x1, y1) the shape is drawn inside."""
        s = SIZE_PX[self.size]
        x0, y0 = self.cx - s // 2, self.cy - s // 2
        return (x0, y0, x0 + s, y0 + s)

    @property
    def area(self) -> int:
        return SIZE_PX[self.size] ** 2


@dataclass(frozen=True)
class Background:
    brightness: str
    warmth: str
    jitter: tuple[int, int, int] = (0, 0, 0)  # small seeded RGB offset so backgrounds are not 4 constants

    def __post_init__(self) -> None:
        if self.brightness not in BRIGHTNESS:
            raise ValueError(f"Background.brightness={self.brightness!r} is not one of {BRIGHTNESS}")
        if self.warmth not in WARMTH:
            raise ValueError(f"Background.warmth={self.warmth!r} is not one of {WARMTH}")


@dataclass(frozen=True)
class Group:
    """Objects sharing shape, colour, size and slot: the unit a caption names ("two small red circles")."""

    shape: str
    colour: str
    size: str
    position: str
    count: int


@dataclass(frozen=True)
class Scene:
    objects: tuple[WorldObject, ...]
    background: Background

    def groups(self) -> tuple[Group, ...]:
        """Groups in caption order: slots in reading order, then first appearance within the slot."""
        counts: dict[tuple[str, str, str, str], int] = {}
        for o in sorted(self.objects, key=lambda o: (POSITIONS.index(o.position), o.oid)):
            key = (o.shape, o.colour, o.size, o.position)
            counts[key] = counts.get(key, 0) + 1
        return tuple(Group(s, c, z, p, n) for (s, c, z, p), n in counts.items())

    def objects_at(self, position: str) -> tuple[WorldObject, ...]:
        return tuple(o for o in self.objects if o.position == position)

    def free_quadrants(self, position: str) -> tuple[int, ...]:
        col, row = SLOT_CELL[position]
        used = {((o.cx - col * CELL) // QUADRANT) + 2 * ((o.cy - row * CELL) // QUADRANT)
                for o in self.objects_at(position)}
        return tuple(q for q in range(4) if q not in used)

    def without(self, oid: int) -> Scene:
        return replace(self, objects=tuple(o for o in self.objects if o.oid != oid))

    def with_object(self, obj: WorldObject) -> Scene:
        return replace(self, objects=tuple(o if o.oid != obj.oid else obj for o in self.objects))


def quadrant_centre(position: str, quadrant: int, size: str, rng: np.random.Generator) -> tuple[int, int]:
    col, row = SLOT_CELL[position]
    s = SIZE_PX[size]
    # Near-centred (+-1 px): at 9-15 px a shape is recognisable by a linear patch embedding only if it
    # does not wander around its patch; the box stays inside the quadrant with a 1 px gap.
    centre = (QUADRANT - s) // 2
    ox, oy = (min(QUADRANT - s - 1, max(0, centre + int(v))) for v in rng.integers(-1, 2, size=2))
    x0 = col * CELL + (quadrant % 2) * QUADRANT + ox
    y0 = row * CELL + (quadrant // 2) * QUADRANT + oy
    return x0 + s // 2, y0 + s // 2


def place_slot(
    specs: Sequence[tuple[str, str, str]], position: str, first_oid: int, rng: np.random.Generator
) -> list[WorldObject]:
    """Place (shape, colour, size) specs in distinct random quadrants of one slot's cell."""
    if not 1 <= len(specs) <= MAX_PER_SLOT:
        raise ValueError(f"a slot holds 1..{MAX_PER_SLOT} shapes, got {len(specs)}")
    quadrants = sorted(int(q) for q in rng.choice(4, size=len(specs), replace=False))
    out = []
    for k, ((shape, colour, size), q) in enumerate(zip(specs, quadrants, strict=True)):
        cx, cy = quadrant_centre(position, q, size, rng)
        out.append(WorldObject(first_oid + k, shape, colour, size, position, cx, cy))
    return out


def sample_background(rng: np.random.Generator, brightness: str | None = None,
                      warmth: str | None = None) -> Background:
    b = brightness if brightness is not None else str(rng.choice(BRIGHTNESS))
    w = warmth if warmth is not None else str(rng.choice(WARMTH))
    jitter = tuple(int(v) for v in rng.integers(-12, 13, size=3))
    return Background(b, w, (jitter[0], jitter[1], jitter[2]))


def sample_scene(
    rng: np.random.Generator,
    n_groups: tuple[int, int] = (1, 3),
    max_count: int = 3,
    shapes: Sequence[str] = SHAPES,
    unique_shape_colour: bool = True,
    background: Background | None = None,
    count_p: Sequence[float] | None = None,
) -> Scene:
    """A scene of ``n_groups`` (inclusive range) groups, each in its own slot.

    ``count_p`` gives P(count = 1 .. max_count) of each group; by default 1 is most likely.

    ``unique_shape_colour`` keeps every (shape, colour) pair to one group, so "the red circle" names one
    group unambiguously (questions and foil captions about one group rely on it).
    """
    lo, hi = n_groups
    if not 1 <= lo <= hi <= len(POSITIONS):
        raise ValueError(f"n_groups must satisfy 1 <= lo <= hi <= {len(POSITIONS)}, got {n_groups}")
    if not 1 <= max_count <= MAX_PER_SLOT:
        raise ValueError(f"max_count must be in 1..{MAX_PER_SLOT}, got {max_count}")
    k = int(rng.integers(lo, hi + 1))
    slots = [str(p) for p in rng.choice(POSITIONS, size=k, replace=False)]
    used: set[tuple[str, str]] = set()
    objects: list[WorldObject] = []
    # counts: 1 most often by default, so singular nouns (which flip vocabularies match) are common
    probs = np.array([0.6, 0.25, 0.15, 0.1][:max_count] if count_p is None else count_p, dtype=np.float64)
    if probs.shape != (max_count,) or (probs < 0).any() or probs.sum() <= 0:
        raise ValueError(f"count_p must hold {max_count} non-negative weights, got {count_p}")
    probs = probs / probs.sum()
    for slot in slots:
        while True:
            shape, colour = str(rng.choice(list(shapes))), str(rng.choice(COLOURS))
            if not unique_shape_colour or (shape, colour) not in used:
                break
        used.add((shape, colour))
        count = int(rng.choice(np.arange(1, max_count + 1), p=probs))
        size = str(rng.choice(SIZES))
        objects += place_slot([(shape, colour, size)] * count, slot, len(objects), rng)
    bg = background if background is not None else sample_background(rng)
    return Scene(tuple(objects), bg)


def sample_dense_scene(rng: np.random.Generator, n_objects: int, background: Background | None = None,
                       shapes: Sequence[str] = SHAPES) -> Scene:
    """``n_objects`` independent shapes spread over the slots (several per slot): difference-pair scenes."""
    if not 1 <= n_objects <= MAX_PER_SLOT * len(POSITIONS):
        raise ValueError(f"n_objects must be in 1..{MAX_PER_SLOT * len(POSITIONS)}, got {n_objects}")
    per_slot = dict.fromkeys(POSITIONS, 0)
    for _ in range(n_objects):
        open_slots = [p for p in POSITIONS if per_slot[p] < MAX_PER_SLOT]
        per_slot[str(rng.choice(open_slots))] += 1
    objects: list[WorldObject] = []
    for slot in POSITIONS:
        n = per_slot[slot]
        if n:
            specs = [(str(rng.choice(list(shapes))), str(rng.choice(COLOURS)),
                      "small" if n > 2 else str(rng.choice(SIZES))) for _ in range(n)]
            objects += place_slot(specs, slot, len(objects), rng)
    return Scene(tuple(objects), background if background is not None else sample_background(rng))
