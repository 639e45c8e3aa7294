"""Draw a scene with PIL: flat shapes, no anti-aliasing, so pixels are an exact function of the scene."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from faithtests.world.scene import CANVAS, SIZE_PX, Background, Scene, WorldObject

#: Object colours, chosen to stay distinct from each other and from all four backgrounds.
RGB: dict[str, tuple[int, int, int]] = {
    "red": (225, 30, 30),
    "green": (30, 185, 45),
    "blue": (40, 90, 255),
    "yellow": (250, 230, 20),
    "purple": (165, 45, 215),
}
#: Background base colours by (brightness, warmth).
BACKGROUND_RGB: dict[tuple[str, str], tuple[int, int, int]] = {
    ("dark", "warm"): (85, 45, 25),
    ("dark", "cool"): (25, 40, 80),
    ("bright", "warm"): (235, 200, 150),
    ("bright", "cool"): (175, 205, 235),
}


def background_rgb(bg: Background) -> tuple[int, int, int]:
    base = BACKGROUND_RGB[(bg.brightness, bg.warmth)]
    r, g, b = (min(255, max(0, c + j)) for c, j in zip(base, bg.jitter, strict=True))
    return (r, g, b)


def draw_object(draw: ImageDraw.ImageDraw, obj: WorldObject, fill: tuple[int, int, int] | int) -> None:
    """Draw one shape inside its bounding box (PIL boxes are inclusive, hence the -1)."""
    x0, y0, x1, y1 = obj.bbox
    xr, yb = x1 - 1, y1 - 1
    s = SIZE_PX[obj.size]
    if obj.shape == "circle":
        draw.ellipse((x0, y0, xr, yb), fill=fill)
    elif obj.shape == "square":
        draw.rectangle((x0 + 1, y0 + 1, xr - 1, yb - 1), fill=fill)  # inset: equal visual weight to a circle
    elif obj.shape == "triangle":
        draw.polygon([(x0, yb), (xr, yb), ((x0 + xr) / 2, y0)], fill=fill)
    elif obj.shape == "cross":
        t = max(3, s // 3)
        a = x0 + (s - t) // 2
        b = y0 + (s - t) // 2
        draw.rectangle((a, y0, a + t - 1, yb), fill=fill)
        draw.rectangle((x0, b, xr, b + t - 1), fill=fill)
    else:  # WorldObject validates shapes, so this is a programming error
        raise ValueError(f"unknown shape {obj.shape!r}")


def render(scene: Scene) -> Image.Image:
    """RGB image of side ``CANVAS``; same scene -> same pixels."""
    img = Image.new("RGB", (CANVAS, CANVAS), background_rgb(scene.background))
    draw = ImageDraw.Draw(img)
    for obj in scene.objects:
        draw_object(draw, obj, RGB[obj.colour])
    return img


def object_mask(obj: WorldObject) -> np.ndarray:
    """Boolean [CANVAS, CANVAS] mask of the pixels the shape covers."""
    img = Image.new("L", (CANVAS, CANVAS), 0)
    draw_object(ImageDraw.Draw(img), obj, 255)
    return np.asarray(img) > 0
