"""More tiny, randomly initialised models of real families, built offline like :mod:`.tiny`.

Five image-text-to-text families (PaliGemma, Gemma 4, Llama 3.2 Vision, Llama 4, Janus) and two dual
encoders (SigLIP2 NaFlex, MetaCLIP 2). Each builder writes what a user's checkpoint directory holds: a
config with tiny dimensions, a WordLevel tokenizer (:func:`.tiny.tiny_tokenizer`) carrying the family's
special tokens, the family's own processor classes shrunk to small images, and a chat template shaped like
the released one. PaliGemma is released without a chat template and is saved without one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from faithtests.testing.tiny import BASE_WORDS, _save, _seeded, _text_dims, _untyped, tiny_tokenizer


def _tokens_last(tok: Any, last: Sequence[str]) -> Any:
    """``tok`` rebuilt with the tokens ``last`` moved, in this order, to the end of its vocabulary (Llama 3.2
    Vision's ``<|image|>`` lies just past the text vocabulary the LM head predicts)."""
    from tokenizers import Tokenizer  # lazy: torch-free at import (see tiny.tiny_tokenizer)
    from transformers import PreTrainedTokenizerFast

    spec = json.loads(tok.backend_tokenizer.to_str())
    old: dict[str, int] = spec["model"]["vocab"]
    order = [t for t in sorted(old, key=old.__getitem__) if t not in last] + list(last)
    spec["model"]["vocab"] = vocab = {t: i for i, t in enumerate(order)}
    for added in spec["added_tokens"]:
        added["id"] = vocab[added["content"]]
    return _untyped(PreTrainedTokenizerFast)(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)), pad_token=tok.pad_token,
        unk_token=tok.unk_token, bos_token=tok.bos_token, eos_token=tok.eos_token,
    )


