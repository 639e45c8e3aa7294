"""Tiny, randomly initialised Qwen2.5-VL, Qwen3-VL, Qwen3.5 and GLM-4.1V models, built like :mod:`.tiny`.

All four share the Qwen2-VL vision layout (flattened 2-frame patches of 4 px here, 2x2 spatial merge, so an
image of ``image_size`` px is ``(image_size/8)**2`` placeholder tokens) and multimodal RoPE in the text
model; the processors return ``mm_token_type_ids`` alongside ``input_ids`` (the models need it to place
image positions). Each is saved with its family's processor (and the video processor the processor class
insists on) and a chat template shaped like the real one. Qwen3.5 mixes linear-attention (gated delta
net) and full-attention layers, so its cache holds both kinds of layer state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from faithtests.testing.tiny import BASE_WORDS, _save, _seeded, _text_dims, _untyped, tiny_tokenizer

#: Vision patch of the tiny towers (px) and their spatial merge: one placeholder token per 8x8 px.
PATCH = 4
MERGE = 2
_PATCHES: dict[str, Any] = {"patch_size": PATCH, "merge_size": MERGE, "temporal_patch_size": 2}

_QWEN_SPECIALS = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
                  "<|video_pad|>"]


def _qwen_tokenizer(words: Iterable[str]) -> tuple[Any, dict[str, Any]]:
    """The tiny Qwen tokenizer (ChatML and vision markers) and the config's media token ids."""
    tok = tiny_tokenizer(_QWEN_SPECIALS, words=words, bos=None, eos="<|im_end|>")
    return tok, _qwen_media_ids(tok)


def _qwen_media_ids(tok: Any) -> dict[str, Any]:
    ids = {t: int(tok.convert_tokens_to_ids(t)) for t in _QWEN_SPECIALS}
    return {"image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
            "vision_start_token_id": ids["<|vision_start|>"], "vision_end_token_id": ids["<|vision_end|>"]}


def _qwen3_vl_parts(image_size: int, tok: Any, template: str, **vision: Any) -> tuple[dict[str, Any], Any]:
    """The Qwen3-VL-style vision tower config (one layer, ``vision`` added) and the Qwen3-VL processor that
    Qwen3-VL and Qwen3.5 share."""
    from transformers import Qwen3VLProcessor, Qwen3VLVideoProcessor  # lazy: torch-free at import

    tower = {"depth": 1, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2, "out_hidden_size": 32,
             "spatial_merge_size": MERGE, "patch_size": PATCH, "temporal_patch_size": 2,
             "num_position_embeddings": 64, **vision}
    processor = _untyped(Qwen3VLProcessor)(
        image_processor=_qwen_image_processor(image_size), tokenizer=tok,
        video_processor=_untyped(Qwen3VLVideoProcessor)(cap_pixels_per_frame=True, **_PATCHES),
        chat_template=template,
    )
    return tower, processor


def _qwen_image_processor(image_size: int) -> Any:
    """Qwen2-VL image processor resizing every image to ``image_size**2`` pixels (4 px patches)."""
    from transformers import Qwen2VLImageProcessor  # lazy: torch-free at import (see tiny.tiny_tokenizer)

    pixels = image_size * image_size
    return _untyped(Qwen2VLImageProcessor)(size={"shortest_edge": pixels, "longest_edge": pixels}, **_PATCHES)


# ------------------------------------------------------------------------------------------ Qwen2.5-VL
#: Qwen3-VL (Instruct): a system turn only when the conversation starts with one.
QWEN3_VL_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% elif item['type'] == 'video' %}"
    "<|vision_start|><|video_pad|><|vision_end|>{% elif item['type'] == 'text' %}{{ item['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: Qwen2.5-VL's template is Qwen2-VL's: Qwen3-VL's with a default system turn when the conversation has
#: none.
QWEN2_5_VL_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}" + QWEN3_VL_TEMPLATE
)


