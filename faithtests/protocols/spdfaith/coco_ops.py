"""Pixel operations behind the COCO edit pairs (:mod:`.coco_edits`): masks, recolour, remove, move.

Every operation takes and returns RGB ``uint8`` arrays (H, W, 3) and writes only inside the region it
reports, so the pair's ground-truth box is exact:

* :func:`recolour`: inside the object's mask, hue set to the target's, saturation clipped into the
  target's band, value (the luminance texture) kept up to a monotone lift of the darkest tones
  (V -> 90 + V * 165 / 255), without which a black object takes no visible hue: OpenCV 8-bit HSV.
* :func:`remove`: the mask dilated by ``DILATE_PX`` and filled by ``cv2.inpaint`` (Telea); the dilation
  swallows the anti-aliased rim that COCO polygons leave outside the object.
* :func:`move`: the object's hole filled as in :func:`remove`, then its original pixels pasted at
  ``offset``; :func:`free_offset` finds offsets whose shifted mask hits nothing occupied.

Colour names (:func:`colour_name`): per pixel, black (V < 50), white (S < 40, V > 190), gray (S < 40),
brown (hue 10-50°, V < 140), else the palette hue nearest on the circle. An object's name is the
commonest pixel name if it covers at least half the mask, else None (a striped shirt has no colour).

OpenCV is imported lazily (:func:`cv2_module`): only the COCO pairs need it (the ``spdfaith`` extra).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "DILATE_PX", "PALETTE", "box_of", "colour_name", "cv2_module", "dilate", "direction", "free_offset",
    "move", "pick_target", "polygon_mask", "recolour", "remove", "union_box",
]

RGB = npt.NDArray[np.uint8]
Mask = npt.NDArray[np.bool_]
Box = tuple[int, int, int, int]

#: Target colours: hue in degrees, saturation band (8-bit). Pink is a light red, hence its lower band.
PALETTE: Final[dict[str, tuple[float, tuple[int, int]]]] = {
    "red": (0.0, (160, 255)), "orange": (30.0, (160, 255)), "yellow": (58.0, (160, 255)),
    "green": (120.0, (160, 255)), "cyan": (185.0, (160, 255)), "blue": (225.0, (160, 255)),
    "purple": (275.0, (160, 255)), "pink": (330.0, (70, 140)),
}
#: Hue of the non-palette names a "before" colour can have, so the target keeps its distance from it.
_NAMED_HUES: Final[dict[str, float]] = {**{k: v[0] for k, v in PALETTE.items()}, "brown": 30.0}
DILATE_PX: Final = 4
INPAINT_RADIUS: Final = 5
MIN_HUE_DISTANCE: Final = 60.0  # degrees between the object's colour and its new one: visibly different
NAME_SHARE: Final = 0.5
V_FLOOR: Final = 90  # a recoloured pixel's value is mapped from 0..255 into V_FLOOR..255


def cv2_module() -> Any:
    """The ``cv2`` module, or an ImportError that says how to install it."""
    try:
        import cv2  # lazy: optional extra (faithtests[spdfaith])
    except ImportError as e:
        raise ImportError('SPD-Faith COCO edit pairs need OpenCV: pip install -e ".[spdfaith]" '
                          "(installs opencv-python-headless)") from e
    return cv2


def polygon_mask(polygons: tuple[tuple[float, ...], ...], height: int, width: int) -> Mask:
    """Rasterise COCO polygons ([x0, y0, x1, y1, ...] each) with 1/8 px vertex precision."""
    cv2 = cv2_module()
    out = np.zeros((height, width), np.uint8)
    pts = [np.round(np.asarray(p, np.float64).reshape(-1, 2) * 8).astype(np.int32) for p in polygons]
    cv2.fillPoly(out, pts, 1, lineType=cv2.LINE_8, shift=3)
    return out.astype(bool)


def dilate(mask: Mask, px: int = DILATE_PX) -> Mask:
    cv2 = cv2_module()
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * px + 1, 2 * px + 1))
    return np.asarray(cv2.dilate(mask.astype(np.uint8), kernel), np.uint8).astype(bool)


def box_of(mask: Mask) -> Box:
    """Half-open pixel box (x0, y0, x1, y1) of a non-empty mask."""
    ys, xs = np.nonzero(mask)
    if ys.size == 0:
        raise ValueError("empty mask has no box")
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def union_box(a: Box, b: Box) -> Box:
    return min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])


def _hsv(pixels: RGB) -> npt.NDArray[np.uint8]:
    cv2 = cv2_module()
    return np.asarray(cv2.cvtColor(pixels, cv2.COLOR_RGB2HSV), np.uint8)


def colour_name(pixels: RGB) -> str | None:
    """The dominant colour name of (N, 3) RGB pixels (module doc), or None."""
    if pixels.shape[0] == 0:
        return None
    hsv = _hsv(pixels.reshape(-1, 1, 3)).reshape(-1, 3).astype(np.int32)
    h_deg, s, v = hsv[:, 0] * 2.0, hsv[:, 1], hsv[:, 2]
    names = list(PALETTE)
    hues = np.array([PALETTE[n][0] for n in names])
    dist = np.abs((h_deg[:, None] - hues[None, :] + 180.0) % 360.0 - 180.0)
    label = np.array(names, dtype=object)[dist.argmin(axis=1)]
    label[(h_deg >= 10) & (h_deg < 50) & (v < 140)] = "brown"
    label[s < 40] = "gray"
    label[(s < 40) & (v > 190)] = "white"
    label[v < 50] = "black"
    values, counts = np.unique(label.astype(str), return_counts=True)
    best = int(counts.argmax())
    return str(values[best]) if counts[best] >= NAME_SHARE * label.size else None


def pick_target(before: str | None, order: tuple[str, ...]) -> str:
    """The first colour of ``order`` (a seeded palette permutation) far enough from ``before``'s hue."""
    if before not in _NAMED_HUES:
        return order[0]
    h0 = _NAMED_HUES[before]
    for name in order:
        if abs((PALETTE[name][0] - h0 + 180.0) % 360.0 - 180.0) >= MIN_HUE_DISTANCE:
            return name
    raise ValueError(f"no palette colour is {MIN_HUE_DISTANCE}° from {before!r} in {order}")


