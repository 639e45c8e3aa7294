"""Rendering prompts through a processor's chat template, and locating token spans in the result.

A :class:`~faithtests.models.interfaces.Prompt` becomes one user turn: one ``{"type": "image"}`` item per
image, then one text item (:func:`user_text`: the description in the text's ``{description}`` slot, or
when the text has none the description, a newline, then the text), rendered with
``add_generation_prompt=True`` so the next token is the answer. The processor then expands image
placeholders into the family's image tokens. Images stay where the chat template puts image items
(for LLaVA-style templates: before the text), not inside the text.

Span finding:
- image: the positions whose id is the config's image token id (``image_token_id``/``image_token_index``);
  ``TokenSpans.image`` is [first, last + 1) per row, ``TokenSpans.image_runs`` the contiguous runs.
- description: the rendered (unexpanded) text is tokenized with offsets; the tokens overlapping the
  description's characters (a token that straddles its edge, e.g. a BPE merge of its final period with
  a closing quote, counts as inside; the reference tokenizer splits there, so its span is exact) are
  mapped into the expanded sequence by aligning the common tail (everything after the last image
  placeholder is tokenized identically in both); a mismatch is an error, not a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from faithtests.models.interfaces import DESCRIPTION_SLOT, Prompt, TokenSpans


class PromptRenderError(ValueError):
    """A prompt cannot be rendered or its token spans cannot be located exactly."""


class OptionTokenError(ValueError):
    """An option letter is not a single token of the model's tokenizer."""


def layout(prompt: Prompt) -> tuple[str, int]:
    """The user text and the character offset of the description in it (-1 without a description).

    The description replaces the text's one ``{description}`` slot, or comes first (then a newline)
    when the text has no slot; a slot without a description, or two slots, is an error."""
    if not prompt.text.strip():
        raise PromptRenderError("Prompt.text is empty")
    slots = prompt.text.count(DESCRIPTION_SLOT)
    if slots > 1:
        raise PromptRenderError(f"Prompt.text has {slots} {DESCRIPTION_SLOT} slots; at most one")
    if prompt.description is None:
        if slots:
            raise PromptRenderError(f"Prompt.text has a {DESCRIPTION_SLOT} slot but no description")
        return prompt.text, -1
    if not prompt.description.strip():
        raise PromptRenderError("Prompt.description is empty (use None for no description)")
    if not slots:
        return f"{prompt.description}\n{prompt.text}", 0
    at = prompt.text.index(DESCRIPTION_SLOT)
    return prompt.text[:at] + prompt.description + prompt.text[at + len(DESCRIPTION_SLOT):], at


def user_text(prompt: Prompt) -> str:
    return layout(prompt)[0]


def messages(prompt: Prompt, answer: str | None = None) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = [{"type": "image"} for _ in prompt.images]
    content.append({"type": "text", "text": user_text(prompt)})
    msgs: list[dict[str, Any]] = [{"role": "user", "content": content}]
    if answer is not None:
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
    return msgs


def render(processor: Any, prompt: Prompt) -> str:
    """The prompt as text, through the processor's own chat template, ending in the generation prompt."""
    if getattr(processor, "chat_template", None) is None:
        raise PromptRenderError(
            f"{type(processor).__name__} has no chat template; save one with the processor "
            "(chat_template.jinja) so prompts are laid out as the model was trained"
        )
    text = processor.apply_chat_template(messages(prompt), add_generation_prompt=True, tokenize=False)
    if not isinstance(text, str):
        raise PromptRenderError(f"chat template returned {type(text).__name__}, expected str")
    return text


def adds_special_tokens(tokenizer: Any, rendered: str) -> bool:
    """Mirror ``ProcessorMixin.apply_chat_template``: no second BOS when the template already wrote one."""
    bos = getattr(tokenizer, "bos_token", None)
    return not (bos is not None and rendered.startswith(bos))


