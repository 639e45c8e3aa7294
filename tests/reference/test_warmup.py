"""Warm-up targets: hand-checked patch labels and attribute bags."""

from __future__ import annotations

from faithtests.reference.warmup import BAG_SIZE, bag_targets
from faithtests.world.patches import PATCH_SLOTS, patch_targets
from faithtests.world.scene import Background, Scene, WorldObject


def _scene() -> Scene:
    # a large red circle in the left slot's top-left quadrant: box (0..15, 32..47) -> patch row 2, col 0
    obj = WorldObject(0, "circle", "red", "large", "left", cx=7, cy=39)
    return Scene((obj,), Background("dark", "warm"))


def test_patch_targets_put_the_object_in_its_patch() -> None:
    colour, shape, size, slots = patch_targets(_scene(), slots=True)
    k = 2 * 6 + 0
    assert (colour[k], shape[k], size[k]) == (1, 1, 2)  # red, circle, large (1-based; 0 = empty)
    assert sum(colour) == 1 and sum(shape) == 1 and sum(size) == 2
    assert slots == PATCH_SLOTS


def test_patch_slots_grid() -> None:
    rows = [PATCH_SLOTS[r * 6:(r + 1) * 6] for r in range(6)]
    assert rows[0] == [0, 0, 2, 2, 0, 0]  # top cell
    assert rows[2] == [1, 1, 3, 3, 5, 5]  # left, center, right cells
    assert rows[5] == [0, 0, 4, 4, 0, 0]  # bottom cell


def test_bag_targets_and_colour_mask() -> None:
    feats, mask = bag_targets(_scene(), colour=False)
    assert len(feats) == len(mask) == BAG_SIZE == 4 + 5 + 20 + 20 + 25 + 25
    assert feats[:4] == [1.0, 0.0, 0.0, 0.0]  # circle present
    assert feats[4:9] == [1.0, 0.0, 0.0, 0.0, 0.0]  # red present
    assert mask[4:29] == [0.0] * 25 and mask[:4] == [1.0] * 4  # colour features hidden from the text tower
    assert sum(feats) == 1 + 1 + 1 + 1 + 1 + 5  # shape, colour, pair, slot x shape, slot x colour, 5 counts
