"""COCO captions loader on COCO-MINI (read-only) and malformed copies in tmp dirs; lazy images."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from faithtests.data import (
    DataError,
    ImageLoadError,
    ImageRef,
    load_coco_captions,
    load_coco_dir,
)


@pytest.fixture
def coco_mini(shared_data: Path) -> Path:
    return shared_data / "coco-mini"


def _jpeg(path: Path, size: tuple[int, int] = (64, 48)) -> Path:
    """A real JPEG written here, so malformed-record tests need no shared data."""
    from PIL import Image

    Image.new("RGB", size, (120, 80, 40)).save(path, format="JPEG")
    return path


def test_coco_mini_loads_every_image_with_five_captions(coco_mini: Path) -> None:
    res = load_coco_dir(coco_mini)
    assert len(res) == 79 and res.missing == ()
    assert all(len(r.captions) == 5 and len(r.caption_ids) == 5 for r in res)
    first = res.records[0]
    assert first.image_id == "397133" and first.image.path.name == "000000397133.jpg"
    assert all(c == c.strip() and c for r in res for c in r.captions)
    # file order of annotations is kept per image
    raw = json.loads((coco_mini / "annotations/captions_val2017.json").read_text())
    expected = [a["caption"].strip() for a in raw["annotations"] if a["image_id"] == 397133]
    assert list(first.captions) == expected


def test_image_is_opened_lazily_as_rgb(coco_mini: Path) -> None:
    # the image dir is inferred from the COCO layout
    rec = load_coco_captions(coco_mini / "annotations/captions_val2017.json").records[0]
    im = rec.image.load()
    assert im.mode == "RGB" and im.size == (640, 427)


def _write(tmp: Path, data: Any) -> Path:
    p = tmp / "annotations" / "captions_val2017.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data))
    return p


def _small(tmp: Path) -> dict[str, Any]:
    (tmp / "val2017").mkdir(parents=True, exist_ok=True)
    _jpeg(tmp / "val2017/a.jpg")
    return {
        "images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "gone.jpg"}],
        "annotations": [{"id": 10, "image_id": 1, "caption": "A room. "},
                        {"id": 11, "image_id": 2, "caption": "A dog."}],
    }


def test_missing_image_is_reported_not_dropped(tmp_path: Path) -> None:
    res = load_coco_captions(_write(tmp_path, _small(tmp_path)))
    assert [r.image_id for r in res] == ["1"]
    assert len(res.missing) == 1
    assert res.missing[0].record_id == "2" and res.missing[0].path == tmp_path / "val2017/gone.jpg"
    everything = load_coco_captions(_write(tmp_path, _small(tmp_path)), check_images=False)
    assert len(everything) == 2 and everything.missing == ()


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d["annotations"][1].update(caption="   "), r"\[annotations\[1\]\] field 'caption': empty"),
        (lambda d: d["annotations"][0].pop("caption"), r"\[annotations\[0\]\] field 'caption': missing"),
        (lambda d: d["annotations"][0].update(image_id=99), r"field 'image_id': caption for unknown image"),
        (lambda d: d["images"][1].update(id=1), r"\[images\[1\]\] field 'id': duplicate"),
        (lambda d: d["images"].append({"id": 3, "file_name": "c.jpg"}), r"\[images\[2\]\].*no caption"),
        (lambda d: d["images"][0].update(file_name=7), r"field 'file_name': expected a string"),
        (lambda d: d.pop("images"), r"field 'images': missing"),
    ],
)
def test_malformed_records_name_file_key_and_field(tmp_path: Path, mutate: Any, match: str) -> None:
    data = _small(tmp_path)
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(DataError, match=match) as info:
        load_coco_captions(path)
    assert str(path) in str(info.value)


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "captions_val2017.json"
    path.write_text('{"images": [\n  {"id": 1,}\n]}')
    with pytest.raises(DataError, match=r"captions_val2017.json:2: invalid JSON"):
        load_coco_captions(path, tmp_path)


def test_image_dir_cannot_be_guessed_from_an_odd_name(tmp_path: Path) -> None:
    path = tmp_path / "caps.json"
    path.write_text("{}")
    with pytest.raises(DataError, match="pass image_dir"):
        load_coco_captions(path)


def test_corrupt_image_fails_at_load_naming_the_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not a jpeg at all")
    ref = ImageRef(bad)
    assert ref.exists()
    with pytest.raises(ImageLoadError, match=str(bad)):
        ref.load()
    gone = ImageRef(tmp_path / "gone.png")
    with pytest.raises(ImageLoadError, match="file not found"):
        gone.load()


def test_truncated_image_fails_at_load(tmp_path: Path) -> None:
    src = _jpeg(tmp_path / "whole.jpg", (640, 427))
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(src.read_bytes()[:2000])
    with pytest.raises(ImageLoadError, match=r"cut\.jpg"):
        ImageRef(cut).load()


def test_crop_box(tmp_path: Path) -> None:
    p = tmp_path / "im.png"
    im = Image.new("RGB", (20, 10), (0, 0, 0))
    im.putpixel((5, 2), (255, 0, 0))
    im.save(p)
    out = ImageRef(p, box=(5, 2, 9, 6)).load()
    assert out.size == (4, 4) and out.getpixel((0, 0)) == (255, 0, 0)