def build_tiny_qwen2_5_vl(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """Qwen2.5-VL: window-attention vision tower (1 block, full attention; windows of 2x2 merged tokens
    still permute the patches), RMSNorm MLP merger, Qwen2 text model with multimodal RoPE (sections
    1/1/2 over a head dim of 8). ``(image_size/8)**2`` image tokens per image."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLVideoProcessor,
    )

    _seeded(seed)
    tok, ids = _qwen_tokenizer(words)
    text = _text_dims(len(tok), rope_parameters={"rope_type": "default", "mrope_section": [1, 1, 2],
                                                 "rope_theta": 10000.0},
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    vision = {"depth": 1, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2, "out_hidden_size": 32,
              "spatial_merge_size": MERGE, "patch_size": PATCH, "temporal_patch_size": 2,
              "window_size": 2 * PATCH * MERGE, "fullatt_block_indexes": [0]}
    config = _untyped(Qwen2_5_VLConfig)(text_config=text, vision_config=vision, **ids)
    model: Any = Qwen2_5_VLForConditionalGeneration(config)
    model.eval()
    # The processor insists on a video processor although no suite sends video.
    processor = _untyped(Qwen2_5_VLProcessor)(
        image_processor=_qwen_image_processor(image_size), tokenizer=tok,
        video_processor=_untyped(Qwen2VLVideoProcessor)(**_PATCHES), chat_template=QWEN2_5_VL_TEMPLATE,
    )
    return _save(model, processor, Path(out_dir), seed)


# -------------------------------------------------------------------------------------------- Qwen3-VL


def build_tiny_qwen3_vl(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """Qwen3-VL: vision tower with learned (bilinearly resampled 8x8) position embeddings and one
    deep-stack merger whose features are added to the first text layer's image positions, Qwen3 text model
    (q/k norm) with interleaved multimodal RoPE (sections 2/1/1 over a head dim of 8).
    ``(image_size/8)**2`` image tokens per image."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
    )

    _seeded(seed)
    tok, ids = _qwen_tokenizer(words)
    rope = {"rope_type": "default", "mrope_section": [2, 1, 1], "mrope_interleaved": True,
            "rope_theta": 10000.0}
    text = _text_dims(len(tok), head_dim=8, rope_parameters=rope, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, bos_token_id=None)
    vision, processor = _qwen3_vl_parts(image_size, tok, QWEN3_VL_TEMPLATE, deepstack_visual_indexes=[0])
    config = _untyped(Qwen3VLConfig)(text_config=text, vision_config=vision, **ids)
    model: Any = Qwen3VLForConditionalGeneration(config)
    model.eval()
    return _save(model, processor, Path(out_dir), seed)


