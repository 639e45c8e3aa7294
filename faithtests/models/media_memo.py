"""Each distinct soundtrack and video preprocessed once: memos in front of a processor's feature
extractor and video processor.

An omni prompt shows one clip with many questions and option orders, and the processor computed the
clip's log-mel spectrogram and resized its frames again for every row: on reference:omni's run of the
default suites the Whisper feature extractor alone was 102 s of 207 s (cProfile, 654 processor calls
for 100 clips).
:class:`ArrayProcessorMemo` keeps each input array's output, keyed by the array's content and the
call's options, and concatenates a call's outputs along the first axis: the batch axis of a feature
extractor (``input_features``, ``attention_mask``) and the patch axis of a Qwen video processor
(``pixel_values_videos``, ``video_grid_thw``), which lay their batch out that way.

That a concatenation of single-input outputs equals the batched call is checked, not assumed: the
first call with two or more distinct inputs under given options is also run batched and compared bit
for bit; on any difference those options are passed through, uncached, from then on. An output that
is not all tensors, or single outputs whose shapes cannot be concatenated (padding to the longest
input), pass those options through too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from faithtests.models.processor_memo import ProcessorMemo

#: The keyword a sub-processor may take its inputs by, when not positionally.
INPUT_NAMES = ("audio", "raw_speech", "videos")

Parts = dict[str, torch.Tensor]


def array_key(array: np.ndarray) -> str:
    """Content key of an array: dtype, shape and bytes."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{array.dtype.str}{array.shape}".encode())
    digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _parts(out: Any) -> Parts | None:
    """An output's tensors by name, if it is a mapping of tensors only (else None: not memoised)."""
    if not isinstance(out, Mapping) or not out:
        return None
    if not all(isinstance(v, torch.Tensor) and v.ndim >= 1 for v in out.values()):
        return None
    return {str(k): v for k, v in out.items()}


def _concat(parts: Sequence[Parts]) -> Parts | None:
    """The outputs concatenated along the first axis, or None where their names or trailing shapes differ."""
    names = set(parts[0])
    if any(set(p) != names for p in parts):
        return None
    joined: Parts = {}
    for name in parts[0]:
        tails = {tuple(p[name].shape[1:]) for p in parts}
        if len(tails) != 1:
            return None
        joined[name] = torch.cat([p[name] for p in parts])
    return joined


def _equal(a: Parts, b: Parts) -> bool:
    return set(a) == set(b) and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)


class ArrayProcessorMemo(ProcessorMemo):
    """Callable in place of ``processor.feature_extractor`` or ``processor.video_processor``."""

    def __init__(self, inner: Any, **kwargs: Any) -> None:
        super().__init__(inner, **kwargs)
        self.__dict__["_verified"] = set()  # options whose batched call equalled the concatenation

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        inner = self.__dict__["_inner"]
        name = next((n for n in INPUT_NAMES if n in kwargs), None) if not args else None
        items = args[0] if args else kwargs.pop(name) if name else None
        rest = args[1:]

        def call(xs: Any) -> Any:
            return inner(xs, *rest, **kwargs) if args or name is None else inner(**{name: xs}, **kwargs)

        options = repr((len(rest), name, sorted(kwargs.items())))
        if (not isinstance(items, Sequence) or not items or options in self._passthrough
                or not all(isinstance(x, np.ndarray) for x in items)):
            return call(items)
        return self._served(list(items), options, call)

    def _served(self, items: list[np.ndarray], options: str, call: Callable[[Any], Any]) -> Any:
        """The call's outputs from the store and single calls for the rest (module doc), or the inner
        call's own output where the memo cannot reproduce it (those options then pass through)."""
        keys = [(options, array_key(x)) for x in items]
        held = self._held(keys)
        missing = {k: x for k, x in zip(keys, items, strict=True) if k not in held}
        fresh: dict[tuple[str, str], Parts] = {}
        for key, item in missing.items():
            single = _parts(call([item]))
            if single is None:
                self._passthrough.add(options)
                return call(items)
            fresh[key] = single
        joined = _concat([held[k] if k in held else fresh[k] for k in keys])
        if joined is None:  # e.g. padded to the longest input: a batch's rows depend on the batch
            self._passthrough.add(options)
            return call(items)
        if options not in self._verified and len(set(keys)) > 1:
            out = call(items)
            batched = _parts(out)
            if batched is None or not _equal(batched, joined):
                self._passthrough.add(options)
                return out
            self._verified.add(options)
        self._store(fresh)
        self._count(len(keys) - len(missing), len(missing))
        from transformers import BatchFeature  # lazy: only a loaded HF processor calls this

        return BatchFeature(joined)


def memoise_media(processor: Any) -> Any:
    """Put an :class:`ArrayProcessorMemo` in front of the processor's feature extractor and video
    processor (where it has them, once); the processor."""
    for attr in ("feature_extractor", "video_processor"):
        inner = getattr(processor, attr, None)
        if inner is not None and not isinstance(inner, ArrayProcessorMemo):
            setattr(processor, attr, ArrayProcessorMemo(inner))
    return processor
