"""Video clips with their sound: frames and a 16 kHz mono waveform decoded with PyAV.

A clip is a video file with its audio track, or a video file plus a separate audio file. Frames are
sampled uniformly over the whole clip (``frames`` of them, indices ``round(linspace(0, n - 1, frames))``:
a clip shorter than ``frames`` repeats frames rather than inventing any). The audio is decoded and
resampled by FFmpeg's resampler (PyAV's ``AudioResampler``: float32, mono, ``sampling_rate`` Hz); no
signal processing is written here. Each clip is decoded once per process (memoised on its path, size and
modification time, and the settings).

A clip that cannot be used raises :class:`ClipLoadError` with a ``kind`` a loader counts as invalid
(:mod:`faithtests.data.invalid`): the file is missing, it does not decode, it has no video, or it has no
(or an empty) audio track. A missing track is never replaced by silence.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

#: What the omni suites feed a model (IMAVB App. J): 50 frames and the audio at 16 kHz mono.
DEFAULT_FRAMES = 50
DEFAULT_RATE = 16_000
#: Decoded clips kept in memory (each holds its frames).
MEMO_SIZE = 32

MISSING_FILE = "missing_file"
CORRUPT = "corrupt_clip"
NO_VIDEO = "no_video"
NO_AUDIO = "no_audio"


class ClipLoadError(OSError):
    """A clip that cannot be loaded; ``kind`` is its invalid-count kind, the message names the path."""

    def __init__(self, path: str | Path, kind: str, reason: str) -> None:
        self.path = Path(path)
        self.kind = kind
        super().__init__(f"cannot load clip {self.path} ({kind}): {reason}")


@dataclass(frozen=True, eq=False)
class Clip:
    """One decoded clip: ``frames`` (RGB, in time order), the mono float32 ``audio`` at
    ``sampling_rate`` Hz, ``fps`` of the sampled frames over the clip, and the clip's ``duration`` (s)."""

    frames: tuple[Image.Image, ...]
    audio: npt.NDArray[np.float32]
    sampling_rate: int
    fps: float
    duration: float


def frame_indices(total: int, wanted: int) -> list[int]:
    """Uniformly spaced frame indices over ``total`` decoded frames (first and last included)."""
    if total < 1 or wanted < 1:
        raise ValueError(f"cannot sample {wanted} of {total} frames")
    return [int(i) for i in np.rint(np.linspace(0, total - 1, wanted))]


def _open(path: Path) -> Any:
    import av  # local: only clip loading needs PyAV

    if not path.is_file():
        raise ClipLoadError(path, MISSING_FILE, "file not found")
    try:
        return av.open(str(path))
    except (av.FFmpegError, ValueError) as e:
        raise ClipLoadError(path, CORRUPT, f"{type(e).__name__}: {e}") from e


#: Frames a container may list beyond those that decode before the file counts as truncated: the larger
#: of a few frames and a small share of the clip (B-frame reordering and edit lists over-count by a few).
OVERCOUNT_SLACK = 2
OVERCOUNT_SHARE = 0.02


def cut_short(listed: int, decoded: int) -> bool:
    """Whether a video that lists ``listed`` frames but decodes ``decoded`` is truncated or damaged (a cut
    download), not just over-counted by its container (issue 46)."""
    return listed - decoded > max(OVERCOUNT_SLACK, round(OVERCOUNT_SHARE * listed))


def _frames(path: Path, wanted: int) -> tuple[tuple[Image.Image, ...], float]:
    """The sampled frames and the video's duration in seconds."""
    import av  # local: only clip loading needs PyAV

    try:
        with _open(path) as box:
            if not box.streams.video:
                raise ClipLoadError(path, NO_VIDEO, "the file has no video stream")
            total = sum(1 for _ in box.decode(video=0))
            stream = box.streams.video[0]
            rate = float(stream.average_rate or 0) or float(stream.guessed_rate or 0)
            listed = int(stream.frames or 0)
        if total == 0:
            raise ClipLoadError(path, CORRUPT, "no video frame decodes")
        if cut_short(listed, total):  # a cut file: never sampled as if whole
            raise ClipLoadError(path, CORRUPT, f"the container lists {listed} frames but only {total} "
                                               "decode: a truncated or damaged file")
        keep = frame_indices(total, wanted)
        picked: dict[int, Image.Image] = {}
        with _open(path) as box:
            for i, frame in enumerate(box.decode(video=0)):
                if i in keep:
                    picked[i] = frame.to_image().convert("RGB")
    except av.FFmpegError as e:
        raise ClipLoadError(path, CORRUPT, f"{type(e).__name__}: {e}") from e
    if len(picked) != len(set(keep)):
        raise ClipLoadError(path, CORRUPT, f"{total} frames on the first pass, {len(picked)} sampled on the "
                                           "second")
    duration = total / rate if rate > 0 else float("nan")
    return tuple(picked[i] for i in keep), duration


