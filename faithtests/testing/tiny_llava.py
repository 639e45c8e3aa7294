"""Tiny, randomly initialised VLMs of the LLaVA-NeXT line and its relatives, built offline like :mod:`.tiny`.

LLaVA-NeXT and LLaVA-OneVision tile an image "anyres": a base view plus the tiles of the grid pinpoint
closest to the image's shape, so the number of image tokens depends on the image's size (the pinpoints
here are the real ones scaled from 336 / 384 px tiles down to ``image_size``). Mistral 3 (Pixtral tower)
keeps an image's own aspect ratio (no tiles) with one ``[IMG_BREAK]`` per row of patches. Aya Vision and
LFM2-VL crop tiles plus a global thumbnail; SmolVLM splits into a grid of tiles plus a global view. Aya
Vision's Cohere2 text model mixes sliding-window (a window of 16 tokens here, shorter than any prompt)
and full-attention layers; LFM2-VL's text model mixes short-convolution and attention layers.
Every builder follows :func:`.tiny.build_tiny_llava`: a family config with tiny dimensions, a WordLevel
tokenizer with the family's special tokens, the family's own processor classes shrunk to small images and
a chat template shaped like the family's real one, written with ``save_pretrained``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from faithtests.testing.tiny import _save, _seeded, _text_dims, _untyped, tiny_tokenizer


def _scaled_pinpoints(grid: Iterable[tuple[int, int]], tile: int) -> list[list[int]]:
    """The real ``image_grid_pinpoints`` (multiples of the tower's tile) with tiles of ``tile`` px."""
    return [[rows * tile, cols * tile] for rows, cols in grid]


# ------------------------------------------------------------------------------------------ LLaVA-NeXT
#: llava-v1.6-mistral's template: images first, then text, inside ``[INST] ... [/INST]``.
LLAVA_NEXT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}<<SYS>>\n"
    "{% for item in message['content'] | selectattr('type', 'equalto', 'text') %}{{ item['text'] }}"
    "{% endfor %}{{ '\\n' }}<</SYS>>\n\n{% elif message['role'] == 'user' %}[INST] "
    "{% for item in message['content'] | selectattr('type', 'equalto', 'image') %}<image>\n{% endfor %}"
    "{% for item in message['content'] | selectattr('type', 'equalto', 'text') %}{{ item['text'] }}"
    "{% endfor %} [/INST]{% elif message['role'] == 'assistant' %} "
    "{% for item in message['content'] | selectattr('type', 'equalto', 'text') %}{{ item['text'] }}"
    "{% endfor %}{{ eos_token }} {% endif %}{% endfor %}"
)
#: llava-v1.6's pinpoints, in tiles of 336 px: 1x2, 2x1, 2x2, 3x1, 1x3.
LLAVA_NEXT_GRID: tuple[tuple[int, int], ...] = ((1, 2), (2, 1), (2, 2), (3, 1), (1, 3))


