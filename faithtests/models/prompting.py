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

import warnings
import weakref
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


def messages(prompt: Prompt, answer: str | None = None, audio_in_video: bool = False) -> list[dict[str, Any]]:
    """One user turn: image items, a video item (if any), an audio item (if any: unless
    ``audio_in_video`` and the prompt has a video, whose item then carries its soundtrack), the text."""
    content: list[dict[str, Any]] = [{"type": "image"} for _ in prompt.images]
    if prompt.video:
        content.append({"type": "video"})
    if prompt.audio is not None and not (audio_in_video and prompt.video):
        content.append({"type": "audio"})
    content.append({"type": "text", "text": user_text(prompt)})
    msgs: list[dict[str, Any]] = [{"role": "user", "content": content}]
    if answer is not None:
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
    return msgs


#: Rendered chat texts per processor: a run renders one prompt many times (each option order, each
#: answer scored, each hooked variant), and the template was ~2% of a run. Keyed by everything
#: :func:`messages` reads and the template itself; cleared past :data:`RENDER_MEMO_SIZE` entries.
_RENDERED: weakref.WeakKeyDictionary[Any, dict[tuple[object, ...], object]] = weakref.WeakKeyDictionary()
RENDER_MEMO_SIZE = 50_000


def chat_text(processor: Any, prompt: Prompt, answer: str | None) -> object:
    """``apply_chat_template`` of ``prompt`` (with the generation prompt when ``answer`` is None, else
    followed by the assistant's ``answer``), memoised per processor."""
    key: tuple[object, ...] = (len(prompt.images), user_text(prompt), answer,
                               getattr(processor, "chat_template", None))
    if prompt.video or prompt.audio is not None:  # (image prompts keep their key)
        key += (bool(prompt.video), prompt.audio is not None)
    try:
        memo = _RENDERED.setdefault(processor, {})
    except TypeError:  # a processor that cannot be weakly referenced: rendered every time
        memo = {}
    if key not in memo:
        if len(memo) >= RENDER_MEMO_SIZE:
            memo.clear()
        memo[key] = processor.apply_chat_template(messages(prompt, answer, interleaves_audio(processor)),
                                                  add_generation_prompt=answer is None, tokenize=False)
    return memo[key]


def render(processor: Any, prompt: Prompt) -> str:
    """The prompt as text, through the processor's own chat template, ending in the generation prompt."""
    if getattr(processor, "chat_template", None) is None:
        raise PromptRenderError(
            f"{type(processor).__name__} has no chat template; save one with the processor "
            "(chat_template.jinja) so prompts are laid out as the model was trained"
        )
    text = chat_text(processor, prompt, None)
    if not isinstance(text, str):
        raise PromptRenderError(f"chat template returned {type(text).__name__}, expected str")
    return text


def adds_special_tokens(tokenizer: Any, rendered: str) -> bool:
    """Mirror ``ProcessorMixin.apply_chat_template``: no second BOS when the template already wrote one."""
    bos = getattr(tokenizer, "bos_token", None)
    return not (bos is not None and rendered.startswith(bos))


def interleaves_audio(processor: Any) -> bool:
    """Whether the processor interleaves a video's soundtrack with its frames (Qwen-Omni's
    ``use_audio_in_video``): then a prompt's audio rides in its video item."""
    return callable(getattr(processor, "replace_video_with_audio_token", None))


def media_token_ids(config: Any) -> tuple[int | None, int | None]:
    """The config's video and audio token ids (None where the family has none)."""
    found: list[int | None] = []
    for names in (("video_token_id", "video_token_index"), ("audio_token_id", "audio_token_index")):
        value = next((getattr(config, n) for n in names if isinstance(getattr(config, n, None), int)), None)
        found.append(value)
    return found[0], found[1]


