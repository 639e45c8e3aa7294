"""Tiny, randomly initialised omni models (vision + audio), built offline like :mod:`.tiny`.

Qwen2.5-Omni and Qwen3-Omni-MoE are saved as their thinker (``model_type`` ``..._thinker``: what the
``hf:`` omni adapter serves), with the family's own processor: a Whisper feature extractor (16 kHz, 16
mel bins here), Qwen2-VL image and video processors (56 px images), and a chat template shaped
like the real one (``<|audio_bos|><|AUDIO|><|audio_eos|>`` for audio, ``<|vision_bos|><|VIDEO|>...``
for video). :func:`write_clip` writes a real MP4 with a sound track (H.264 + AAC, through PyAV) for
the clip loader's tests. Gemma 3n is not built: its vision tower is a timm MobileNetV5, and timm is
not a dependency of this project.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from faithtests.testing.tiny import _save, _seeded, _text_dims, _untyped, tiny_tokenizer

QWEN_OMNI_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif item['type'] == 'video' %}<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{% elif item['type'] == 'audio' %}<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_QWEN_NAMED = {"image_token": "<|IMAGE|>", "audio_token": "<|AUDIO|>", "video_token": "<|VIDEO|>",
               "vision_bos_token": "<|vision_bos|>", "vision_eos_token": "<|vision_eos|>",
               "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>"}
#: Mel bins of the tiny feature extractors (the real ones use 128).
MEL_BINS = 16
#: Vision patch of the tiny Qwen-Omni towers: the real one (see :func:`_qwen_processor`).
PATCH = 14
PATCH3 = 16  # Qwen3-Omni's (its processor bounds frames by 32 px merged patches)


def _qwen_processor(processor_cls: Any, tok: Any, image_size: int, patch: int) -> Any:
    """The family's processor; video frames follow the processor's own per-frame pixel bounds (128 to
    768 patches of 28 px), so the vision patch is the real one (14 px) to keep a clip's tokens real."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        WhisperFeatureExtractor,
    )

    pixels = image_size * image_size
    size = {"shortest_edge": pixels, "longest_edge": pixels}
    patches: dict[str, Any] = {"patch_size": patch, "merge_size": 2, "temporal_patch_size": 2}
    return _untyped(processor_cls)(
        image_processor=_untyped(Qwen2VLImageProcessor)(size=size, **patches),
        video_processor=_untyped(Qwen2VLVideoProcessor)(size=size, cap_pixels_per_frame=True, **patches),
        feature_extractor=_untyped(WhisperFeatureExtractor)(feature_size=MEL_BINS, sampling_rate=16000),
        tokenizer=tok, chat_template=QWEN_OMNI_TEMPLATE,
    )


def _qwen_tokenizer(words: Iterable[str], suffix: str) -> tuple[Any, dict[str, Any]]:
    """The tiny Qwen omni tokenizer, and the thinker config's token ids of its media markers (Qwen2.5-Omni
    names the three media tokens ``*_token_index``, Qwen3-Omni ``*_token_id``: ``suffix``)."""
    tok = tiny_tokenizer(["<|im_start|>", "<|im_end|>"], words=words, named=_QWEN_NAMED, bos=None,
                         eos="<|im_end|>")
    ids = {k: int(tok.convert_tokens_to_ids(v)) for k, v in _QWEN_NAMED.items()}
    media = {"vision_start_token_id": ids["vision_bos_token"], "vision_end_token_id": ids["vision_eos_token"],
             "audio_start_token_id": ids["audio_bos_token"], "audio_end_token_id": ids["audio_eos_token"],
             "user_token_id": int(tok.convert_tokens_to_ids("user"))}
    return tok, {**media, **{f"{m}_token_{suffix}": ids[f"{m}_token"] for m in ("audio", "image", "video")}}


