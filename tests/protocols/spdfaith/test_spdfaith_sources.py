"""SPD-Faith sources: world pairs as DiffRecords, the SPD-Faith-Bench JSONL loader, the COCO wrapper."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from faithtests.data.load_errors import DataError
from faithtests.protocols.spdfaith.sources import coco_records, load_spdfaith_bench, world_records
from faithtests.world.scene import COLOURS, POSITIONS


# ------------------------------------------------------------------------------------------ world
def test_world_records_keep_the_subset_cycle_and_exact_boxes() -> None:
    recs = world_records(10, seed=0)
    assert [r.subset for r in recs] == ["single"] * 3 + ["multi", "identical"] + ["single"] * 3 + [
        "multi", "identical"]
    assert [r.difficulty for r in recs[:3]] == ["easy", "medium", "hard"]
    for r in recs:
        assert r.source == "world" and r.stimulus_id == r.item_id == r.ref and r.n_objects
        a, b = (np.asarray(im, np.int16) for im in r.images())
        changed = (a != b).any(axis=2)
        inside = np.zeros(changed.shape, bool)
        for e in r.edits:
            assert e.box is not None and e.before in COLOURS
            x0, y0, x1, y1 = e.box
            inside[y0:y1, x0:x1] = True
            assert changed[y0:y1, x0:x1].any()
            want = {"color": COLOURS, "position": POSITIONS}.get(e.type)
            assert (e.attribute in want) if want else e.attribute is None
        assert not changed[~inside].any()
        assert changed.any() == (r.subset != "identical")
    assert [r.edits for r in world_records(10, seed=0)] == [r.edits for r in recs]


# ------------------------------------------------------------------------------------------ bench
def _bench(root: Path) -> Path:
    """A bench folder: images (pairs, side-by-side, stacked, corrupt) and one JSONL row per case."""
    (root / "img").mkdir(parents=True)
    red, blue = (200, 30, 30), (30, 30, 200)
    Image.new("RGB", (40, 30), red).save(root / "img" / "a.png")
    Image.new("RGB", (40, 30), blue).save(root / "img" / "b.png")
    sbs = np.zeros((30, 81, 3), np.uint8)  # odd width: the middle column is dropped
    sbs[:, :40], sbs[:, 40], sbs[:, 41:] = red, (0, 255, 0), blue
    Image.fromarray(sbs).save(root / "img" / "sbs.png")
    stacked = np.zeros((60, 30, 3), np.uint8)
    stacked[:30], stacked[30:] = red, blue
    Image.fromarray(stacked).save(root / "img" / "stacked.png")
    wide = np.zeros((20, 100, 3), np.uint8)  # stacked but wider than tall: needs "layout"
    wide[:10], wide[10:] = red, blue
    Image.fromarray(wide).save(root / "img" / "wide.png")
    (root / "img" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    color = {"type": "color", "category": "car", "bbox": [1.5, 2, 10, 5.2], "original_color": "green",
             "target_color": "blue"}
    move = {"type": "position", "category": "surfboard", "original_bbox": [359.22, 230.29, 218.89, 15.03],
            "new_bbox": [209.0, 260.0, 219.0, 15.0]}
    rows: list[Any] = [
        {"qid": 1, "images": ["img/a.png", "img/b.png"], "modifications": [color], "question": "q?",
         "complexity": "Easy", "image_id": 139},
        {"qid": "2", "image_a": "img/a.png", "image_b": "img/b.png", "differences": [move],
         "num_differences": 1},
        {"qid": "3", "image": "img/sbs.png", "modifications": [{"type": "removal", "category": "dog"},
                                                             {"type": "colour", "category": "cat"}]},
        {"qid": "4", "image": "img/stacked.png", "modifications": []},
        {"qid": "5", "image": "img/wide.png", "layout": "top-bottom", "modifications": [color]},
        {"qid": "6", "image": "img/a.png", "edited_image": "img/b.png", "modifications": [color]},
        "{not json",
        {"image": "img/a.png", "modifications": []},
        {"qid": "8", "image": "img/a.png"},
        {"qid": "9", "image": "img/a.png", "modifications": [{"type": "resize", "category": "car"}]},
        {"qid": "10", "image": "img/nowhere.png", "modifications": [color]},
        {"qid": "11", "image": "img/broken.png", "modifications": [color]},
        {"qid": "1", "image": "img/a.png", "modifications": [color]},
        {"qid": "13", "image": "img/a.png", "modifications": [color] * 6},
        {"qid": "14", "image": "img/a.png", "modifications": [color], "num_differences": 2},
        {"qid": "15", "image": "img/a.png", "modifications": [color], "complexity": "extreme"},
        {"qid": "16", "image": "img/a.png", "modifications": [{"type": "color"}]},
        [1, 2],
    ]
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    (root / "bench.jsonl").write_text("\n".join(lines[:7]) + "\n\n" + "\n".join(lines[7:]) + "\n")
    return root / "bench.jsonl"


def _rgb(im: Image.Image) -> set[tuple[int, ...]]:
    return {tuple(int(c) for c in px) for px in np.asarray(im).reshape(-1, 3)}


def test_bench_loader_reads_every_layout_and_counts_every_bad_row(tmp_path: Path) -> None:
    got = load_spdfaith_bench(_bench(tmp_path / "bench"))
    assert [r.item_id for r in got.records] == ["1", "2", "3", "4", "5", "6"]
    assert got.total == 18
    assert got.invalid == {"bad JSON line": 2, "missing field:qid": 1, "missing field:modifications": 1,
                           "unknown edit type": 1, "missing image": 1, "corrupt image": 1, "duplicate qid": 1,
                           "wrong subset size": 2, "unknown complexity": 1, "missing field:category": 1}
    assert got.examples["bad JSON line"][0].startswith("bench.jsonl:7")
    assert got.examples["missing image"][0].startswith("bench.jsonl:12")  # the blank line still counts
    red, blue = {(200, 30, 30)}, {(30, 30, 200)}
    for r in got.records:
        a, b = r.images()
        assert (_rgb(a), _rgb(b)) == (red, blue), r.item_id  # every layout: original, then edited
        assert r.source == "spdfaith"
    one, two, three, four = got.records[:4]
    assert (one.subset, one.difficulty, one.question, one.stimulus_id) == ("single", "easy", "q?", "139")
    (e,) = one.edits
    assert (e.type, e.category, e.attribute, e.before) == ("color", "car", "blue", "green")
    assert e.box == (1, 2, 12, 8)  # COCO [x, y, w, h] -> whole-pixel (x0, y0, x1, y1)
    (m,) = two.edits  # Fig. 28: the surfboard moved left; the box is the union of its two places
    assert (m.type, m.attribute, m.box) == ("position", "left", (209, 230, 579, 275))
    assert three.subset == "multi" and [x.type for x in three.edits] == ["remove", "color"]
    assert three.ref == "img/sbs.png" and three.images()[0].size == (40, 30)
    assert four.subset == "identical" and four.images()[0].size == (30, 30)


def test_bench_limit_all_invalid_and_missing(tmp_path: Path) -> None:
    path = _bench(tmp_path / "bench")
    assert [r.item_id for r in load_spdfaith_bench(path, limit=2).records] == ["1", "2"]
    assert [r.item_id for r in load_spdfaith_bench(path.parent).records][:1] == ["1"]  # a folder
    bad = tmp_path / "bench" / "bad.jsonl"
    bad.write_text('{"qid": "x"}\n{oops\n')
    with pytest.raises(DataError, match=r"no valid SPD-Faith record \(bad JSON line: 1, missing field"):
        load_spdfaith_bench(bad)
    with pytest.raises(FileNotFoundError):
        load_spdfaith_bench(tmp_path / "nowhere.jsonl")


# ------------------------------------------------------------------------------------------ coco
def test_coco_records_needs_the_instances_file(tmp_path: Path) -> None:
    (tmp_path / "val2017").mkdir()
    with pytest.raises(FileNotFoundError, match=r"annotations/instances_val2017\.json"):
        coco_records(tmp_path, 1, 0, 0, seed=0, cache_dir=tmp_path / "cache")


def test_coco_records_on_coco_mini(shared_data: Path, tmp_path: Path) -> None:
    pytest.importorskip("cv2")  # the spdfaith extra; test_spdfaith_coco_edits fails on its absence in CI
    pairs = coco_records(shared_data / "coco-mini", 1, 0, 1, seed=0, cache_dir=tmp_path)
    assert [r.subset for r in pairs.records] == ["single", "identical"]
    assert pairs.records[0].ref.startswith("coco:") and pairs.total == 2