def _audio(path: Path, rate: int) -> npt.NDArray[np.float32]:
    """The file's first audio track, resampled to ``rate`` Hz, its channels averaged: mono float32.

    The channel mean, not libswresample's mono downmix: that one sums the channels at -3 dB each, so a
    stereo track of two equal channels came out +3 dB louder, peaks past [-1, 1] (issue 46)."""
    import av  # local: only clip loading needs PyAV

    chunks: list[npt.NDArray[Any]] = []
    try:
        with _open(path) as box:
            if not box.streams.audio:
                raise ClipLoadError(path, NO_AUDIO, "the file has no audio track")
            resampler = av.AudioResampler(format="fltp", layout=None, rate=rate)  # planar: [channels, n]
            for frame in box.decode(audio=0):
                chunks += [f.to_ndarray().mean(axis=0) for f in resampler.resample(frame)]
            chunks += [f.to_ndarray().mean(axis=0) for f in resampler.resample(None)]  # flush
    except av.FFmpegError as e:
        raise ClipLoadError(path, CORRUPT, f"audio: {type(e).__name__}: {e}") from e
    samples = np.concatenate(chunks).astype(np.float32) if chunks else np.zeros(0, np.float32)
    if samples.size == 0:
        raise ClipLoadError(path, NO_AUDIO, "the audio track decodes to no samples")
    if not np.isfinite(samples).all():
        raise ClipLoadError(path, CORRUPT, "the audio track decodes to non-finite samples")
    return samples


def _stamp(path: Path) -> tuple[str, int, int]:
    try:
        stat = path.stat()
    except FileNotFoundError as e:
        raise ClipLoadError(path, MISSING_FILE, "file not found") from e
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=MEMO_SIZE)
def _decoded(video: tuple[str, int, int], audio: tuple[str, int, int] | None, frames: int,
             rate: int) -> Clip:
    shown, duration = _frames(Path(video[0]), frames)
    samples = _audio(Path(audio[0] if audio is not None else video[0]), rate)
    fps = frames / duration if duration > 0 else float("nan")
    return Clip(frames=shown, audio=samples, sampling_rate=rate, fps=fps, duration=duration)


def load_clip(video: str | Path, *, audio: str | Path | None = None, frames: int = DEFAULT_FRAMES,
              sampling_rate: int = DEFAULT_RATE) -> Clip:
    """``frames`` uniformly sampled frames of ``video`` and its audio track (or the track of ``audio``)
    at ``sampling_rate`` Hz mono; decoded once per process for the same files and settings."""
    if frames < 1 or sampling_rate < 1:
        raise ValueError(f"frames and sampling_rate must be positive, got {frames}, {sampling_rate}")
    video_path = Path(video)
    return _decoded(_stamp(video_path), _stamp(Path(audio)) if audio is not None else None, frames,
                    sampling_rate)


def load_track(path: str | Path, *, sampling_rate: int = DEFAULT_RATE) -> npt.NDArray[np.float32]:
    """The audio track of ``path`` alone at ``sampling_rate`` Hz mono float32, without decoding any
    video frame (an audio question needs no frames); the same :class:`ClipLoadError` kinds as
    :func:`load_clip`, never silence."""
    if sampling_rate < 1:
        raise ValueError(f"sampling_rate must be positive, got {sampling_rate}")
    return _audio(Path(_stamp(Path(path))[0]), sampling_rate)


def clear_memo() -> None:
    """Forget decoded clips (tests; a long process that has moved on to other clips)."""
    _decoded.cache_clear()
