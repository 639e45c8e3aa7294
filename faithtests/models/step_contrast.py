"""Contrastive decoding whose auxiliary input is rebuilt from the model at every step (SPD-Faith Alg. 1
lines 26-30, SAGE stage 3): :class:`StepContrast` in ``Hooks.contrast``.

At step t the main stream's forward has run; what it shows is handed, per row, to ``StepContrast.step``
as a :class:`StepReading`: the step's next-token logits, the current query's attention of every layer
(after the call's attention modifiers), and what the token activation map needs (SPD-Faith App. D.1,
Eqs. 17-18): the last layer's hidden states after the final norm at the image positions, and the LM
head's weight. The callback returns the auxiliary prompt of this step (SAGE: the images with the step's
mask occluded); returning the base prompt object itself means "nothing occluded" and L_aux = L_main
without a forward. L_aux is the auxiliary prompt continued with the tokens chosen so far, one full
forward per step (its images change from step to step, so no KV cache carries over); the main stream
is ``model.generate``'s own KV-cached decoding. Nothing here runs an extra main forward: the readings
come from the forward generate runs anyway (the image states from its prefill, which causal attention
never revisits; the attention from each step's one query).

* Stateful attention modifiers (SAGE stage 1 keeps μ_{t−1} per layer) must not see the auxiliary
  forwards: those run with a deep copy of the call's modifiers, made once per generate call. FFN
  modifiers and MLP scales are forward hooks already active for the call, and apply to the auxiliary
  forwards as to the main one (they act per position, without state).
* The model's own generation-config processors (e.g. a repetition penalty) run on L_main before this
  processor, not on L_aux (the reference models have none).
* Finished rows (an EOS among their new tokens) get no auxiliary forward; generate pads them anyway.
* A decision is one step (:func:`decision_aux`); under ``--faith-cache`` a rule that splits into a
  stored choice and its application (:class:`SplitStep`) has its choices stored, so a warm run needs
  no model for them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import torch
from numpy.typing import NDArray

from faithtests.models.adapter_store import adapter_rows, adapter_store
from faithtests.models.hooks import AttentionContext, attention_context, register_attention, residual_hooks
from faithtests.models.interfaces import AttentionModifier, Contrast, Hooks, Prompt
from faithtests.models.lens import final_norm, unembedding
from faithtests.models.prompt_keys import prompt_keys
from faithtests.models.prompting import option_token_ids
from faithtests.models.sequence_inputs import extended
from faithtests.progress import call_share, model_call

if TYPE_CHECKING:
    from faithtests.models.generation import GenerationHost
    from faithtests.models.prompting import EncodedBatch


@dataclass(frozen=True)
class StepReading:
    """What the main stream shows for one row at one decoding step (module doc)."""

    step: int  # 0: the answer position of the prompt
    logits: torch.Tensor  # [V] next-token logits of the main row (float32, CPU)
    attention: torch.Tensor  # [layers, heads, keys] the step's query, after modifiers (float32, CPU)
    image_positions: tuple[int, ...]  # key positions of the row's image tokens, in order
    image_states: torch.Tensor  # [n image tokens, D] last layer, after the final norm (float32, CPU)
    # [V, D] the LM head's weight (W_head of Eq. 17, transposed): not a copy, so on the model's device
    unembedding: torch.Tensor
    candidates: tuple[int, ...] | None = None  # token ids the step chooses among; None: the vocabulary


T = TypeVar("T")

#: ``fn(base_prompt, reading) -> auxiliary prompt`` (``base_prompt`` itself: nothing occluded).
StepAux = Callable[[Prompt, StepReading], Prompt]


@dataclass(frozen=True)
class StepContrast(Contrast):
    """``Contrast`` whose ``aux[i]`` is row i's base prompt and whose auxiliary prompt of each step is
    ``step(aux[i], reading)``; ``tag`` must name the step rule (output-cache key)."""

    step: StepAux | None = field(default=None, kw_only=True)


_HOST = ("model", "layers", "processor", "runner", "encode", "batch_size")


def generation_host(vlm: object, why: str) -> GenerationHost:
    """``vlm`` when it is an in-process HF adapter (:class:`~.generation.GenerationHost`), a process
    pool's driver copy of the model (``local``), else a TypeError saying ``why`` the internals are needed."""
    if all(hasattr(vlm, a) for a in _HOST):
        return vlm  # type: ignore[return-value]
    local = getattr(vlm, "local", None)
    if callable(local):
        host = local(why)
        if all(hasattr(host, a) for a in _HOST):
            return host  # type: ignore[no-any-return]
    raise TypeError(f"{why}: {type(vlm).__name__} is not faithtests' HF adapter (no model internals)")


def step_contrast(hooks: Hooks | None) -> StepContrast | None:
    c = hooks.contrast if hooks is not None else None
    return c if isinstance(c, StepContrast) and c.step is not None else None


