"""Video frames for IMAVB stimuli: N frames sampled uniformly over the clip with a real decoder (PyAV).

Indices follow the common video-LLM convention (lmms-eval's ``np.linspace(0, total - 1, N)``, rounded),
so a clip of ``total`` frames yields frames 0 and ``total - 1`` and N - 2 evenly spaced between. The
frame count comes from the container (``stream.frames``) or, when it does not say, from counting the
stream's packets; if decoding yields fewer frames than counted, the indices are recomputed on what was
decoded. PyAV is the ``imavb`` extra: ``pip install 'faithtests[imavb]'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import numpy as np
from PIL import Image

DEFAULT_FRAMES: Final = 8


class VideoError(RuntimeError):
    """A video that cannot be read: the loader and the runner count it as invalid ("unreadable video")."""


def require_av() -> Any:
    try:
        import av
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


def sample_frames(path: str | Path, n: int = DEFAULT_FRAMES) -> tuple[Image.Image, ...]:
    """``n`` RGB frames of the video at ``path``, uniformly sampled (module doc)."""
    av = require_av()
    p = Path(path)
    try:
        total = _count_frames(av, p)
        wanted = uniform_indices(total, n)
        frames, decoded = _decode_at(av, p, wanted)
        if len(frames) < len(wanted) and decoded > 0:  # the container over-counted
            wanted = uniform_indices(decoded, n)
            frames, _ = _decode_at(av, p, wanted)
    except VideoError:
        raise
    except Exception as e:  # PyAV raises its own error types (av.error.*), IndexError without a stream
        raise VideoError(f"{p}: cannot decode video ({type(e).__name__}: {e})") from e
    if len(frames) != len(wanted):
        raise VideoError(f"{p}: decoded {len(frames)} of {len(wanted)} sampled frames")
    return tuple(frames)


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
