"""Batched decoder forwards: the full-prompt path and the shared-prefix (KV cache) path.

Both paths take the same request: a right-padded :class:`EncodedBatch` and, per row, the positions whose
next-token logits are wanted (and optionally one position whose per-layer states are wanted). Right
padding keeps every real token's computation identical to an unpadded forward (causal attention never
looks right), so the wanted positions are gathered at each row's real indices.

Shared prefix (docs/architecture.md, "Caching and batching"): rows whose images are identical
(content hash) are rendered in full, their longest common token prefix is found, and
1. the prefix (with the images) runs once, batch 1, ``use_cache=True``;
2. its KV cache is forked and repeated across the rows (the stored prefix is never mutated, so it
   could serve several suffix batches);
3. the suffixes (right-padded remainders) run batched on top of it, with no attention mask (pads sit
   right of every real token) and no image inputs: only the sequence inputs a cache-continuing call
   takes (:mod:`.sequence_inputs`: the tokens, and Mllama's cross-attention mask).
The prefix is cut before the first wanted position and must contain every image token; otherwise the
rows fall back to the full path. So do all rows of a model whose cache cannot be forked exactly
(:data:`FORKABLE_LAYERS`: Qwen3.5's linear-attention layers update their state in place), found at its
first prefix call. Families that keep positional state across calls (Qwen2-VL's
``rope_deltas``) continue correctly because the prefix call sets that state for the suffix call.
MLP scales and FFN modifiers (per-position by contract) apply to both calls; attention modifiers see
per-row spans over the whole prompt, so they take the full path.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from faithtests.models.hooks import (
    AttentionContext,
    attention_context,
    capture_states,
    register_attention,
    residual_hooks,
)
from faithtests.models.interfaces import Hooks
from faithtests.models.prompting import EncodedBatch
from faithtests.models.sequence_inputs import prefix_inputs, suffix_inputs

#: ``reduce(logits [B, M, V], valid [B, M], targets [B, M]) -> Tensor [B, ...]`` on the model's device;
#: ``targets`` holds the token that follows each wanted position (-1 past the row's end).
Reduce = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def common_prefix_length(ids: torch.Tensor, lengths: Sequence[int]) -> int:
    """Length of the longest token prefix shared by all rows (within each row's real length)."""
    limit = min(lengths)
    same = (ids[:, :limit] == ids[:1, :limit]).all(dim=0)
    diff = (~same).nonzero()
    return int(diff[0, 0]) if diff.numel() else limit


#: Cache layer classes whose fork is exact: key/value layers that replace (never write into) their
#: tensors on update, so a shallow copy of the layer shares nothing a later update changes. Anything else
#: (linear-attention layers keep conv/recurrent states they update in place; static or quantised layers)
#: is not forked: those rows take the full forward (:meth:`ForwardRunner.shared`).
FORKABLE_LAYERS = frozenset({"DynamicLayer", "DynamicSlidingWindowLayer"})


def forkable(cache: Any) -> str:
    """"" when :func:`fork_cache` can copy ``cache`` exactly, else why not (its layer classes)."""
    layers = getattr(cache, "layers", None)
    if not isinstance(layers, list):
        return f"{type(cache).__name__} has no list of layers"
    odd = sorted({type(layer).__name__ for layer in layers} - FORKABLE_LAYERS)
    return f"cache layers {', '.join(odd)} cannot be forked exactly" if odd else ""


def fork_cache(cache: Any, repeats: int) -> Any:
    """A batch-``repeats`` copy of a prefix cache that leaves the original untouched.

    Cache layers of :data:`FORKABLE_LAYERS` replace (never write into) their key/value tensors on update,
    so shallow copies of the layer objects suffice; ``batch_repeat_interleave`` then materialises the
    repeated rows. Any other cache is refused (:func:`forkable`).
    """
    if why := forkable(cache):
        raise ValueError(f"fork_cache: {why}")
    forked = copy.copy(cache)
    forked.layers = [copy.copy(layer) for layer in cache.layers]
    forked.batch_repeat_interleave(repeats)
    return forked


def next_tokens(enc: EncodedBatch, idx: torch.Tensor) -> torch.Tensor:
    """The id following each position of ``idx`` [B, M] in its row (-1 beyond the row's real tokens)."""
    ids = enc.inputs["input_ids"]
    nxt = (idx + 1).clamp(max=ids.shape[1] - 1)
    out = ids.gather(1, nxt)
    limit = torch.tensor(enc.lengths)[:, None] + torch.tensor(enc.offsets)[:, None]
    return torch.where(idx + 1 < limit, out, torch.full_like(out, -1))


def _positions_tensor(positions: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad ragged per-row positions to [B, M] (repeating each row's last one) plus a validity mask."""
    width = max(len(p) for p in positions)
    if width == 0 or any(len(p) == 0 for p in positions):
        raise ValueError("every row needs at least one wanted position")
    idx = torch.tensor([list(p) + [p[-1]] * (width - len(p)) for p in positions], dtype=torch.long)
    valid = torch.tensor([[True] * len(p) + [False] * (width - len(p)) for p in positions])
    return idx, valid


class ForwardRunner:
    """Runs one HF ``...ForConditionalGeneration`` model over encoded batches (see module doc)."""

    def __init__(self, model: nn.Module, layers: nn.ModuleList, device: torch.device, dtype: torch.dtype):
        self.model = model
        self.layers = layers
        self.device = device
        self.dtype = dtype
        #: why this model's prefix cache cannot be shared ("" until a prefix call found out): then every
        #: later batch takes the full forward at once (no prefix call thrown away per batch)
        self.unshared = ""
        self.prefix_calls = 0  # counters a test/benchmark can read
        self.suffix_calls = 0
        self.full_calls = 0

    def to_device(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {
            k: v.to(self.device, dtype=self.dtype if v.is_floating_point() else v.dtype)
            for k, v in inputs.items()
        }

    @contextlib.contextmanager
    def _hooks(
        self, hooks: Hooks | None, enc: EncodedBatch | None, state_rows: torch.Tensor | None,
        store: list[torch.Tensor | None],
    ) -> Any:
        register_attention()  # idempotent; guards against re-imported transformers registries
        with contextlib.ExitStack() as stack:
            stack.enter_context(residual_hooks(self.layers, hooks))  # MLP scales, FFN modifiers
            if hooks is not None and hooks.attention:
                if enc is None:
                    raise RuntimeError("attention modifiers need the full-prompt path")
                stack.enter_context(attention_context(AttentionContext(hooks.attention, enc.spans)))
            if state_rows is not None:
                stack.enter_context(capture_states(self.layers, state_rows, store))
            yield

    def _stack_states(self, store: list[torch.Tensor | None]) -> torch.Tensor:
        missing = [i for i, s in enumerate(store) if s is None]
        if missing:
            raise RuntimeError(f"decoder layers {missing} produced no state (hooks did not fire)")
        return torch.stack([s for s in store if s is not None])

    @torch.inference_mode()
    def full(
        self,
        enc: EncodedBatch,
        positions: Sequence[Sequence[int]],
        reduce: Reduce,
        state_rows: Sequence[int] | None,
        hooks: Hooks | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        idx, valid = _positions_tensor(positions)
        store: list[torch.Tensor | None] = [None] * len(self.layers)
        rows = torch.tensor(list(state_rows)) if state_rows is not None else None
        with self._hooks(hooks, enc, rows, store):
            out = self.model(
                **self.to_device(enc.inputs), logits_to_keep=idx.to(self.device), use_cache=False
            )
        self.full_calls += 1
        targets = next_tokens(enc, idx).to(self.device)
        result = reduce(out.logits, valid.to(self.device), targets).float().cpu()
        return result, (self._stack_states(store) if rows is not None else None)

    @torch.inference_mode()
    def shared(
        self,
        enc: EncodedBatch,
        single: EncodedBatch,
        image_token: int,
        positions: Sequence[Sequence[int]],
        reduce: Reduce,
        state_rows: Sequence[int] | None,
        hooks: Hooks | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """The shared-prefix forward; ``None`` when the rows share too little (caller runs :meth:`full`).

        ``single`` is the first row encoded alone (its image tensors feed the prefix call).
        """
        if (hooks is not None and hooks.attention) or self.unshared:
            return None  # modifiers see per-row spans over the whole prompt; a cache we cannot fork
        ids = enc.inputs["input_ids"]
        needed = min(min(p) for p in positions)
        if state_rows is not None:
            needed = min(needed, min(state_rows))
        cut = min(common_prefix_length(ids, enc.lengths), needed)
        image_at = (ids[:, cut:] == image_token).any()
        if cut < 1 or bool(image_at):
            return None
        prefix = prefix_inputs(single.inputs, cut)
        store: list[torch.Tensor | None] = [None] * len(self.layers)
        with self._hooks(hooks, None, None, store):
            out = self.model(**self.to_device(prefix), use_cache=True, logits_to_keep=1)
        self.prefix_calls += 1
        if why := forkable(out.past_key_values):  # e.g. linear-attention state (Qwen3.5): full path
            self.unshared = why
            return None
        cache = fork_cache(out.past_key_values, ids.shape[0])
        width = max(enc.lengths)
        suffix = suffix_inputs(enc.inputs, cut, width)  # input_ids and any cross-attention mask
        idx, valid = _positions_tensor([[p - cut for p in row] for row in positions])
        rows = torch.tensor([r - cut for r in state_rows]) if state_rows is not None else None
        with self._hooks(hooks, None, rows, store):
            out = self.model(
                **self.to_device(suffix),
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=idx.to(self.device),
            )
        self.suffix_calls += 1
        targets = next_tokens(enc, idx + cut).to(self.device)
        result = reduce(out.logits, valid.to(self.device), targets).float().cpu()
        return result, (self._stack_states(store) if rows is not None else None)
