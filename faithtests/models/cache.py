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

from faithtests.models.store import OutputStore, decode_array, encode_array

if TYPE_CHECKING:
    from PIL import Image

T = TypeVar("T")


def image_key(image: Image.Image) -> str:
    """Digest of an image's content (mode, size, pixels): equal pixels give equal keys."""
    h = hashlib.sha256()
    h.update(f"{image.mode}|{image.size[0]}x{image.size[1]}|".encode())
    h.update(image.tobytes())
    return h.hexdigest()


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


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt", ".ckpt")


def checkpoint_sha256(paths: Sequence[Path]) -> dict[str, str]:
    """{file name: sha256} for the weight files among ``paths`` (directories are searched one level)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES)))
        elif p.is_file():
            files.append(p)
    return {f.name: file_sha256(f) for f in files}


def content_sha256(paths: Sequence[Path]) -> dict[str, str]:
    """{file name: sha256} of every file among ``paths`` (directories one level): weights *and* the
    configs, tokenizer and preprocessing files beside them, which change outputs just as much."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(f for f in p.iterdir() if f.is_file()))
        elif p.is_file():
            files.append(p)
    return {f.name: file_sha256(f) for f in files}


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
        if self._store is not None and self._store_ns is None:
            self._store.stats(None).uncacheable += len(missing)
        if self._store is not None and self._store_ns is not None and missing:
            stored = self._store.get(self._store_ns, [str(k[1]) for k in missing])
            self._store.stats(self._owner).hits += len(stored)
            for key in [k for k in missing if str(k[1]) in stored]:
                self._rows[key] = decode_array(stored[str(key[1])])
                del missing[key]
        pending = list(missing.items())
        for start in range(0, len(pending), self.batch_size):
            chunk = pending[start : start + self.batch_size]
            rows = self.encode_fn([item for _, item in chunk])
            if rows.shape[0] != len(chunk):
                raise RuntimeError(f"encoder returned {rows.shape[0]} rows for {len(chunk)} items")
            rows = rows.detach().float().cpu()
            for (key, _), row in zip(chunk, rows, strict=True):
                self._rows[key] = row
            if self._store is not None and self._store_ns is not None:
                fresh = {str(k[1]): encode_array(r) for (k, _), r in zip(chunk, rows, strict=True)}
                self._store.put(self._store_ns, fresh)
                self._store.stats(self._owner).writes += len(fresh)
            self.stats.calls += 1
            self.stats.encoded += len(chunk)
        return torch.stack([self._rows[k] for k in keys])
