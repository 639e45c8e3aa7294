"""IMAVB on video as the paper runs it (App. C, J): 50 uniformly sampled frames by default through a real
decoder, A6/A7's trimmed clips, A5's verdict parsing, and data errors that name file, line and field
(issue 31). Clips are encoded here with PyAV; each frame carries its index as 8 black/white stripes, so a
decoded frame says exactly which one it is despite the lossy codec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import av  # the imavb extra, brought by the dev extra: missing, collection fails
import numpy as np
import pytest

from faithtests.protocols.imavb import video
from faithtests.protocols.imavb.prompts import a5_text, parse_verdict, prompt_text, trim_window
from faithtests.protocols.imavb.records import LETTERS
from faithtests.protocols.imavb.sources import DataError, load_imavb, parse_window, world_records
from faithtests.protocols.imavb.video import frame_indices, sample_frames, uniform_indices

FPS = 10


def striped_clip(path: Path, n: int) -> Path:
    """``n`` frames at 10 fps; frame i shows i in binary as 8 vertical stripes (white = 1)."""
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=FPS)
        s.width, s.height, s.pix_fmt = 128, 16, "yuv420p"
        for i in range(n):
            img = np.zeros((16, 128, 3), np.uint8)
            for b in range(8):
                if i >> b & 1:
                    img[:, 16 * b : 16 * (b + 1)] = 255
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def index_of(frame: Any) -> int:
    a = np.asarray(frame.convert("L"), dtype=np.float64)
    return sum(1 << b for b in range(8) if a[4:12, 16 * b + 4 : 16 * b + 12].mean() > 128)


def test_default_is_50_frames_at_uniform_indices_of_a_real_clip(tmp_path: Path) -> None:
    """App. J: 50 uniformly sampled frames; index k of N over T frames is round(k(T-1)/(N-1))."""
    clip = striped_clip(tmp_path / "clip.mp4", 120)
    frames = sample_frames(clip)
    want = [round(k * 119 / 49) for k in range(50)]
    assert video.DEFAULT_FRAMES == 50 and len(frames) == 50
    assert [index_of(f) for f in frames] == want == frame_indices(clip) == uniform_indices(120, 50)
    assert want[:4] == [0, 2, 5, 7] and want[-1] == 119
    assert [index_of(f) for f in sample_frames(clip, 4)] == [0, 40, 79, 119]


def test_a_truncated_clip_is_unreadable_never_sampled_as_if_whole(tmp_path: Path) -> None:
    """Issue 46: a cut download whose container still lists every frame (an AVI header) decoded a part
    and was sampled as if the container had over-counted: 50 frames from the first few, repeated,
    nothing counted. Many frames short is a VideoError ("unreadable video"); the whole clip samples."""
    from faithtests.protocols.imavb.video import VideoError
    from faithtests.testing.tiny_omni import write_cut_avi

    whole, cut = write_cut_avi(tmp_path)
    with pytest.raises(VideoError, match=r"cut.avi: the container lists 100 frames but only \d+ decode: a "
                                         "truncated or damaged file"):
        sample_frames(cut)
    assert len(sample_frames(whole)) == 50


def test_a_window_samples_within_its_seconds(tmp_path: Path) -> None:
    """A6/A7 trimming: frames with presentation time in [2 s, 4 s] at 10 fps are 20..40 (21 frames);
    5 uniform among them are 20, 25, 30, 35, 40."""
    clip = striped_clip(tmp_path / "clip.mp4", 60)
    assert [index_of(f) for f in sample_frames(clip, 5, (2.0, 4.0))] == [20, 25, 30, 35, 40]
    assert frame_indices(clip, 5, (2.0, 4.0)) == [20, 25, 30, 35, 40]
    with pytest.raises(video.VideoError, match="no frame between"):
        sample_frames(clip, 5, (7.0, 9.0))


def test_a_stimulus_decodes_once_for_its_variants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    striped_clip(tmp_path / "clip.mp4", 30)
    calls: list[int] = []
    real = video._sample

    def counted(p: Path, n: int, window: Any) -> Any:
        calls.append(n)
        return real(p, n, window)

    monkeypatch.setattr(video, "_sample", counted)
    root = tmp_path
    rows = {s: [_row("v1", a)] for s, a in (("standard_vision", "B"), ("misleading_vision", "E"))}
    _write_jsonl(root, rows)
    loaded = load_imavb(root, n_frames=6)
    a, b = (r.load_media() for r in loaded.records)
    assert len(a) == 6 and a is b and calls == [6]


def test_trim_windows_of_a6_and_a7() -> None:
    """App. C: A6 = the answer window; A7 = it ±50% of its length (never before 0 s)."""
    assert trim_window((20.0, 30.0), "A6") == (20.0, 30.0)
    assert trim_window((20.0, 30.0), "A7") == (15.0, 35.0)
    assert trim_window((2.0, 10.0), "A7") == (0.0, 14.0)
    assert prompt_text("A6", "q?", ["o"] * 6, "standard_vision") == prompt_text("A1", "q?", ["o"] * 6, "x")


def test_parse_window_reads_the_public_timestamp_forms() -> None:
    assert parse_window("[20s-30s]") == (20.0, 30.0)
    assert parse_window("20-30") == (20.0, 30.0)
    assert parse_window("0:20 - 0:30") == (20.0, 30.0)
    assert parse_window([1.5, 2]) == (1.5, 2.0) and parse_window({"start": 0, "end": 10}) == (0.0, 10.0)
    assert [parse_window(x) for x in ("soon", "30-20", [1], True, None, "[a-b]")] == [None] * 6


def test_a5_verdict_and_explanation_are_parsed_never_guessed() -> None:
    """A5 = A2's text + "Explain your reasoning in 1–2 sentences." (App. I.1); the verdict is the first
    word, else the one of TRUE/FALSE the first sentence holds alone; anything else is no verdict."""
    assert a5_text("q", "standard_vision").endswith("Answer with only: TRUE or FALSE\n"
                                                      "Explain your reasoning in 1–2 sentences.")
    assert parse_verdict("FALSE. The man wears blue, not red.") == ("FALSE", "The man wears blue, not red.")
    assert parse_verdict("True: he waves.") == ("TRUE", "he waves.")
    assert parse_verdict("The description is false. He sits.")[0] == "FALSE"
    assert parse_verdict("TRUE")[0] == "TRUE" and parse_verdict("TRUE")[1] == ""
    assert parse_verdict("It could be true or false.")[0] is None
    assert parse_verdict("I cannot tell.")[0] is None and parse_verdict("")[0] is None


def _row(vid: str, answer: Any, **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"video_id": vid, "question": f"When the man waves ({vid})?",
                           "correct_answer": answer, "video": "clip.mp4"}
    row.update({f"option_{x.lower()}": f"text {x}" for x in LETTERS})
    row.update(kw)
    return row


def _write_jsonl(root: Path, splits: dict[str, list[Any]]) -> None:
    if not (root / "clip.mp4").exists():
        striped_clip(root / "clip.mp4", 30)
    for split, rows in splits.items():
        (root / f"{split}.jsonl").write_text("".join(
            (r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def test_a_jsonl_line_that_is_not_json_or_not_an_object_names_file_and_line(tmp_path: Path) -> None:
    _write_jsonl(tmp_path, {"standard_vision": [_row("v1", "A"), "{not json"],
                            "misleading_vision": [_row("v1", "E")]})
    with pytest.raises(DataError, match=r"standard_vision\.jsonl:2: not JSON"):
        load_imavb(tmp_path)
    _write_jsonl(tmp_path, {"standard_vision": [_row("v1", "A"), '["A", "B"]']})
    with pytest.raises(DataError, match=r"standard_vision\.jsonl:2: expected a JSON object.*list"):
        load_imavb(tmp_path)


def test_a_correct_answer_that_is_not_one_letter_is_counted_with_file_line_and_field(tmp_path: Path) -> None:
    """Issue 31: "a blue screen" used to be read as A."""
    _write_jsonl(tmp_path, {"standard_vision": [_row("v1", "a blue screen"), _row("v2", "B")],
                            "misleading_vision": [_row("v1", "E"), _row("v2", "(E)")]})
    loaded = load_imavb(tmp_path)
    assert [r.item_id for r in loaded.records] == ["v2/standard_vision", "v1/misleading_vision"]
    assert loaded.invalid == {"correct_answer not one letter A-F": 2}
    ex = loaded.examples["correct_answer not one letter A-F"]
    assert "standard_vision.jsonl:1" in ex[0] and "field correct_answer: 'a blue screen'" in ex[0]
    assert "misleading_vision.jsonl:2" in ex[1] and "'(E)'" in ex[1]


def test_empty_and_missing_splits_are_clear_errors(tmp_path: Path) -> None:
    _write_jsonl(tmp_path, {"standard_vision": [_row("v1", "A")], "misleading_vision": []})
    with pytest.raises(DataError, match=r"misleading_vision\.jsonl: split misleading_vision has no rows"):
        load_imavb(tmp_path)
    (tmp_path / "misleading_vision.jsonl").unlink()
    with pytest.raises(DataError, match="split misleading_vision is missing"):
        load_imavb(tmp_path)
    one = tmp_path / "all.json"
    one.write_text(json.dumps({"standard_vision": [_row("v1", "A")], "misleading_vision": []}))
    with pytest.raises(DataError, match="misleading_vision: split has no rows"):
        load_imavb(one)


def test_timestamps_reach_the_records_and_unreadable_ones_are_counted(tmp_path: Path) -> None:
    _write_jsonl(tmp_path, {
        "standard_vision": [_row("v1", "A", answer_timestamp="[0s-1s]"),
                            _row("v2", "B", answer_timestamp="later")],
        "misleading_vision": [_row("v1", "E", answer_timestamp="[0s-1s]"), _row("v2", "E")],
    })
    loaded = load_imavb(tmp_path, n_frames=3)
    by = {r.item_id: r for r in loaded.records}
    assert by["v1/standard_vision"].answer_window == (0.0, 1.0)
    assert by["v2/standard_vision"].answer_window is None
    kind = "answer_timestamp unreadable (A6/A7 skip the row)"
    assert loaded.invalid == {kind: 1}
    assert "field answer_timestamp: 'later'" in loaded.examples[kind][0]
    r = by["v1/misleading_vision"]
    assert r.window_media is not None and [index_of(f) for f in r.window_media(0.0, 1.0)] == [0, 5, 10]
    assert all(r.window_media is None and r.answer_window is None for r in world_records(2, seed=0))


def test_a5_to_a7_reach_the_scorecard_on_video_data(tmp_path: Path) -> None:
    """The suite on a tiny IMAVB folder (PyAV clips with answer timestamps) and a tiny LLaVA, as a user
    runs it: 50 frames per clip by default (in the fingerprint), and A5, A6, A7 recorded per split with
    ΔBal against A1 beside A2-A4."""
    from faithtests.testing.suite_run import run_suite, value
    from faithtests.testing.tiny import build_tiny

    root = Path(__file__).resolve().parents[3]
    data = tmp_path / "imavb"
    data.mkdir()
    striped_clip(data / "clip.mp4", 30)
    rows = {s: [_row(f"v{i}", a, answer_timestamp="[1s-2s]") for i in range(4)]
            for s, a in (("standard_vision", "B"), ("misleading_vision", "E"))}
    _write_jsonl(data, rows)
    model = build_tiny("llava", tmp_path / "m")
    outcomes, results, invalid = run_suite(
        root, "suites/test_premise_rejection.py", tmp_path / "report", f"hf:{model}",
        "--faith-data", f"imavb={data}", "-k", "prompt_variant and imavb")
    assert sorted(t.rsplit("-", 1)[1].rstrip("]") for t in outcomes) == [f"A{k}" for k in range(2, 8)]
    assert all(t.startswith("test_prompt_variant[imavb-") and o == "passed" for t, o in outcomes.items())
    for k in range(2, 8):
        assert 0.0 <= value(results, "Bal", slice=f"prompt=A{k}") <= 1.0
        assert -1.0 <= value(results, "delta_Bal_vs_A1", slice=f"prompt=A{k}") <= 1.0
    card = json.loads((tmp_path / "report" / "scorecard.json").read_text())
    assert card["fingerprint"]["settings"]["imavb_frames"] == 50
    assert not any("not applicable" in e["kind"] and e["kind"].startswith("A") for v in invalid.values()
                   for e in v)
