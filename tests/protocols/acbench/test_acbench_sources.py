"""AC-Bench records: the reference world's six variants per image, an AC-Bench-style JSONL and EmoSet
annotations written here with every kind of bad row, each counted by kind (never dropped silently)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from faithtests.data.load_errors import ImageLoadError
from faithtests.protocols.acbench.records import DESCRIBED_SUBSETS, EMOTIONS, WORLD_SUBSETS, AcRecord
from faithtests.protocols.acbench.sources import (
    load_acbench,
    load_emoset,
    normalize_emotion,
    normalize_subset,
    world_records,
)
from faithtests.protocols.acbench.stimuli import DESCRIPTION_SUBSETS, mood_items


def test_world_records_six_per_image() -> None:
    recs = world_records(4, seed=7)
    assert len(recs) == 24
    assert len({r.item_id for r in recs}) == 24
    items = mood_items(4, 7)
    for i, item in enumerate(items):
        mine = recs[6 * i : 6 * i + 6]
        assert [r.subset for r in mine] == list(DESCRIBED_SUBSETS)
        assert {r.stimulus_id for r in mine} == {item.item_id}
        for r, world_subset in zip(mine, DESCRIPTION_SUBSETS, strict=True):
            d = item.description(world_subset)
            assert (r.description, r.text_emotion, r.image_emotion) == (d.text, d.emotion, item.emotion)
            assert r.conflict == (r.subset != "aligned")
    img = recs[0].load_image()
    assert isinstance(img, Image.Image)
    assert img.tobytes() == items[0].image().tobytes()
    assert world_records(4, seed=7) == recs  # deterministic (loaders are not compared)


def test_subset_names_map_world_to_paper() -> None:
    assert WORLD_SUBSETS == {
        "aligned": "aligned",
        "subjective_adjacent": "S-Adj",
        "subjective_opposite": "S-Opp",
        "objective_object": "O-Obj",
        "objective_attribute": "O-Attr",
        "objective_behaviour": "O-Beh",
    }
    for alias, name in [
        ("Subj-Adj", "S-Adj"), ("SUBJ_OPP", "S-Opp"), ("Obj-Object", "O-Obj"), ("OBJ_ATTRIBUTE", "O-Attr"),
        ("Obj-Beha", "O-Beh"), ("objective_behaviour", "O-Beh"), ("OBJ_BEHAVIOR", "O-Beh"),
        ("ALIGN", "aligned"), ("image only", "image-only"), ("subjective_adjacent", "S-Adj"),
    ]:  # fmt: skip
        assert normalize_subset(alias) == name, alias
    assert normalize_subset("subjective") is None and normalize_subset(3) is None


def test_emotions_match_case_insensitively_and_nothing_else() -> None:
    assert normalize_emotion(" Awe ") == "awe"
    assert [normalize_emotion(x) for x in ("joy", "happy", "sad", "fearful", "", None)] == [None] * 6
    assert len(EMOTIONS) == 8


def test_record_invariants() -> None:
    with pytest.raises(ValueError, match="y_txt != y_img"):
        AcRecord("x", "x", "S-Adj", "awe", "awe", "text", "img.png")
    with pytest.raises(ValueError, match="y_txt = y_img"):
        AcRecord("x", "x", "aligned", "awe", "fear", "text", "img.png")
    with pytest.raises(ValueError, match="not one of"):
        AcRecord("x", "x", "aligned", "joy", "joy", "text", "img.png")
    with pytest.raises(ValueError, match="non-empty description"):
        AcRecord("x", "x", "aligned", "awe", "awe", " ", "img.png")
    only = AcRecord("x", "x", "image-only", "awe", None, None, "img.png")
    assert not only.conflict
    with pytest.raises(ValueError, match="no image loader"):
        only.load_image()


# ------------------------------------------------------------------------------------------ AC-Bench
def _png(path: Path, color: tuple[int, int, int] = (200, 30, 30)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), color).save(path)
    return path


def _write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n\n")
    return path


def test_load_acbench_counts_every_bad_kind(tmp_path: Path) -> None:
    _png(tmp_path / "imgs" / "a.png")
    absolute = _png(tmp_path / "elsewhere" / "b.png", (0, 0, 255))
    (tmp_path / "imgs" / "corrupt.png").write_bytes(b"not a png")
    good = {"image": "imgs/a.png", "emotion": "awe", "description": "A vast hall.", "subset": "aligned"}
    rows: list[Any] = [
        {**good, "id": "g1"},  # aligned, y_txt omitted (= y_img)
        {"id": "g2", "image_path": "imgs/a.png", "image_emotion": "Excitement", "text_emotion": "anger",
         "description": "A reckless provocation.", "type": "SUBJ_OPP"},
        {"id": "g3", "img": str(absolute), "y_img": "fear", "y_txt": "amusement", "desc": "A goofy grin.",
         "subset": "Obj-Beha"},
        {**good, "id": "c1", "image": "imgs/corrupt.png"},  # exists; decoding is deferred to run time
        {**good, "id": "b1", "emotion": "joy"},
        {**good, "id": "b2", "image": "imgs/nope.png"},
        {**good, "id": "b3", "description": "   "},
        "{not json",
        "[1, 2]",
        {"id": "b4", "image": "imgs/a.png", "description": "x", "subset": "aligned"},
        {**good, "id": "b5", "subset": "subjective"},
        {**good, "id": "b6", "subset": "S-Adj", "description_emotion": "awe"},
        {**good, "id": "g1"},
        {**good, "id": "b7", "subset": "S-Opp"},
    ]  # fmt: skip
    loaded = load_acbench(_write_jsonl(tmp_path / "acbench.jsonl", rows))
    assert loaded.total == 14
    assert [r.item_id for r in loaded.records] == ["g1", "g2", "g3", "c1"]
    assert loaded.invalid == {
        "unknown emotion label": 1,
        "missing image": 1,
        "empty description": 1,
        "malformed line": 2,
        "missing field:image_emotion": 1,
        "unknown subset": 1,
        "subset/label mismatch": 1,
        "duplicate id": 1,
        "missing field:description_emotion": 1,
    }
    assert sum(loaded.invalid.values()) + len(loaded.records) == loaded.total
    assert loaded.examples["malformed line"][0].startswith("acbench.jsonl:8")
    assert "joy" in loaded.examples["unknown emotion label"][0]
    g1, g2, g3, c1 = loaded.records
    assert (g1.subset, g1.image_emotion, g1.text_emotion, g1.conflict) == ("aligned", "awe", "awe", False)
    assert (g2.subset, g2.image_emotion, g2.text_emotion) == ("S-Opp", "excitement", "anger")
    assert g2.conflict
    assert (g3.subset, g3.description) == ("O-Beh", "A goofy grin.")
    assert g1.image == str(tmp_path / "imgs" / "a.png")
    assert g3.load_image().getpixel((0, 0)) == (0, 0, 255)
    with pytest.raises(ImageLoadError, match=r"corrupt\.png"):
        c1.load_image()


def test_load_acbench_examples_are_capped_at_five(tmp_path: Path) -> None:
    loaded = load_acbench(_write_jsonl(tmp_path / "x.jsonl", ["{bad"] * 7))
    assert loaded.invalid == {"malformed line": 7} and len(loaded.examples["malformed line"]) == 5


def test_load_acbench_folder_and_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not found"):
        load_acbench(tmp_path / "nope.jsonl")
    with pytest.raises(FileNotFoundError, match=r"no \*\.jsonl"):
        load_acbench(tmp_path)
    _png(tmp_path / "a.png")
    row = {"image": "a.png", "emotion": "sadness", "description": "Rain.", "subset": "aligned"}
    _write_jsonl(tmp_path / "one.jsonl", [{**row, "id": "1"}])
    _write_jsonl(tmp_path / "two.jsonl", [{**row, "id": "2"}])
    assert [r.item_id for r in load_acbench(tmp_path).records] == ["1", "2"]


# ------------------------------------------------------------------------------------------ EmoSet
def _emoset_tree(root: Path) -> None:
    """EmoSet's layout: annotation/<emotion>/<id>.json beside image/<emotion>/<id>.jpg."""
    _png(root / "image" / "amusement" / "amusement_00000.jpg")
    _png(root / "image" / "fear" / "fear_00007.jpg")
    ann = root / "annotation"
    (ann / "amusement").mkdir(parents=True)
    (ann / "fear").mkdir()
    (ann / "amusement" / "amusement_00000.json").write_text(json.dumps({
        "image_id": "amusement_00000", "emotion": "amusement", "brightness": 0.6, "colorfulness": 0.8,
        "object": ["Food", "Snack"], "facial_expression": "happy", "scene": None,
    }))  # fmt: skip
    (ann / "fear" / "fear_00007.json").write_text(json.dumps({"emotion": "Fear", "brightness": 0.2}))
    (ann / "fear" / "fear_00008.json").write_text(json.dumps({"emotion": "fear"}))  # no image
    (ann / "fear" / "fear_00009.json").write_text(json.dumps({"emotion": "dread"}))
    (ann / "fear" / "fear_00010.json").write_text(json.dumps({"brightness": 0.1}))
    (ann / "fear" / "fear_00011.json").write_text("{broken")


