"""SPD-Faith COCO edit pairs: pixels change exactly where the ground truth says, seeded, and cached.

The real-photo tests use COCO-MINI (``shared_data``: a skip outside CI, a failure in CI); the rest runs
on a synthetic COCO folder written here.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from faithtests.data.load_errors import DataError
from faithtests.protocols.spdfaith import coco_edits
from faithtests.protocols.spdfaith import coco_ops as ops
from faithtests.protocols.spdfaith.coco_edits import CocoPairs, build_coco_pairs, difficulty_of
from faithtests.protocols.spdfaith.coco_instances import coco_layout

U8 = np.ndarray[Any, np.dtype[np.uint8]]


@pytest.fixture(scope="session")
def cv2() -> Any:
    """OpenCV (the ``spdfaith`` extra): a skip when absent, a failure in CI."""
    try:
        import cv2 as module
    except ImportError:
        why = 'opencv-python-headless missing: pip install -e ".[spdfaith]"'
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail(f"CI=true and {why}")
        pytest.skip(why)
    return module


@pytest.fixture(scope="session")
def coco_mini(shared_data: Path, cv2: Any) -> Path:
    return shared_data / "coco-mini"


def _arrays(pairs: CocoPairs, i: int) -> tuple[U8, U8]:
    a, b = pairs.records[i].images()
    return np.asarray(a, np.uint8), np.asarray(b, np.uint8)


def _changed(a: U8, b: U8) -> np.ndarray[Any, np.dtype[np.bool_]]:
    return np.asarray((a != b).any(axis=2))


def _hue_deg(cv2: Any, pixels: U8) -> np.ndarray[Any, np.dtype[np.float64]]:
    hsv = cv2.cvtColor(pixels.reshape(-1, 1, 3), cv2.COLOR_RGB2HSV).reshape(-1, 3)
    return np.asarray(hsv[:, 0], np.float64) * 2.0


def _circ_dist(a: float, b: float) -> float:
    return abs((a - b + 180.0) % 360.0 - 180.0)


def _circ_mean(deg: np.ndarray[Any, np.dtype[np.float64]]) -> float:
    r = np.deg2rad(deg)
    return float(np.rad2deg(np.arctan2(np.sin(r).mean(), np.cos(r).mean())) % 360.0)


# ------------------------------------------------------------------------------------------ real photos
@pytest.fixture(scope="module")
def mixed(coco_mini: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[CocoPairs, Path]:
    cache = tmp_path_factory.mktemp("spd_cache")
    return build_coco_pairs(coco_mini, 4, 2, 1, seed=0, cache_dir=cache), cache


def test_color_edit_changes_hue_inside_mask_only(coco_mini: Path, tmp_path: Path, cv2: Any) -> None:
    pairs = build_coco_pairs(coco_mini, 3, 0, 0, seed=1, cache_dir=tmp_path, types=("color",))
    assert len(pairs.records) == 3
    for i, (plan, rec) in enumerate(zip(pairs.plans, pairs.records, strict=True)):
        a, b = _arrays(pairs, i)
        (edit,), (truth,) = plan.edits, rec.edits
        mask = plan.image.mask(edit.ann_id)
        assert np.array_equal(a[~mask], b[~mask])  # exactly equal outside the mask
        assert _changed(a, b)[mask].mean() > 0.5
        hue_after = _hue_deg(cv2, b[mask])
        assert truth.attribute in ops.PALETTE and truth.attribute != truth.before
        assert _circ_dist(_circ_mean(hue_after), ops.PALETTE[truth.attribute][0]) < 15
        if truth.before in ops.PALETTE:  # a named hue before: the new one is far from it
            assert _circ_dist(ops.PALETTE[truth.before][0], ops.PALETTE[truth.attribute][0]) >= 60
        assert truth.box == ops.box_of(mask)


def test_remove_edit_changes_pixels_only_inside_dilated_mask(coco_mini: Path, tmp_path: Path) -> None:
    pairs = build_coco_pairs(coco_mini, 3, 0, 0, seed=2, cache_dir=tmp_path, types=("remove",))
    assert len(pairs.records) == 3
    for i, plan in enumerate(pairs.plans):
        a, b = _arrays(pairs, i)
        mask = plan.image.mask(plan.edits[0].ann_id)
        region = ops.dilate(mask)
        changed = _changed(a, b)
        assert not changed[~region].any()
        assert changed[mask].mean() > 0.5
        assert pairs.records[i].edits[0].box == ops.box_of(region)
        assert pairs.records[i].edits[0].attribute is None


def test_position_edit_pastes_the_object_at_the_offset(coco_mini: Path, tmp_path: Path) -> None:
    pairs = build_coco_pairs(coco_mini, 3, 0, 0, seed=3, cache_dir=tmp_path, types=("position",))
    assert len(pairs.records) == 3
    for i, plan in enumerate(pairs.plans):
        a, b = _arrays(pairs, i)
        (edit,), (truth,) = plan.edits, pairs.records[i].edits
        assert edit.offset is not None
        dx, dy = edit.offset
        mask = plan.image.mask(edit.ann_id)
        ys, xs = np.nonzero(mask)
        assert np.array_equal(b[ys + dy, xs + dx], a[ys, xs])  # the object, pixel for pixel, moved
        moved = np.zeros_like(mask)
        moved[ys + dy, xs + dx] = True
        assert not (moved & ops.dilate(mask)).any()  # it left its old place ...
        assert _changed(a, b)[mask].mean() > 0.5  # ... which was filled
        assert not _changed(a, b)[~(ops.dilate(mask) | moved)].any()
        assert truth.attribute == ops.direction(edit.offset)
        others = [o.box for o in plan.image.objects if o.ann_id != edit.ann_id]
        for x0, y0, x1, y1 in others:  # the new place overlaps no other annotation's box
            assert not moved[max(y0, 0):y1, max(x0, 0):x1].any()


def test_boxes_contain_every_changed_pixel(mixed: tuple[CocoPairs, Path]) -> None:
    pairs, _ = mixed
    assert [r.subset for r in pairs.records] == ["single"] * 4 + ["multi"] * 2 + ["identical"]
    assert pairs.total == 7 and pairs.rendered == 6
    for i, rec in enumerate(pairs.records):
        a, b = _arrays(pairs, i)
        inside = np.zeros(a.shape[:2], bool)
        for e in rec.edits:
            assert e.box is not None and e.category.strip()
            x0, y0, x1, y1 = e.box
            inside[y0:y1, x0:x1] = True
        assert not _changed(a, b)[~inside].any(), rec.item_id
        plan = pairs.plans[i]
        assert rec.stimulus_id == str(plan.image.image_id) and rec.source == "coco"
        assert rec.n_objects == len(plan.image.objects)
        assert len({e.ann_id for e in plan.edits}) == len(plan.edits)  # distinct objects
        if rec.subset == "identical":
            assert np.array_equal(a, b) and rec.ref == f"coco:{plan.image.file.name}+copy"
        else:
            assert _changed(a, b).any() and rec.ref == f"coco:{plan.image.file.name}+edit"
        if rec.subset == "single":
            obj = plan.image.obj(plan.edits[0].ann_id)
            assert rec.difficulty == difficulty_of(len(plan.image.objects), obj.area)


def test_same_seed_same_bytes(mixed: tuple[CocoPairs, Path], coco_mini: Path, tmp_path: Path) -> None:
    first, _ = mixed
    again = build_coco_pairs(coco_mini, 4, 2, 1, seed=0, cache_dir=tmp_path)
    assert [r.edits for r in again.records] == [r.edits for r in first.records]
    for (s1, e1), (s2, e2) in zip(first.files, again.files, strict=True):
        assert s1.read_bytes() == s2.read_bytes() and e1.read_bytes() == e2.read_bytes()
    other = build_coco_pairs(coco_mini, 4, 0, 0, seed=5, cache_dir=tmp_path)
    assert [p.edits for p in other.plans] != [p.edits for p in first.plans[:4]]


def test_second_call_does_no_image_work(mixed: tuple[CocoPairs, Path], coco_mini: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    first, cache = mixed

    def boom(*args: object) -> None:
        raise AssertionError("image work on a cached call")

    monkeypatch.setattr(coco_edits, "_render", boom)
    monkeypatch.setattr(coco_edits, "_write_source", boom)
    again = build_coco_pairs(coco_mini, 4, 2, 1, seed=0, cache_dir=cache)
    assert (again.rendered, again.cached) == (0, 6)
    assert [r.edits for r in again.records] == [r.edits for r in first.records]
    assert again.files == first.files


# ------------------------------------------------------------------------------------------ synthetic
def _synthetic_coco(root: Path) -> Path:
    """A 160x120 photo with five coloured squares and a crowd region, plus one annotation / image entry
    of each bad kind."""
    (root / "val2017").mkdir(parents=True)
    (root / "annotations").mkdir()
    rng = np.random.default_rng(0)
    img = rng.integers(90, 140, (120, 160, 3), dtype=np.uint8)
    squares = [(10, 10, (200, 30, 30)), (50, 10, (30, 200, 30)), (90, 10, (30, 30, 200)),
               (10, 50, (220, 200, 30)), (50, 50, (150, 40, 200))]
    anns: list[dict[str, Any]] = []
    for aid, (x, y, rgb) in enumerate(squares, start=1):
        img[y:y + 20, x:x + 20] = rgb
        anns.append({"id": aid, "image_id": 7, "category_id": 1, "bbox": [x, y, 20, 20], "area": 400.0,
                     "iscrowd": 0, "segmentation": [[x, y, x + 19, y, x + 19, y + 19, x, y + 19]]})
    Image.fromarray(img).save(root / "val2017" / "a.png")
    anns += [
        {"id": 9, "image_id": 99, "category_id": 1, "bbox": [0, 0, 5, 5], "area": 25, "segmentation": []},
        {"id": 10, "image_id": 7, "category_id": 42, "bbox": [0, 0, 5, 5], "area": 25, "segmentation": []},
        {"id": 11, "image_id": 7, "category_id": 1, "bbox": [0, 0, 5, 5], "area": 25, "iscrowd": 0,
         "segmentation": [[1, 2, 3]]},
        {"id": 12, "image_id": 7, "category_id": 1, "area": 25, "segmentation": []},
        {"id": 13, "image_id": 7, "category_id": 1, "bbox": [100, 80, 30, 30], "area": 900, "iscrowd": 1,
         "segmentation": {"counts": "abc", "size": [120, 160]}},
    ]
    data = {"images": [{"id": 7, "file_name": "a.png", "width": 160, "height": 120},
                       {"id": 8, "file_name": "gone.jpg", "width": 10, "height": 10},
                       {"id": 7, "file_name": "a.png", "width": 160, "height": 120},
                       {"file_name": "x.jpg"}],
            "annotations": anns, "categories": [{"id": 1, "name": "box"}]}
    (root / "annotations" / "instances_val2017.json").write_text(json.dumps(data))
    return root


def test_synthetic_coco_counts_every_bad_entry(tmp_path: Path, cv2: Any) -> None:
    root = _synthetic_coco(tmp_path / "coco")
    pairs = build_coco_pairs(root, 2, 1, 1, seed=0, cache_dir=tmp_path / "cache")
    # Two single pairs are one medium and one hard (App. A's split); six 2% objects make no hard one.
    assert pairs.invalid == {"missing image": 1, "duplicate image id": 1, "bad image entry": 1,
                             "unknown image id": 1, "unknown category": 1, "bad segmentation": 1,
                             "bad annotation": 1, "not enough objects:hard": 1}
    assert "gone.jpg" in pairs.examples["missing image"][0]
    assert [(r.subset, r.difficulty) for r in pairs.records] == [
        ("single", "medium"), ("multi", None), ("identical", None)]
    for i, rec in enumerate(pairs.records):
        a, b = _arrays(pairs, i)
        assert rec.n_objects == 6  # five squares and the crowd region
        assert not _changed(a, b)[80:110, 100:130].any()  # crowd: never edited, never landed on
        for e in rec.edits:
            assert e.category == "box" and e.box is not None
            if e.type == "color":
                assert e.before in ("red", "green", "blue", "yellow", "purple")


def test_free_offset_is_exact(cv2: Any) -> None:
    """Every offset returned keeps the shifted mask in the image and off ``occupied``; None only when no
    offset exists (brute force over all offsets)."""
    rng = np.random.default_rng(1)
    for _ in range(25):
        h, w = (int(v) for v in rng.integers(8, 24, 2))
        mask = np.zeros((h, w), bool)
        y, x = int(rng.integers(0, h - 3)), int(rng.integers(0, w - 3))
        mask[y:y + int(rng.integers(1, 4)), x:x + int(rng.integers(1, 4))] = True
        occupied = rng.random((h, w)) < 0.3
        ys, xs = np.nonzero(mask)
        valid = {(dx, dy) for dy in range(-h, h) for dx in range(-w, w)
                 if ys.min() + dy >= 0 and ys.max() + dy < h and xs.min() + dx >= 0 and xs.max() + dx < w
                 and not occupied[ys + dy, xs + dx].any()}
        got = {ops.free_offset(mask, occupied, np.random.default_rng(s)) for s in range(20)}
        assert (got <= valid) if valid else (got == {None})


def test_colour_names_and_targets(cv2: Any) -> None:
    def patch(rgb: tuple[int, int, int]) -> U8:
        return np.full((50, 3), rgb, np.uint8)

    assert ops.colour_name(patch((220, 30, 30))) == "red"
    assert ops.colour_name(patch((30, 60, 220))) == "blue"
    assert ops.colour_name(patch((10, 10, 10))) == "black"
    assert ops.colour_name(patch((240, 240, 240))) == "white"
    stripes = np.concatenate([patch(rgb)[:20] for rgb in ((220, 30, 30), (30, 200, 30), (30, 60, 220))])
    assert ops.colour_name(stripes) is None  # no colour covers half the object
    order = tuple(ops.PALETTE)
    assert ops.pick_target("red", order) == "green"  # orange (30°) and yellow (58°) are too close to red
    assert ops.pick_target(None, order) == "red"


def test_layout_and_opencv_errors_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FileNotFoundError, match=r"instances_val2017\.json"):
        coco_layout(tmp_path)
    monkeypatch.setitem(sys.modules, "cv2", None)  # import cv2 now raises ImportError
    with pytest.raises(ImportError, match=r'pip install -e "\.\[spdfaith\]"'):
        build_coco_pairs(tmp_path, 1, 0, 0, seed=0, cache_dir=tmp_path)


def test_malformed_instances_file_is_an_error(tmp_path: Path, cv2: Any) -> None:
    root = _synthetic_coco(tmp_path / "coco")
    bad: dict[str, Any] = {"images": {}, "annotations": [], "categories": []}
    (root / "annotations" / "instances_val2017.json").write_text(json.dumps(bad))
    with pytest.raises(DataError, match="field 'images': expected a list"):
        build_coco_pairs(root, 1, 0, 0, seed=0, cache_dir=tmp_path / "cache")