def image_token_id(config: Any) -> int:
    for name in ("image_token_id", "image_token_index"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    raise PromptRenderError(f"{type(config).__name__} declares no image_token_id / image_token_index")


def option_token_ids(tokenizer: Any, options: Sequence[str], prefix: str = "") -> list[int]:
    """Token id of each option letter (tokenized as ``prefix + letter``); each must be exactly one token."""
    ids: list[int] = []
    for option in options:
        encoded = tokenizer.encode(prefix + option, add_special_tokens=False)
        if len(encoded) != 1:
            pieces = tokenizer.convert_ids_to_tokens(encoded)
            raise OptionTokenError(
                f"option {option!r} (tokenized as {prefix + option!r}) is {len(encoded)} tokens {pieces}; "
                "option scoring needs one token per option"
            )
        ids.append(int(encoded[0]))
    if len(set(ids)) != len(ids):
        raise OptionTokenError(f"options {list(options)} map to repeated token ids {ids}")
    return ids


def _runs(positions: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for p in positions:
        if runs and runs[-1][1] == p:
            runs[-1] = (runs[-1][0], p + 1)
        else:
            runs.append((p, p + 1))
    return runs


def char_span_tokens(
    tokenizer: Any,
    rendered: str,
    char_start: int,
    char_end: int,
    expanded_ids: Sequence[int],
    add_special: bool,
) -> tuple[int, int]:
    """[start, end) of the tokens covering characters [char_start, char_end) of ``rendered``, as positions
    in the processor's image-expanded id sequence (the span must lie after the last image placeholder)."""
    enc = tokenizer(rendered, add_special_tokens=add_special, return_offsets_mapping=True)
    ids: list[int] = list(enc["input_ids"])
    offsets: list[tuple[int, int]] = [(int(o[0]), int(o[1])) for o in enc["offset_mapping"]]
    inside = [i for i, (s, e) in enumerate(offsets) if e > s and s < char_end and e > char_start]
    if not inside:
        raise PromptRenderError(f"no token overlaps characters [{char_start}, {char_end}) of the prompt")
    start, end = inside[0], inside[-1] + 1
    shift = len(expanded_ids) - len(ids)
    if shift < 0 or list(expanded_ids[start + shift :]) != ids[start:]:
        raise PromptRenderError(
            "the text's tokens differ between the plain and the image-expanded prompt; cannot align the span"
        )
    return (start + shift, end + shift)


def description_span(
    tokenizer: Any, rendered: str, prompt: Prompt, expanded_ids: Sequence[int], add_special: bool
) -> tuple[int, int]:
    """[start, end) of the description's tokens in the processor's (expanded) id sequence; (0, 0) if none."""
    if prompt.description is None:
        return (0, 0)
    text, at = layout(prompt)
    text_start = rendered.rfind(text)
    if text_start < 0:
        raise PromptRenderError("the chat template altered the prompt text; cannot locate the description")
    char_start = text_start + at
    char_end = char_start + len(prompt.description.rstrip())
    return char_span_tokens(tokenizer, rendered, char_start, char_end, expanded_ids, add_special)


@dataclass(frozen=True)
class EncodedBatch:
    """Processor output for a batch (right- or left-padded) with the lengths and spans of every row."""

    inputs: dict[str, torch.Tensor]
    lengths: list[int]
    offsets: list[int]  # index of each row's first real token (non-zero only with left padding)
    spans: TokenSpans


def render_with_answer(processor: Any, prompt: Prompt, answer: str) -> tuple[str, int, int]:
    """The prompt followed by ``answer`` as the assistant turn, and the answer's character span.

    The template's answer turn must begin with exactly the generation-prompt rendering, so the answer's
    tokens are conditioned on what generation would see; otherwise this is an error."""
    if not answer.strip():
        raise PromptRenderError("empty answer/caption")
    head = render(processor, prompt)
    full = processor.apply_chat_template(
        messages(prompt, answer), add_generation_prompt=False, tokenize=False
    )
    if not isinstance(full, str) or not full.startswith(head):
        raise PromptRenderError(
            "the chat template renders the assistant turn differently from its generation prompt; "
            "cannot score an answer conditioned on the generation prompt"
        )
    start = full.find(answer, len(head))
    if start < 0:
        raise PromptRenderError(f"the chat template altered the answer text {answer!r}")
    return full, start, start + len(answer)


def encode_with_answers(
    processor: Any, config: Any, prompts: Sequence[Prompt], answers: Sequence[str]
) -> tuple[EncodedBatch, list[tuple[int, int]]]:
    """Encode prompt + assistant answer per row (right padding) and each answer's token span."""
    rendered = [render_with_answer(processor, p, a) for p, a in zip(prompts, answers, strict=True)]
    enc = encode_batch(processor, config, prompts, "right", texts=[r[0] for r in rendered])
    add_special = adds_special_tokens(processor.tokenizer, rendered[0][0])
    spans = []
    for row, (text, a, b) in enumerate(rendered):
        real = enc.inputs["input_ids"][row, : enc.lengths[row]].tolist()
        spans.append(char_span_tokens(processor.tokenizer, text, a, b, real, add_special))
    return enc, spans


def _processor_kwargs(
    processor: Any, prompts: Sequence[Prompt], padding_side: str, texts: Sequence[str] | None
) -> dict[str, Any]:
    """The processor call for ``prompts`` (all with images or all without), ``texts`` or their renderings."""
    if not prompts:
        raise ValueError("encode_batch needs at least one prompt")
    has_images = {bool(p.images) for p in prompts}
    if len(has_images) != 1:
        raise ValueError("encode_batch: prompts must all have images or all be text-only")
    texts = list(texts) if texts is not None else [render(processor, p) for p in prompts]
    add_special = {adds_special_tokens(processor.tokenizer, t) for t in texts}
    if len(add_special) != 1:
        raise PromptRenderError("prompts disagree on whether the template writes the BOS token")
    kwargs: dict[str, Any] = {
        "text": texts,
        "padding": True,
        "padding_side": padding_side,
        "return_tensors": "pt",
        "add_special_tokens": add_special.pop(),
    }
    if True in has_images:
        kwargs["images"] = [[im.convert("RGB") for im in p.images] for p in prompts]
    return kwargs


def _row_spans(
    processor: Any, img_id: int, row: int, prompt: Prompt, text: str, real: list[int], offset: int,
    add_special: bool,
) -> tuple[tuple[int, int], list[tuple[int, int]], tuple[int, int]]:
    """One row's image span, image runs and description span, as positions in the padded batch."""
    positions = [offset + i for i, t in enumerate(real) if t == img_id]
    if prompt.images and not positions:
        raise PromptRenderError(f"row {row}: the processor wrote no image tokens (id {img_id})")
    image = (positions[0], positions[-1] + 1) if positions else (0, 0)
    s, e = description_span(processor.tokenizer, text, prompt, real, add_special)
    return image, _runs(positions), ((s + offset, e + offset) if e > s else (0, 0))


def encode_batch(
    processor: Any,
    config: Any,
    prompts: Sequence[Prompt],
    padding_side: str,
    texts: Sequence[str] | None = None,
) -> EncodedBatch:
    """Render and process ``prompts`` (all with images or all without) in one processor call.

    ``texts`` replaces the rendered prompts (e.g. prompt + answer); spans are still those of the prompt."""
    kwargs = _processor_kwargs(processor, prompts, padding_side, texts)
    out = processor(**kwargs)
    inputs = {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}
    mask = inputs["attention_mask"]
    lengths = [int(x) for x in mask.sum(dim=1).tolist()]
    width = mask.shape[1]
    offsets = [width - n if padding_side == "left" else 0 for n in lengths]
    img_id = image_token_id(config)
    image, runs, desc = [], [], []
    for row, prompt in enumerate(prompts):
        real = inputs["input_ids"][row, offsets[row] : offsets[row] + lengths[row]].tolist()
        img, run, d = _row_spans(processor, img_id, row, prompt, kwargs["text"][row], real, offsets[row],
                                 kwargs["add_special_tokens"])
        image.append(img)
        runs.append(run)
        desc.append(d)
    spans = TokenSpans(image=image, description=desc, length=lengths, image_runs=runs, offset=offsets)
    return EncodedBatch(inputs=inputs, lengths=lengths, offsets=offsets, spans=spans)
