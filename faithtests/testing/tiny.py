"""Tiny, randomly initialised VLMs of real families, built offline from configs.

No pretrained weights reach the machines this project runs on, so every adapter is proven on models built
here: a family config with tiny dimensions, a WordLevel tokenizer (``PreTrainedTokenizerFast``) carrying
the family's special tokens, the family's image processor from its defaults (shrunk to small images) and a
chat template shaped like the family's real one. Everything is written with ``save_pretrained`` so a test
loads it back through exactly the path a user's checkpoint takes (``load_model("hf:DIR")``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from faithtests.testing.families import builder

#: Words every tiny vocabulary holds: option letters, digits, punctuation and the words the tests use.
BASE_WORDS: tuple[str, ...] = (
    *"ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    *"abcdefghijklmnopqrstuvwxyz",
    *"0123456789",
    *".,:;!?\"'()[]-/",
    "a", "an", "the", "of", "in", "on", "is", "are", "which", "what", "caption", "better", "matches",
    "image", "answer", "only", "or", "and", "yes", "no", "photo", "picture", "shows", "this", "there",
    "red", "blue", "green", "yellow", "black", "white", "circle", "square", "triangle", "one", "two",
    "three", "dog", "cat", "describe", "question", "options", "option", "letter", "from", "given",
    "choices", "directly", "with", "to", "it", "happy", "sad", "scene", "same", "different", "pictures",
    "USER", "ASSISTANT", "User", "Assistant", "system", "user", "assistant", "model", "You", "helpful",
)

def tiny_tokenizer(
    special_tokens: Sequence[str],
    *,
    words: Iterable[str] = (),
    named: dict[str, str] | None = None,
    pad: str = "<pad>",
    unk: str = "<unk>",
    bos: str | None = "<s>",
    eos: str = "</s>",
    wrap: bool = False,
) -> Any:
    """A WordLevel ``PreTrainedTokenizerFast``: whitespace + punctuation split, one id per vocabulary word.

    ``named`` maps attribute names the family's processor reads (``boi_token``, ``image_token``, ...) to
    token strings; they become ``extra_special_tokens`` so ``tokenizer.boi_token_id`` etc. resolve.
    ``wrap`` adds BOS/EOS around every encoded text (text encoders that pool at EOS, e.g. CLIP).
    """
    # lazy: torch-free at import (the builders import what they need when called)
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors  # lazy
    from transformers import PreTrainedTokenizerFast

    core = [t for t in (pad, unk, bos, eos) if t is not None]
    ordered: dict[str, int] = {}
    for token in [*core, *special_tokens, *(named or {}).values(), *BASE_WORDS, *words]:
        ordered.setdefault(token, len(ordered))
    backend = Tokenizer(models.WordLevel(vocab=ordered, unk_token=unk))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=True)  # joins words with single spaces
    # Registered on the backend as special added tokens so they are never split and ``decode`` can skip them.
    specials = [t for t in ordered if t in core or t in special_tokens or t in (named or {}).values()]
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    if wrap:
        ends = [t for t in (bos, eos) if t is not None]
        backend.post_processor = processors.TemplateProcessing(
            single=" ".join([*([bos] if bos else []), "$A", eos]),
            special_tokens=[(t, ordered[t]) for t in ends],
        )
    fast: Any = PreTrainedTokenizerFast  # untyped constructor
    return fast(
        tokenizer_object=backend,
        pad_token=pad,
        unk_token=unk,
        bos_token=bos,
        eos_token=eos,
        extra_special_tokens=dict(named or {}),
    )


def _text_dims(vocab_size: int, **overrides: Any) -> dict[str, Any]:
    dims: dict[str, Any] = {
        "vocab_size": vocab_size,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 2048,
    }
    dims.update(overrides)
    return dims


def _save(model: Any, processor: Any, out_dir: Path, seed: int) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return out_dir


def _untyped(cls: Any) -> Any:
    """transformers' processor constructors are untyped; call them through ``Any`` (mypy strict)."""
    return cls


def _seeded(seed: int) -> None:
    import torch  # lazy: torch-free at import (see tiny_tokenizer)

    torch.manual_seed(seed)