def _positions(enc: EncodedBatch, row: int) -> tuple[int, ...]:
    runs = enc.spans.image_runs[row] if enc.spans.image_runs else [enc.spans.image[row]]
    return tuple(p for a, b in sorted(runs) for p in range(a, b))


class _ImageStates:
    """Forward hook on the final norm: each row's image-position states of the first (prefill) call."""

    def __init__(self, enc: EncodedBatch) -> None:
        self.positions = [_positions(enc, r) for r in range(len(enc.lengths))]
        self.states: list[torch.Tensor] | None = None

    def __call__(self, _m: torch.nn.Module, _i: Any, output: Any) -> None:
        if self.states is not None:
            return
        hidden = output if isinstance(output, torch.Tensor) else output[0]
        self.states = [hidden[r, list(p)].float().cpu() for r, p in enumerate(self.positions)]


class StepReader:
    """The main stream's readings of one batch: image states (prefill) and each call's attention."""

    def __init__(self, host: GenerationHost, enc: EncodedBatch, hooks: Hooks | None) -> None:
        self.host, self.enc = host, enc
        self.images = _ImageStates(enc)
        self.norm = final_norm(host.model)
        weight: torch.Tensor = getattr(unembedding(host.model), "weight")  # noqa: B009 (typed read)
        self.weight = weight.detach()
        self.ctx = AttentionContext(modifiers=dict(hooks.attention) if hooks else {}, spans=enc.spans,
                                    capture_last=True)

    def reading(self, row: int, step: int, logits: torch.Tensor,
                candidates: tuple[int, ...] | None) -> StepReading:
        layers = len(self.host.layers)
        missing = [i for i in range(layers) if i not in self.ctx.captured]
        if missing or self.images.states is None:
            raise RuntimeError(f"step reading: no attention captured for layers {missing} or no image states")
        keys = int(self.enc.inputs["input_ids"].shape[1]) + step  # every position so far
        att = torch.stack([left_padded(self.ctx.captured[i][row], keys) for i in range(layers)])
        return StepReading(step, logits.float().cpu(), att, self.images.positions[row],
                           self.images.states[row], self.weight, candidates)


def left_padded(weights: torch.Tensor, keys: int) -> torch.Tensor:
    """One layer's attention row [heads, k] over all ``keys`` positions: a sliding-window layer decoding
    past its window holds only the latest ``k`` keys (its cache keeps the window's end), so they are the
    last ``k`` positions and every earlier one gets weight 0, which it has."""
    missing = keys - weights.shape[-1]
    if missing < 0:
        raise RuntimeError(f"attention over {weights.shape[-1]} keys at a step that has {keys} positions")
    return torch.nn.functional.pad(weights, (missing, 0)) if missing else weights


def aux_logits(host: GenerationHost, prompts: Sequence[Prompt], tails: Sequence[torch.Tensor],
               modifiers: dict[int, AttentionModifier]) -> torch.Tensor:
    """Next-token logits [n, V] of each prompt continued with its ``tails[i]`` token ids: one full
    forward (left-padded), attention modifiers ``modifiers``, the caller's residual hooks as they are."""
    enc = host.encode(prompts, padding_side="left")
    width = max((len(t) for t in tails), default=0)
    tail = (torch.stack([t.to(torch.long).cpu() for t in tails]) if width  # rows continue equally long
            else torch.zeros((len(prompts), 0), dtype=torch.long))
    inputs = extended(enc.inputs, tail)  # every sequence-aligned input, as generation extends it
    ctx = AttentionContext(modifiers=modifiers, spans=enc.spans)
    with attention_context(ctx):
        out = host.model(**host.runner.to_device(inputs), logits_to_keep=1, use_cache=False)
    logits: torch.Tensor = out.logits[:, -1].float()
    return logits


class StepContrastLogits:
    """Logits processor of the main stream (module doc): L_main + eta * ReLU(L_main - L_aux)."""

    def __init__(self, host: GenerationHost, reader: StepReader, base: Sequence[Prompt],
                 contrast: StepContrast, hooks: Hooks | None) -> None:
        self.host, self.reader, self.base, self.contrast = host, reader, list(base), contrast
        self.width = reader.enc.inputs["input_ids"].shape[1]
        self.modifiers = copy.deepcopy(dict(hooks.attention)) if hooks else {}
        eos = host.model.generation_config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        self.calls = 0

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        step, self.calls = self.calls, self.calls + 1
        tails = input_ids[:, self.width :]
        assert self.contrast.step is not None
        aux = scores.clone()
        rows, prompts = [], []
        for r in range(len(self.base)):
            if any(int(t) in self.eos for t in tails[r]):
                continue
            p = self.contrast.step(self.base[r], self.reader.reading(r, step, scores[r], None))
            if p is not self.base[r]:
                rows.append(r)
                prompts.append(p)
        if rows:
            got = aux_logits(self.host, prompts, [tails[r] for r in rows], self.modifiers)
            aux[rows] = got.to(aux.device, aux.dtype)
        return scores + self.contrast.eta * torch.relu(scores - aux)


