"""The one conversion of a decoded user image to the 8-bit RGB every model sees (:func:`to_rgb`).

PIL's own ``convert("RGB")`` is wrong for several modes a real data set contains:

- 16-bit greyscale (``I;16``/``I;16B``/``I;16L``; a 16-bit PNG opened as ``I``): PIL clips each value to
  255, so a normal 16-bit photo comes out almost all white. We scale the full 0..65535 range to 0..255
  (``round(v * 255 / 65535)``). 16-bit RGB(A) PNGs are reduced to 8 bits by PIL's decoder already.
- transparency (``RGBA``, ``LA``, ``PA``, a palette or RGB/L image with a ``transparency`` entry): PIL
  drops the alpha channel, so whatever colour the transparent pixels happen to store shows. We composite
  over :data:`BACKGROUND` (opaque white, what a viewer on a white page shows).
- palette (``P``) images are expanded through their palette (with their transparency, above).
- 32-bit integer (``I`` from anything but PNG) and float (``F``) pixels have no defined range: they are
  refused with :class:`ValueError` (the caller names the file) rather than guessed.

Every other mode (``1``, ``L``, ``RGB``, ``CMYK``, ``YCbCr``, ...) goes through PIL's conversion.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from PIL import Image

#: The colour transparent pixels are composited over (opaque white).
BACKGROUND: Final[tuple[int, int, int]] = (255, 255, 255)
_SIXTEEN_BIT: Final = frozenset({"I;16", "I;16B", "I;16L", "I;16N"})
_ALPHA: Final = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})


def _from_16bit(im: Image.Image) -> Image.Image:
    values = np.asarray(im, dtype=np.float64)
    if values.size and (values.min() < 0 or values.max() > 65535):
        raise ValueError(f"mode {im.mode} pixels outside 0..65535 (min {values.min():g}, "
                         f"max {values.max():g})")
    grey = np.rint(values * (255.0 / 65535.0)).astype(np.uint8)
    return Image.fromarray(grey, mode="L").convert("RGB")


def _has_alpha(im: Image.Image) -> bool:
    return im.mode in _ALPHA or (im.mode in ("P", "L", "RGB") and "transparency" in im.info)


def to_rgb(im: Image.Image, background: tuple[int, int, int] = BACKGROUND) -> Image.Image:
    """``im`` as 8-bit RGB: 16-bit scaled, alpha composited over ``background``, palette expanded (module
    doc); ValueError for pixel modes without a defined range (``F``, non-PNG ``I``)."""
    mode = im.mode
    if mode in _SIXTEEN_BIT or (mode == "I" and im.format == "PNG"):
        return _from_16bit(im)
    if mode in ("I", "F"):
        kind = "float" if mode == "F" else "32-bit integer"
        raise ValueError(f"{kind} pixels (mode {mode}) have no defined range; save the image as 8- or "
                         "16-bit")
    if _has_alpha(im):
        rgba = im.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, (*background, 255))
        return Image.alpha_composite(canvas, rgba).convert("RGB")
    if mode == "RGB":
        return im.copy()
    return im.convert("RGB")
