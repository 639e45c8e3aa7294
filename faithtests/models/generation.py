"""Greedy generation for :class:`~faithtests.models.hf_vlm.HFVisionLanguageModel`: plain, and contrastive
against one auxiliary prompt per row (``Hooks.contrast``, SPD-Faith Eq. 7 / 24); and the hooked forwards
that capture the answer query's attention rows (:func:`captured_rows`).

Both go through ``model.generate`` on left-padded batches, with the attention modifiers, MLP scales and
FFN modifiers of the call's hooks active, and return the decoded new tokens.

Contrastive decoding runs the two streams as one joint batch: rows [0, n) are the call's prompts (main),
rows [n, 2n) their auxiliary prompts. Each stream has its own rows of the KV cache: both are prefilled,
then advance one token per step. A logits processor replaces main row i's next-token logits by
L_main + eta * ReLU(L_main - L_aux) (L_aux: row n + i) and forces row n + i onto the token main row i
picks (the greedy argmax of those logits), so the auxiliary prompt is continued with the same tokens.
Letting ``generate`` drive both streams keeps each family's own input preparation (position ids from
the left-padding attention mask, Qwen2-VL's rope deltas, image inputs at prefill only) and its per-row
EOS handling (both rows of a pair stop together, the auxiliary one being forced onto the EOS); with
eta = 0 the main rows are exactly plain greedy decoding. Hooks apply to both streams (the modifiers see
the joint batch's spans). The model's own generation-config processors (e.g. a repetition penalty) run
first, on each row with its own history, so L_main is exactly what plain greedy decoding would see.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import torch

from faithtests.models.attention_rows import AttentionRow, split_rows
from faithtests.models.hooks import AttentionContext, attention_context, register_attention, residual_hooks
from faithtests.models.interfaces import Hooks, Prompt
from faithtests.models.prefix import ForwardRunner
from faithtests.models.prompting import EncodedBatch, placeholder_ids
from faithtests.models.step_contrast import StepContrast, StepContrastLogits, StepReader, step_contrast
from faithtests.progress import call_reported, call_share


class GenerationHost(Protocol):
    """What the generation loop needs of an adapter (``HFVisionLanguageModel`` satisfies it)."""

    batch_size: int

    @property
    def model(self) -> Any: ...

    @property
    def layers(self) -> Any: ...

    @property
    def processor(self) -> Any: ...

    @property
    def runner(self) -> ForwardRunner: ...

    def encode(self, prompts: Sequence[Prompt], padding_side: str = "right") -> EncodedBatch: ...


def contrast(main: torch.Tensor, aux: torch.Tensor, eta: float) -> torch.Tensor:
    """Eq. 7 / 24: L_main + eta * ReLU(L_main - L_aux); a token suppressed in the main stream (-inf, e.g.
    a media placeholder) stays suppressed (-inf - -inf would be NaN)."""
    return torch.where(torch.isneginf(main), main, main + eta * torch.relu(main - aux))


def decoding_options(host: GenerationHost) -> dict[str, Any]:
    """``generate`` options every greedy decoding here shares: greedy, the tokenizer's pad, and no media
    placeholder token ever generated (:func:`~.prompting.placeholder_ids`)."""
    return {"do_sample": False, "num_beams": 1, "pad_token_id": host.processor.tokenizer.pad_token_id,
            "temperature": None, "top_p": None, "top_k": None,
            "suppress_tokens": placeholder_ids(host.model.config)}


def contrast_aux(hooks: Hooks | None, n: int) -> tuple[Prompt, ...] | None:
    """The validated auxiliary prompts of a ``generate`` call with ``n`` prompts; None without contrast."""
    if hooks is None or hooks.contrast is None:
        return None
    c = hooks.contrast
    if len(c.aux) != n:
        raise ValueError(f"Hooks.contrast has {len(c.aux)} auxiliary prompts for {n} prompts (one per row)")
    if not (math.isfinite(c.eta) and c.eta >= 0):
        raise ValueError(f"Hooks.contrast.eta must be finite and >= 0 (Eq. 7 never lowers a logit): {c.eta}")
    for i, p in enumerate(c.aux):
        if not isinstance(p, Prompt):
            raise TypeError(f"auxiliary prompt {i} is {type(p).__name__}, expected faithtests Prompt")
    return c.aux


class ContrastLogits:
    """Logits processor of a joint [main; aux] batch (module doc)."""

    def __init__(self, n: int, eta: float) -> None:
        self.n = n
        self.eta = eta

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if scores.shape[0] != 2 * self.n:
            raise RuntimeError(f"contrastive decoding: {scores.shape[0]} rows for {self.n} pairs")
        final = contrast(scores[: self.n], scores[self.n :], self.eta)
        forced = torch.full_like(final, torch.finfo(final.dtype).min)
        forced.scatter_(1, final.argmax(dim=-1, keepdim=True), 0.0)
        return torch.cat([final, forced])


class DecodeSteps:
    """A ``generate`` streamer that only reports progress (``progress.call_share``): after decoding step
    t, each of the batch's ``rows`` counts as t / ``max_new_tokens`` done (an upper bound on the steps
    left until the batch ends, when the caller reports it whole). It reads no token and changes nothing;
    passed only while the progress is shown (:func:`streamer`)."""

    def __init__(self, before: int, rows: int, max_new_tokens: int, total: int) -> None:
        self.before, self.rows, self.total = before, rows, total
        self.max_new_tokens = max(max_new_tokens, 1)
        self.steps = -1  # generate's first put is the prompt

    def put(self, value: Any) -> None:
        self.steps += 1
        if self.steps:
            call_share(self.before + self.rows * min(self.steps / self.max_new_tokens, 1.0), self.total)

    def end(self) -> None:
        pass


def streamer(before: int, rows: int, max_new_tokens: int, total: int) -> dict[str, Any]:
    """``generate`` keyword arguments for the decoding-step progress: none when nobody reads it."""
    return {"streamer": DecodeSteps(before, rows, max_new_tokens, total)} if call_reported() else {}


def kind_runs(prompts: Sequence[Prompt], start: int, stop: int) -> list[list[int]]:
    """Consecutive index runs in [start, stop) whose prompts all have images or all have none, in order
    (a processor call takes one kind; keeping runs consecutive keeps the output order)."""
    runs: list[list[int]] = []
    for i in range(start, stop):
        if runs and bool(prompts[runs[-1][-1]].images) == bool(prompts[i].images):
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


@torch.inference_mode()
def greedy_texts(
    host: GenerationHost,
    prompts: Sequence[Prompt],
    max_new_tokens: int,
    hooks: Hooks | None,
    aux: Sequence[Prompt] | None = None,
) -> list[str]:
    """Greedy continuations of ``prompts``; contrastive against ``aux`` (row-aligned) when given, with
    ``hooks.contrast.eta`` (module doc)."""
    if aux is not None and len(aux) != len(prompts):
        raise ValueError(f"{len(aux)} auxiliary prompts for {len(prompts)} prompts")
    if (stepped := step_contrast(hooks)) is not None:  # the auxiliary input is rebuilt at every step
        return stepped_texts(host, prompts, max_new_tokens, hooks, stepped, aux or stepped.aux)
    eta = hooks.contrast.eta if hooks is not None and hooks.contrast is not None else 0.0
    register_attention()  # idempotent; guards against re-imported transformers registries
    tok = host.processor.tokenizer
    per_batch = host.batch_size if aux is None else max(1, host.batch_size // 2)  # joint batches are 2n
    texts: dict[int, str] = {}
    for start in range(0, len(prompts), per_batch):
        for rows in kind_runs(prompts, start, min(start + per_batch, len(prompts))):
            batch = [prompts[i] for i in rows]
            extra: dict[str, Any] = {}
            if aux is not None:
                mixed = [i for i in rows if bool(aux[i].images) != bool(prompts[i].images)]
                if mixed:
                    raise ValueError(f"contrastive decoding: rows {mixed} pair a prompt with images and one "
                                     "without (the two streams run in one processor call)")
                batch += [aux[i] for i in rows]
                from transformers import LogitsProcessorList  # lazy: a warm run imports no transformers

                extra["logits_processor"] = LogitsProcessorList([ContrastLogits(len(rows), eta)])
            enc = host.encode(batch, padding_side="left")
            ctx = AttentionContext(modifiers=dict(hooks.attention) if hooks else {}, spans=enc.spans)
            with attention_context(ctx), residual_hooks(host.layers, hooks):
                out = host.model.generate(
                    **host.runner.to_device(enc.inputs), max_new_tokens=max_new_tokens,
                    **decoding_options(host), **extra,
                    **streamer(len(texts), len(rows), max_new_tokens, len(prompts)),
                )
            new = out[: len(rows), enc.inputs["input_ids"].shape[1] :]
            for r, seq in zip(rows, new, strict=True):
                texts[r] = tok.decode(seq, skip_special_tokens=True).strip()
            call_share(len(texts), len(prompts))
    return [texts[i] for i in range(len(prompts))]


@torch.inference_mode()
def stepped_texts(host: GenerationHost, prompts: Sequence[Prompt], max_new_tokens: int, hooks: Hooks | None,
                  contrast: StepContrast, base: Sequence[Prompt]) -> list[str]:
    """Greedy continuations, contrastive against an auxiliary prompt rebuilt at every step from the main
    stream's reading (:mod:`.step_contrast`); ``base[i]`` is row i's base prompt for ``contrast.step``."""
    if len(base) != len(prompts):
        raise ValueError(f"{len(base)} base prompts for {len(prompts)} prompts")
    register_attention()
    from transformers import LogitsProcessorList  # lazy: a warm run imports no transformers

    tok = host.processor.tokenizer
    texts: dict[int, str] = {}
    for start in range(0, len(prompts), host.batch_size):
        for rows in kind_runs(prompts, start, min(start + host.batch_size, len(prompts))):
            enc = host.encode([prompts[i] for i in rows], padding_side="left")
            reader = StepReader(host, enc, hooks)
            proc = StepContrastLogits(host, reader, [base[i] for i in rows], contrast, hooks)
            handle = reader.norm.register_forward_hook(reader.images)
            try:
                with attention_context(reader.ctx), residual_hooks(host.layers, hooks):
                    out = host.model.generate(
                        **host.runner.to_device(enc.inputs), max_new_tokens=max_new_tokens,
                        **decoding_options(host), logits_processor=LogitsProcessorList([proc]),
                        **streamer(len(texts), len(rows), max_new_tokens, len(prompts)),
                    )
            finally:
                handle.remove()
            new = out[:, enc.inputs["input_ids"].shape[1] :]
            for r, seq in zip(rows, new, strict=True):
                texts[r] = tok.decode(seq, skip_special_tokens=True).strip()
            call_share(len(texts), len(prompts))
    return [texts[i] for i in range(len(prompts))]


@torch.inference_mode()
def captured_rows(host: GenerationHost, prompts: Sequence[Prompt], hooks: Hooks | None) -> list[AttentionRow]:
    """The answer query's attention weights of every layer (after any modifier), one row per prompt:
    one forward per batch of one kind (image or text-only) with the capture installed."""
    out: list[AttentionRow] = []
    layers = len(host.layers)
    for start in range(0, len(prompts), host.batch_size):
        for run in kind_runs(prompts, start, min(start + host.batch_size, len(prompts))):
            enc = host.encode([prompts[i] for i in run])
            ctx = AttentionContext(
                modifiers=dict(hooks.attention) if hooks else {}, spans=enc.spans,
                capture_rows=torch.tensor([n - 1 for n in enc.lengths]),
            )
            with attention_context(ctx), residual_hooks(host.layers, hooks):
                host.model(**host.runner.to_device(enc.inputs), logits_to_keep=1, use_cache=False)
            missing = [i for i in range(layers) if i not in ctx.captured]
            if missing:
                raise RuntimeError(f"no attention captured for layers {missing}")
            out += split_rows([ctx.captured[i] for i in range(layers)], enc.spans)
            call_share(len(out), len(prompts))
    return out
