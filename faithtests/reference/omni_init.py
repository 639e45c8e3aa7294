"""The reference omni model's starting point: a Qwen2.5-Omni thinker grown from the reference VLM.

- text model: the reference VLM's Llama transplanted into the thinker's Qwen2 decoder (same widths; the
  q/k/v biases are zero, so for text-only positions, where the three multimodal RoPE axes are equal,
  the thinker computes exactly what the Llama computes: ``tests/reference/test_omni_reference.py``);
- tokenizer: the VLM's word-level vocabulary plus the audio questions' words and the family's media
  tokens (new embedding rows are the mean of the old ones); the chat template renders
  ``USER: <media> text ASSISTANT:`` as the VLM's does, with the media block where its ``<image>`` was;
- vision: a Qwen2.5-VL ViT (patch 28, merge 2) on frames resized to 336 px: a 6x6 merged grid, the
  VLM's 36 patches of 16 px (:mod:`.omni_distill` teaches it the VLM's projected patches);
- audio: a small Whisper-style encoder (32 mel bins, 25 tokens per second), trained from scratch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Tokenizer

from faithtests.world import sound

#: Attribute name -> token the Qwen2.5-Omni processor reads from its tokenizer.
NAMED = {"image_token": "<|IMAGE|>", "audio_token": "<|AUDIO|>", "video_token": "<|VIDEO|>",
         "vision_bos_token": "<|vision_bos|>", "vision_eos_token": "<|vision_eos|>",
         "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>"}
#: The VLM's ``USER: <image> text ASSISTANT:`` with the family's media blocks in place of ``<image>``.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}{%- if message['role'] == 'user' -%}USER:"
    "{%- elif message['role'] == 'assistant' -%}ASSISTANT:{%- else -%}SYSTEM:{%- endif -%}"
    "{%- if message['content'] is string %} {{ message['content'] }}{%- else -%}"
    "{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' %} <|vision_bos|><|IMAGE|><|vision_eos|>"
    "{%- elif item['type'] == 'video' %} <|vision_bos|><|VIDEO|><|vision_eos|>"
    "{%- elif item['type'] == 'audio' %} <|audio_bos|><|AUDIO|><|audio_eos|>"
    "{%- elif item['type'] == 'text' %} {{ item['text'] }}{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{%- if message['role'] == 'assistant' %}</s>{%- endif %}\n{%- endfor -%}"
    "{%- if add_generation_prompt -%}ASSISTANT:{%- endif -%}"
)
#: Frames are resized to this side: 12 x 12 patches of 28 px, merged 2 x 2 into the VLM's 6 x 6 grid. (The
#: processor's own per-call video bounds, at least 128 x 28 x 28 pixels per frame, override the video
#: processor's size and cannot be saved with it: a 96 px frame becomes 336 px whatever the config says,
#: so the patch is 28 px, not the family's 14, to keep the VLM's 36 tokens per frame pair.)
FRAME_PX = 336
PATCH = 28
MEL_BINS = 32
#: The VLM's pixel normalisation (its CLIP processor's), so both towers see the same values.
PIXEL_MEAN = [0.5, 0.5, 0.5]
PIXEL_STD = [0.25, 0.25, 0.25]
VISION = {"depth": 3, "hidden_size": 64, "intermediate_size": 192, "num_heads": 4, "patch_size": PATCH,
          "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": FRAME_PX,
          "out_hidden_size": 128, "fullatt_block_indexes": [2]}
AUDIO = {"num_mel_bins": MEL_BINS, "encoder_layers": 2, "encoder_attention_heads": 4, "encoder_ffn_dim": 256,
         "d_model": 64, "n_window": 50, "output_dim": 128, "max_source_positions": 1500}
#: Multimodal RoPE sections (temporal, height, width) over the 16 frequency pairs of a 32-wide head.
MROPE_SECTION = [4, 6, 6]


def _u(cls: Any) -> Any:
    """transformers' constructors are untyped; call them through ``Any`` (mypy strict)."""
    return cls


def audio_words(known: set[str]) -> list[str]:
    """Words of the world's audio questions and options the VLM's vocabulary lacks (they would be
    ``[UNK]``), in first-seen order over a fixed sample (the vocabulary seed of :mod:`.tokenizer`)."""
    from faithtests.protocols.imavb.audio_stimuli import clip_items  # local: only the omni model needs it
    from faithtests.reference.tokenizer import VOCAB_SEED, words  # local: imports every protocol

    texts = [" ".join(sound.SOUND_TYPES + sound.LOUDNESS + sound.AMBIENTS + sound.MUSIC)]
    # the clips of the first stages (without speech): the speech stage appends its words after the media
    # tokens (faithtests.reference.omni_speech), so the ids of every earlier word stay
    for it in clip_items(300, VOCAB_SEED, speech=False):
        for q in (it.standard_audio, it.misleading_audio):
            texts.append(q.question + " " + " ".join(q.options))
    new: dict[str, None] = {}  # ordered set
    for text in texts:
        new.update((w, None) for w in words(text) if w not in known)
    return list(new)


def omni_tokenizer(vlm_dir: Path) -> Any:
    """The VLM's word-level tokenizer with the audio questions' new words, then the media tokens,
    appended (ids after the VLM's: its tokenization of every text it knew is unchanged)."""
    spec = json.loads((vlm_dir / "tokenizer.json").read_text())
    vocab: dict[str, int] = spec["model"]["vocab"]
    added = {a["content"]: int(a["id"]) for a in spec["added_tokens"]}
    # added tokens with ids past the word vocabulary (the VLM's layout markers) enter it with their ids:
    # words appended after them would otherwise push the markers to new ids, sharing ids with words
    vocab.update({t: i for t, i in added.items() if i >= len(vocab)})
    next_id = 1 + max([*vocab.values(), *added.values()])
    for word in audio_words(set(vocab) | set(added)):
        vocab[word] = next_id
        next_id += 1
    backend = Tokenizer.from_str(json.dumps(spec))
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in NAMED.values()])
    return fast_tokenizer(backend)


