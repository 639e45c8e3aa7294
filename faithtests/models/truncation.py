"""Counting inputs longer than a model's context, so no caption is shortened silently.

A dual encoder's tokenizer cuts a caption at its context length (77 tokens for CLIP): the model then
scores a different, shorter text. Each adapter counts, per unique input, how many were longer than the
limit; the count reaches the scorecard's fingerprint as ``truncated_inputs``
(``{kind: {"truncated", "checked", "limit", "longest_tokens"}}``). Counting happens where inputs enter
the adapter, before any cache, so cached outputs (``--faith-cache``) are counted too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TruncationCounter:
    """How many unique inputs of one kind exceeded ``limit`` tokens (None: the limit is unknown)."""

    kind: str
    limit: int | None = None
    checked: int = 0
    truncated: int = 0
    longest: int = 0
    _seen: set[str] = field(default_factory=set, repr=False)

    def observe(self, texts: Sequence[str], lengths: Callable[[list[str]], list[int]]) -> None:
        """Count the texts not seen before; ``lengths`` gives their token counts before any cut."""
        if self.limit is None:
            return
        new = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if not new:
            return
        self._seen.update(new)
        for n in lengths(new):
            self.checked += 1
            self.longest = max(self.longest, n)
            self.truncated += n > self.limit

    def as_info(self) -> dict[str, Any]:
        return {"truncated": self.truncated, "checked": self.checked, "limit": self.limit,
                "longest_tokens": self.longest}


def open_clip_lengths(tokenizer: Any) -> Callable[[list[str]], list[int]] | None:
    """Token counts as open_clip's tokenizer sees them (special tokens included), None for a tokenizer
    this does not know (then nothing is counted and ``limit`` stays None)."""
    if hasattr(tokenizer, "sot_token_id") and hasattr(tokenizer, "encode"):  # SimpleTokenizer (CLIP BPE)
        return lambda texts: [len(tokenizer.encode(t)) + 2 for t in texts]
    inner = getattr(tokenizer, "tokenizer", None)
    if inner is not None and callable(inner):  # HFTokenizer / SigLipTokenizer wrap a transformers one
        clean = getattr(tokenizer, "clean_fn", None) or (lambda t: t)
        return lambda texts: [len(ids) for ids in inner([clean(t) for t in texts])["input_ids"]]
    return None


def hf_lengths(tokenizer: Any, special_tokens: bool = True) -> Callable[[list[str]], list[int]]:
    """Token counts of a transformers tokenizer, before truncation."""
    return lambda texts: [len(ids) for ids in
                          tokenizer(texts, add_special_tokens=special_tokens, truncation=False)["input_ids"]]


def known_limit(value: Any) -> int | None:
    """A context length, or None for transformers' "no limit" sentinel (a huge number) or a missing one."""
    return int(value) if isinstance(value, int) and 0 < value < 1_000_000 else None
