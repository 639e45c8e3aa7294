"""Content-hash caches: every unique image and caption is encoded once per model per session.

Keys are ``sha256`` digests of the content (image mode, size and pixels; caption UTF-8 bytes) combined with
the model's fingerprint id, so one cache object can even be shared between models without collisions.
Misses are encoded in batches of ``batch_size`` (in first-seen order, deduplicated within the request);
``stats`` counts encoded items, hits and encoder calls so a test or benchmark can prove the dedupe.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

import torch

from faithtests.models.locations import WEIGHT_SUFFIXES
from faithtests.models.store import ARRAY_CODEC, OutputStore

if TYPE_CHECKING:
    from PIL import Image

T = TypeVar("T")


def image_key(image: Image.Image) -> str:
    """Digest of an image's content (mode, size, pixels): equal pixels give equal keys."""
    h = hashlib.sha256()
    h.update(f"{image.mode}|{image.size[0]}x{image.size[1]}|".encode())
    h.update(image.tobytes())
    return h.hexdigest()


class ImageKeys:
    """:func:`image_key` memoised by object identity for one call: a batch holds the same image object in
    many prompts (one image, many captions), and hashing its pixels each time was a warm run's largest
    key cost. Ids are unique while the call holds the images; never reuse one across calls (an image may
    be edited in place in between)."""

    def __init__(self) -> None:
        self._keys: dict[int, tuple[Image.Image, str]] = {}  # the image is kept so its id is not reused

    def __call__(self, image: Image.Image) -> str:
        got = self._keys.get(id(image))
        if got is None:
            got = self._keys[id(image)] = (image, image_key(image))
        return got[1]


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of one file, memoised on (path, size, mtime) so a session hashes a checkpoint once."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _FILE_DIGESTS:
        with path.open("rb") as f:
            _FILE_DIGESTS[key] = hashlib.file_digest(f, "sha256").hexdigest()
    return _FILE_DIGESTS[key]


def _listed(paths: Sequence[Path], weights_only: bool) -> list[Path]:
    """The files among ``paths`` (directories searched one level, weight files only if asked)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(f for f in p.iterdir()
                                if f.is_file() and (not weights_only or f.name.endswith(WEIGHT_SUFFIXES))))
        elif p.is_file():
            files.append(p)
    return files


def checkpoint_sha256(paths: Sequence[Path]) -> dict[str, str]:
    """{file name: sha256} for the weight files among ``paths`` (directories are searched one level)."""
    return {f.name: file_sha256(f) for f in _listed(paths, weights_only=True)}


def content_sha256(paths: Sequence[Path]) -> dict[str, str]:
    """{file name: sha256} of every file among ``paths`` (directories one level): weights *and* the
    configs, tokenizer and preprocessing files beside them, which change outputs just as much."""
    return {f.name: file_sha256(f) for f in _listed(paths, weights_only=False)}


@dataclass
class CacheStats:
    """Counters: ``encoded`` items actually run through the encoder, ``hits`` served from the cache,
    ``calls`` encoder invocations (batches)."""

    encoded: int = 0
    hits: int = 0
    calls: int = 0


class EncodeCache(Generic[T]):
    """Maps item -> row tensor via a batched encoder, encoding each unique item once.

    ``key_fn`` gives the content key, ``encode_fn`` encodes a list of items into [n, ...] (any device;
    rows are stored on the CPU in float32).
    """

    def __init__(
        self,
        namespace: str,
        key_fn: Callable[[T], Hashable],
        encode_fn: Callable[[list[T]], torch.Tensor],
        batch_size: int = 16,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.namespace = namespace
        self.key_fn = key_fn
        self.encode_fn = encode_fn
        self.batch_size = batch_size
        self.stats = CacheStats()
        self._rows: dict[tuple[str, Hashable], torch.Tensor] = {}
        self._store: OutputStore | None = None
        self._store_ns: str | None = None
        self._owner: str | None = None

    def attach(self, store: OutputStore, owner: str | None, kind: str) -> None:
        """Read and write rows through a persistent store too, under ``owner`` (a model's namespace;
        None: never stored) and ``kind``. Keys must then be strings (content digests)."""
        self._store, self._owner = store, owner
        self._store_ns = f"{owner}|{kind}" if owner else None

    def __len__(self) -> int:
        return len(self._rows)

    def clear(self) -> None:
        self._rows.clear()
        self.stats = CacheStats()

    def get(self, items: Sequence[T]) -> torch.Tensor:
        """Rows for ``items`` in order, [len(items), ...]; unseen items are encoded in batches first."""
        if not items:
            raise ValueError("EncodeCache.get needs at least one item")
        keys = [(self.namespace, self.key_fn(item)) for item in items]
        missing: dict[tuple[str, Hashable], T] = {}
        for key, item in zip(keys, items, strict=True):
            if key not in self._rows and key not in missing:
                missing[key] = item
        self.stats.hits += len(items) - len(missing)
        pending, todo = list(missing), list(missing.values())
        if self._store is None:
            rows = self._encode(todo)
        else:  # the persistent store serves what it holds and keeps what is encoded
            rows = self._store.rows(self._owner, self._store_ns, [str(k[1]) for k in pending],
                                    lambda idx: self._encode([todo[i] for i in idx]), ARRAY_CODEC)
        self._rows.update(zip(pending, rows, strict=True))
        return torch.stack([self._rows[k] for k in keys])

    def _encode(self, items: list[T]) -> list[torch.Tensor]:
        """Rows of ``items`` (float32, CPU), encoded in batches of ``batch_size``."""
        out: list[torch.Tensor] = []
        for start in range(0, len(items), self.batch_size):
            chunk = items[start : start + self.batch_size]
            rows = self.encode_fn(chunk)
            if rows.shape[0] != len(chunk):
                raise RuntimeError(f"encoder returned {rows.shape[0]} rows for {len(chunk)} items")
            out.extend(rows.detach().float().cpu())
            self.stats.calls += 1
            self.stats.encoded += len(chunk)
        return out


class PairScores:
    """Scores of (image, text) pairs held for the session by content (image pixels, text): each
    unique pair is scored once, whoever asks (the VLM scorer in-process or on a Ray pool). ``stats``:
    ``encoded`` pairs scored, ``hits`` answered from memory, ``calls`` scoring calls."""

    def __init__(self) -> None:
        self.stats = CacheStats()
        self._scores: dict[tuple[str, str], float] = {}

    def get(self, images: Sequence[Image.Image], texts: Sequence[str],
            score: Callable[[list[int]], Sequence[float]]) -> torch.Tensor:
        """Scores [N] of the pairs ``zip(images, texts)``; ``score(rows)`` scores the rows not held yet
        (first occurrence of each new pair, in order)."""
        image_keys = ImageKeys()
        keys = [(image_keys(im), text_key(t)) for im, t in zip(images, texts, strict=True)]
        todo: dict[tuple[str, str], int] = {}
        for i, key in enumerate(keys):
            if key not in self._scores and key not in todo:
                todo[key] = i
        self.stats.hits += len(keys) - len(todo)
        if todo:
            rows = list(todo.values())
            self._scores.update(zip(todo, (float(v) for v in score(rows)), strict=True))
            self.stats.encoded += len(rows)
            self.stats.calls += 1
        return torch.tensor([self._scores[k] for k in keys], dtype=torch.float32)

