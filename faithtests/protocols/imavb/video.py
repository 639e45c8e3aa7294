"""Video frames for IMAVB stimuli: N frames sampled uniformly over the clip with a real decoder (PyAV).

N is 50 by default, as the paper feeds every model ("50 uniformly sampled video frames", App. J; the
public extractor's ``--max_frames 50``); ``--faith-imavb-frames`` changes it. Indices follow the common
video-LLM convention (lmms-eval's ``np.linspace(0, total - 1, N)``, rounded), so a clip of ``total``
frames yields frames 0 and ``total - 1`` and N - 2 evenly spaced between (a clip shorter than N frames
repeats frames). The frame count comes from the container (``stream.frames``) or, when it does not say,
from counting the stream's packets; if decoding yields a few fewer frames than counted (an over-count),
the indices are recomputed on what was decoded; many fewer is a truncated file, an error.

A6/A7 (App. C) trim the clip to a time window: the frames whose presentation time lies in
[start, end] seconds are the clip, and N are sampled uniformly over them the same way.

Decoding 50 frames of a long clip is the expensive step, so the last few (path, N, window) results are
kept (:data:`CACHE_SIZE`): the standard and misleading variants of a stimulus, which the loader keeps
next to each other, decode once. PyAV is the ``imavb`` extra: ``pip install 'faithtests[imavb]'``.

The soundtrack (:func:`load_audio`) is decoded and resampled to 16 kHz mono by
:func:`faithtests.data.av_clip.load_track` (FFmpeg's resampler), once per clip; :func:`probe_audio` names
a clip without an audio stream (``no_audio``) without decoding it.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from threading import Lock
from typing import Any, Final

import numpy as np
from PIL import Image

from faithtests.data.av_clip import CORRUPT, DEFAULT_RATE, MISSING_FILE, NO_AUDIO, cut_short, load_track
from faithtests.models.interfaces import Audio

DEFAULT_FRAMES: Final = 50
#: Decoded stimuli kept (full-resolution frames: 50 frames of 720p are ~140 MB, so only a few).
CACHE_SIZE: Final = 2
#: Decoded soundtracks kept (a 5 min track at 16 kHz float32 is ~19 MB).
AUDIO_CACHE_SIZE: Final = 8

Window = tuple[float, float]


class VideoError(RuntimeError):
    """A video that cannot be read: the loader and the runner count it as invalid ("unreadable video")."""


def require_av() -> Any:
    try:
        import av  # lazy: optional extra (faithtests[imavb])
    except ImportError as e:  # pragma: no cover - exercised where the extra is absent
        raise ImportError(
            "IMAVB video stimuli need PyAV: pip install 'faithtests[imavb]' (or: pip install av)"
        ) from e
    return av


def uniform_indices(total: int, n: int) -> list[int]:
    """``n`` frame indices spread uniformly over ``total`` frames (first and last included)."""
    if total <= 0:
        raise VideoError("video has no frames")
    if n <= 0:
        raise ValueError(f"need at least one frame, got n={n}")
    return [int(i) for i in np.linspace(0, total - 1, n).round().astype(int)]


def _count_frames(av: Any, path: Path) -> int:
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        if stream.frames and stream.frames > 0:
            return int(stream.frames)
        return sum(1 for p in c.demux(stream) if p.size > 0)


def _frame_times(av: Any, path: Path) -> list[float]:
    """Presentation time (s) of every decoded frame, in decode order."""
    with av.open(str(path)) as c:
        return [float(f.time) if f.time is not None else float("nan") for f in c.decode(video=0)]


def _decode_at(av: Any, path: Path, wanted: list[int]) -> tuple[list[Image.Image], int]:
    keep: dict[int, Image.Image] = {}
    targets = set(wanted)
    last = max(wanted)
    count = 0
    with av.open(str(path)) as c:
        for i, frame in enumerate(c.decode(video=0)):
            count = i + 1
            if i in targets:
                keep[i] = frame.to_image().convert("RGB")
            if i >= last:
                break
    return [keep[i] for i in wanted if i in keep], count


def _check_shortfall(p: Path, listed: int, decoded: int) -> None:
    """A container may list a frame or two more than decode (B-frame reordering, edit lists): then the
    indices are recomputed on what decodes. Many more missing is a truncated or damaged file (a cut
    download: half the clip, its frames repeated to fill N): a :class:`VideoError`, counted "unreadable
    video", never sampled as if whole (issue 46)."""
    if cut_short(listed, decoded):
        raise VideoError(f"{p}: the container lists {listed} frames but only {decoded} decode: a truncated "
                         "or damaged file")


def frame_indices(path: str | Path, n: int = DEFAULT_FRAMES, window: Window | None = None) -> list[int]:
    """The decode-order indices :func:`sample_frames` returns (for reports and tests)."""
    return _sample(Path(path), n, window)[1]


