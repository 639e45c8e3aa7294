"""Loading the text-generating half of a released omni checkpoint.

A released Qwen2.5-Omni / Qwen3-Omni checkpoint (``model_type`` ``qwen2_5_omni`` / ``qwen3_omni_moe``)
holds a *thinker* (audio + vision in, text out) and a *talker* (speech out) under ``thinker.`` and
``talker.`` prefixes. The suites score text, so only the thinker is built, from the checkpoint's
``thinker_config``, with its weights' prefix stripped; the talker's weights are not read into it. Every
other checkpoint loads through ``AutoModelForImageTextToText`` exactly as before.
"""

from __future__ import annotations

from typing import Any

#: Full omni ``model_type`` -> the transformers class of its thinker.
THINKERS: dict[str, str] = {
    "qwen2_5_omni": "Qwen2_5OmniThinkerForConditionalGeneration",
    "qwen3_omni_moe": "Qwen3OmniMoeThinkerForConditionalGeneration",
}


def load_generative(path: str, *, dtype: Any, local_files_only: bool, placement: dict[str, Any]) -> Any:
    """The generative model at ``path``: a full omni checkpoint's thinker, else the image-text-to-text
    model transformers maps its config to."""
    import transformers  # lazy: a warm (deferred) run imports no transformers
    from transformers import AutoConfig, AutoModelForImageTextToText

    auto_config: Any = AutoConfig  # transformers' loaders are untyped
    model_type = str(getattr(auto_config.from_pretrained(path, local_files_only=local_files_only),
                             "model_type", ""))
    if model_type not in THINKERS:
        auto_model: Any = AutoModelForImageTextToText
        return auto_model.from_pretrained(path, dtype=dtype, local_files_only=local_files_only, **placement)
    config = auto_config.from_pretrained(path, local_files_only=local_files_only)
    thinker: Any = getattr(transformers, THINKERS[model_type])
    return thinker.from_pretrained(path, config=config.thinker_config, key_mapping={r"^thinker\.": ""},
                                   dtype=dtype, local_files_only=local_files_only, **placement)