# ------------------------------------------------------------------------------------------- PaliGemma
def build_tiny_paligemma(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """PaliGemma (1): SigLIP tower (no head), one linear projector, Gemma text model with a bidirectional
    prefix (``token_type_ids`` 0 on image + prompt). ``(image_size/8)**2`` ``<image>`` tokens per image, then
    BOS, the prompt and ``\\n`` (the processor builds that prompt itself). No chat template, as released;
    the processor adds the 1024 ``<locXXXX>`` and 128 ``<segXXX>`` tokens to the vocabulary."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        PaliGemmaConfig,
        PaliGemmaForConditionalGeneration,
        PaliGemmaProcessor,
        SiglipImageProcessor,
    )

    _seeded(seed)
    tok = tiny_tokenizer([], words=words, named={"image_token": "<image>"}, bos="<bos>", eos="<eos>")
    patch = 8
    n_tokens = (image_size // patch) ** 2
    # image_seq_length: read by the processor, saved with the image processor (as released)
    image_processor = _untyped(SiglipImageProcessor)(size={"height": image_size, "width": image_size},
                                                     image_seq_length=n_tokens)
    processor = _untyped(PaliGemmaProcessor)(image_processor=image_processor, tokenizer=tok)
    vocab = len(tok)  # after the processor's <loc>/<seg> tokens
    text = {"model_type": "gemma", **_text_dims(vocab), "head_dim": 8, "pad_token_id": tok.pad_token_id,
            "eos_token_id": tok.eos_token_id, "bos_token_id": tok.bos_token_id}
    vision = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": image_size, "patch_size": patch,
              "vision_use_head": False}
    config = PaliGemmaConfig(
        text_config=text, vision_config=vision, image_token_index=tok.convert_tokens_to_ids("<image>"),
        vocab_size=vocab, projection_dim=32, hidden_size=32,
    )
    model: Any = PaliGemmaForConditionalGeneration(config)
    model.eval()
    return _save(model, processor, Path(out_dir), seed)


# --------------------------------------------------------------------------------------------- Gemma 4
GEMMA4_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|turn>"
    "{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}\n\n<|image|>\n\n"
    "{% elif item['type'] == 'text' %}{{ item['text'] | trim }}{% endif %}{% endfor %}{% endif %}<turn|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)
_GEMMA4_NAMED = {"boi_token": "<|image>", "eoi_token": "<image|>", "image_token": "<|image|>",
                 "boa_token": "<|audio>", "eoa_token": "<audio|>", "audio_token": "<|audio|>"}
#: Gemma 4's vision patch (px) and pooling kernel of the tiny model, and its smallest soft-token budget.
GEMMA4_PATCH, GEMMA4_POOL, GEMMA4_SOFT_TOKENS = 4, 3, 70


def build_tiny_gemma4(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0,
    sliding_window: int = 16,
) -> Path:
    """Gemma 4 (the dense, audio-free layout of the large checkpoints): a ViT over 4 px patches, pooled 3x3,
    whose image processor resizes every image, keeping its aspect, to the smallest soft-token budget the
    processor accepts (70; a square image becomes 64 soft tokens between ``<|image>`` and ``<image|>``,
    whatever ``image_size``). The text model alternates a sliding-window layer (``sliding_window``) and a
    full layer (keys shared with values, wider heads, partial RoPE), attends bidirectionally among an image's
    soft tokens (``mm_token_type_ids``) and soft-caps its logits."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        Gemma4AudioFeatureExtractor,
        Gemma4Config,
        Gemma4ForConditionalGeneration,
        Gemma4ImageProcessor,
        Gemma4Processor,
        Gemma4TextConfig,
        Gemma4VideoProcessor,
        Gemma4VisionConfig,
    )

    del image_size  # the processor sizes images by its soft-token budget
    _seeded(seed)
    tok = tiny_tokenizer(["<|turn>", "<turn|>"], words=words, named=_GEMMA4_NAMED, bos="<bos>", eos="<eos>")
    pixels = {"patch_size": GEMMA4_PATCH, "pooling_kernel_size": GEMMA4_POOL,
              "max_soft_tokens": GEMMA4_SOFT_TOKENS}
    processor = _untyped(Gemma4Processor)(
        feature_extractor=_untyped(Gemma4AudioFeatureExtractor)(),
        image_processor=_untyped(Gemma4ImageProcessor)(**pixels),
        video_processor=_untyped(Gemma4VideoProcessor)(**pixels),
        tokenizer=tok, chat_template=GEMMA4_TEMPLATE, image_seq_length=GEMMA4_SOFT_TOKENS,
    )
    ids = {k: int(tok.convert_tokens_to_ids(v)) for k, v in _GEMMA4_NAMED.items()}
    eos = [int(tok.eos_token_id), int(tok.convert_tokens_to_ids("<turn|>"))]
    text = _untyped(Gemma4TextConfig)(
        **_text_dims(len(tok)),  # len(tok) after the processor's <|video|>
        head_dim=8, global_head_dim=16, attention_k_eq_v=True, num_global_key_value_heads=1,
        layer_types=["sliding_attention", "full_attention"], sliding_window=sliding_window,
        hidden_size_per_layer_input=0, vocab_size_per_layer_input=len(tok), final_logit_softcapping=30.0,
        use_bidirectional_attention="vision", pad_token_id=tok.pad_token_id, eos_token_id=eos,
        bos_token_id=tok.bos_token_id,
    )
    vision = Gemma4VisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, head_dim=16, patch_size=GEMMA4_PATCH, pooling_kernel_size=GEMMA4_POOL,
        position_embedding_size=256,
    )
    config = _untyped(Gemma4Config)(
        text_config=text, vision_config=vision, audio_config=None, boi_token_id=ids["boi_token"],
        eoi_token_id=ids["eoi_token"], image_token_id=ids["image_token"],
        video_token_id=processor.video_token_id, boa_token_id=ids["boa_token"],
        eoa_token_index=ids["eoa_token"], audio_token_id=ids["audio_token"],
    )
    model: Any = Gemma4ForConditionalGeneration(config)
    model.eval()
    return _save(model, processor, Path(out_dir), seed)