def _sample(p: Path, n: int, window: Window | None) -> tuple[tuple[Image.Image, ...], list[int]]:
    av = require_av()
    try:
        if window is None:
            total = _count_frames(av, p)
            wanted = uniform_indices(total, n)
            frames, decoded = _decode_at(av, p, wanted)
            if len(frames) < len(wanted) and decoded > 0:  # the container over-counted, or truncation
                _check_shortfall(p, total, decoded)
                wanted = uniform_indices(decoded, n)
                frames, _ = _decode_at(av, p, wanted)
        else:
            start, end = window
            inside = [i for i, t in enumerate(_frame_times(av, p)) if start <= t <= end]
            if not inside:
                raise VideoError(f"{p}: no frame between {start:g} s and {end:g} s")
            wanted = [inside[j] for j in uniform_indices(len(inside), n)]
            frames, _ = _decode_at(av, p, wanted)
    except VideoError:
        raise
    except Exception as e:  # PyAV raises its own error types (av.error.*), IndexError without a stream
        raise VideoError(f"{p}: cannot decode video ({type(e).__name__}: {e})") from e
    if len(frames) != len(wanted):
        raise VideoError(f"{p}: decoded {len(frames)} of {len(wanted)} sampled frames")
    return tuple(frames), wanted


_CACHE: OrderedDict[tuple[str, int, Window | None], tuple[Image.Image, ...]] = OrderedDict()
_LOCK = Lock()


def sample_frames(
    path: str | Path, n: int = DEFAULT_FRAMES, window: Window | None = None
) -> tuple[Image.Image, ...]:
    """``n`` RGB frames of the video at ``path`` (or of its ``window`` in seconds), uniformly sampled
    (module doc); the last :data:`CACHE_SIZE` results are reused."""
    key = (str(Path(path).resolve()), int(n), window)
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    frames = _sample(Path(path), n, window)[0]
    with _LOCK:
        _CACHE[key] = frames
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return frames


def probe_audio(path: str | Path) -> str | None:
    """The invalid kind of the clip's soundtrack (:mod:`faithtests.data.av_clip`'s ``missing_file``,
    ``corrupt_clip``, ``no_audio``), or ``None`` where the file has an audio stream. A cheap check (the
    container is opened, nothing decoded); a track that is there but does not decode fails in
    :func:`load_audio`."""
    p = Path(path)
    if not p.is_file():
        return MISSING_FILE
    av = require_av()
    try:
        with av.open(str(p)) as c:
            return None if c.streams.audio else NO_AUDIO
    except Exception:  # PyAV's own error types (av.error.*)
        return CORRUPT


def clip_seconds(path: str | Path) -> float | None:
    """The clip's duration from its container (``None`` where it does not say or cannot be opened)."""
    av = require_av()
    try:
        with av.open(str(path)) as c:
            if c.duration:
                return float(c.duration) / float(av.time_base)
            stream = c.streams.video[0]
            if stream.duration and stream.time_base:
                return float(stream.duration * stream.time_base)
    except Exception:  # PyAV's own error types; the frame loader reports the video's problem
        return None
    return None


_AUDIO: OrderedDict[tuple[str, int], Audio] = OrderedDict()


def load_audio(path: str | Path, sampling_rate: int = DEFAULT_RATE) -> Audio:
    """The clip's soundtrack at ``sampling_rate`` Hz mono (App. J: 16 kHz), decoded and resampled by
    :func:`faithtests.data.av_clip.load_track` (no video frame decoded) once per clip (the last
    :data:`AUDIO_CACHE_SIZE` kept).
    A missing or undecodable track raises :class:`~faithtests.data.av_clip.ClipLoadError` (an
    ``OSError`` whose ``kind`` is its invalid count): never silence."""
    key = (str(Path(path).resolve()), int(sampling_rate))
    with _LOCK:
        if key in _AUDIO:
            _AUDIO.move_to_end(key)
            return _AUDIO[key]
    audio = Audio(load_track(path, sampling_rate=sampling_rate), int(sampling_rate))
    with _LOCK:
        _AUDIO[key] = audio
        while len(_AUDIO) > AUDIO_CACHE_SIZE:
            _AUDIO.popitem(last=False)
    return audio


def probe_video(path: str | Path) -> str | None:
    """Why the video cannot be used ("missing video", "unreadable video: ..."), or ``None``."""
    p = Path(path)
    if not p.is_file():
        return "missing video"
    av = require_av()
    try:
        with av.open(str(p)) as c:
            if not c.streams.video:
                return "unreadable video: no video stream"
    except Exception as e:
        return f"unreadable video: {type(e).__name__}"
    return None