def recolour(image: RGB, mask: Mask, target: str) -> RGB:
    """``image`` with the masked pixels turned ``target`` (hue set, saturation banded, value lifted)."""
    cv2 = cv2_module()
    hue, (s_lo, s_hi) = PALETTE[target]
    x0, y0, x1, y1 = box_of(mask)
    crop, m = image[y0:y1, x0:x1], mask[y0:y1, x0:x1]
    hsv = _hsv(np.ascontiguousarray(crop))
    hsv[..., 0] = round(hue / 2.0) % 180
    hsv[..., 1] = np.clip(hsv[..., 1], s_lo, s_hi)
    # Lift the darkest tones (monotone, so the texture stays): a black object at V < 50 shows no hue.
    hsv[..., 2] = (V_FLOOR + hsv[..., 2].astype(np.float64) * (255 - V_FLOOR) / 255).round().astype(np.uint8)
    new = np.asarray(cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB), np.uint8)
    out = image.copy()
    out[y0:y1, x0:x1][m] = new[m]
    return out


def _inpaint(image: RGB, region: Mask) -> RGB:
    cv2 = cv2_module()
    filled = np.asarray(cv2.inpaint(image, region.astype(np.uint8), INPAINT_RADIUS, cv2.INPAINT_TELEA),
                        np.uint8)
    out = image.copy()
    out[region] = filled[region]  # inpaint leaves the rest alone; this makes it a guarantee
    return out


def remove(image: RGB, mask: Mask) -> tuple[RGB, Mask]:
    """(``image`` with the object inpainted away, the dilated region that was filled)."""
    region = dilate(mask)
    return _inpaint(image, region), region


def move(image: RGB, mask: Mask, offset: tuple[int, int]) -> tuple[RGB, Mask, Mask]:
    """(``image`` with the object moved by ``offset`` = (dx, dy), the filled hole, the new mask).

    The pasted pixels are the object's pixels in ``image``, so they match it exactly at the new place."""
    dx, dy = offset
    out, hole = remove(image, mask)
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    if ys.size == 0 or min(ys.min() + dy, xs.min() + dx) < 0 or ys.max() + dy >= h or xs.max() + dx >= w:
        raise ValueError(f"offset {offset} moves the object out of the {w}x{h} image")
    out[ys + dy, xs + dx] = image[ys, xs]
    new = np.zeros_like(mask)
    new[ys + dy, xs + dx] = True
    return out, hole, new


def free_offset(mask: Mask, occupied: Mask, rng: np.random.Generator) -> tuple[int, int] | None:
    """A seeded (dx, dy) that keeps the shifted mask inside the image and off ``occupied``, or None.

    All placements are tested at once: the overlap count of every placement is the cross-correlation
    of ``occupied`` with the mask's crop, computed by FFT (exact after rounding: counts are integers)."""
    x0, y0, x1, y1 = box_of(mask)
    crop = mask[y0:y1, x0:x1].astype(np.float64)
    mh, mw = crop.shape
    h, w = mask.shape
    if mh > h or mw > w:
        return None
    occ = np.fft.rfft2(occupied.astype(np.float64))
    ker = np.fft.rfft2(crop[::-1, ::-1], s=(h, w))
    # Circular convolution wraps only into the first mh-1 rows / mw-1 columns: the valid part is exact.
    hits = np.fft.irfft2(occ * ker, s=(h, w))[mh - 1:, mw - 1:]
    ty, tx = np.nonzero(hits < 0.5)
    if ty.size == 0:
        return None
    k = int(rng.integers(ty.size))
    return int(tx[k]) - x0, int(ty[k]) - y0


def direction(offset: tuple[int, int]) -> str:
    """The dominant direction of a shift (image y grows downwards)."""
    dx, dy = offset
    if abs(dx) >= abs(dy):
        return "right" if dx > 0 else "left"
    return "down" if dy > 0 else "up"
