"""SugarCrepe (real shared data), ARO VG-Relation/VG-Attribution/COCO-Order and Winoground loaders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from faithtests.data import (
    SUGARCREPE_SPLITS,
    DataError,
    load_coco_order,
    load_sugarcrepe,
    load_sugarcrepe_split,
    load_vg_attribution,
    load_vg_relation,
    load_winoground,
)


def test_sugarcrepe_all_splits_every_item_accounted_for(shared_data: Path) -> None:
    SUGAR, IMAGES = shared_data / "sugarcrepe", shared_data / "coco-mini/val2017"
    res = load_sugarcrepe(SUGAR, IMAGES)
    totals = {s: len(json.loads((SUGAR / f"{s}.json").read_text())) for s in SUGARCREPE_SPLITS}
    assert len(res) + res.n_missing == sum(totals.values()) == 7511
    assert {r.split for r in res} == set(SUGARCREPE_SPLITS)
    assert all(r.image.exists() for r in res)
    assert all(not m.path.exists() for m in res.missing)
    assert len(res) == 211  # items whose COCO image is in COCO-MINI
    first = load_sugarcrepe_split(SUGAR / "add_att.json", IMAGES, check_images=False).records[0]
    assert first.record_id == "add_att/0" and first.image.path.name == "000000085329.jpg"
    assert first.negative_caption.startswith("A drawing of a tattooed young woman")


def test_sugarcrepe_malformed_and_absent_split(tmp_path: Path) -> None:
    p = tmp_path / "swap_att.json"
    p.write_text(json.dumps({"0": {"filename": "a.jpg", "caption": "x y z", "negative_caption": ""}}))
    with pytest.raises(DataError, match=r"swap_att.json \[0\] field 'negative_caption': empty text"):
        load_sugarcrepe_split(p, tmp_path)
    p.write_text(json.dumps({"7": {"caption": "x", "negative_caption": "y"}}))
    with pytest.raises(DataError, match=r"\[7\] field 'filename': missing"):
        load_sugarcrepe_split(p, tmp_path)
    with pytest.raises(DataError, match="file not found"):
        load_sugarcrepe(tmp_path, tmp_path, splits=("add_obj",))


def _aro_root(tmp: Path, items: list[dict[str, Any]], name: str) -> Path:
    (tmp / "images").mkdir(exist_ok=True)
    im = Image.new("RGB", (40, 30), (0, 0, 255))
    im.paste((255, 0, 0), (10, 5, 20, 15))
    im.save(tmp / "images/1.jpg", quality=100)
    (tmp / name).write_text(json.dumps(items))
    return tmp


REL: dict[str, Any] = {"image_path": "1.jpg", "bbox_x": 10, "bbox_y": 5, "bbox_w": 10, "bbox_h": 10,
       "true_caption": "the horse is eating the grass", "false_caption": "the grass is eating the horse",
       "relation_name": "eating"}


def test_vg_relation_crops_the_bbox_and_reports_missing(tmp_path: Path) -> None:
    root = _aro_root(tmp_path, [REL, {**REL, "image_path": "2.jpg"}], "visual_genome_relation.json")
    res = load_vg_relation(root)
    assert len(res) == 1 and res.missing[0].record_id == "vg_relation/1"
    item = res.records[0]
    assert item.label == "eating" and item.true_caption.startswith("the horse")
    im = item.image.load()
    assert im.size == (10, 10)
    pixel = im.getpixel((5, 5))
    # the red patch, not the blue background
    assert isinstance(pixel, tuple) and pixel[0] > 200 and pixel[2] < 60


def test_vg_attribution_label_and_bad_fields(tmp_path: Path) -> None:
    att = {k: v for k, v in REL.items() if k != "relation_name"} | {"attributes": ["white", "black"]}
    root = _aro_root(tmp_path, [att], "visual_genome_attribution.json")
    assert load_vg_attribution(root).records[0].label == "white_black"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"attributes": ["white"]}, "field 'attributes'"),
        ({"bbox_w": 0}, "field 'bbox_w': empty box"),
        ({"bbox_x": "3"}, "field 'bbox_x': expected a finite number"),
        ({"true_caption": ""}, "field 'true_caption': empty text"),
    ]
    for bad, match in cases:
        _aro_root(tmp_path, [{**att, **bad}], "visual_genome_attribution.json")
        with pytest.raises(DataError, match=r"visual_genome_attribution.json \[0\] " + match):
            load_vg_attribution(root)


def test_coco_order_from_coco_mini_captions(shared_data: Path) -> None:
    DATA, IMAGES = shared_data, shared_data / "coco-mini/val2017"
    res = load_coco_order(DATA / "coco-mini/annotations/captions_val2017.json", IMAGES, seed=0)
    assert len(res) == 395 and res.missing == ()
    item = res.records[0]
    assert item.record_id == "397133/0"
    assert item.perturbations == ("shuffle_within_trigrams", "shuffle_trigrams")
    assert item.caption == item.caption.lower()
    assert all(sorted(n.split()) == sorted(item.caption.split()) for n in item.negatives)
    again = load_coco_order(DATA / "coco-mini/annotations/captions_val2017.json", IMAGES, seed=0)
    assert again.records == res.records


def test_coco_order_karpathy_format(tmp_path: Path) -> None:
    ann = tmp_path / "coco_karpathy_test.json"
    ann.write_text(json.dumps([{"image": "val2014/a.jpg", "caption": ["A dog.", "A cat on a mat."]},
                               {"image": "val2014/b.jpg", "caption": "one caption here"}]))
    (tmp_path / "val2014").mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "val2014/a.jpg")
    res = load_coco_order(ann, tmp_path)
    assert [r.record_id for r in res] == ["val2014/a.jpg/0", "val2014/a.jpg/1"]
    assert [m.record_id for m in res.missing] == ["val2014/b.jpg/0"]
    ann.write_text(json.dumps([{"image": "a.jpg", "caption": ["ok", ""]}]))
    with pytest.raises(DataError, match=r"\[0\] field 'caption': caption 1 is empty"):
        load_coco_order(ann, tmp_path)


WINO = {"id": 0, "image_0": "ex_0_img_0", "image_1": "ex_0_img_1",
        "caption_0": "an old person kisses a young person",
        "caption_1": "a young person kisses an old person",
        "tag": "Object", "secondary_tag": "", "num_main_preds": 1, "collapsed_tag": "Object"}


def test_winoground(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    for name in ("ex_0_img_0", "ex_0_img_1", "ex_1_img_0"):
        Image.new("RGB", (4, 4)).save(tmp_path / f"images/{name}.png")
    second = {**WINO, "id": 1, "image_0": "ex_1_img_0", "image_1": "ex_1_img_1"}
    (tmp_path / "examples.jsonl").write_text(json.dumps(WINO) + "\n" + json.dumps(second) + "\n")
    res = load_winoground(tmp_path)
    assert [r.record_id for r in res] == ["0"]
    assert res.records[0].image_1.path.name == "ex_0_img_1.png" and res.records[0].secondary_tag == ""
    assert [(m.record_id, m.path.name) for m in res.missing] == [("1", "ex_1_img_1.png")]
    bad = {**WINO, "num_main_preds": "1"}
    (tmp_path / "examples.jsonl").write_text(json.dumps(WINO) + "\n" + json.dumps(bad))
    with pytest.raises(DataError, match=r"examples.jsonl:2 field 'num_main_preds': expected an integer"):
        load_winoground(tmp_path)
    (tmp_path / "examples.jsonl").write_text(json.dumps({**WINO, "caption_1": " "}))
    with pytest.raises(DataError, match=r"examples.jsonl:1 field 'caption_1': empty text"):
        load_winoground(tmp_path)