def test_load_emoset_folder_counts_every_bad_kind(tmp_path: Path) -> None:
    _emoset_tree(tmp_path)
    (tmp_path / "info.json").write_text("{}")  # outside annotation/: not read
    loaded = load_emoset(tmp_path)
    assert loaded.total == 6
    assert [r.item_id for r in loaded.records] == ["amusement_00000", "fear_00007"]
    assert loaded.invalid == {
        "missing image": 1,
        "unknown emotion label": 1,
        "missing field:emotion": 1,
        "malformed line": 1,
    }
    assert "fear_00008" in loaded.examples["missing image"][0]
    a, f = loaded.records
    assert (a.subset, a.image_emotion) == ("image-only", "amusement")
    assert a.text_emotion is None and a.description is None
    assert dict(a.attributes) == {
        "brightness": "0.6", "colorfulness": "0.8", "object": "Food, Snack", "facial_expression": "happy",
    }  # fmt: skip
    assert f.image_emotion == "fear" and f.load_image().size == (8, 8)
    # the annotation folder itself, and one annotation file, find the same images
    assert len(load_emoset(tmp_path / "annotation").records) == 2
    one = load_emoset(tmp_path / "annotation" / "fear" / "fear_00007.json")
    assert [r.item_id for r in one.records] == ["fear_00007"]


def test_load_emoset_list_file_with_explicit_paths(tmp_path: Path) -> None:
    _png(tmp_path / "pics" / "x.png")
    rows = [
        {"image_id": "x", "emotion": "awe", "image_path": "pics/x.png"},
        {"image_id": "y", "emotion": "awe", "image_path": "pics/y.png"},
        {"image_id": "x", "emotion": "awe", "image_path": "pics/x.png"},
        "not an object",
    ]
    (tmp_path / "emoset.json").write_text(json.dumps(rows))
    loaded = load_emoset(tmp_path / "emoset.json")
    assert [r.item_id for r in loaded.records] == ["x"]
    assert loaded.invalid == {"missing image": 1, "duplicate id": 1, "malformed line": 1}
    assert loaded.examples["malformed line"] == ["emoset.json[3]: a JSON str, not an object"]
    with pytest.raises(FileNotFoundError, match="not found"):
        load_emoset(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no EmoSet annotation"):
        load_emoset(tmp_path / "empty")