# ----------------------------------------------------------------------------------------------- LLaVA
LLAVA_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}USER: {% else %}ASSISTANT: {% endif %}"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}<image>\n"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}"
    "{% if message['role'] == 'user' %} {% else %}{{ eos_token }} {% endif %}{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def build_tiny_llava(
    out_dir: str | Path,
    *,
    words: Iterable[str] = (),
    image_size: int = 32,
    patch_size: int = 8,
    hidden_size: int = 32,
    num_layers: int = 2,
    vision_hidden_size: int = 32,
    vision_layers: int = 2,
    seed: int = 0,
) -> Path:
    """LLaVA-1.5 layout: CLIP vision tower + MLP projector + Llama. ``(image_size/patch_size)**2`` image
    tokens per image (the "default" strategy drops CLS)."""
    from transformers import (  # lazy: torch-free at import (see tiny_tokenizer)
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    _seeded(seed)
    tok = tiny_tokenizer(["<image>"], words=words)
    vision = CLIPVisionConfig(
        hidden_size=vision_hidden_size, intermediate_size=2 * vision_hidden_size,
        num_hidden_layers=vision_layers, num_attention_heads=2,
        image_size=image_size, patch_size=patch_size, projection_dim=32,
    )
    text = LlamaConfig(**_text_dims(len(tok), hidden_size=hidden_size, num_hidden_layers=num_layers),
                       pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                       eos_token_id=tok.eos_token_id)
    config = LlavaConfig(
        vision_config=vision, text_config=text, image_token_index=tok.convert_tokens_to_ids("<image>"),
        image_seq_length=(image_size // patch_size) ** 2, vision_feature_layer=-1,
    )
    model: Any = LlavaForConditionalGeneration(config)
    model.eval()
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    processor = _untyped(LlavaProcessor)(
        image_processor=image_processor, tokenizer=tok, patch_size=patch_size,
        vision_feature_select_strategy="default", chat_template=LLAVA_TEMPLATE, num_additional_image_tokens=1,
    )
    return _save(model, processor, Path(out_dir), seed)



# -------------------------------------------------------------------------------------------- Qwen2-VL
QWEN2VL_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% elif item['type'] == 'text' %}{{ item['text'] }}"
    "{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_qwen2_vl(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """Qwen2-VL: 2x2-merged patches of 4 px (an image of ``image_size`` px has ``(image_size/8)**2``
    tokens) and multimodal RoPE (mrope sections over a head dim of 8)."""
    from transformers import (  # lazy: torch-free at import (see tiny_tokenizer)
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    _seeded(seed)
    specials = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
                "<|video_pad|>"]
    tok = tiny_tokenizer(specials, words=words, bos=None, eos="<|im_end|>")
    ids = {t: tok.convert_tokens_to_ids(t) for t in specials}
    text = _text_dims(len(tok), rope_parameters={"rope_type": "default", "mrope_section": [1, 1, 2],
                                                 "rope_theta": 10000.0},
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    vision = {"depth": 1, "embed_dim": 16, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 2,
              "patch_size": 4, "spatial_merge_size": 2, "temporal_patch_size": 2}
    config = Qwen2VLConfig(
        text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    model: Any = Qwen2VLForConditionalGeneration(config)
    model.eval()
    pixels = image_size * image_size
    image_processor = Qwen2VLImageProcessor(
        size={"shortest_edge": pixels, "longest_edge": pixels}, patch_size=4, merge_size=2,
        temporal_patch_size=2,
    )
    # The processor insists on a video processor although no suite sends video.
    video_processor = Qwen2VLVideoProcessor(patch_size=4, merge_size=2, temporal_patch_size=2)
    processor = _untyped(Qwen2VLProcessor)(image_processor=image_processor, tokenizer=tok,
                                 video_processor=video_processor, chat_template=QWEN2VL_TEMPLATE)
    return _save(model, processor, Path(out_dir), seed)


# ------------------------------------------------------------------------------------ Idefics3/SmolVLM
IDEFICS3_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'][0]['type'] == 'image' %}{{ ':' }}{% else %}{{ ': ' }}{% endif %}"
    "{% for item in message['content'] %}{% if item['type'] == 'text' %}{{ item['text'] }}"
    "{% elif item['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)


def build_tiny_idefics3(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """Idefics3 (the SmolVLM layout): SigLIP-style tower, pixel-shuffle connector (scale 2), Llama text
    model; no image splitting, so one image is ``(image_size/8/2)**2`` image tokens between markers."""
    from transformers import (  # lazy: torch-free at import (see tiny_tokenizer)
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessor,
        Idefics3Processor,
    )

    _seeded(seed)
    specials = ["<|im_start|>", "<end_of_utterance>", "<fake_token_around_image>", "<image>", "<global-img>"]
    tok = tiny_tokenizer(specials, words=words, bos=None, eos="<end_of_utterance>")
    patch, scale = 8, 2
    seq_len = ((image_size // patch) ** 2) // (scale * scale)
    text = _text_dims(len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "image_size": image_size, "patch_size": patch}
    config = Idefics3Config(
        vision_config=vision, text_config=text, image_token_id=tok.convert_tokens_to_ids("<image>"),
        scale_factor=scale,
    )
    model: Any = Idefics3ForConditionalGeneration(config)
    model.eval()
    image_processor = Idefics3ImageProcessor(
        size={"longest_edge": image_size}, max_image_size={"longest_edge": image_size},
        do_image_splitting=False,
    )
    processor = _untyped(Idefics3Processor)(
        image_processor=image_processor, tokenizer=tok, image_seq_len=seq_len, chat_template=IDEFICS3_TEMPLATE
    )
    return _save(model, processor, Path(out_dir), seed)


# ---------------------------------------------------------------------------------------------- Gemma3
GEMMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<start_of_turn>"
    "{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}<start_of_image>"
    "{% elif item['type'] == 'text' %}{{ item['text'] | trim }}{% endif %}{% endfor %}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def build_tiny_gemma3(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0,
    sliding_window: int = 64,
) -> Path:
    """Gemma3: SigLIP tower, average-pooled soft tokens (``(image_size/8)**2``), bidirectional attention
    among image tokens, sliding-window layers, post-FFN RMSNorm."""
    import torch  # lazy: torch-free at import (see tiny_tokenizer)
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3ImageProcessor,
        Gemma3Processor,
        Gemma3TextConfig,
        SiglipVisionConfig,
    )

    _seeded(seed)
    named = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
             "image_token": "<image_soft_token>"}
    tok = tiny_tokenizer(["<start_of_turn>", "<end_of_turn>"], words=words, named=named, bos="<bos>",
                         eos="<eos>")
    patch = 8
    n_tokens = (image_size // patch) ** 2
    text = Gemma3TextConfig(
        **_text_dims(len(tok)), head_dim=8, query_pre_attn_scalar=8, sliding_window=sliding_window,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id,
    )
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                num_attention_heads=2, image_size=image_size, patch_size=patch)
    config = Gemma3Config(
        text_config=text, vision_config=vision, mm_tokens_per_image=n_tokens,
        boi_token_index=tok.convert_tokens_to_ids(named["boi_token"]),
        eoi_token_index=tok.convert_tokens_to_ids(named["eoi_token"]),
        image_token_index=tok.convert_tokens_to_ids(named["image_token"]),
    )
    model: Any = Gemma3ForConditionalGeneration(config)
    model.eval()
    # Gemma3 initialises its vision projection to zeros, which would make the random model image-blind.
    torch.nn.init.normal_(model.model.multi_modal_projector.mm_input_projection_weight, std=0.02)
    image_processor = Gemma3ImageProcessor(size={"height": image_size, "width": image_size})
    processor = _untyped(Gemma3Processor)(
        image_processor=image_processor, tokenizer=tok, image_seq_length=n_tokens,
        chat_template=GEMMA3_TEMPLATE,
    )
    return _save(model, processor, Path(out_dir), seed)


# -------------------------------------------------------------------------------------------- InternVL
INTERNVL_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}<IMG_CONTEXT>\n"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_internvl(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """InternVL (3.x HF layout): InternViT tower, pixel-shuffle (ratio 0.5) + MLP projector, Qwen2 text
    model; one image is ``<img>`` + ``(image_size/16)**2`` context tokens + ``</img>``."""
    from transformers import (  # lazy: torch-free at import (see tiny_tokenizer)
        GotOcr2ImageProcessor,
        InternVLConfig,
        InternVLForConditionalGeneration,
        InternVLProcessor,
        InternVLVideoProcessor,
    )

    _seeded(seed)
    named = {"start_image_token": "<img>", "end_image_token": "</img>",
             "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"}
    tok = tiny_tokenizer(["<|im_start|>", "<|im_end|>"], words=words, named=named, bos=None, eos="<|im_end|>")
    patch = 8
    seq_len = ((image_size // patch) ** 2) // 4
    text = _text_dims(len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "image_size": [image_size, image_size], "patch_size": [patch, patch]}
    config = InternVLConfig(
        vision_config=vision, text_config={"model_type": "qwen2", **text},
        image_token_id=tok.convert_tokens_to_ids(named["context_image_token"]), image_seq_length=seq_len,
        downsample_ratio=0.5,
    )
    model: Any = InternVLForConditionalGeneration(config)
    model.eval()
    # The processor asks for dynamic tiling (crop_to_patches=True); max_patches=1 keeps one tile per image.
    image_processor = GotOcr2ImageProcessor(size={"height": image_size, "width": image_size}, max_patches=1)
    processor = _untyped(InternVLProcessor)(image_processor=image_processor, tokenizer=tok,
                                  video_processor=InternVLVideoProcessor(), image_seq_length=seq_len,
                                  chat_template=INTERNVL_TEMPLATE)
    return _save(model, processor, Path(out_dir), seed)


BUILDERS: dict[str, Callable[..., Path]] = {
    "llava": build_tiny_llava,
    "qwen2_vl": build_tiny_qwen2_vl,
    "idefics3": build_tiny_idefics3,
    "gemma3": build_tiny_gemma3,
    "internvl": build_tiny_internvl,
}


def build_tiny(family: str, out_dir: str | Path, **kwargs: Any) -> Path:
    """Build the tiny model of ``family`` (a ``model_type`` of :data:`~.families.FAMILIES`) into
    ``out_dir``."""
    return builder(family)(out_dir, **kwargs)