# --------------------------------------------------------------------------------------------- Qwen3.5
def _word_bpe_tokenizer(specials: Sequence[str], words: Iterable[str], *, eos: str, pad: str) -> Any:
    """A ``Qwen3_5Tokenizer`` (byte-level BPE, Qwen's pre-tokenizer) in which every vocabulary word, bare
    and after a space (``Ġword``), is one token.

    transformers loads any tokenizer saved beside a ``qwen3_5`` config as ``Qwen3_5Tokenizer``, rebuilding
    its pipeline from the saved vocabulary and merges, so a WordLevel tokenizer (:func:`.tiny.tiny_tokenizer`)
    would come back splitting every word into characters. Merges are added word by word: when the merges so
    far leave a word in pieces, the first two pieces get a new (last-ranked) merge, which cannot change how
    an earlier word merges (BPE only reaches a last-ranked merge once nothing else applies). Text outside
    the vocabulary falls back to bytes, never to an unknown token.
    """
    from tokenizers.pre_tokenizers import ByteLevel  # lazy: torch-free at import (see tiny.tiny_tokenizer)
    from transformers import Qwen3_5Tokenizer

    vocab: dict[str, int] = {}
    for token in [pad, eos, *specials, *sorted(ByteLevel.alphabet())]:
        vocab.setdefault(token, len(vocab))
    ranks: dict[tuple[str, str], int] = {}

    def merged(piece: str) -> list[str]:
        symbols = list(piece)
        while len(symbols) > 1:
            pairs = list(pairwise(symbols))
            i = min(range(len(pairs)), key=lambda j: ranks.get(pairs[j], len(ranks)))
            if pairs[i] not in ranks:
                break
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
        return symbols

    pre_tokenizer = _untyped(Qwen3_5Tokenizer)(vocab=dict(vocab), merges=[]).backend_tokenizer.pre_tokenizer
    for word in dict.fromkeys([*BASE_WORDS, *words]):
        if word in specials:
            continue
        for text in (word, " " + word):
            for piece, _ in pre_tokenizer.pre_tokenize_str(text):
                while len(pieces := merged(piece)) > 1:
                    ranks[(pieces[0], pieces[1])] = len(ranks)
                    vocab.setdefault(pieces[0] + pieces[1], len(vocab))
    tok = _untyped(Qwen3_5Tokenizer)(vocab=vocab, merges=sorted(ranks, key=ranks.__getitem__), eos_token=eos,
                                     pad_token=pad, unk_token=pad)
    tok.add_special_tokens({"additional_special_tokens": [t for t in specials if t not in (eos, pad)]})
    return tok


#: Qwen3.5 thinks by default: the generation prompt opens ``<think>``; ``enable_thinking=False`` renders an
#: empty think block instead, and a final assistant turn (one after the last user turn, as the real template
#: has it) carries its (here always empty) think block, so it starts with either generation prompt.
QWEN3_5_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['role'] == 'assistant' and loop.last %}<think>\n\n</think>\n\n{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% elif item['type'] == 'video' %}"
    "<|vision_start|><|video_pad|><|vision_end|>{% elif item['type'] == 'text' %}{{ item['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% else %}<think>\n{% endif %}{% endif %}"
)
#: Layer kinds of the tiny Qwen3.5: the real model's pattern (a full-attention layer after every three
#: gated-delta-net layers), so a cache holds both recurrent/conv states and key/value tensors.
QWEN3_5_LAYER_TYPES = ("linear_attention", "linear_attention", "linear_attention", "full_attention")


