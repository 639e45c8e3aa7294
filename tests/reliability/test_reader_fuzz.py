"""Issue 46 item 2: fuzzing where the hand cases end. Every reader of a file a user hands faithtests (a
scorecard or baseline, an item log, a thresholds file, an IMAVB / JSONL data file) is given random
damage: random bytes, random JSON values, a real file with one field replaced by a random value, a real
file cut short. Each either reads it or raises its one documented error naming the file; never another
exception (a traceback for the user), never a hang.

Bounded (``max_examples``), deterministic (``derandomize``): it runs in ``pytest tests/`` within the
budget and fails the same way on every machine.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faithtests.data._validate import read_jsonl
from faithtests.data.load_errors import DataError
from faithtests.protocols.imavb.sources import DataError as ImavbDataError
from faithtests.protocols.imavb.sources import load_imavb
from faithtests.scorecard.gate_kinds import ThresholdError
from faithtests.scorecard.item_log import iter_item_log, log_rows, write_item_log
from faithtests.scorecard.scorecard import ScorecardError, read_scorecard, write_scorecard
from faithtests.scorecard.thresholds import load_thresholds

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scorecard"))
from _sample_scorecard import sample_scorecard  # a test helper beside the scorecard tests

EXAMPLES = int(os.environ.get("FAITH_FUZZ_EXAMPLES", "60"))  # CI: 60 per reader; raise it to search
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=4), max_leaves=12)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into a JSON document (objects and lists), the document itself first."""
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:3]):
            out += _paths(v, (*prefix, i))
    return out


def _replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {**doc, head: _replaced(doc[head], rest, value)}
    out = list(doc)
    out[head] = _replaced(doc[head], rest, value)
    return out


@pytest.fixture(scope="module")
def card_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = write_scorecard(sample_scorecard(), tmp_path_factory.mktemp("card") / "scorecard.json")
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


@FUZZ
@given(data=st.data())
def test_a_damaged_scorecard_is_read_or_a_scorecard_error(tmp_path: Path, card_doc: dict[str, Any],
                                                          data: st.DataObject) -> None:
    paths = _paths(card_doc)
    where = data.draw(st.sampled_from(paths[: 400]))
    damaged = _replaced(card_doc, where, data.draw(JSON))
    path = tmp_path / "scorecard.json"
    text = json.dumps(damaged)
    if data.draw(st.booleans()):  # or cut short
        text = text[: data.draw(st.integers(0, len(text)))]
    path.write_text(text)
    try:
        read_scorecard(path)
    except ScorecardError as exc:
        assert str(path) in str(exc)


