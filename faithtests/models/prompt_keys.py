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
    :class:`~faithtests.models.cache.ImageKeys`), its text and description."""
    return digest([[keys(im) for im in prompt.images], prompt.text, prompt.description])


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

    Rows with the same images (content hash) batch together; leftover single rows are pooled by
    whether they carry images (a processor call takes all-image or all-text batches)."""
    by_images: dict[tuple[str, ...], list[int]] = {}
    keys = ImageKeys()
    for i, p in enumerate(prompts):
        by_images.setdefault(tuple(keys(im) for im in p.images), []).append(i)
    batches: list[tuple[list[int], bool]] = []
    singles: dict[bool, list[int]] = {True: [], False: []}
    for rows in by_images.values():
        if share and len(rows) > 1:
            for s in range(0, len(rows), batch_size):
                chunk = rows[s : s + batch_size]
                if len(chunk) > 1:
                    batches.append((chunk, True))
                else:
                    singles[bool(prompts[chunk[0]].images)].extend(chunk)
        else:
            for r in rows:
                singles[bool(prompts[r].images)].extend([r])
    for rows in singles.values():
        batches += [(rows[s : s + batch_size], False) for s in range(0, len(rows), batch_size)]
    return batches
