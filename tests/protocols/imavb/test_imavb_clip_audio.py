"""Real IMAVB clips with sound: a video's records carry its soundtrack (16 kHz mono, decoded once per
clip) and the fps of their frames; an audio question on a clip without an audio track is counted
``no_audio``, and that clip's soundtrack never loads as silence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from faithtests.data.av_clip import NO_AUDIO, ClipLoadError, load_track
from faithtests.models.interfaces import Audio
from faithtests.protocols.imavb import video
from faithtests.protocols.imavb.records import LETTERS, SPLITS
from faithtests.protocols.imavb.sources import load_imavb
from faithtests.testing.tiny_omni import SECONDS, TONE_HZ, write_clip


def _row(vid: str, answer: str, clip: str) -> dict[str, Any]:
    row: dict[str, Any] = {"video_id": vid, "question": f"When the door slams ({vid})?",
                           "correct_answer": answer, "video": clip}
    row.update({f"option_{x.lower()}": f"text {x}" for x in LETTERS})
    return row


@pytest.fixture
def data(tmp_path: Path) -> Path:
    write_clip(tmp_path / "sound.mp4", audio=True)
    write_clip(tmp_path / "mute.mp4", audio=False)
    answers = dict(zip(SPLITS, "BECF", strict=True))
    for split, answer in answers.items():
        rows = [_row("v1", answer, "sound.mp4"), _row("v2", answer, "mute.mp4")]
        (tmp_path / f"{split}.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    video._AUDIO.clear()
    return tmp_path


def test_records_carry_the_soundtrack_and_fps(data: Path) -> None:
    loaded = load_imavb(data)
    assert loaded.total == 8
    assert loaded.invalid == {NO_AUDIO: 2}  # v2's two audio questions: the clip has no audio track
    assert loaded.examples[NO_AUDIO][0].count("mute.mp4") == 1
    by_id = {r.item_id: r for r in loaded.records}
    want = [f"v1/{s}" for s in SPLITS] + ["v2/standard_vision", "v2/misleading_vision"]
    assert sorted(by_id) == sorted(want)
    v1 = [by_id[f"v1/{s}"] for s in SPLITS]
    for r in v1:
        assert r.audio is not None and r.fps == pytest.approx(50 / SECONDS, rel=0.05)
    sound = v1[2].audio()  # type: ignore[misc]
    assert isinstance(sound, Audio) and sound.sampling_rate == 16_000
    assert sound.samples.dtype == np.float32 and abs(sound.samples.size - SECONDS * 16_000) < 0.05 * 16_000
    spec = np.abs(np.fft.rfft(sound.samples))
    assert np.fft.rfftfreq(sound.samples.size, 1 / 16_000)[np.argmax(spec)] == pytest.approx(TONE_HZ, abs=3)
    assert len(v1[0].load_media()) == 50  # the paper's 50 frames, as before


def test_soundtrack_decodes_once_per_clip(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    real = load_track

    def counting(*a: Any, **kw: Any) -> Any:
        calls.append(a)
        return real(*a, **kw)

    monkeypatch.setattr(video, "load_track", counting)
    loaded = load_imavb(data)
    v1 = [r for r in loaded.records if r.stimulus_id == "v1"]
    tracks = [r.audio() for r in v1 if r.audio is not None]
    assert len(tracks) == 4 and all(t is tracks[0] for t in tracks) and len(calls) == 1


def test_a_clip_without_audio_never_loads_silence(data: Path) -> None:
    """Its vision questions carry no soundtrack (the clip is seen as it is: an omni model gets its frames
    only; issue 46: each was counted 'unreadable audio' before, so a set of silent clips left an omni
    model no record and crashed every premise test). Unprobed (``check_videos=False``), the loader
    refuses: never silence."""
    loaded = load_imavb(data)
    mute = [r for r in loaded.records if r.stimulus_id == "v2"]
    assert [r.split for r in mute] == ["standard_vision", "misleading_vision"]
    assert all(r.audio is None for r in mute)
    unprobed = [r for r in load_imavb(data, check_videos=False).records if r.stimulus_id == "v2"]
    for r in unprobed:
        assert r.audio is not None
        with pytest.raises(ClipLoadError) as e:
            r.audio()
        assert e.value.kind == NO_AUDIO and isinstance(e.value, OSError)  # the runner counts OSError
    assert video.probe_audio(data / "mute.mp4") == NO_AUDIO and video.probe_audio(data / "sound.mp4") is None
    assert video.probe_audio(data / "gone.mp4") == "missing_file"
    (data / "junk.mp4").write_bytes(b"not a clip")
    assert video.probe_audio(data / "junk.mp4") == "corrupt_clip"


def test_frames_option_still_sets_the_frames_and_fps(data: Path) -> None:
    loaded = load_imavb(data, n_frames=4)
    r = next(r for r in loaded.records if r.item_id == "v1/standard_audio")
    assert len(r.load_media()) == 4 and r.fps == pytest.approx(4 / SECONDS, rel=0.05)
    unchecked = load_imavb(data, n_frames=4, check_videos=False)
    assert unchecked.invalid == {} and all(r.fps is None for r in unchecked.records)


class _Hearing:
    """A model that hears: records the prompts it is given (video + audio, or frames only)."""

    spec = "hearing"
    num_layers = 1
    accepts_audio = True

    def __init__(self) -> None:
        self.prompts: list[Any] = []

    def decide(self, prompts: Any, options: Any, hooks: Any = None) -> Any:
        import torch

        from faithtests.models.interfaces import Decision

        self.prompts += list(prompts)
        return Decision(logits=torch.zeros(len(prompts), 6).index_fill_(1, torch.tensor([4]), 1.0),
                        states=torch.zeros(1, len(prompts), 2))


def test_an_omni_model_sees_a_silent_clips_vision_questions_as_frames(data: Path) -> None:
    from faithtests.protocols.imavb.fixtures import finite_run, load_counts, runnable
    from faithtests.protocols.imavb.run import run_choice

    loaded = load_imavb(data)
    todo, na, _ = runnable(loaded.records, True)
    vlm = _Hearing()
    run = finite_run(run_choice(vlm, todo))  # type: ignore[arg-type]
    assert not run.invalid and sorted(r.item_id for r in run.records) == sorted(r.item_id for r in todo)
    silent = [p for p in vlm.prompts if p.audio is None]
    assert len(silent) == 2 * 4 and all(p.images and not p.video for p in silent)  # v2's two, 4 orders
    # coverage: the two audio questions rejected at load count out of the 8 rows read, not the 6 that ran
    assert na == {} and load_counts(loaded, True, na) == (8, {NO_AUDIO: 2})
    # a model that takes no audio runs the 4 vision rows: the audio rows and their rejections are not its
    todo, na, _ = runnable(loaded.records, False)
    assert na == {"standard_audio": 1, "misleading_audio": 1} and load_counts(loaded, False, na) == (4, {})


def test_a_run_with_no_record_left_is_returned_as_it_is() -> None:
    from faithtests.protocols.imavb.fixtures import finite_run
    from faithtests.protocols.imavb.run import ChoiceRun

    empty = ChoiceRun([], ("fixed", 0), np.zeros((0, 2, 6)), np.zeros((0, 2, 6), np.int64), None, total=3,
                      invalid={"unreadable video": 3})
    assert finite_run(empty) is empty  # was: "cannot reshape array of size 0" in every premise test


def test_counts_on_rows_of_a_split_the_model_does_not_run_are_not_its() -> None:
    """What was counted on audio rows (a bad timestamp, a missing video) is left out for a model that
    takes no audio, with those rows: the count can never exceed the rows read (issue 46)."""
    from faithtests.protocols.imavb.fixtures import load_counts
    from faithtests.protocols.imavb.sources import Loaded

    stamp = "answer_timestamp unreadable (A6/A7 skip the row)"
    loaded = Loaded(total=4, read_by_split={"standard_vision": 2, "standard_audio": 2},
                    invalid={stamp: 2, "missing video": 1},
                    rejected_by_split={"standard_audio": {stamp: 2}, "standard_vision": {"missing video": 1}})
    assert load_counts(loaded, False, {"standard_audio": 2}) == (2, {"missing video": 1})
    assert load_counts(loaded, True, {}) == (4, {stamp: 2, "missing video": 1})