def build_tiny_llava_next(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """LLaVA-NeXT (v1.6, Mistral text model): CLIP tower (8 px patches, CLS dropped), "anyres" tiling over
    the real pinpoint grid in tiles of ``image_size`` px, unpadded features with one ``image_newline`` per
    row, plus the base view: a 32 px square image is 36 image tokens (1x2 tiles unpadded back to its 4x4
    patches + 4 newlines + 16 base), a 64 px one 88."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        CLIPVisionConfig,
        LlavaNextConfig,
        LlavaNextForConditionalGeneration,
        LlavaNextImageProcessor,
        LlavaNextProcessor,
        MistralConfig,
    )

    _seeded(seed)
    tok = tiny_tokenizer(["<image>", "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>"], words=words)
    patch = 8
    pinpoints = _scaled_pinpoints(LLAVA_NEXT_GRID, image_size)
    vision = CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        image_size=image_size, patch_size=patch, projection_dim=32,
    )
    text = MistralConfig(**_text_dims(len(tok)), sliding_window=None, pad_token_id=tok.pad_token_id,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    config = LlavaNextConfig(
        vision_config=vision, text_config=text, image_token_index=tok.convert_tokens_to_ids("<image>"),
        image_grid_pinpoints=pinpoints, image_seq_length=(image_size // patch) ** 2,
        vision_feature_select_strategy="default", vision_feature_layer=-1,
    )
    model: Any = LlavaNextForConditionalGeneration(config)
    model.eval()
    image_processor = _untyped(LlavaNextImageProcessor)(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size},
        image_grid_pinpoints=pinpoints,
    )
    processor = _untyped(LlavaNextProcessor)(
        image_processor=image_processor, tokenizer=tok, patch_size=patch,
        vision_feature_select_strategy="default", chat_template=LLAVA_NEXT_TEMPLATE,
        num_additional_image_tokens=1,
    )
    return _save(model, processor, Path(out_dir), seed)


# ------------------------------------------------------------------------------------- LLaVA-OneVision
#: llava-onevision-qwen2's template, as released: ``<|im_start|>user <image>\ntext<|im_end|>`` (images,
#: videos, then text; no newline after ``<|im_end|>``). Its assistant turn opens ``<|im_start|>assistant \n``
#: while its generation prompt is ``<|im_start|>assistant\n`` (no space): the real template's quirk, kept.
LLAVA_ONEVISION_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }} "
    "{% for item in message['content'] | selectattr('type', 'equalto', 'image') %}<image>{% endfor %}"
    "{% for item in message['content'] | selectattr('type', 'equalto', 'video') %}<video>{% endfor %}"
    "{% for item in message['content'] | selectattr('type', 'equalto', 'text') %}{{ '\\n' + item['text'] }}"
    "{% endfor %}<|im_end|>{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: llava-onevision's pinpoints, in tiles of 384 px: every grid from 1x1 to 6x6.
LLAVA_ONEVISION_GRID: tuple[tuple[int, int], ...] = tuple((r, c) for r in range(1, 7) for c in range(1, 7))


def build_tiny_llava_onevision(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """LLaVA-OneVision (Qwen2 text model): SigLIP tower (8 px patches, all features kept), "anyres_max_9"
    tiling over the real 1x1..6x6 pinpoint grid in tiles of ``image_size`` px plus the base view; a
    32 px square image is 1 tile + newlines + base = 36 image tokens (64 px: 88). With several images in one
    prompt each image is its base view only (``(image_size/8)**2 + 1`` tokens)."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
        Qwen2Config,
        SiglipVisionConfig,
    )

    _seeded(seed)
    tok = tiny_tokenizer(["<|im_start|>", "<|im_end|>", "<image>", "<video>"], words=words, bos=None,
                         eos="<|im_end|>")
    patch = 8
    pinpoints = _scaled_pinpoints(LLAVA_ONEVISION_GRID, image_size)
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                num_attention_heads=2, image_size=image_size, patch_size=patch,
                                vision_use_head=False)
    text = Qwen2Config(**_text_dims(len(tok)), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                       bos_token_id=None)
    config = LlavaOnevisionConfig(
        vision_config=vision, text_config=text, image_token_index=tok.convert_tokens_to_ids("<image>"),
        video_token_index=tok.convert_tokens_to_ids("<video>"), image_grid_pinpoints=pinpoints,
        vision_feature_select_strategy="full", vision_feature_layer=-1, vision_aspect_ratio="anyres_max_9",
    )
    model: Any = LlavaOnevisionForConditionalGeneration(config)
    model.eval()
    square = {"height": image_size, "width": image_size}
    image_processor = _untyped(LlavaOnevisionImageProcessor)(size=square, image_grid_pinpoints=pinpoints)
    processor = _untyped(LlavaOnevisionProcessor)(
        image_processor=image_processor, tokenizer=tok,
        video_processor=_untyped(LlavaOnevisionVideoProcessor)(size=square),
        num_image_tokens=(image_size // patch) ** 2, vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_9", chat_template=LLAVA_ONEVISION_TEMPLATE,
    )
    return _save(model, processor, Path(out_dir), seed)


# -------------------------------------------------------------------------------------------- Mistral 3
#: Mistral-Small-3.1's template (without its long default system prompt): images inline as ``[IMG]``.
MISTRAL3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}[SYSTEM_PROMPT]"
    "{% for item in message['content'] %}{% if item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
    "{% endfor %}[/SYSTEM_PROMPT]{% elif message['role'] == 'user' %}[INST]"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}[IMG]"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}[/INST]"
    "{% elif message['role'] == 'assistant' %}{% for item in message['content'] %}"
    "{% if item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}{{ eos_token }}{% endif %}"
    "{% endfor %}"
)