#: Words that mark a config's media token ids (``image_token_id``, ``vision_start_token_id``,
#: ``audio_end_token_id``, ``boi_token_index``...): placeholders and the markers around them.
MEDIA_WORDS = ("image", "video", "audio", "vision", "boi", "eoi", "boa", "eoa")


def placeholder_ids(config: Any) -> list[int]:
    """Every media token id the config declares: placeholders (image, video, audio) and the markers
    around them (vision/audio start and end). Generation must never emit one: a generated placeholder
    makes the next forward see more media tokens than features, and a generated marker sends an M-RoPE
    family's position index looking for media that is not there (Qwen2.5-Omni)."""
    ids = {image_token_id(config), *(t for t in media_token_ids(config) if t is not None)}
    for name, value in vars(config).items():
        named = name.endswith(("token_id", "token_index")) and any(word in name for word in MEDIA_WORDS)
        if named and isinstance(value, int) and not isinstance(value, bool):
            ids.add(value)
    return sorted(ids)


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

    The answer is conditioned on exactly what generation sees: the generation prompt. Where the template
    writes its assistant turn's header otherwise than its generation prompt (LLaVA-OneVision's released
    template: ``assistant \n`` against ``assistant\n``), the answer and what follows it are put after the
    generation prompt instead of the turn's own header."""
    if not answer.strip():
        raise PromptRenderError("empty answer/caption")
    head = render(processor, prompt)
    full = chat_text(processor, prompt, answer)
    if not isinstance(full, str):
        raise PromptRenderError(f"chat template returned {type(full).__name__}, expected str")
    # characters the two renderings share (the prompt): the answer is looked for after them
    pairs = enumerate(zip(head, full, strict=False))
    shared = next((i for i, (a, b) in pairs if a != b), min(len(head), len(full)))
    start = full.find(answer, shared)
    if start < 0:
        raise PromptRenderError(f"the chat template altered the answer text {answer!r}")
    if not full.startswith(head):
        full, start = head + full[start:], len(head)
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
    if any(p.video or p.audio is not None for p in prompts):
        kwargs.update(_media_kwargs(processor, prompts))
    return kwargs


def _media_kwargs(processor: Any, prompts: Sequence[Prompt]) -> dict[str, Any]:
    """Video frames and waveforms for the processor (flat, in row order), refused by one without that
    input; with an interleaving processor (:func:`interleaves_audio`) a video's audio rides in it."""
    with_video = [p for p in prompts if p.video]
    with_audio = [p for p in prompts if p.audio is not None]
    kwargs = {**_video_kwargs(processor, with_video), **_audio_kwargs(processor, with_audio)}
    if with_video and with_audio and interleaves_audio(processor):
        if any(p.audio is None for p in with_video):
            raise PromptRenderError("a batch mixes videos with and without a soundtrack; the processor "
                                    "interleaves the soundtracks of all its videos or of none")
        kwargs["load_audio_from_video"] = True
        # each audio slot, in row order: the index of its row's video, or None for standalone audio (by
        # position: one Prompt object may fill several rows, e.g. one per scored answer)
        slots, n_video = [], 0
        for p in prompts:
            if p.audio is not None:
                slots.append(n_video if p.video else None)
            n_video += bool(p.video)
        kwargs["audio_from_video_indices"] = slots
    return kwargs


def _video_kwargs(processor: Any, with_video: Sequence[Prompt]) -> dict[str, Any]:
    import numpy as np  # local: only omni prompts need it

    kwargs: dict[str, Any] = {}
    if with_video:
        if getattr(processor, "video_processor", None) is None:
            raise PromptRenderError(f"{type(processor).__name__} takes no video; the prompt carries frames")
        kwargs["videos"] = [np.stack([np.asarray(f.convert("RGB")) for f in p.video]) for p in with_video]
        fps_set = {p.video_fps for p in with_video}
        if len(fps_set) > 1:
            raise PromptRenderError(f"a batch mixes video frame rates {sorted(str(r) for r in fps_set)}")
        if (fps := fps_set.pop()) is not None:
            kwargs["fps"] = float(fps)
    return kwargs