@FUZZ
@given(raw=st.binary(max_size=300))
def test_random_bytes_are_no_scorecard(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "scorecard.json"
    path.write_bytes(raw)
    try:
        read_scorecard(path)
    except ScorecardError as exc:
        assert str(path) in str(exc)


@FUZZ
@given(rows=st.lists(JSON, max_size=4), cut=st.floats(0, 1), gz=st.booleans(), raw=st.binary(max_size=80))
def test_a_damaged_item_log_is_a_value_error_naming_it(tmp_path: Path, rows: list[Any], cut: float, gz: bool,
                                                      raw: bytes) -> None:
    path = tmp_path / "items.jsonl.gz"
    row = {"model": "m", "variant": "base", "metric": "acc", "slice": None, "item": "i", "inputs": {},
           "output": {}, "outcome": True, "invalid": None}
    write_item_log(log_rows([("s", "t.py::a", [row] * 30)]), path)
    if gz:  # random JSON lines, properly compressed
        path.write_bytes(gzip.compress("\n".join(json.dumps(r) for r in rows).encode() + b"\n" + raw))
    else:  # a real log cut short
        data = path.read_bytes()
        path.write_bytes(data[: int(cut * len(data))])
    try:
        list(iter_item_log(path))
    except ValueError as exc:
        assert str(path) in str(exc)


@FUZZ
@given(text=st.text(max_size=200))
def test_a_damaged_thresholds_file_is_a_threshold_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "thresholds.toml"
    path.write_text("[coverage]\nmin_n = 10\n[flip]\n" + text, encoding="utf-8")
    try:
        load_thresholds(None, path)
    except ThresholdError as exc:
        assert "thresholds.toml" in str(exc)


@FUZZ
@given(lines=st.lists(JSON | st.text(max_size=30), max_size=4), raw=st.binary(max_size=40))
def test_damaged_jsonl_data_is_a_data_error_naming_the_file(tmp_path: Path, lines: list[Any],
                                                           raw: bytes) -> None:
    path = tmp_path / "standard_vision.jsonl"
    path.write_bytes("\n".join(json.dumps(x) for x in lines).encode() + b"\n" + raw)
    try:
        list(read_jsonl(path))
    except DataError as exc:
        assert str(path) in str(exc)
    try:
        load_imavb(tmp_path, check_videos=False)
    except (DataError, ImavbDataError) as exc:  # the IMAVB loader's own, and the shared reader's
        assert str(tmp_path) in str(exc)


ACBENCH_ROW = {"id": "g1", "image": "a.png", "emotion": "awe", "text_emotion": "fear",
               "description": "A vast hall.", "subset": "S-Opp"}
SPD_ROW = {"qid": "1", "image_a": "a.png", "image_b": "b.png", "num_differences": 1,
           "differences": [{"type": "position", "category": "surfboard", "original_bbox": [1, 2, 3, 4],
                             "new_bbox": [2, 3, 4, 5]}]}


def _damaged_rows(data: st.DataObject, row: dict[str, Any]) -> list[str]:
    """A valid row and copies with one field (at any depth) replaced by a random JSON value."""
    out = [json.dumps(row)]
    for _ in range(3):
        where = data.draw(st.sampled_from(_paths(row)[1:]))
        out.append(json.dumps(_replaced(row, where, data.draw(JSON))))
    return out


@FUZZ
@given(data=st.data())
def test_damaged_acbench_and_spd_rows_are_counted_or_a_named_error(tmp_path: Path,
                                                                     data: st.DataObject) -> None:
    """A row a loader cannot use is counted by kind (never a crash); a file it cannot use at all is a
    named error."""
    from PIL import Image

    from faithtests.protocols.acbench.sources import load_acbench
    from faithtests.protocols.spdfaith.sources import load_spdfaith_bench

    for name in ("a.png", "b.png"):
        Image.new("RGB", (8, 8)).save(tmp_path / name)
    for rows, load, name in ((ACBENCH_ROW, load_acbench, "acbench.jsonl"),
                             (SPD_ROW, load_spdfaith_bench, "bench.jsonl")):
        path = tmp_path / name
        lines = _damaged_rows(data, rows)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        try:
            loaded = load(path)
        except (DataError, OSError, ValueError) as exc:
            assert str(path) in str(exc) or path.name in str(exc), exc
            continue
        assert loaded.total == len(lines)
        assert len(loaded.records) + sum(loaded.invalid.values()) >= loaded.total  # every row accounted


@FUZZ
@given(raw=st.binary(max_size=400), keep=st.floats(0, 1))
def test_damaged_media_files_are_named_errors(tmp_path: Path, raw: bytes, keep: float) -> None:
    """An image or a clip that is random bytes, or a real one cut short, is ``ImageLoadError`` /
    ``VideoError`` / ``ClipLoadError`` naming the file: counted by the suites, never another exception."""
    from PIL import Image

    from faithtests.data.av_clip import ClipLoadError, load_clip
    from faithtests.data.load_errors import ImageLoadError
    from faithtests.data.loaded import ImageRef
    from faithtests.protocols.imavb.video import VideoError, sample_frames

    real = tmp_path / "real.png"
    Image.new("RGB", (16, 16), "red").save(real)
    cut = real.read_bytes()[: int(keep * real.stat().st_size)]
    for name, content in (("random.png", raw), ("cut.png", cut)):
        path = tmp_path / name
        path.write_bytes(content)
        try:
            ImageRef(path).load()
        except ImageLoadError as exc:
            assert str(path) in str(exc)
    clip = tmp_path / "random.mp4"
    clip.write_bytes(raw)
    with pytest.raises(VideoError, match=str(clip)):
        sample_frames(clip, 4)
    with pytest.raises(ClipLoadError, match=str(clip)):
        load_clip(clip, frames=4)


@FUZZ
@given(data=st.data())
def test_damaged_coco_annotations_are_a_named_data_error(tmp_path: Path, data: st.DataObject) -> None:
    from faithtests.data.coco import load_coco_captions

    doc = {"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}],
           "annotations": [{"id": 10, "image_id": 1, "caption": "a red cup"},
                           {"id": 11, "image_id": 2, "caption": "two dogs"}]}
    where = data.draw(st.sampled_from(_paths(doc)))
    path = tmp_path / "captions_val2017.json"
    path.write_text(json.dumps(_replaced(doc, where, data.draw(JSON))), encoding="utf-8")
    try:
        load_coco_captions(path, tmp_path, check_images=False)
    except DataError as exc:
        assert str(path) in str(exc)