def build_tiny_mistral3(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """Mistral 3 (Mistral-Small-3.1 layout): Pixtral tower (4 px patches, 2D RoPE) at the image's own
    aspect ratio (longest edge at most ``2 * image_size``, never upscaled), a 2x2 patch merger, Mistral
    text model. An image of ``h x w`` px is ``(h/8) * (w/8)`` ``[IMG]`` tokens, one ``[IMG_BREAK]`` after
    each row and ``[IMG_END]`` in place of the last break."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        Mistral3Config,
        Mistral3ForConditionalGeneration,
        MistralConfig,
        PixtralImageProcessor,
        PixtralProcessor,
        PixtralVisionConfig,
    )

    _seeded(seed)
    specials = ["[INST]", "[/INST]", "[IMG]", "[IMG_BREAK]", "[IMG_END]", "[SYSTEM_PROMPT]",
                "[/SYSTEM_PROMPT]"]
    tok = tiny_tokenizer(specials, words=words)
    patch, merge, longest = 4, 2, 2 * image_size
    vision = PixtralVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=2, image_size=longest, patch_size=patch)
    text = MistralConfig(**_text_dims(len(tok)), head_dim=8, sliding_window=None,
                         pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id)
    config = Mistral3Config(
        vision_config=vision, text_config=text, image_token_index=tok.convert_tokens_to_ids("[IMG]"),
        spatial_merge_size=merge, vision_feature_layer=-1, tie_word_embeddings=False,
    )
    model: Any = Mistral3ForConditionalGeneration(config)
    model.eval()
    image_processor = _untyped(PixtralImageProcessor)(
        size={"longest_edge": longest}, patch_size={"height": patch, "width": patch}
    )
    processor = _untyped(PixtralProcessor)(
        image_processor=image_processor, tokenizer=tok, patch_size=patch, spatial_merge_size=merge,
        chat_template=MISTRAL3_TEMPLATE,
    )
    return _save(model, processor, Path(out_dir), seed)


# ------------------------------------------------------------------------------------------ Aya Vision
#: aya-vision's Command-R turn markers; ``<image>`` is expanded by the processor.
AYA_VISION_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|START_OF_TURN_TOKEN|>"
    "{% if message['role'] == 'user' %}<|USER_TOKEN|>{% elif message['role'] == 'system' %}<|SYSTEM_TOKEN|>"
    "{% else %}<|CHATBOT_TOKEN|>{% endif %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<image>{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
    "{% endfor %}<|END_OF_TURN_TOKEN|>{% endfor %}"
    "{% if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}"
)
#: Aya's tile markers are plain text (``TILE_1``, ``TILE_GLOBAL``), split into these words.
AYA_TILE_WORDS: tuple[str, ...] = ("TILE", "GLOBAL", "_")


def build_tiny_aya_vision(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0,
    sliding_window: int = 16,
) -> Path:
    """Aya Vision: SigLIP tower (4 px patches), pixel-shuffle (2x2) SwiGLU projector, Cohere2 text model of
    4 layers (3 sliding-window layers of ``sliding_window`` tokens, then 1 full-attention layer, as the
    real pattern of 4; RoPE on the sliding layers only). GotOcr2 tiling: a square image larger than
    ``image_size`` becomes tiles + a global view, each ``(image_size/8)**2`` ``<|IMG_PATCH|>`` tokens."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        AyaVisionConfig,
        AyaVisionForConditionalGeneration,
        AyaVisionProcessor,
        Cohere2Config,
        GotOcr2ImageProcessor,
        SiglipVisionConfig,
    )

    _seeded(seed)
    specials = ["<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>",
                "<|SYSTEM_TOKEN|>", "<image>", "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_PATCH|>",
                "<|IMG_LINE_BREAK|>"]
    tok = tiny_tokenizer(specials, words=[*AYA_TILE_WORDS, *words], pad="<PAD>", unk="<UNK>",
                         bos="<BOS_TOKEN>", eos="<|END_OF_TURN_TOKEN|>")
    patch, downsample = 4, 2
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                num_attention_heads=2, image_size=image_size, patch_size=patch,
                                vision_use_head=False)
    layer_types = ["sliding_attention"] * 3 + ["full_attention"]
    text = Cohere2Config(
        **_text_dims(len(tok), num_hidden_layers=len(layer_types)), sliding_window=sliding_window,
        layer_types=layer_types, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    config = AyaVisionConfig(
        vision_config=vision, text_config=text, vision_feature_select_strategy="full",
        vision_feature_layer=-1, downsample_factor=downsample,
        image_token_index=tok.convert_tokens_to_ids("<|IMG_PATCH|>"),
    )
    model: Any = AyaVisionForConditionalGeneration(config)
    model.eval()
    image_processor = _untyped(GotOcr2ImageProcessor)(
        size={"height": image_size, "width": image_size}, crop_to_patches=True, min_patches=1, max_patches=12,
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
    )
    processor = _untyped(AyaVisionProcessor)(
        image_processor=image_processor, tokenizer=tok, patch_size=patch, img_size=image_size,
        downsample_factor=downsample, chat_template=AYA_VISION_TEMPLATE,
    )
    return _save(model, processor, Path(out_dir), seed)


# --------------------------------------------------------------------------------------------- LFM2-VL
LFM2_VL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}<image>"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: LFM2-VL's tile limit (``max_tiles``); its tokenizer names every tile ``<|img_row_R_col_C|>`` up to it.
LFM2_VL_MAX_TILES = 10


