"""Store keys of prompt rows, and the batches rows with the same images form (prefix sharing).

Keys are content digests (:func:`~faithtests.models.store.digest`), with each image object's pixels
hashed once per call (:class:`~faithtests.models.cache.ImageKeys`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from faithtests.models.cache import ImageKeys, image_key
from faithtests.models.interfaces import Prompt
from faithtests.models.store import digest

if TYPE_CHECKING:
    from PIL import Image


def prompt_key(prompt: Prompt, keys: Callable[[Image.Image], str] = image_key) -> str:
    """Content digest of a prompt: its images' pixels (through ``keys``, e.g. one call's
    :class:`~faithtests.models.cache.ImageKeys`), its text and description; and its video frames and
    audio only when it has them (so keys of prompts without them are what they were before)."""
    parts: list[object] = [[keys(im) for im in prompt.images], prompt.text, prompt.description]
    if prompt.video or prompt.audio is not None:
        parts.append(media_key(prompt, keys))
    return digest(parts)


def media_key(prompt: Prompt, keys: Callable[[Image.Image], str] = image_key) -> str:
    """Digest of a prompt's video frames and audio waveform ("" when it has neither)."""
    if not prompt.video and prompt.audio is None:
        return ""
    audio = prompt.audio.digest() if prompt.audio is not None else None
    return digest(["media", [keys(im) for im in prompt.video], audio, prompt.video_fps])


def media_kind(prompt: Prompt) -> tuple[bool, bool, bool]:
    """Which inputs a prompt carries (images, video, audio): one processor call takes one kind."""
    return bool(prompt.images), bool(prompt.video), prompt.audio is not None


def check_prompts(prompts: Sequence[Prompt]) -> None:
    if not prompts:
        raise ValueError("no prompts given")
    for i, p in enumerate(prompts):
        if not isinstance(p, Prompt):
            raise TypeError(f"prompt {i} is {type(p).__name__}, expected faithtests Prompt")


def prompt_keys(prompts: Sequence[Prompt], aux: Sequence[Prompt] | None = None) -> Callable[[int], str]:
    """Row ``i``'s store key for one call (images hashed once per object in it); with ``aux`` (a
    contrast's auxiliary prompts, one per row) the pair's."""
    keys = ImageKeys()
    if aux is None:
        return lambda i: prompt_key(prompts[i], keys)
    return lambda i: digest([prompt_key(prompts[i], keys), prompt_key(aux[i], keys)])


def caption_keys(prompts: Sequence[Prompt], captions: Sequence[str]) -> Callable[[int], str]:
    """Row ``i``'s store key of a (prompt, caption) pair for one call."""
    keys = ImageKeys()
    return lambda i: digest([prompt_key(prompts[i], keys), captions[i]])


def image_groups(prompts: Sequence[Prompt], batch_size: int, share: bool) -> list[tuple[list[int], bool]]:
    """Row-index batches (at most ``batch_size``), each flagged whether it may share a prefix.

    Rows with the same images (content hash), and the same video and audio, batch together; leftover
    single rows are pooled by which inputs they carry (:func:`media_kind`: a processor call takes
    all-image or all-text batches)."""
    by_images: dict[tuple[str, ...], list[int]] = {}
    keys = ImageKeys()
    for i, p in enumerate(prompts):
        media = (media_key(p, keys),) if p.video or p.audio is not None else ()  # same video and audio too
        by_images.setdefault((*(keys(im) for im in p.images), *media), []).append(i)
    batches: list[tuple[list[int], bool]] = []
    singles: dict[tuple[bool, bool, bool], list[int]] = {(True, False, False): [], (False, False, False): []}
    for rows in by_images.values():
        if share and len(rows) > 1:
            for s in range(0, len(rows), batch_size):
                chunk = rows[s : s + batch_size]
                if len(chunk) > 1:
                    batches.append((chunk, True))
                else:
                    singles.setdefault(media_kind(prompts[chunk[0]]), []).extend(chunk)
        else:
            for r in rows:
                singles.setdefault(media_kind(prompts[r]), []).extend([r])
    for rows in singles.values():
        batches += [(rows[s : s + batch_size], False) for s in range(0, len(rows), batch_size)]
    return batches