# ---------------------------------------------------------------------------------- Llama 3.2 Vision
MLLAMA_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}<|image|>"
    "{% elif item['type'] == 'text' %}{{ item['text'] | trim }}{% endif %}{% endfor %}{% endif %}<|eot_id|>"
    "{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def build_tiny_mllama(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """Llama 3.2 Vision: a tiled ViT (tiles of ``image_size`` px, up to 4 per image, 8 px patches + CLS,
    a gated global encoder, features of layer 0 and the last concatenated) feeding cross-attention layers
    interleaved with self-attention ones (layers: self, cross, self). The prompt keeps a single
    ``<|image|>`` token per image (the last id, past the LM head's vocabulary); ``cross_attention_mask``
    (batch, seq, images, tiles) says which tokens see which image. The cross-attention gates, zero at
    initialisation, are opened so the random model sees the image."""
    import torch  # lazy: torch-free at import (see tiny.tiny_tokenizer)
    from transformers import (
        MllamaConfig,
        MllamaForConditionalGeneration,
        MllamaImageProcessor,
        MllamaProcessor,
        MllamaTextConfig,
        MllamaVisionConfig,
    )

    _seeded(seed)
    specials = ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|end_of_text|>", "<|python_tag|>",
                "<|image|>"]
    tok = _tokens_last(tiny_tokenizer(specials, words=words, pad="<|finetune_right_pad_id|>",
                                      bos="<|begin_of_text|>", eos="<|eot_id|>"), ["<|image|>"])
    image_id = int(tok.convert_tokens_to_ids("<|image|>"))
    text = MllamaTextConfig(
        **_text_dims(image_id, num_hidden_layers=3), cross_attention_layers=[1],
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
    )
    layers_out = [0]  # intermediate vision layers concatenated to the last hidden state
    vision = MllamaVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_global_layers=1, attention_heads=2,
        image_size=image_size, patch_size=8, max_num_tiles=4, intermediate_layers_indices=layers_out,
        vision_output_dim=32 * (len(layers_out) + 1),
    )
    config = MllamaConfig(vision_config=vision, text_config=text, image_token_index=image_id)
    model: Any = MllamaForConditionalGeneration(config)
    model.eval()
    for layer in model.model.language_model.layers:
        if hasattr(layer, "cross_attn_attn_gate"):
            torch.nn.init.constant_(layer.cross_attn_attn_gate, 1.0)
            torch.nn.init.constant_(layer.cross_attn_mlp_gate, 1.0)
    image_processor = MllamaImageProcessor(size={"height": image_size, "width": image_size},
                                           max_image_tiles=4)
    processor = _untyped(MllamaProcessor)(image_processor=image_processor, tokenizer=tok,
                                          chat_template=MLLAMA_TEMPLATE)
    return _save(model, processor, Path(out_dir), seed)


# --------------------------------------------------------------------------------------------- Llama 4
_LLAMA4_SPECIALS = ["<|header_start|>", "<|header_end|>", "<|eot|>", "<|end_of_text|>", "<|image_start|>",
                    "<|image_end|>", "<|image|>", "<|patch|>", "<|tile_x_separator|>", "<|tile_y_separator|>",
                    "<|python_start|>", "<|python_end|>"]


def build_tiny_llama4(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0,
    attention_chunk_size: int = 32,
) -> Path:
    """Llama 4: a ViT over 8 px patches whose pixel-shuffle adapter leaves ``(image_size/16)**2``
    ``<|patch|>`` tokens per tile; an image is split into up to 4 tiles of ``image_size`` px, plus a global
    tile when it needs more than one (``<|image_start|>`` tiles and separators, ``<|image|>``, the global
    tile, ``<|image_end|>``).
    Text model of 4 layers: chunked attention (``attention_chunk_size``) with RoPE in layers 0-2, a NoPE
    full-attention layer 3, and a 2-expert MoE (1 routed + a shared expert) in layers 1 and 3, dense MLPs
    in 0 and 2. The processor's own chat template is the released one. Saved in bfloat16: the image
    processor normalises in bfloat16 and returns bfloat16 ``pixel_values``."""
    import torch  # lazy: torch-free at import (see tiny.tiny_tokenizer)
    from transformers import (
        Llama4Config,
        Llama4ForConditionalGeneration,
        Llama4ImageProcessor,
        Llama4Processor,
        Llama4TextConfig,
        Llama4VisionConfig,
    )
    from transformers.models.llama4.processing_llama4 import chat_template  # lazy: as above

    _seeded(seed)
    tok = tiny_tokenizer(_LLAMA4_SPECIALS, words=words, pad="<|finetune_right_pad|>", bos="<|begin_of_text|>",
                         eos="<|eot|>")
    ids = {t: int(tok.convert_tokens_to_ids(t)) for t in _LLAMA4_SPECIALS}
    patch = 8
    text = Llama4TextConfig(
        **_text_dims(len(tok), num_hidden_layers=4), intermediate_size_mlp=64, head_dim=8,
        num_local_experts=2, num_experts_per_tok=1, interleave_moe_layer_step=2,
        attention_chunk_size=attention_chunk_size,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
    )
    # The pixel shuffle (ratio 0.5) folds 4 patches into one 4*hidden vector: the adapter's input width.
    vision = Llama4VisionConfig(
        hidden_size=32, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
        image_size=image_size, patch_size=patch, pixel_shuffle_ratio=0.5, projector_input_dim=32,
        projector_output_dim=32, vision_output_dim=32,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    config = Llama4Config(
        vision_config=vision, text_config=text, boi_token_index=ids["<|image_start|>"],
        eoi_token_index=ids["<|image_end|>"], image_token_index=ids["<|patch|>"],
    )
    model: Any = Llama4ForConditionalGeneration(config)
    # Saved in bfloat16, as released: the image processor always returns bfloat16 pixel values.
    model.to(torch.bfloat16).eval()
    image_processor = Llama4ImageProcessor(size={"height": image_size, "width": image_size}, max_patches=4)
    processor = _untyped(Llama4Processor)(image_processor=image_processor, tokenizer=tok, patch_size=patch,
                                          pixel_shuffle_ratio=0.5, chat_template=chat_template)
    return _save(model, processor, Path(out_dir), seed)


# ----------------------------------------------------------------------------------------------- Janus
JANUS_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}<|User|>: "
    "{% elif message['role'] == 'assistant' %}<|Assistant|>: {% else %}{{ message['role'] | capitalize }}: "
    "{% endif %}{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}<image_placeholder>\n"
    "{% elif item['type'] == 'text' %}{{ item['text'] | trim }}{% endif %}{% endfor %}{% endif %}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% else %}\n\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|Assistant|>:{% endif %}"
)
_JANUS_NAMED = {"image_token": "<image_placeholder>", "boi_token": "<begin_of_image>",
                "eoi_token": "<end_of_image>"}


def build_tiny_janus(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 32, seed: int = 0
) -> Path:
    """Janus (Pro): SigLIP-style tower + 2-layer MLP aligner, Llama text model; one image is
    ``<begin_of_image>`` + ``(image_size/8)**2`` ``<image_placeholder>`` + ``<end_of_image>``. The image
    generation half (VQ-VAE, generation head) is built too, at its smallest (32 codes)."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        JanusConfig,
        JanusForConditionalGeneration,
        JanusImageProcessor,
        JanusProcessor,
    )

    _seeded(seed)
    tok = tiny_tokenizer(["<|User|>", "<|Assistant|>"], words=words, named=_JANUS_NAMED, pad="<｜▁pad▁｜>",
                         bos="<｜begin▁of▁sentence｜>", eos="<｜end▁of▁sentence｜>")
    patch = 8
    n_tokens = (image_size // patch) ** 2
    text = {"model_type": "llama", **_text_dims(len(tok)), "pad_token_id": tok.pad_token_id,
            "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    vision = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": image_size,
              "patch_size": patch, "mlp_ratio": 2.0, "projection_dim": 32, "depth": 2,
              "num_image_tokens": n_tokens}
    vq = {"embed_dim": 8, "num_embeddings": 32, "latent_channels": 32, "base_channels": 32,
          "channel_multiplier": [1, 1], "num_res_blocks": 1, "projection_dim": 32,
          "image_token_embed_dim": 32}
    config = JanusConfig(text_config=text, vision_config=vision, vq_config=vq,
                         image_token_id=tok.convert_tokens_to_ids(_JANUS_NAMED["image_token"]))
    model: Any = JanusForConditionalGeneration(config)
    model.eval()
    image_processor = JanusImageProcessor(size={"height": image_size, "width": image_size}, min_size=patch)
    processor = _untyped(JanusProcessor)(image_processor=image_processor, tokenizer=tok,
                                         chat_template=JANUS_TEMPLATE, num_image_tokens=n_tokens)
    return _save(model, processor, Path(out_dir), seed)


# ------------------------------------------------------------------------------------- dual encoders
def _siglip2_tokenizer(words: Iterable[str]) -> Any:
    """A ``Siglip2Tokenizer`` (Gemma layout: ``<pad>`` 0, ``<eos>`` 1, ``<bos>`` 2, lowercasing, spaces as
    ``▁``, byte-fallback BPE) whose BPE merges make every (lowercased) word one token. ``AutoTokenizer``
    always rebuilds SigLIP2 tokenizers as this class from the saved vocabulary and merges, so a WordLevel
    tokenizer would not survive the round trip."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers  # lazy: torch-free
    from transformers import Siglip2Tokenizer

    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.normalizer = normalizers.Sequence([normalizers.Lowercase(), normalizers.Replace(" ", "▁")])
    backend.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous")
    # Each word alone and after a space (``▁word``): no merge ever spans two words.
    vocab_words = sorted({w.lower() for w in (*BASE_WORDS, *words)})
    trainer = trainers.BpeTrainer(vocab_size=1 << 20, special_tokens=specials, show_progress=False)
    backend.train_from_iterator([t for w in vocab_words for t in (w, " " + w)], trainer)
    spec = json.loads(backend.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["merges"]]
    tok = _untyped(Siglip2Tokenizer)(vocab=spec["vocab"], merges=merges)
    tok.model_max_length = 64
    return tok


def build_tiny_siglip2(out_dir: str | Path, *, words: Iterable[str] = (), seed: int = 0) -> Path:
    """HF ``Siglip2Model`` (NaFlex) + ``Siglip2Processor``: images become up to 256 patches of 16 px at their
    own aspect ratio (``pixel_values`` (B, 256, 768), ``pixel_attention_mask``, ``spatial_shapes``), texts
    are lowercased and padded to 64 tokens (:func:`_siglip2_tokenizer`), as the processor's defaults say;
    the text tower pools the last position."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        Siglip2Config,
        Siglip2ImageProcessor,
        Siglip2Model,
        Siglip2Processor,
    )

    _seeded(seed)
    tok = _siglip2_tokenizer(words)
    text = {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "max_position_embeddings": 64, "pad_token_id": tok.pad_token_id,
            "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
              "patch_size": 16, "num_patches": 256}
    model: Any = Siglip2Model(Siglip2Config(text_config=text, vision_config=vision))
    model.eval()
    image_processor = Siglip2ImageProcessor(patch_size=16, max_num_patches=256)
    processor = _untyped(Siglip2Processor)(image_processor=image_processor, tokenizer=tok)
    return _save(model, processor, Path(out_dir), seed)


def build_tiny_metaclip_2(out_dir: str | Path, *, words: Iterable[str] = (), seed: int = 0) -> Path:
    """HF ``MetaClip2Model`` + ``CLIPProcessor``: CLIP's layout (every text wrapped in BOS/EOS); the text
    tower pools at the first EOS."""
    from transformers import MetaClip2Config, MetaClip2Model  # lazy: torch-free at import

    from faithtests.testing.tiny_duals import build_clip_like  # lazy: tiny_duals imports open_clip

    return build_clip_like(MetaClip2Model, MetaClip2Config, out_dir, words=words, seed=seed)


BUILDERS: dict[str, Callable[..., Path]] = {
    "paligemma": build_tiny_paligemma,
    "gemma4": build_tiny_gemma4,
    "mllama": build_tiny_mllama,
    "llama4": build_tiny_llama4,
    "janus": build_tiny_janus,
    "siglip2": build_tiny_siglip2,
    "metaclip_2": build_tiny_metaclip_2,
}