def build_tiny_lfm2_vl(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """LFM2-VL: SigLIP2 NaFlex tower (4 px patches, variable resolution), pixel-unshuffle (2x2) projector,
    LFM2 text model of 4 layers (short-convolution layers around one attention layer: conv, conv,
    attention, conv). Images of up to about ``(1.4 * image_size)**2`` px are resized whole (between
    ``(image_size/16)**2`` and ``(image_size/8)**2`` tokens, aspect ratio kept); larger ones are cut into
    2..10 tiles of ``image_size`` px plus a thumbnail, each tile ``<|img_row_R_col_C|>`` + its tokens."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        Lfm2Config,
        Lfm2VlConfig,
        Lfm2VlForConditionalGeneration,
        Lfm2VlImageProcessor,
        Lfm2VlProcessor,
        Siglip2VisionConfig,
    )

    _seeded(seed)
    tiles = [f"<|img_row_{r}_col_{c}|>" for r in range(1, LFM2_VL_MAX_TILES + 1)
             for c in range(1, LFM2_VL_MAX_TILES + 1)]
    specials = ["<|im_start|>", "<|im_end|>", "<image>", "<|image_start|>", "<|image_end|>",
                "<|img_thumbnail|>", *tiles]
    tok = tiny_tokenizer(specials, words=words, pad="<|pad|>", bos="<|startoftext|>", eos="<|im_end|>")
    patch, downsample = 4, 2
    tile_tokens = (image_size // patch // downsample) ** 2
    vision = Siglip2VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=2, patch_size=patch,
                                 num_patches=tile_tokens * downsample**2)
    layer_types = ["conv", "conv", "full_attention", "conv"]
    text = Lfm2Config(
        **_text_dims(len(tok), num_hidden_layers=len(layer_types)), layer_types=layer_types,
        block_auto_adjust_ff_dim=False, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    config = Lfm2VlConfig(
        vision_config=vision, text_config=text, image_token_id=tok.convert_tokens_to_ids("<image>"),
        projector_hidden_size=64, downsample_factor=downsample,
    )
    model: Any = Lfm2VlForConditionalGeneration(config)
    model.eval()
    # The real ratios: a tile (512 px, 16 px patches) is 256 tokens = max_image_tokens = 4 * min_image_tokens.
    image_processor = _untyped(Lfm2VlImageProcessor)(
        encoder_patch_size=patch, downsample_factor=downsample, tile_size=image_size,
        size={"height": image_size, "width": image_size}, min_image_tokens=max(1, tile_tokens // 4),
        max_image_tokens=tile_tokens, min_tiles=2, max_tiles=LFM2_VL_MAX_TILES, use_thumbnail=True,
        do_image_splitting=True,
    )
    processor = _untyped(Lfm2VlProcessor)(image_processor=image_processor, tokenizer=tok,
                                          chat_template=LFM2_VL_TEMPLATE)
    return _save(model, processor, Path(out_dir), seed)


# --------------------------------------------------------------------------------------------- SmolVLM
#: SmolVLM's own default template (``<|im_start|>User:<image>text<end_of_utterance>\nAssistant:``).
SMOLVLM_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'] is string %}{{ ': ' + message['content'] }}{% else %}"
    "{% if message['content'][0]['type'] == 'image' %}{{ ':' }}{% else %}{{ ': ' }}{% endif %}"
    "{% for item in message['content'] %}{% if item['type'] == 'text' %}{{ item['text'] }}"
    "{% elif item['type'] == 'image' %}{{ '<image>' }}{% elif item['type'] == 'video' %}{{ '<video>' }}"
    "{% endif %}{% endfor %}{% endif %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
#: SmolVLM's tokenizer names grid cells ``<row_R_col_C>`` up to 6 x 6.
SMOLVLM_MAX_GRID = 6


def build_tiny_smolvlm(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """SmolVLM: Idefics3-style tower (4 px patches), pixel-shuffle connector (scale 2), Llama text model;
    image splitting on: an image is resized to a longest edge of ``2 * image_size`` (up or down), cut
    into a grid of ``image_size`` px tiles (``<row_R_col_C>`` each) plus a global view, each tile
    ``(image_size/8)**2`` ``<image>`` tokens between ``<fake_token_around_image>`` markers. Needs the
    ``num2words`` package (the processor imports it)."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        SmolVLMConfig,
        SmolVLMForConditionalGeneration,
        SmolVLMImageProcessor,
        SmolVLMProcessor,
        SmolVLMVideoProcessor,
    )

    _seeded(seed)
    grid = range(1, SMOLVLM_MAX_GRID + 1)
    cells = [f"<row_{r}_col_{c}>" for r in grid for c in grid]
    specials = ["<fake_token_around_image>", "<image>", "<global-img>", "<video>", *cells]
    tok = tiny_tokenizer(specials, words=words, pad="<|im_end|>", unk="<|endoftext|>", bos="<|im_start|>",
                         eos="<end_of_utterance>")
    patch, scale = 4, 2
    seq_len = ((image_size // patch) ** 2) // (scale * scale)
    text = _text_dims(len(tok), pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id)
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "image_size": image_size, "patch_size": patch}
    # pad_token_id is an init-only keyword (its default, 128002, would be saved otherwise): hence _untyped.
    config = _untyped(SmolVLMConfig)(
        vision_config=vision, text_config={"model_type": "llama", **text},
        image_token_id=tok.convert_tokens_to_ids("<image>"), scale_factor=scale,
        pad_token_id=tok.pad_token_id,
    )
    model: Any = SmolVLMForConditionalGeneration(config)
    model.eval()
    tile = {"longest_edge": image_size}
    image_processor = _untyped(SmolVLMImageProcessor)(
        size={"longest_edge": 2 * image_size}, max_image_size=tile, do_image_splitting=True
    )
    video_processor = _untyped(SmolVLMVideoProcessor)(size=tile, max_image_size=tile)
    processor = _untyped(SmolVLMProcessor)(
        image_processor=image_processor, tokenizer=tok, video_processor=video_processor,
        image_seq_len=seq_len, chat_template=SMOLVLM_TEMPLATE,
    )
    return _save(model, processor, Path(out_dir), seed)


BUILDERS: dict[str, Callable[..., Path]] = {
    "llava_next": build_tiny_llava_next,
    "llava_onevision": build_tiny_llava_onevision,
    "mistral3": build_tiny_mistral3,
    "aya_vision": build_tiny_aya_vision,
    "lfm2_vl": build_tiny_lfm2_vl,
    "smolvlm": build_tiny_smolvlm,
}
