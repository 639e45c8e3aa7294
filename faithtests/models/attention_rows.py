"""Per-row attention results, so ``attentions`` goes through the output store like every other call.

A batch's captured weights are split into rows (each trimmed to its own real tokens, with its spans) and
a call's rows are assembled back into one :class:`Attentions`, zero-padded on the right to the longest
row. Cached and computed rows take the same path, so a cache hit returns exactly what a fresh run does.
Batches are right-padded here: a row's keys past its length are padding, whose weight is zero.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import torch

from faithtests.models.interfaces import Attentions, TokenSpans
from faithtests.models.store import decode_array, encode_array

#: One prompt's answer-query attention: weights [layers, heads, length] and its spans.
AttentionRow = tuple[torch.Tensor, dict[str, Any]]

_MAGIC = b"FTR1"


def split_rows(per_layer: Sequence[torch.Tensor], spans: TokenSpans) -> list[AttentionRow]:
    """Rows of one batch: ``per_layer[l]`` is [n, heads, width]; row j keeps its first length[j] keys."""
    rows: list[AttentionRow] = []
    for j, length in enumerate(spans.length):
        if spans.offset and spans.offset[j]:
            raise ValueError("attention rows: a left-padded batch cannot be split by length")
        weights = torch.stack([w[j, :, :length] for w in per_layer]).float().cpu()
        meta = {"image": list(spans.image[j]), "description": list(spans.description[j]), "length": length,
                "image_runs": [list(r) for r in spans.image_runs[j]] if spans.image_runs else None}
        rows.append((weights, meta))
    return rows


def assemble(rows: Sequence[AttentionRow]) -> Attentions:
    """One :class:`Attentions` from rows in prompt order (zero-padded to the longest row)."""
    if not rows:
        raise ValueError("attention rows: nothing to assemble")
    width = max(int(w.shape[-1]) for w, _ in rows)
    padded = torch.stack([torch.nn.functional.pad(w, (0, width - w.shape[-1])) for w, _ in rows], dim=1)
    metas = [m for _, m in rows]
    runs = [m["image_runs"] for m in metas]
    spans = TokenSpans(
        image=[(int(m["image"][0]), int(m["image"][1])) for m in metas],
        description=[(int(m["description"][0]), int(m["description"][1])) for m in metas],
        length=[int(m["length"]) for m in metas],
        image_runs=[] if any(r is None for r in runs) else [[(int(a), int(b)) for a, b in r] for r in runs],
        offset=[0] * len(metas),
    )
    return Attentions(weights=list(padded.unbind(0)), spans=spans)


def _encode(row: AttentionRow) -> bytes:
    meta = json.dumps(row[1], sort_keys=True).encode("utf-8")
    return _MAGIC + len(meta).to_bytes(4, "little") + meta + encode_array(row[0])


def _decode(blob: bytes) -> AttentionRow:
    if blob[:4] != _MAGIC:
        raise ValueError("store: not an attention row (bad magic); delete the cache directory")
    size = int.from_bytes(blob[4:8], "little")
    return decode_array(blob[8 + size :]), dict(json.loads(blob[8 : 8 + size].decode("utf-8")))


ATTENTION_CODEC: tuple[Callable[[AttentionRow], bytes], Callable[[bytes], AttentionRow]] = (_encode, _decode)
