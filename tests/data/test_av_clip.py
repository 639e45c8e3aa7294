"""Clips with sound through PyAV: a real MP4 written here (H.264 video, AAC stereo 44.1 kHz tone), loaded
as 50 frames and 16 kHz mono audio; corrupt files and videos without audio are explicit invalids."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from faithtests.data.av_clip import (
    CORRUPT,
    MISSING_FILE,
    NO_AUDIO,
    ClipLoadError,
    clear_memo,
    frame_indices,
    load_clip,
    load_track,
)
from faithtests.testing.tiny_omni import SECONDS, TONE_HZ, write_clip, write_cut_avi


@pytest.fixture(scope="module")
def clip_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_clip(tmp_path_factory.mktemp("clips") / "tone.mp4")


def dominant_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(samples.size)))
    return float(np.fft.rfftfreq(samples.size, 1 / rate)[int(np.argmax(spectrum))])


def test_frame_indices_are_uniform_and_cover_the_clip() -> None:
    assert frame_indices(60, 50)[0] == 0 and frame_indices(60, 50)[-1] == 59
    assert frame_indices(60, 3) == [0, 30, 59]  # rint(29.5) = 30 (round half to even)
    assert frame_indices(10, 20).count(0) == 2  # a short clip repeats frames, never invents any
    with pytest.raises(ValueError):
        frame_indices(0, 5)


def test_clip_loads_50_frames_and_16k_mono_audio(clip_file: Path) -> None:
    clip = load_clip(clip_file)
    assert len(clip.frames) == 50
    assert all(f.size == (64, 64) and f.mode == "RGB" for f in clip.frames)
    reds = [int(np.asarray(f)[..., 0].mean()) for f in clip.frames]
    assert reds[0] < 6 and reds[-1] > 4 * 59 - 8 and reds == sorted(reds)  # first..last, in time order
    assert clip.sampling_rate == 16_000 and clip.audio.dtype == np.float32 and clip.audio.ndim == 1
    # AAC adds encoder priming/padding (about 1-2 frames of 1024 samples at 44.1 kHz): allow 0.1 s
    assert abs(clip.audio.size - 32_000) <= 1_600
    assert abs(dominant_hz(clip.audio, 16_000) - TONE_HZ) < 5.0
    assert clip.duration == pytest.approx(SECONDS, abs=0.05) and clip.fps == pytest.approx(25.0, abs=1.0)
    assert load_clip(clip_file) is clip  # decoded once per process
    clear_memo()
    assert load_clip(clip_file) is not clip


def test_separate_audio_file_is_used(tmp_path: Path, clip_file: Path) -> None:
    other = write_clip(tmp_path / "880.mp4", tone=880.0)
    clip = load_clip(clip_file, audio=other, frames=5)
    assert len(clip.frames) == 5
    assert abs(dominant_hz(clip.audio, 16_000) - 880.0) < 5.0


def test_video_without_audio_is_invalid(tmp_path: Path) -> None:
    silent = write_clip(tmp_path / "mute.mp4", audio=False)
    with pytest.raises(ClipLoadError, match="no audio track") as err:
        load_clip(silent)
    assert err.value.kind == NO_AUDIO


def test_track_alone_equals_the_clips_audio_and_refuses_like_it(tmp_path: Path, clip_file: Path) -> None:
    """``load_track`` (an audio question needs no frames) gives the samples ``load_clip`` gives, with
    the same error kinds."""
    np.testing.assert_array_equal(load_track(clip_file), load_clip(clip_file).audio)
    with pytest.raises(ClipLoadError) as err:
        load_track(write_clip(tmp_path / "mute.mp4", audio=False))
    assert err.value.kind == NO_AUDIO
    with pytest.raises(ClipLoadError) as err:
        load_track(tmp_path / "absent.mp4")
    assert err.value.kind == MISSING_FILE


def test_corrupt_and_missing_files_are_invalid(tmp_path: Path, clip_file: Path) -> None:
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 8)
    with pytest.raises(ClipLoadError) as err:
        load_clip(broken)
    assert err.value.kind == CORRUPT and "broken.mp4" in str(err.value)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(clip_file.read_bytes()[: clip_file.stat().st_size // 3])  # truncated: no moov atom
    with pytest.raises(ClipLoadError) as err:
        load_clip(cut)
    assert err.value.kind == CORRUPT
    with pytest.raises(ClipLoadError) as err:
        load_clip(tmp_path / "absent.mp4")
    assert err.value.kind == MISSING_FILE


def test_memo_follows_the_file(tmp_path: Path) -> None:
    path = write_clip(tmp_path / "swap.mp4")
    first = load_clip(path, frames=4)
    write_clip(path, tone=880.0)  # rewritten in place: a new size or mtime means a new decode
    second = load_clip(path, frames=4)
    assert second is not first and abs(dominant_hz(second.audio, 16_000) - 880.0) < 5.0


def test_a_stereo_track_is_the_mean_of_its_channels(tmp_path: Path) -> None:
    """Issue 46: libswresample's mono downmix sums two equal channels at -3 dB each, +3 dB in all: a 0.9
    peak came out 1.27, outside [-1, 1]. The channel mean keeps it: 0.9 for equal channels, and the
    average where they differ (left 0.9 sine, right silent: 0.45)."""
    import av

    rate = 44_100
    tone = (0.9 * np.sin(2 * np.pi * 440 * np.arange(rate) / rate)).astype(np.float32)

    def wav(name: str, left: np.ndarray, right: np.ndarray) -> Path:
        path = tmp_path / name
        with av.open(str(path), "w") as box:
            stream = box.add_stream("pcm_f32le", rate=rate, layout="stereo")
            frame = av.AudioFrame.from_ndarray(np.stack([left, right]), format="fltp", layout="stereo")
            frame.sample_rate = rate
            for packet in [*stream.encode(frame), *stream.encode(None)]:
                box.mux(packet)
        return path

    same = load_track(wav("same.wav", tone, tone), sampling_rate=16_000)
    assert np.abs(same).max() == pytest.approx(0.9, abs=0.01)
    half = load_track(wav("half.wav", tone, np.zeros_like(tone)), sampling_rate=16_000)
    assert np.abs(half).max() == pytest.approx(0.45, abs=0.01)


def test_a_truncated_clip_is_corrupt_never_sampled_from_what_decodes(tmp_path: Path) -> None:
    """Issue 46: the first of a cut file's frames were sampled as if they were the clip."""
    whole, cut = write_cut_avi(tmp_path)
    sound = write_clip(tmp_path / "tone.mp4")  # the soundtrack, from another file
    with pytest.raises(ClipLoadError) as e:
        load_clip(cut, audio=sound, frames=8)
    assert e.value.kind == CORRUPT and "the container lists 100 frames but only" in str(e.value)
    assert len(load_clip(whole, audio=sound, frames=8).frames) == 8