def build_tiny_qwen2_5_omni(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 56, seed: int = 0
) -> Path:
    """Qwen2.5-Omni thinker: Whisper-style audio tower (25 tokens per second of audio), Qwen2.5-VL
    window-attention vision tower (``(image_size/28)**2`` tokens per image, 128 to 768 per 2 video
    frames), Qwen2 text model with multimodal RoPE (head dim 8)."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        Qwen2_5OmniProcessor,
        Qwen2_5OmniThinkerConfig,
        Qwen2_5OmniThinkerForConditionalGeneration,
    )

    _seeded(seed)
    tok, ids = _qwen_tokenizer(words, "index")
    text = _text_dims(len(tok), rope_parameters={"rope_type": "default", "mrope_section": [1, 1, 2],
                                                 "rope_theta": 10000.0},
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    vision = {"depth": 1, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2, "patch_size": PATCH,
              "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 56, "out_hidden_size": 32,
              "fullatt_block_indexes": [0]}
    audio = {"num_mel_bins": MEL_BINS, "encoder_layers": 1, "encoder_attention_heads": 2,
             "encoder_ffn_dim": 32, "d_model": 16, "n_window": 50, "output_dim": 32}
    # (vision_* ids are not declared fields: the config keeps them as attributes and RoPE reads them)
    config = _untyped(Qwen2_5OmniThinkerConfig)(audio_config=audio, vision_config=vision, text_config=text,
                                                **ids)
    model: Any = Qwen2_5OmniThinkerForConditionalGeneration(config)
    model.eval()
    return _save(model, _qwen_processor(Qwen2_5OmniProcessor, tok, image_size, PATCH), Path(out_dir), seed)


def build_tiny_qwen3_omni_moe(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 64, seed: int = 0
) -> Path:
    """Qwen3-Omni-MoE thinker: chunked conv audio tower, Qwen3-VL vision tower with deep-stack
    features, Qwen3-MoE text model (4 experts, 2 per token) with interleaved multimodal RoPE."""
    import torch  # lazy: torch-free at import (see tiny.tiny_tokenizer)
    from transformers import (
        Qwen3OmniMoeProcessor,
        Qwen3OmniMoeThinkerConfig,
        Qwen3OmniMoeThinkerForConditionalGeneration,
    )

    _seeded(seed)
    tok, ids = _qwen_tokenizer(words, "id")
    text = _text_dims(len(tok), head_dim=8, moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2,
                      rope_parameters={"rope_type": "default", "mrope_section": [1, 1, 2],
                                       "mrope_interleaved": True, "rope_theta": 10000.0},
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    vision = {"depth": 2, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2, "patch_size": PATCH3,
              "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 32,
              "num_position_embeddings": 64, "deepstack_visual_indexes": [0]}
    audio = {"num_mel_bins": MEL_BINS, "encoder_layers": 1, "encoder_attention_heads": 2,
             "encoder_ffn_dim": 32, "d_model": 16, "n_window": 50, "output_dim": 32,
             "downsample_hidden_size": 8}
    config = _untyped(Qwen3OmniMoeThinkerConfig)(audio_config=audio, vision_config=vision, text_config=text,
                                                 **ids)
    model: Any = Qwen3OmniMoeThinkerForConditionalGeneration(config)
    model.eval()
    # At std 0.02 the tiny audio tower's convolutions vanish beside its sinusoidal positions and the model
    # is deaf (two tones embed 1e-7 apart); torch's fan-in init keeps the signal.
    for module in model.model.audio_tower.modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            module.reset_parameters()
    return _save(model, _qwen_processor(Qwen3OmniMoeProcessor, tok, image_size, PATCH3), Path(out_dir), seed)


# -------------------------------------------------------------------------------------------- Gemma 3n
GEMMA3N_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<start_of_turn>"
    "{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<image_soft_token>{% elif item['type'] == 'audio' %}<audio_soft_token>"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
_GEMMA3N_NAMED = {"boi_token": "<start_of_image>", "boa_token": "<start_of_audio>",
                  "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>",
                  "eoa_token": "<end_of_audio>", "audio_token": "<audio_soft_token>"}
#: Gemma 3n embeds ids >= the vision offset with its vision / audio tables: these come last, in this order.
_GEMMA3N_LAST = ["<end_of_image>", "<image_soft_token>", "<end_of_audio>", "<audio_soft_token>"]
#: Soft tokens per image of the tiny Gemma 3n (its MobileNetV5 fusion grid is 2x2; the real one 16x16).
GEMMA3N_GRID = 2


def _gemma3n_tokenizer(words: Iterable[str]) -> Any:
    """:func:`tiny_tokenizer` with the four multimodal tokens moved to the end of the vocabulary."""
    from tokenizers import Tokenizer  # lazy: torch-free at import (see tiny.tiny_tokenizer)
    from transformers import PreTrainedTokenizerFast

    base = tiny_tokenizer(["<start_of_turn>", "<end_of_turn>"], words=words, named=_GEMMA3N_NAMED,
                          bos="<bos>", eos="<end_of_turn>")
    spec = json.loads(base.backend_tokenizer.to_str())
    old: dict[str, int] = spec["model"]["vocab"]
    order = [t for t in sorted(old, key=old.__getitem__) if t not in _GEMMA3N_LAST] + _GEMMA3N_LAST
    spec["model"]["vocab"] = vocab = {t: i for i, t in enumerate(order)}
    for added in spec["added_tokens"]:
        added["id"] = vocab[added["content"]]
    return _untyped(PreTrainedTokenizerFast)(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)), pad_token="<pad>", unk_token="<unk>",
        bos_token="<bos>", eos_token="<end_of_turn>", extra_special_tokens=dict(_GEMMA3N_NAMED))


def build_tiny_gemma3n(
    out_dir: str | Path, *, words: Iterable[str] = (), image_size: int = 64, seed: int = 0
) -> Path:
    """Gemma 3n: the timm MobileNetV5 encoder at 1/16 of its channels (its fusion adapter's 2048 output
    channels are fixed by timm) pooled to a 2x2 grid (4 soft tokens per image), a 1-layer conformer
    audio tower (16 mel bins; 188 soft tokens per clip, as the real one: every waveform is padded or cut
    to 30 s by the feature extractor), and a 2-layer text model with AltUp, LAuReL and per-layer inputs."""
    from transformers import (  # lazy: torch-free at import (see tiny.tiny_tokenizer)
        Gemma3nAudioFeatureExtractor,
        Gemma3nConfig,
        Gemma3nForConditionalGeneration,
        Gemma3nProcessor,
        SiglipImageProcessor,
    )

    _seeded(seed)
    tok = _gemma3n_tokenizer(words)
    text_vocab = len(tok) - len(_GEMMA3N_LAST)
    text = _text_dims(len(tok), vocab_size_per_layer_input=text_vocab, head_dim=8, num_kv_shared_layers=0,
                      hidden_size_per_layer_input=4, laurel_rank=4, altup_num_inputs=2,
                      layer_types=["sliding_attention", "full_attention"], sliding_window=64,
                      activation_sparsity_pattern=[0.0, 0.0], pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id)
    vision = {"hidden_size": 2048, "vocab_size": 2, "vocab_offset": text_vocab,
              "model_args": {"channel_multiplier": 0.0625, "msfa_output_resolution": GEMMA3N_GRID}}
    audio = {"vocab_size": 2, "vocab_offset": text_vocab + 2, "input_feat_size": MEL_BINS, "hidden_size": 16,
             "conf_num_attention_heads": 2, "conf_num_hidden_layers": 1, "sscp_conv_channel_size": [8, 8]}
    ids = {f"{k.removesuffix('_token')}_token_id": int(tok.convert_tokens_to_ids(v))
           for k, v in _GEMMA3N_NAMED.items()}
    ids["image_token_id"], ids["audio_token_id"] = ids.pop("image_token_id"), ids.pop("audio_token_id")
    config = _untyped(Gemma3nConfig)(text_config=text, vision_config=vision, audio_config=audio,
                                     vision_soft_tokens_per_image=GEMMA3N_GRID**2, **ids)
    model: Any = Gemma3nForConditionalGeneration(config)
    model.eval()
    processor = _untyped(Gemma3nProcessor)(
        feature_extractor=_untyped(Gemma3nAudioFeatureExtractor)(feature_size=MEL_BINS, sampling_rate=16000),
        image_processor=_untyped(SiglipImageProcessor)(size={"height": image_size, "width": image_size}),
        tokenizer=tok, chat_template=GEMMA3N_TEMPLATE, image_seq_length=GEMMA3N_GRID**2,
        audio_seq_length=config.audio_soft_tokens_per_image,
    )
    return _save(model, processor, Path(out_dir), seed)


# ------------------------------------------------------------------------------------------ test clips
TONE_HZ = 440.0
SECONDS = 2.0
FPS = 30
SOURCE_RATE = 44_100


def write_clip(path: Path, *, audio: bool = True, tone: float = TONE_HZ) -> Path:
    """A 64x64 clip of ``SECONDS`` s at ``FPS`` whose frame i has red level 4 * i (frames are told apart),
    with a stereo sine of ``tone`` Hz at 44.1 kHz when ``audio``."""
    import av  # lazy: torch-free and PyAV-free at import (see tiny.tiny_tokenizer)

    n_frames = int(SECONDS * FPS)
    with av.open(str(path), mode="w") as box:
        video = box.add_stream("libx264", rate=FPS)
        video.width = video.height = 64
        video.pix_fmt = "yuv420p"
        sound = box.add_stream("aac", rate=SOURCE_RATE, layout="stereo") if audio else None
        for i in range(n_frames):
            pixels = np.zeros((64, 64, 3), np.uint8)
            pixels[..., 0] = 4 * i
            for packet in video.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                box.mux(packet)
        for packet in video.encode():
            box.mux(packet)
        if sound is not None:
            t = np.arange(int(SECONDS * SOURCE_RATE)) / SOURCE_RATE
            wave = (0.5 * np.sin(2 * np.pi * tone * t)).astype(np.float32)
            step = 1024
            for start in range(0, wave.size, step):
                chunk = np.stack([wave[start:start + step]] * 2)
                frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(chunk), format="fltp",
                                                   layout="stereo")
                frame.sample_rate = SOURCE_RATE
                frame.pts = start
                frame.time_base = Fraction(1, SOURCE_RATE)
                for packet in sound.encode(frame):
                    box.mux(packet)
            for packet in sound.encode():
                box.mux(packet)
    return path


#: Thinker ``model_type`` -> the transformers config class of the released (thinker + talker) model.
RELEASED_CONFIGS = {"qwen2_5_omni_thinker": "Qwen2_5OmniConfig",
                    "qwen3_omni_moe_thinker": "Qwen3OmniMoeConfig"}


def save_as_released(thinker_dir: str | Path, out_dir: str | Path) -> Path:
    """A copy of a tiny thinker laid out as a released omni checkpoint: the full model's config (its
    ``thinker_config`` = the thinker's, default talker settings) and weights under ``thinker.``."""
    import transformers  # lazy: torch-free at import (see tiny.tiny_tokenizer)
    from safetensors.torch import load_file, save_file  # lazy: as transformers

    src, dst = Path(thinker_dir), Path(out_dir)
    shutil.copytree(src, dst)
    thinker = json.loads((src / "config.json").read_text())
    full: Any = getattr(transformers, RELEASED_CONFIGS[thinker["model_type"]])
    full(thinker_config=thinker, enable_audio_output=False).save_pretrained(dst)
    weights = load_file(str(src / "model.safetensors"))
    save_file({f"thinker.{k}": v for k, v in weights.items()}, str(dst / "model.safetensors"))
    return dst


BUILDERS: dict[str, Callable[..., Path]] = {
    "qwen2_5_omni": build_tiny_qwen2_5_omni,
    "qwen3_omni_moe": build_tiny_qwen3_omni_moe,
    "gemma3n": build_tiny_gemma3n,
}


def write_cut_avi(folder: Path, n_frames: int = 100) -> tuple[Path, Path]:
    """(a whole AVI of ``n_frames`` flat 64x64 frames, its first half as a cut download leaves it): the
    cut one's header still lists every frame, and it decodes to its end without an error."""
    import av  # lazy: as write_clip

    whole, cut = folder / "clip.avi", folder / "cut.avi"
    with av.open(str(whole), "w") as box:
        stream = box.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for i in range(n_frames):
            frame = av.VideoFrame.from_ndarray(np.full((64, 64, 3), 2 * i, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                box.mux(packet)
        for packet in stream.encode():
            box.mux(packet)
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    return whole, cut
