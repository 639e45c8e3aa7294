"""Loading a Hugging Face image-text-to-text checkpoint for :class:`~faithtests.models.hf_vlm.
HFVisionLanguageModel`, and the description of it the adapter stores so a warm run can defer the load."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from faithtests.models.audio_window import audio_window_s
from faithtests.models.capabilities import describe_layers, patch_grid_support
from faithtests.models.encode_once import encode_once
from faithtests.models.errors import UnsupportedModelError
from faithtests.models.hooks import register_attention
from faithtests.models.image_memo import memoise_images
from faithtests.models.interfaces import Prompt
from faithtests.models.lens import lens_support
from faithtests.models.media_memo import memoise_media
from faithtests.models.omni_loading import load_generative
from faithtests.models.prefix import ForwardRunner
from faithtests.models.prompting import encode_batch, image_token_id
from faithtests.models.work import count_work


@dataclass
class LoadedVLM:
    """What loading the checkpoint gives: the processor, the module, its decoder layers, the runner,
    and the device inputs go to (the first layer's under a device map)."""

    processor: Any
    model: Any
    layers: Any
    runner: ForwardRunner
    device: torch.device


def load_vlm(path: str, dtype: torch.dtype, device: torch.device, local_files_only: bool,
             device_map: str | None) -> LoadedVLM:
    from transformers import AutoProcessor  # lazy: not on a warm (deferred) run

    auto_processor: Any = AutoProcessor  # transformers' loaders are untyped
    # each distinct image, soundtrack and video preprocessed once (faithtests.models.image_memo,
    # media_memo: bit-identical outputs)
    processor = memoise_media(memoise_images(
        auto_processor.from_pretrained(path, local_files_only=local_files_only)))
    # device_map (``--faith-device-map``): accelerate places the layers; inputs go to the first device
    placement = {"device_map": device_map} if device_map else {}
    # (a released omni checkpoint loads its thinker: faithtests.models.omni_loading)
    model: Any = load_generative(path, dtype=dtype, local_files_only=local_files_only, placement=placement)
    # Text model only: the vision tower keeps its implementation (no hooks there).
    model.set_attn_implementation({"text_config": register_attention()})
    model = (model if device_map else model.to(device)).eval()
    if device_map:
        device = model.get_input_embeddings().weight.device
    layers = decoder_layers(model)
    count_work(model)  # what its forwards compute, read by models.work.work_of
    encode_once(model)  # each distinct image / clip / soundtrack through its tower once
    return LoadedVLM(processor, model, layers, ForwardRunner(model, layers, device, dtype), device)


def decoder_layers(model: Any) -> Any:
    """The text decoder's layer list: ``get_decoder().layers``, or one level down where the decoder is a
    causal-LM wrapper (Llama 4's ``get_decoder()`` is its ``Llama4ForCausalLM``); else an error naming
    the model (an adapter that cannot find the layers cannot read states or place hooks)."""
    decoder = model.get_decoder()
    for candidate in (decoder, getattr(decoder, "model", None)):
        layers = getattr(candidate, "layers", None)
        if layers is not None:
            return layers
    raise UnsupportedModelError(f"{type(model).__name__}: no decoder layers found on "
                                f"{type(decoder).__name__} (get_decoder().layers)")


def describe_vlm(model: Any, processor: Any) -> dict[str, Any]:
    """What the adapter reads off a loaded model (stored, so a deferred one reads it back), with what it
    lacks (:mod:`.capabilities`): found here, once, so no call has to fail on a prompt to find out."""
    text_config = getattr(model.config, "text_config", model.config)
    return {"num_layers": len(decoder_layers(model)), "image_token": image_token_id(model.config),
            "context": getattr(text_config, "max_position_embeddings", None),
            "model_type": str(model.config.model_type), "architecture": type(model).__name__,
            "lens": lens_support(model), "lacks": model_lacks(model, processor),
            "audio_window_s": audio_window_s(processor, model.config)}


#: Every key :func:`describe_vlm` writes: a stored description lacking one is from an older version and
#: is not trusted (the model loads and is described afresh).
DESCRIPTION_KEYS = frozenset({"num_layers", "image_token", "context", "model_type", "architecture", "lens",
                              "lacks", "audio_window_s"})

#: The probe image of :func:`model_lacks` (square: a model with a patch grid makes it a square one).
PROBE_SIZE = (224, 224)


def processor_support(model: Any, processor: Any) -> str:
    """"" when ``model.generate`` applies a caller's logits processor (contrastive decoding steers
    generation through one), else why not. Janus's own ``generate`` drops it in text mode: contrastive
    decoding would silently be plain greedy decoding. One one-token generation on a one-token prompt."""
    from transformers import LogitsProcessorList  # lazy: a warm run describes nothing

    calls: list[int] = []

    def count(_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return scores

    tok = processor.tokenizer
    first = next((t for t in (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) if t is not None), 0)
    ids = torch.tensor([[int(first)]], device=model.get_input_embeddings().weight.device)
    try:
        with torch.inference_mode():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=1,
                           do_sample=False, pad_token_id=tok.pad_token_id,
                           logits_processor=LogitsProcessorList([count]))
    except Exception as exc:  # any failure of the family's generate: say what it was
        return (f"{type(model).__name__}.generate failed on a one-token text prompt: "
                f"{type(exc).__name__}: {exc}")
    return "" if calls else f"{type(model).__name__}.generate does not apply a caller's logits processors"


def model_lacks(model: Any, processor: Any) -> dict[str, str]:
    """feature -> reason for what this model cannot give (:data:`~.capabilities.FEATURES`): its
    decoder layers' kinds, its chat template, and how one square probe image is tokenised."""
    lacks = describe_layers(decoder_layers(model))
    if why := processor_support(model, processor):
        lacks["logits_processors"] = why
    if getattr(processor, "chat_template", None) is None:
        lacks["chat_template"] = (f"{type(processor).__name__} has no chat template (save one with the "
                                  "processor, chat_template.jinja, so prompts are laid out as the model was "
                                  "trained)")
        return lacks
    from PIL import Image  # lazy: a warm run describes nothing

    probe = Prompt((Image.new("RGB", PROBE_SIZE, (128, 128, 128)),), "Describe the image.")
    try:
        enc = encode_batch(processor, model.config, [probe], "right")
    except Exception as exc:  # the prompts will say what is wrong, each with its own message
        lacks["patch_grid"] = f"a {PROBE_SIZE[0]}x{PROBE_SIZE[1]} probe image did not encode: {exc}"
        return lacks
    runs = enc.spans.image_runs[0] if enc.spans.image_runs else [enc.spans.image[0]]
    if why := patch_grid_support(sum(b - a for a, b in runs), PROBE_SIZE):
        lacks["patch_grid"] = why
    return lacks
