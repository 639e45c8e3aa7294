"""IMAVB records: the reference world's premise items, and the public format end to end with a tiny
real video (encoded here with PyAV) in every layout a user may have; bad rows counted by kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import av  # the imavb extra, brought by the dev extra: missing, collection fails
import numpy as np
import pytest

from faithtests.protocols.imavb.records import LETTERS
from faithtests.protocols.imavb.sources import load_imavb, normalize_answer, world_records
from faithtests.protocols.imavb.video import VideoError, sample_frames, uniform_indices

N_FRAMES = 10


def make_video(path: Path, n: int = N_FRAMES) -> Path:
    """Frame i is a flat grey of level 20·i (so a sampled frame tells its index), with a 1 s mono sine
    track (the audio rows need one: a clip without audio counts ``no_audio``)."""
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=10)
        s.width, s.height, s.pix_fmt = 32, 32, "yuv420p"
        a = c.add_stream("aac", rate=16_000, layout="mono")
        for i in range(n):
            frame = av.VideoFrame.from_ndarray(np.full((32, 32, 3), 20 * i, np.uint8), format="rgb24")
            for p in s.encode(frame):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
        wave = (0.3 * np.sin(2 * np.pi * 440 * np.arange(16_000) / 16_000)).astype(np.float32)[None]
        sound = av.AudioFrame.from_ndarray(wave, format="fltp", layout="mono")
        sound.sample_rate = 16_000
        for p in [*a.encode(sound), *a.encode(None)]:
            c.mux(p)
    return path


def test_uniform_indices() -> None:
    assert uniform_indices(10, 4) == [0, 3, 6, 9]
    assert uniform_indices(3, 5) == [0, 0, 1, 2, 2]
    with pytest.raises(VideoError):
        uniform_indices(0, 4)


def test_frames_are_sampled_uniformly_from_a_real_video(tmp_path: Path) -> None:
    frames = sample_frames(make_video(tmp_path / "clip.mp4"), 4)
    levels = [float(np.asarray(f).mean()) for f in frames]
    assert len(frames) == 4 and frames[0].mode == "RGB"
    assert levels == pytest.approx([0, 60, 120, 180], abs=8)  # frames 0, 3, 6, 9


def test_unreadable_video_raises_video_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video")
    with pytest.raises(VideoError):
        sample_frames(bad, 2)


def _row(vid: str, answer: str, video: Any = "clip.mp4", **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "video_id": vid,
        "question": f"When the man in the dark suit waves ({vid})?",
        "correct_answer": answer,
        "video": video,
        "question_type": "existence",
    }
    row.update({f"option_{x.lower()}": f"text {x}" for x in LETTERS})
    row.update(kw)
    return row


def _splits() -> dict[str, list[dict[str, Any]]]:
    return {
        "standard_vision": [_row("v1", "B"), _row("v2", " C "), _row("v3", "G"), _row("v4", "E")],
        "misleading_vision": [
            _row("v1", "E", misleading_category="person_action"),
            _row("v2", "E", option_c=""),
            _row("v3", "E", video="missing.mp4"),
        ],
        "standard_audio": [_row("v1", "A"), _row("v1", "A")],
        "misleading_audio": [_row("v1", "F")],
    }


def _check(loaded: Any) -> None:
    assert loaded.total == 10
    assert len(loaded.records) == 5  # v1 std/mis vision, v2 std, v1 std/mis audio
    assert loaded.invalid == {
        "correct_answer not one letter A-F": 1,
        "answer does not fit split": 1,
        "missing field:option_c": 1,
        "missing video": 1,
        "duplicate video_id in split": 1,
    }
    by_id = {r.item_id: r for r in loaded.records}
    assert by_id["v2/standard_vision"].correct_answer == "C"
    mis = by_id["v1/misleading_vision"]
    assert mis.subcategory == "person_action" and mis.category == "existence"
    assert by_id["v1/standard_vision"].subcategory is None
    frames = mis.load_media()
    assert len(frames) == 50  # the paper's N (App. J), through the real decoder


@pytest.mark.parametrize("layout", ["jsonl", "json", "parquet", "hub-parquet", "save_to_disk", "one-file"])
def test_public_layouts_load_the_same_records(tmp_path: Path, layout: str) -> None:
    # videos beside the split files, or in videos/ (both are looked in)
    make_video(_mk(tmp_path / "videos") / "clip.mp4" if layout == "save_to_disk" else tmp_path / "clip.mp4")
    splits = _splits()
    if layout == "jsonl":
        for s, rows in splits.items():
            (tmp_path / f"{s}.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    elif layout == "json":
        for s, rows in splits.items():
            (tmp_path / f"{s}.json").write_text(json.dumps(rows))
    elif layout in ("parquet", "hub-parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        for s, rows in splits.items():
            target = (
                tmp_path / f"{s}.parquet"
                if layout == "parquet"
                else _mk(tmp_path / "data") / f"{s}-00000-of-00001.parquet"
            )
            pq.write_table(pa.Table.from_pylist(rows), target)
    elif layout == "save_to_disk":
        _save_to_disk(tmp_path, splits)
    else:
        (tmp_path / "all.json").write_text(json.dumps(splits))
    loaded = load_imavb(tmp_path / "all.json" if layout == "one-file" else tmp_path)
    _check(loaded)


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _save_to_disk(root: Path, splits: dict[str, list[dict[str, Any]]]) -> None:
    """A ``datasets`` DatasetDict.save_to_disk folder: with ``datasets`` when installed, else the same
    files written by hand: dataset_dict.json, and per split data-00000-of-00001.arrow (an Arrow stream)
    beside the metadata state.json and dataset_info.json (JSON objects, not rows)."""
    try:
        import datasets
    except ImportError:
        import pyarrow as pa

        (root / "dataset_dict.json").write_text(json.dumps({"splits": list(splits)}))
        for s, rows in splits.items():
            table = pa.Table.from_pylist(rows)
            folder = _mk(root / s)
            with (
                pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as f,
                pa.ipc.new_stream(f, table.schema) as w,
            ):
                w.write_table(table)
            (folder / "state.json").write_text(
                json.dumps(
                    {
                        "_data_files": [{"filename": "data-00000-of-00001.arrow"}],
                        "_fingerprint": "0123456789abcdef",
                        "_format_columns": None,
                        "_format_kwargs": {},
                        "_format_type": None,
                        "_output_all_columns": False,
                        "_split": None,
                    }
                )
            )
            (folder / "dataset_info.json").write_text(
                json.dumps({"citation": "", "description": "", "features": {}, "homepage": "", "license": ""})
            )
        return
    datasets.DatasetDict({s: datasets.Dataset.from_list(r) for s, r in splits.items()}).save_to_disk(
        str(root)
    )
    assert (root / "standard_vision" / "state.json").is_file()


def test_save_to_disk_metadata_is_not_read_as_rows(tmp_path: Path) -> None:
    make_video(_mk(tmp_path / "videos") / "clip.mp4")
    _save_to_disk(tmp_path, _splits())
    assert {p.name for p in (tmp_path / "standard_vision").iterdir()} >= {"state.json", "dataset_info.json"}
    _check(load_imavb(tmp_path))


def test_missing_folder_and_empty_folder_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not found"):
        load_imavb(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="no IMAVB split files"):
        load_imavb(tmp_path)


def test_normalize_answer_takes_exactly_one_letter() -> None:
    """Issue 31: "a blue screen" was read as A (a leading letter and a space matched); only one letter
    A-F, whitespace trimmed, is an answer."""
    assert [normalize_answer(x) for x in ("A", " B", "C\n", "D", "E", " F ")] == list("ABCDEF")
    bad = ("a blue screen", "A. The visual", "(C)", "b", "G", "Apple", "AB", "", 3, None)
    assert [normalize_answer(x) for x in bad] == [None] * len(bad)


def test_world_records_pair_standard_and_misleading() -> None:
    recs = world_records(6, seed=0)
    assert len(recs) == 12
    for std, mis in zip(recs[::2], recs[1::2], strict=True):
        assert std.stimulus_id == mis.stimulus_id and std.options == mis.options
        assert std.split == "standard_vision" and std.correct_answer in "ABCD"
        assert mis.split == "misleading_vision" and mis.correct_answer == "E" and mis.subcategory
        assert std.options[4:] == (
            "The visual detail in the question is incorrect",
            "The audio detail in the question is incorrect",
        )
    assert recs[0].load_media()[0].size == (96, 96)
