"""Loading a Hugging Face image-text-to-text checkpoint for :class:`~faithtests.models.hf_vlm.
HFVisionLanguageModel`, and the description of it the adapter stores so a warm run can defer the load."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from faithtests.models.hooks import register_attention
from faithtests.models.image_memo import memoise_images
from faithtests.models.lens import lens_support
from faithtests.models.media_memo import memoise_media
from faithtests.models.omni_loading import load_generative
from faithtests.models.prefix import ForwardRunner
from faithtests.models.prompting import image_token_id


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
    layers = model.get_decoder().layers
    return LoadedVLM(processor, model, layers, ForwardRunner(model, layers, device, dtype), device)


def describe_vlm(model: Any) -> dict[str, Any]:
    """What the adapter reads off a loaded model (stored, so a deferred one reads it back)."""
    text_config = getattr(model.config, "text_config", model.config)
    return {"num_layers": len(model.get_decoder().layers), "image_token": image_token_id(model.config),
            "context": getattr(text_config, "max_position_embeddings", None),
            "model_type": str(model.config.model_type), "architecture": type(model).__name__,
            "lens": lens_support(model)}