def _first_step(host: GenerationHost, prompts: Sequence[Prompt], hooks: Hooks | None,
                candidates: tuple[int, ...] | None, read: Callable[[int, StepReading], T]) -> list[T]:
    """``read(i, reading)`` of each prompt's answer step: the main forward (hooks on) read as
    generation's first step reads it, in batches of the host's batch size."""
    register_attention()
    out: list[T] = []
    for start in range(0, len(prompts), host.batch_size):
        rows = list(range(start, min(start + host.batch_size, len(prompts))))
        enc = host.encode([prompts[i] for i in rows], padding_side="left")
        reader = StepReader(host, enc, hooks)
        handle = reader.norm.register_forward_hook(reader.images)
        try:
            with attention_context(reader.ctx), residual_hooks(host.layers, hooks):
                logits = host.model(**host.runner.to_device(enc.inputs), logits_to_keep=1,
                                    use_cache=False).logits[:, -1]
        finally:
            handle.remove()
        for j, i in enumerate(rows):
            out.append(read(i, reader.reading(j, 0, logits[j], candidates)))
        call_share(len(out), len(prompts))  # progress of the caller's model_call, if any
    return out


def _check_rule(contrast: StepContrast, n: int) -> None:
    if contrast.step is None or len(contrast.aux) != n:
        raise ValueError(f"first_step_aux: a step rule and one base prompt per row are needed "
                         f"({len(contrast.aux)} for {n})")


@torch.inference_mode()
def first_step_aux(host: GenerationHost, prompts: Sequence[Prompt], hooks: Hooks | None,
                   contrast: StepContrast, candidates: Sequence[int] | None = None) -> list[Prompt]:
    """The auxiliary prompts of the answer step (step 0) of each prompt: the main forward (hooks on) read as
    generation's first step reads it, then ``contrast.step(contrast.aux[i], reading)``; the reading's
    ``candidates`` (a decision's option token ids) are what the step chooses among. Scoring calls use
    them as the auxiliary path of a one-step decision (the caller contrasts the two option logits)."""
    _check_rule(contrast, len(prompts))
    step = contrast.step
    assert step is not None
    cand = tuple(int(c) for c in candidates) if candidates is not None else None
    return _first_step(host, prompts, hooks, cand, lambda i, r: step(contrast.aux[i], r))


@runtime_checkable
class SplitStep(Protocol):
    """A step rule in two parts, so a decision's step can be stored: ``choice`` (an array read off the
    step's reading, e.g. a mask) and ``apply`` (the auxiliary prompt it makes of the base prompt).
    ``rule(base, reading)`` must equal ``rule.apply(base, rule.choice(base, reading))``."""

    def choice(self, base: Prompt, reading: StepReading) -> NDArray[Any]: ...

    def apply(self, base: Prompt, choice: NDArray[Any]) -> Prompt: ...


def decision_aux(vlm: object, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None,
                 contrast: StepContrast, why: str, stage: str) -> list[Prompt]:
    """:func:`first_step_aux` of ``vlm``'s host with the options' token ids as the step's candidates.
    With the adapter's output store (``--faith-cache``), a tagged contrast and a :class:`SplitStep`
    rule, each row's choice is stored (:func:`~.adapter_store.adapter_rows`), keyed by the prompt, its
    base prompt, the options, the tag and the rule's repr, so a warm run needs no model for it."""
    _check_rule(contrast, len(prompts))
    rule = contrast.step

    def host_ids() -> tuple[GenerationHost, tuple[int, ...]]:
        host = generation_host(vlm, why)  # reads the model: loads it
        prefix = str(getattr(host, "answer_prefix", ""))
        return host, tuple(option_token_ids(host.processor.tokenizer, options, prefix))

    if not isinstance(rule, SplitStep) or adapter_store(vlm) is None or not contrast.tag:
        with model_call(stage, len(prompts), model=getattr(vlm, "spec", None)):
            host, ids = host_ids()
            return first_step_aux(host, prompts, hooks, contrast, ids)
    split: SplitStep = rule

    @torch.inference_mode()
    def compute(rows: list[int]) -> list[torch.Tensor]:
        host, ids = host_ids()
        base = [contrast.aux[r] for r in rows]
        return _first_step(host, [prompts[r] for r in rows], hooks, ids,
                           lambda j, r: torch.from_numpy(np.asarray(split.choice(base[j], r))))

    key = prompt_keys(prompts, contrast.aux)
    kind = f"step_aux{tuple(options)}|{contrast.tag}|{split!r}"
    got = adapter_rows(vlm, kind, hooks, [key(i) for i in range(len(prompts))], compute, stage)
    return [split.apply(contrast.aux[i], got[i].numpy()) for i in range(len(prompts))]
