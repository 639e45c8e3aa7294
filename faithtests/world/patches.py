"""Per-patch ground truth of a scene on the 16 px patch grid of a patch-16 vision transformer.

The world puts every shape inside one 16 px patch (``scene.QUADRANT``), so each patch holds at most one
object and its colour, shape and size are exact per-patch labels.
"""

from __future__ import annotations

from faithtests.world.scene import CANVAS, CELL, COLOURS, POSITIONS, SHAPES, SIZES, SLOT_CELL, Scene

PATCH = 16


def _patch_slots() -> list[int]:
    """Slot class of every patch (row-major): 1 + POSITIONS index, 0 for the unused corner cells."""
    side = CANVAS // PATCH
    cell_of = {cell: POSITIONS.index(p) + 1 for p, cell in SLOT_CELL.items()}
    cells = [((k % side) * PATCH // CELL, (k // side) * PATCH // CELL) for k in range(side * side)]
    return [cell_of.get(c, 0) for c in cells]


PATCH_SLOTS = _patch_slots()


def patch_targets(scene: Scene, slots: bool = False) -> tuple[list[int], ...]:
    """Per 16 px patch (row-major): colour, shape, size class of the object inside it (0 = empty), and
    with ``slots`` the patch's position slot (a function of the patch index: keeps position readable)."""
    side = CANVAS // PATCH
    colour, shape, size = [0] * side * side, [0] * side * side, [0] * side * side
    for o in scene.objects:
        k = (o.cy // PATCH) * side + (o.cx // PATCH)
        colour[k] = COLOURS.index(o.colour) + 1
        shape[k] = SHAPES.index(o.shape) + 1
        size[k] = SIZES.index(o.size) + 1
    return (colour, shape, size, list(PATCH_SLOTS)) if slots else (colour, shape, size)


def patch_diff(a: Scene, b: Scene) -> tuple[bool, ...]:
    """Per patch (row-major): whether ``b``'s object there differs from ``a``'s (colour, shape or size)."""
    before, after = patch_targets(a), patch_targets(b)
    return tuple(x != y for x, y in zip(zip(*before, strict=True), zip(*after, strict=True), strict=True))
