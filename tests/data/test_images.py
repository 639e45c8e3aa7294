"""``faithtests.data.images.to_rgb`` through ``ImageRef.load``: every pixel mode a user's files bring is
read correctly (16-bit scaled, alpha composited on white, palette expanded) or refused naming the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from faithtests.data.images import BACKGROUND, to_rgb
from faithtests.data.load_errors import ImageLoadError
from faithtests.data.loaded import ImageRef


def _load(tmp_path: Path, im: Image.Image, name: str = "x.png") -> np.ndarray:
    path = tmp_path / name
    im.save(path)
    return np.asarray(ImageRef(path).load())


def test_16bit_greyscale_png_is_scaled_not_clipped(tmp_path: Path) -> None:
    values = np.array([[0, 257, 32896], [65535, 1000, 65280]], dtype=np.uint16)
    out = _load(tmp_path, Image.fromarray(values))
    assert Image.open(tmp_path / "x.png").mode == "I;16"  # what PIL gives a 16-bit PNG
    expected = np.array([[0, 1, 128], [255, 4, 254]], dtype=np.uint8)  # round(v * 255 / 65535)
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out[..., 0], expected)
    np.testing.assert_array_equal(out[..., 0], out[..., 2])


def test_16bit_photo_is_not_mostly_white(tmp_path: Path) -> None:
    """The bug: PIL's convert("RGB") clips 16-bit values at 255 and a mid-grey photo turns white."""
    ramp = np.tile(np.linspace(0, 65535, 64), (64, 1)).astype(np.uint16)
    out = _load(tmp_path, Image.fromarray(ramp))
    assert (out == 255).mean() < 0.05
    assert abs(float(out.mean()) - 127.5) < 1.0


def test_rgba_is_composited_on_white(tmp_path: Path) -> None:
    rgba = np.zeros((1, 3, 4), dtype=np.uint8)
    rgba[0, 0] = (255, 0, 0, 255)  # opaque red
    rgba[0, 1] = (0, 0, 0, 0)  # fully transparent black: shows the background
    rgba[0, 2] = (0, 0, 255, 128)  # half-transparent blue over white
    out = _load(tmp_path, Image.fromarray(rgba, mode="RGBA"))
    assert BACKGROUND == (255, 255, 255)
    assert out[0, 0].tolist() == [255, 0, 0]
    assert out[0, 1].tolist() == [255, 255, 255]
    assert out[0, 2].tolist() == [127, 127, 255]


def test_greyscale_with_alpha_is_composited(tmp_path: Path) -> None:
    la = Image.fromarray(np.array([[[0, 0], [0, 255]]], dtype=np.uint8), mode="LA")
    out = _load(tmp_path, la)
    assert out[0].tolist() == [[255, 255, 255], [0, 0, 0]]


def test_palette_with_transparency_is_expanded_and_composited(tmp_path: Path) -> None:
    im = Image.new("P", (2, 1))
    im.putpalette([0, 0, 0, 0, 200, 0] + [0] * (256 * 3 - 6))
    im.putpixel((0, 0), 0)
    im.putpixel((1, 0), 1)
    im.info["transparency"] = 0  # palette entry 0 is transparent
    out = _load(tmp_path, im)
    assert out[0].tolist() == [[255, 255, 255], [0, 200, 0]]


def test_opaque_palette_is_expanded(tmp_path: Path) -> None:
    im = Image.new("P", (1, 1))
    im.putpalette([10, 20, 30] + [0] * (256 * 3 - 3))
    assert _load(tmp_path, im, "p.gif")[0, 0].tolist() == [10, 20, 30]


def test_8bit_rgb_and_greyscale_unchanged(tmp_path: Path) -> None:
    rgb = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    np.testing.assert_array_equal(_load(tmp_path, Image.fromarray(rgb)), rgb)
    grey = np.array([[0, 77], [200, 255]], dtype=np.uint8)
    np.testing.assert_array_equal(_load(tmp_path, Image.fromarray(grey), "g.png")[..., 1], grey)


def test_float_pixels_are_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "f.tif"
    Image.fromarray(np.ones((2, 2), dtype=np.float32)).save(path)
    with pytest.raises(ImageLoadError) as err:
        ImageRef(path).load()
    assert str(err.value) == (f"cannot load image {path}: ValueError: float pixels (mode F) have no defined "
                              "range; save the image as 8- or 16-bit")


def test_32bit_integer_tiff_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "i.tif"
    Image.fromarray(np.full((2, 2), 70000, dtype=np.int32)).save(path)
    with pytest.raises(ImageLoadError, match=r"32-bit integer pixels \(mode I\) have no defined range"):
        ImageRef(path).load()


def test_to_rgb_takes_another_background() -> None:
    im = Image.new("RGBA", (1, 1), (0, 0, 0, 0))
    assert to_rgb(im, background=(0, 10, 20)).getpixel((0, 0)) == (0, 10, 20)


def test_crop_box_applies_after_conversion(tmp_path: Path) -> None:
    path = tmp_path / "c.png"
    Image.fromarray(np.array([[0, 65535]], dtype=np.uint16)).save(path)
    assert np.asarray(ImageRef(path, box=(1, 0, 2, 1)).load()).tolist() == [[[255, 255, 255]]]
