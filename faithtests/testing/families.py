"""The model families faithtests is checked on, declared once: the conformance matrix
(``tests/models/test_family_matrix.py``) builds each one's tiny random-init checkpoint, checks the adapter
against plain transformers and runs every suite on it; ``docs/models.md``'s family table is generated
from what the matrix measured (:mod:`faithtests.testing.family_table`), so the page cannot drift.

Torch-free: a builder module is named here and imported only when its family is built.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Kind = Literal["vlm", "omni", "dual"]


@dataclass(frozen=True)
class Family:
    """One family: its ``model_type``, the name users know, which adapter serves it, where its tiny
    builder lives, what it needs beyond ``pip install faithtests`` (an extra), and — for a family whose
    own transformers model cannot run at all — why (the matrix asserts it still fails, so a fixed
    transformers release shows up as a failing test to remove the note)."""

    model_type: str
    label: str
    kind: Kind
    module: str
    extra: str = ""
    broken: str = ""
    #: released with a chat template (PaliGemma is not: every prompt-level call is not applicable)
    chat_template: bool = True


_TINY, _QWEN, _LLAVA, _MORE = ("faithtests.testing.tiny", "faithtests.testing.tiny_qwen",
                               "faithtests.testing.tiny_llava", "faithtests.testing.tiny_more")
_OMNI, _DUALS = "faithtests.testing.tiny_omni", "faithtests.testing.tiny_duals"

FAMILIES: tuple[Family, ...] = (
    Family("llava", "LLaVA 1.5", "vlm", _TINY),
    Family("llava_next", "LLaVA-NeXT", "vlm", _LLAVA),
    Family("llava_onevision", "LLaVA-OneVision", "vlm", _LLAVA),
    Family("qwen2_vl", "Qwen2-VL", "vlm", _TINY),
    Family("qwen2_5_vl", "Qwen2.5-VL", "vlm", _QWEN),
    Family("qwen3_vl", "Qwen3-VL", "vlm", _QWEN),
    Family("qwen3_5", "Qwen3.5", "vlm", _QWEN),
    Family("internvl", "InternVL 3", "vlm", _TINY),
    Family("idefics3", "Idefics3", "vlm", _TINY),
    # SmolVLM's processor imports num2words (the smolvlm extra)
    Family("smolvlm", "SmolVLM", "vlm", _LLAVA, extra="smolvlm"),
    Family("gemma3", "Gemma 3", "vlm", _TINY),
    Family("gemma4", "Gemma 4", "vlm", _MORE),
    Family("paligemma", "PaliGemma", "vlm", _MORE, chat_template=False),
    Family("mllama", "Llama 3.2 Vision (Mllama)", "vlm", _MORE),
    Family("mistral3", "Mistral 3", "vlm", _LLAVA),
    Family("glm4v", "GLM-4.1V", "vlm", _QWEN),
    Family("aya_vision", "Aya Vision", "vlm", _LLAVA),
    Family("llama4", "Llama 4", "vlm", _MORE,
           broken="transformers' own Llama4ForConditionalGeneration.forward raises AttributeError "
                  "('MoeCausalLMOutputWithPast' object has no attribute 'image_outputs') on every input"),
    Family("janus", "Janus", "vlm", _MORE),
    Family("lfm2_vl", "LFM2-VL", "vlm", _LLAVA),
    Family("qwen2_5_omni", "Qwen2.5-Omni (thinker)", "omni", _OMNI),
    Family("qwen3_omni_moe", "Qwen3-Omni-MoE (thinker)", "omni", _OMNI),
    Family("gemma3n", "Gemma 3n", "omni", _OMNI, extra="omni"),
    Family("clip", "CLIP", "dual", _DUALS),
    Family("siglip", "SigLIP", "dual", _DUALS),
    Family("siglip2", "SigLIP2 (NaFlex)", "dual", _MORE),
    Family("metaclip_2", "MetaCLIP 2", "dual", _MORE),
)
BY_TYPE: dict[str, Family] = {f.model_type: f for f in FAMILIES}
#: The image-text-to-text families whose own model runs and that have a chat template: the adapter
#: conformance tests' parameters (a family without one is checked to refuse every call, once).
VLM_FAMILIES: tuple[str, ...] = tuple(f.model_type for f in FAMILIES
                                      if f.kind == "vlm" and not f.broken and f.chat_template)
#: The dual encoders' builders in :mod:`.tiny_duals` predate the ``BUILDERS`` convention.
_DUAL_BUILDERS = {"clip": "build_tiny_clip_hf", "siglip": "build_tiny_siglip_hf"}


def builder(model_type: str) -> Callable[..., Path]:
    """The tiny builder of ``model_type`` (imports its module)."""
    try:
        family = BY_TYPE[model_type]
    except KeyError:
        raise ValueError(f"unknown tiny family {model_type!r}; known: {sorted(BY_TYPE)}") from None
    module: Any = importlib.import_module(family.module)
    if model_type in _DUAL_BUILDERS:
        found: Callable[..., Path] = getattr(module, _DUAL_BUILDERS[model_type])
        return found
    built: Callable[..., Path] = module.BUILDERS[model_type]
    return built
