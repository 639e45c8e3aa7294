"""What every preprocessing memo shares: it stands in for a Hugging Face sub-processor (image processor,
feature extractor, video processor), passes every attribute through to it, and keeps the outputs it
has seen in a byte-bounded least-recently-used store, safe to share between threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch

#: Bytes of memoised outputs per sub-processor (least recently used dropped first): 256 MiB holds
#: ~6,000 96-px image rows, ~170 Whisper log-mel rows (30 s, 128 bins).
MEMO_BYTES = 256 * 2**20


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, Mapping):
        return sum(_nbytes(v) for v in value.values())
    return 0


class ProcessorMemo:
    """Callable in place of ``processor.<sub-processor>``; every other attribute is the inner one's.

    Subclasses define ``__call__`` with :meth:`_held` and :meth:`_store`; ``hits`` and ``misses`` count
    the inputs served from the store and those computed, ``distinct`` the different inputs asked for
    (fewer than ``misses`` once the budget has evicted some)."""

    def __init__(self, inner: Any, memo_bytes: int = MEMO_BYTES) -> None:
        self.__dict__["_inner"] = inner
        self.__dict__["_rows"] = OrderedDict()  # key -> memoised output of one input
        self.__dict__["_bytes"] = 0
        self.__dict__["_limit"] = memo_bytes
        self.__dict__["_passthrough"] = set()  # call options this memo does not serve
        self.__dict__["_lock"] = threading.Lock()
        self.__dict__["hits"] = 0
        self.__dict__["misses"] = 0
        self.__dict__["_seen"] = set()  # every key asked for: the distinct inputs (models.work's floor)

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("_inner")
        if inner is None:  # mid-construction (copy, pickle): no attributes yet
            raise AttributeError(name)
        return getattr(inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.__dict__["_inner"], name, value)

    def _held(self, keys: list[Any]) -> dict[Any, Any]:
        """The outputs of ``keys`` in the store now: references, so a later eviction cannot take them."""
        with self._lock:
            self._seen.update(keys)
            held = {k: self._rows[k] for k in keys if k in self._rows}
            for k in held:
                self._rows.move_to_end(k)
        return held

    @property
    def distinct(self) -> int:
        with self._lock:
            return len(self._seen)

    def _count(self, hits: int, misses: int) -> None:
        with self._lock:
            self.__dict__["hits"] += hits
            self.__dict__["misses"] += misses

    def _store(self, rows: Mapping[Any, Any]) -> None:
        with self._lock:
            for key, row in rows.items():
                self._rows[key] = row
                self.__dict__["_bytes"] += _nbytes(row)
            while self._bytes > self._limit and self._rows:
                _, old = self._rows.popitem(last=False)
                self.__dict__["_bytes"] -= _nbytes(old)
