"""LGIP JSONL loader: the small fixture (images from COCO-MINI) and malformed lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faithtests.data import DataError
from faithtests.protocols.lgip.jsonl import load_lgip_jsonl
from faithtests.protocols.lgip.records import LGIPFlip

FIXTURE = Path(__file__).parent / "lgip_small.jsonl"


def test_fixture_records_and_typed_flips(shared_data: Path) -> None:
    IMAGES = shared_data / "coco-mini/val2017"
    res = load_lgip_jsonl(FIXTURE, IMAGES)
    assert [r.record_id for r in res] == ["397133", "139"]
    assert len(res.missing) == 1 and res.missing[0].record_id == "1"
    assert res.missing[0].path == IMAGES / "does_not_exist.jpg"
    first = res.records[0]
    assert [c.index for c in first.captions] == [0, 1]
    assert first.captions[0].paraphrases == ("a photo of A man is in a kitchen making pizzas.",
                                             "In the image, a man is in a kitchen making pizzas.")
    assert first.captions[0].flips == ()
    # every flip once, typed by its diff_caps_<type> list (the public script counts each twice)
    assert first.captions[1].flips == (
        LGIPFlip("A blue bus near two dogs.", "color"),
        LGIPFlip("A red bus near four dogs.", "number"),
        LGIPFlip("A red train near two dogs.", "object"),
    )
    second = res.records[1]
    assert second.captions[0].flips == (LGIPFlip("A dog on a white couch.", "object"),
                                        LGIPFlip("A cat on a pink couch.", "color"))
    assert second.captions[0].combined == (
        LGIPFlip("a picture of A bird on a white couch.", "object", "a picture of A cat on a white couch."),
    )
    assert second.image.load().mode == "RGB"


def _line(tmp: Path, obj: dict[str, Any]) -> Path:
    p = tmp / "x.jsonl"
    p.write_text("\n" + json.dumps(obj) + "\n")  # the record is on line 2
    return p


BASE: dict[str, Any] = {"image_path": "a.jpg", "orig_captions": ["A red car.", "A dog."],
                        "same_caps": {"0": ["a photo of A red car."]},
                        "diff_caps": {"0": ["A blue car."]}, "diff_caps_color": {"0": ["A blue car."]}}


@pytest.mark.parametrize(
    ("patch", "match"),
    [
        ({"orig_captions": ["A red car.", " "]}, r"x.jsonl:2 field 'orig_captions': item 1: empty text"),
        ({"orig_captions": []}, r":2 field 'orig_captions': no captions"),
        ({"image_path": ""}, r":2 field 'image_path': empty text"),
        ({"same_caps": {"5": []}}, r":2 field 'same_caps': key '5' is not a caption index"),
        ({"same_caps": ["x"]}, r"field 'same_caps': expected an object"),
        ({"same_caps": {"0": ["ok text", ""]}}, r"field 'same_caps\[0\]': item 1: empty text"),
        ({"diff_caps_color": {"0": ["A green car."]}},
         r"field 'diff_caps_color': flip 'A green car\.' is missing"),
        ({"diff_caps": {"0": [{"flip_type": "color"}]}}, r"field 'text': missing"),
        ({"diff_caps": {"0": "A blue car."}}, r"field 'diff_caps\[0\]': expected a list"),
    ],
)
def test_malformed_lines_name_file_line_and_field(tmp_path: Path, patch: dict[str, Any], match: str) -> None:
    obj = {**BASE, **patch}
    path = _line(tmp_path, obj)
    with pytest.raises(DataError, match=match):
        load_lgip_jsonl(path, check_images=False)


def test_missing_field_and_bad_json(tmp_path: Path) -> None:
    obj = dict(BASE)
    obj.pop("orig_captions")
    with pytest.raises(DataError, match=r":2 field 'orig_captions': missing"):
        load_lgip_jsonl(_line(tmp_path, obj), check_images=False)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(BASE) + "\n{not json\n")
    with pytest.raises(DataError, match=r"bad.jsonl:2: invalid JSON"):
        load_lgip_jsonl(bad, check_images=False)
    arr = tmp_path / "arr.jsonl"
    arr.write_text("[1, 2]\n")
    with pytest.raises(DataError, match=r"arr.jsonl:1: expected a JSON object"):
        load_lgip_jsonl(arr, check_images=False)


def test_typed_lists_alone_and_untyped_flips(tmp_path: Path) -> None:
    only_typed = {k: v for k, v in BASE.items() if k != "diff_caps"}
    rec = load_lgip_jsonl(_line(tmp_path, only_typed), check_images=False).records[0]
    assert rec.captions[0].flips == (LGIPFlip("A blue car.", "color"),)
    untyped = {k: v for k, v in BASE.items() if k != "diff_caps_color"}
    rec = load_lgip_jsonl(_line(tmp_path, untyped), check_images=False).records[0]
    assert rec.captions[0].flips == (LGIPFlip("A blue car.", None),)
    assert rec.record_id == "line2" and rec.captions[1].paraphrases == ()
