"""Exemplar pictures of an SPD-Faith pair: both images with every ground-truth edit's box outlined, so a
reader of the scorecard sees where the differences are before reading what the model claimed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from PIL import Image, ImageDraw

from faithtests.protocols.spdfaith.records import EditTruth

#: Outline colour per edit type (color / remove / position), readable on photos and on the world's grey.
OUTLINE: Final[dict[str, tuple[int, int, int]]] = {
    "color": (255, 0, 255), "remove": (255, 40, 40), "position": (0, 200, 255)}


def outlined(image: Image.Image, edits: Sequence[EditTruth]) -> Image.Image:
    """A copy of ``image`` with each edit's box (``EditTruth.box``, pixels of the original) outlined in
    its type's colour; edits without a box are left unmarked (the exemplar's text still lists them)."""
    out = image.convert("RGB").copy()
    draw = ImageDraw.Draw(out)
    width = max(1, round(min(out.size) / 96))
    for e in edits:
        if e.box is not None:
            x0, y0, x1, y1 = e.box
            draw.rectangle((x0, y0, max(x0, x1 - 1), max(y0, y1 - 1)), outline=OUTLINE[e.type], width=width)
    return out


def edits_text(edits: Sequence[EditTruth]) -> str:
    """The ground truth in words: "color car (-> blue); remove person"."""
    if not edits:
        return "none (identical pair)"
    return "; ".join(f"{e.type} {e.category}" + (f" (-> {e.attribute})" if e.attribute else "")
                     for e in edits)