def build_tiny_qwen3_5(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """Qwen3.5 (``Qwen3_5ForConditionalGeneration``): Qwen3-VL-style vision tower without deep-stack, and a
    hybrid text model of 4 layers (:data:`QWEN3_5_LAYER_TYPES`: gated delta net linear attention, then one
    gated full-attention layer) with partial (1/4 of a head dim of 32) interleaved multimodal RoPE
    (sections 2/1/1). ``(image_size/8)**2`` image tokens per image."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        Qwen3_5Config,
        Qwen3_5ForConditionalGeneration,
    )

    _seeded(seed)
    tok = _word_bpe_tokenizer([*_QWEN_SPECIALS, "<think>", "</think>"], words, eos="<|im_end|>",
                              pad="<|endoftext|>")
    ids = _qwen_media_ids(tok)
    text = _text_dims(
        len(tok), num_hidden_layers=len(QWEN3_5_LAYER_TYPES), layer_types=list(QWEN3_5_LAYER_TYPES),
        head_dim=32, linear_conv_kernel_dim=4, linear_key_head_dim=8, linear_value_head_dim=8,
        linear_num_key_heads=2, linear_num_value_heads=4,
        rope_parameters={"rope_type": "default", "mrope_section": [2, 1, 1], "mrope_interleaved": True,
                         "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None,
    )
    vision, processor = _qwen3_vl_parts(image_size, tok, QWEN3_5_TEMPLATE)
    config = _untyped(Qwen3_5Config)(text_config=text, vision_config=vision, **ids)
    model: Any = Qwen3_5ForConditionalGeneration(config)
    model.eval()
    return _save(model, processor, Path(out_dir), seed)


# ------------------------------------------------------------------------------------------- GLM-4.1V
GLM4V_TEMPLATE = (
    "[gMASK]<sop>{% for message in messages %}"
    "{% if message['role'] == 'system' %}<|system|>\n"
    "{% elif message['role'] == 'user' %}<|user|>\n{% else %}<|assistant|>\n{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}"
    "<|begin_of_image|><|image|><|end_of_image|>{% elif item['type'] == 'video' %}"
    "<|begin_of_video|><|video|><|end_of_video|>{% elif item['type'] == 'text' %}{{ item['text'] }}"
    "{% endif %}{% endfor %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
_GLM4V_SPECIALS = ["[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
                   "<|assistant|>", "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>",
                   "<|begin_of_video|>", "<|end_of_video|>", "<|image|>", "<|video|>", "<think>", "</think>"]


def build_tiny_glm4v(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """GLM-4.1V: vision tower with bicubically resampled learned positions, a 2x2 strided-conv downsample
    and a gated MLP merger, GLM-4 text model (post-attention/post-MLP norms) with multimodal RoPE
    (sections 1/1/2 over a head dim of 8; the real model rotates half the head, too few frequencies
    here). One image is ``<|begin_of_image|>`` + ``(image_size/8)**2`` ``<|image|>`` + ``<|end_of_image|>``;
    generation stops at ``<|endoftext|>``, ``<|user|>`` or ``<|observation|>``."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        Glm4vConfig,
        Glm4vForConditionalGeneration,
        Glm4vImageProcessor,
        Glm4vProcessor,
        Glm4vVideoProcessor,
    )

    _seeded(seed)
    tok = tiny_tokenizer(_GLM4V_SPECIALS, words=words, pad="<|endoftext|>", bos=None, eos="<|endoftext|>")
    tid = {t: int(tok.convert_tokens_to_ids(t)) for t in _GLM4V_SPECIALS}
    stops = [int(tok.eos_token_id), tid["<|user|>"], tid["<|observation|>"]]
    text = _text_dims(len(tok), rope_parameters={"rope_type": "default", "mrope_section": [1, 1, 2],
                                                 "rope_theta": 10000.0},
                      pad_token_id=tok.pad_token_id, eos_token_id=stops)
    vision = {"depth": 1, "hidden_size": 16, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 32,
              "spatial_merge_size": MERGE, "patch_size": PATCH, "temporal_patch_size": 2,
              "image_size": image_size}
    config = _untyped(Glm4vConfig)(
        text_config=text, vision_config=vision, image_token_id=tid["<|image|>"],
        video_token_id=tid["<|video|>"], image_start_token_id=tid["<|begin_of_image|>"],
        image_end_token_id=tid["<|end_of_image|>"], video_start_token_id=tid["<|begin_of_video|>"],
        video_end_token_id=tid["<|end_of_video|>"],
    )
    model: Any = Glm4vForConditionalGeneration(config)
    model.eval()
    # GLM's resize bounds count both frames of the (duplicated) temporal patch: 2 * image_size**2.
    pixels = 2 * image_size * image_size
    image_processor = _untyped(Glm4vImageProcessor)(size={"shortest_edge": pixels, "longest_edge": pixels},
                                                    **_PATCHES)
    processor = _untyped(Glm4vProcessor)(
        image_processor=image_processor, tokenizer=tok,
        video_processor=_untyped(Glm4vVideoProcessor)(**_PATCHES), chat_template=GLM4V_TEMPLATE,
    )
    return _save(model, processor, Path(out_dir), seed)


BUILDERS: dict[str, Callable[..., Path]] = {
    "qwen2_5_vl": build_tiny_qwen2_5_vl,
    "qwen3_vl": build_tiny_qwen3_vl,
    "qwen3_5": build_tiny_qwen3_5,
    "glm4v": build_tiny_glm4v,
}