def _audio_kwargs(processor: Any, with_audio: Sequence[Prompt]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if with_audio:
        extractor = getattr(processor, "feature_extractor", None)
        if extractor is None:
            raise PromptRenderError(f"{type(processor).__name__} takes no audio; the prompt carries audio")
        rates = {int(p.audio.sampling_rate) for p in with_audio if p.audio is not None}
        if rates != {int(extractor.sampling_rate)}:
            raise PromptRenderError(f"audio at {sorted(rates)} Hz; this model's feature extractor expects "
                                    f"{extractor.sampling_rate} Hz (resample when loading the data)")
        kwargs["audio"] = [p.audio.samples for p in with_audio if p.audio is not None]
    return kwargs


def _row_spans(
    processor: Any, img_id: int, row: int, prompt: Prompt, text: str, real: list[int], offset: int,
    add_special: bool, media: tuple[int | None, int | None] = (None, None),
) -> tuple[tuple[int, int], list[tuple[int, int]], tuple[int, int], list[tuple[int, int]]]:
    """One row's image span, image runs, description span and audio runs, as positions in the padded
    batch. A video's frame tokens count as image tokens; ``media`` is (video id, audio id)."""
    visual = {img_id} | ({media[0]} if prompt.video and media[0] is not None else set())
    positions = [offset + i for i, t in enumerate(real) if t in visual]
    if (prompt.images or prompt.video) and not positions:
        raise PromptRenderError(f"row {row}: the processor wrote no image tokens (ids {sorted(visual)})")
    audio: list[int] = []
    if prompt.audio is not None:
        audio = [offset + i for i, t in enumerate(real) if t == media[1]]
        if not audio:
            raise PromptRenderError(f"row {row}: the processor wrote no audio tokens (id {media[1]})")
    image = (positions[0], positions[-1] + 1) if positions else (0, 0)
    s, e = description_span(processor.tokenizer, text, prompt, real, add_special)
    return image, _runs(positions), ((s + offset, e + offset) if e > s else (0, 0)), _runs(audio)


#: Qwen omni processors (transformers 5.x) pass token counts held in torch tensors to ``np.arange``, and
#: NumPy 2 warns for each clip that torch's ``__array__`` takes no ``copy`` argument: 10,000 lines under
#: the default run's summary, about a value that is only read. That one warning is not passed on.
NUMPY_COPY_WARNING = r"__array__ implementation doesn't accept a copy keyword"


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
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=NUMPY_COPY_WARNING, category=DeprecationWarning)
        out = processor(**kwargs)
    inputs = {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}
    if kwargs.get("load_audio_from_video"):  # the model must lay positions out as the processor did
        inputs["use_audio_in_video"] = torch.tensor(True)
    mask = inputs["attention_mask"]
    lengths = [int(x) for x in mask.sum(dim=1).tolist()]
    width = mask.shape[1]
    offsets = [width - n if padding_side == "left" else 0 for n in lengths]
    img_id = image_token_id(config)
    media = media_token_ids(config) if "videos" in kwargs or "audio" in kwargs else (None, None)
    image, runs, desc, audio = [], [], [], []
    for row, prompt in enumerate(prompts):
        real = inputs["input_ids"][row, offsets[row] : offsets[row] + lengths[row]].tolist()
        img, run, d, a = _row_spans(processor, img_id, row, prompt, kwargs["text"][row], real, offsets[row],
                                    kwargs["add_special_tokens"], media)
        image.append(img)
        runs.append(run)
        desc.append(d)
        audio.append(a)
    spans = TokenSpans(image=image, description=desc, length=lengths, image_runs=runs, offset=offsets,
                       audio_runs=audio if "audio" in kwargs else [])
    return EncodedBatch(inputs=inputs, lengths=lengths, offsets=offsets, spans=spans)