def fast_tokenizer(backend: Tokenizer) -> Any:
    """The omni's transformers tokenizer around a word-level ``backend`` that holds the media tokens."""
    from transformers import PreTrainedTokenizerFast  # local: transformers' tokenizer classes are heavy

    return _u(PreTrainedTokenizerFast)(
        tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", bos_token="<s>", eos_token="</s>",
        extra_special_tokens=dict(NAMED), padding_side="left")


def omni_processor(tokenizer: Any) -> Any:
    """Qwen2.5-Omni's processor: one 96 px frame pair (or image) -> 36 vision tokens, 2 s of 16 kHz
    audio -> 50 audio tokens."""
    from transformers import (  # local: heavy
        Qwen2_5OmniProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        WhisperFeatureExtractor,
    )

    pixels = FRAME_PX * FRAME_PX
    size = {"shortest_edge": pixels, "longest_edge": pixels}
    common: dict[str, Any] = {"patch_size": PATCH, "merge_size": 2, "temporal_patch_size": 2, "size": size,
                              "image_mean": PIXEL_MEAN, "image_std": PIXEL_STD}
    return _u(Qwen2_5OmniProcessor)(
        image_processor=_u(Qwen2VLImageProcessor)(**common),
        video_processor=_u(Qwen2VLVideoProcessor)(cap_pixels_per_frame=True, **common),
        feature_extractor=_u(WhisperFeatureExtractor)(feature_size=MEL_BINS, sampling_rate=16000),
        tokenizer=tokenizer, chat_template=CHAT_TEMPLATE)


def omni_config(tokenizer: Any, llama: Any) -> Any:
    """The thinker's config: text dims copied from the VLM's Llama config ``llama``."""
    from transformers import Qwen2_5OmniThinkerConfig  # local: heavy

    ids = {k: int(tokenizer.convert_tokens_to_ids(v)) for k, v in NAMED.items()}
    text = {"vocab_size": len(tokenizer), "hidden_size": llama.hidden_size,
            "intermediate_size": llama.intermediate_size, "num_hidden_layers": llama.num_hidden_layers,
            "num_attention_heads": llama.num_attention_heads,
            "num_key_value_heads": llama.num_key_value_heads,
            "rms_norm_eps": llama.rms_norm_eps, "tie_word_embeddings": True, "max_position_embeddings": 2048,
            "rope_parameters": {"rope_type": "default", "mrope_section": MROPE_SECTION,
                                "rope_theta": float(llama.rope_parameters["rope_theta"])},
            "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id,
            "bos_token_id": tokenizer.bos_token_id}
    return _u(Qwen2_5OmniThinkerConfig)(
        audio_config=AUDIO, vision_config=VISION, text_config=text, audio_token_index=ids["audio_token"],
        image_token_index=ids["image_token"], video_token_index=ids["video_token"],
        vision_start_token_id=ids["vision_bos_token"], vision_end_token_id=ids["vision_eos_token"],
        audio_start_token_id=ids["audio_bos_token"], audio_end_token_id=ids["audio_eos_token"],
        user_token_id=int(tokenizer.convert_tokens_to_ids("USER")), tie_word_embeddings=True)


@torch.no_grad()
def transplant(llava: Any, thinker: Any) -> None:
    """Copy the VLM's Llama into the thinker's decoder; media-token embeddings start at the mean row."""
    src = llava.model.language_model.state_dict()
    dst = thinker.model.language_model
    for name, value in dst.state_dict().items():
        if name.endswith("_proj.bias"):
            value.zero_()
        elif name == "embed_tokens.weight":
            old = src[name]
            value[: old.shape[0]] = old
            value[old.shape[0]:] = old.mean(0)
        else:
            value.copy_(src[name])
    thinker.lm_head.weight = dst.embed_tokens.weight


def build_initial(vlm_dir: Path, seed: int) -> tuple[Any, Any, Any, Any]:
    """(thinker, omni processor, VLM, VLM processor): the thinker with the VLM's text model, fresh
    (seeded) vision and audio towers."""
    from transformers import (  # local: heavy
        AutoProcessor,
        LlavaForConditionalGeneration,
        Qwen2_5OmniThinkerForConditionalGeneration,
    )

    torch.manual_seed(seed)
    llava: Any = _u(LlavaForConditionalGeneration).from_pretrained(str(vlm_dir), dtype=torch.float32,
                                                                    local_files_only=True)
    llava.eval()
    vlm_processor = _u(AutoProcessor).from_pretrained(str(vlm_dir), local_files_only=True)
    tokenizer = omni_tokenizer(vlm_dir)
    thinker: Any = _u(Qwen2_5OmniThinkerForConditionalGeneration)(omni_config(tokenizer,
                                                                              llava.config.text_config))
    # torch's fan-in init keeps a tiny audio tower's signal above its sinusoidal positions (tiny_omni);
    # seeded apart so the audio tower does not depend on the vocabulary's size
    torch.manual_seed(seed + 1)
    for module in thinker.model.audio_tower.modules():
        if isinstance(module, torch.nn.Conv1d | torch.nn.Linear):
            module.reset_parameters()
    transplant(llava, thinker)
    return thinker, omni_processor(tokenizer), llava, vlm_processor
