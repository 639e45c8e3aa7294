"""Spec-string registry: one entry point that turns ``reference:clip``, ``open_clip:...``, ``hf:...`` into an
adapter satisfying :class:`ImageTextScorer` or :class:`VisionLanguageModel`.

Specs:
- ``open_clip:NAME@PRETRAINED`` / ``open_clip:CONFIG.json@WEIGHTS`` / ``open_clip:local-dir:PATH`` — see
  :mod:`.open_clip_adapter`.
- ``hf:PATH_OR_REPO`` — a local directory, or a hub repo id that must already be in the local HF cache
  unless ``allow_download``. ``config.json``'s ``model_type`` decides: CLIP/SigLIP-like -> dual-encoder
  scorer; a type known to ``AutoModelForImageTextToText`` -> generative VLM.
- ``reference:NAME`` — ``fixtures/NAME/`` of this repository (``$FAITHTESTS_FIXTURES`` overrides the
  fixtures root), dispatched on its content (open_clip local-dir or HF directory).
- ``vlm-scorer:SPEC`` — the VLM loaded from ``SPEC`` used as a scorer (mean caption log-prob given the
  image, :mod:`.vlm_scorer`), so the scorer suites run on generative models.
- ``py:package.module:factory`` and prefixes registered in the entry-point group ``faithtests.models``
  — models from other packages (:mod:`.plugins`), checked against the protocols at load.

Loading never touches the network unless ``allow_download=True``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faithtests.models.checks import check_spec, hf_location, known_prefixes, read_json, reference_target
from faithtests.models.errors import CheckpointError, ModelSpecError, UnsupportedModelError
from faithtests.models.plugins import PY_PREFIX, load_entry_point, load_py

if TYPE_CHECKING:
    import torch

    from faithtests.models.interfaces import ImageTextScorer, VisionLanguageModel

__all__ = ["check_spec", "known_prefixes", "load_model", "resolve_device", "resolve_dtype"]
#: Set to 1 to let open_clip interpolate position embeddings whose size differs from the config's.
RESIZE_ENV = "FAITHTESTS_RESIZE_POS_EMBED"
_DTYPES = {
    "float32": "float32", "fp32": "float32", "float": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
}


def resolve_device(device: str | None) -> torch.device:
    import torch  # lazy: the plugin and check_spec stay torch-free

    if device in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    import torch  # lazy: the plugin and check_spec stay torch-free

    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    name = _DTYPES.get(str(dtype).lower().removeprefix("torch."))
    if name is None:
        raise ModelSpecError(f"unknown dtype {dtype!r}; use one of {sorted(_DTYPES)}")
    return getattr(torch, name)  # type: ignore[no-any-return]


def _read_config(path_or_repo: str, local_only: bool) -> dict[str, Any]:
    path = Path(path_or_repo)
    if path.is_dir():
        return read_json(f"hf:{path_or_repo}", path / "config.json")
    from transformers import AutoConfig  # lazy: hub repos only (a warm run imports no transformers)

    return dict(AutoConfig.from_pretrained(path_or_repo, local_files_only=local_only).to_dict())


def _load_hf(spec: str, target: str, device: torch.device, dtype: torch.dtype, allow_download: bool,
             batch_size: int, options: dict[str, Any]) -> ImageTextScorer | VisionLanguageModel:
    from faithtests.models.hf_dual import DUAL_MODEL_TYPES, HFDualEncoder  # lazy: torch-free until a load
    from faithtests.models.hf_omni import OMNI_MODEL_TYPES, HFOmniModel  # lazy: torch-free until a load
    from faithtests.models.hf_vlm import HFVisionLanguageModel

    where, local_only = hf_location(spec, target, allow_download)
    config = _read_config(where, local_only)
    model_type = str(config.get("model_type", ""))
    # omni families (audio + vision) take the omni adapter; every other generative VLM the plain one
    vlm_class = HFOmniModel if model_type in OMNI_MODEL_TYPES else HFVisionLanguageModel
    store = options.pop("defer_to", None)
    if store is not None and model_type not in DUAL_MODEL_TYPES:
        # outputs of this checkpoint are cached: nothing is imported or loaded before a miss needs it
        deferred = vlm_class.from_store(spec, where, store=store, device=device, dtype=dtype,
                                        batch_size=batch_size, local_files_only=local_only, **options)
        if deferred is not None:
            return deferred
    # lazy: after the deferred (warm) return above, which imports no transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    try:
        if model_type in DUAL_MODEL_TYPES:
            return HFDualEncoder(spec, where, device=device, dtype=dtype, batch_size=batch_size,
                                 local_files_only=local_only)
        if model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES or model_type in OMNI_MODEL_TYPES:
            return vlm_class(spec, where, device=device, dtype=dtype, batch_size=batch_size,
                             local_files_only=local_only, **options)
    except (OSError, RuntimeError) as err:
        if "ignore_mismatched_sizes" in str(err):  # transformers logged a table; name the files in one line
            raise CheckpointError(f"{spec}: the weights in {where} do not fit the architecture in its "
                                  "config.json (transformers reports size mismatches)") from err
        raise
    raise UnsupportedModelError(
        f"{spec}: model_type {model_type!r} (architectures {config.get('architectures')}) is neither a dual "
        f"encoder ({sorted(DUAL_MODEL_TYPES)}) nor an image-text-to-text model known to transformers"
    )


def load_model(
    spec: str,
    device: str | None = None,
    dtype: str | torch.dtype | None = None,
    allow_download: bool = False,
    batch_size: int = 16,
    **options: Any,
) -> ImageTextScorer | VisionLanguageModel:
    """Load the model a spec string names (see module doc). ``options`` go to the VLM adapter
    (``prefix_cache``, ``answer_prefix``, ``device_map``, ``defer_to``: an output store whose rows let
    the weights load on the first miss), except ``resize_pos_embed`` (open_clip: allow interpolating
    position embeddings whose size differs from the config's; default: ``$FAITHTESTS_RESIZE_POS_EMBED``).

    The spec and its files are checked first (:func:`check_spec`), so a mistake is named before
    anything heavy is imported."""
    check_spec(spec, allow_download)
    resize = bool(options.pop("resize_pos_embed", os.environ.get(RESIZE_ENV, "") not in ("", "0")))
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    if spec.startswith("reference:"):
        target = reference_target(spec, spec.removeprefix("reference:"))
        model = load_model(target, device, dtype, allow_download, batch_size, resize_pos_embed=resize,
                           **options)
        model.spec = spec
        return model
    if spec.startswith("vlm-scorer:"):
        from faithtests.models.hf_vlm import HFVisionLanguageModel  # lazy: torch-free until a load
        from faithtests.models.vlm_scorer import VLMScorer

        inner_spec = spec.removeprefix("vlm-scorer:")
        inner = load_model(inner_spec, device, dtype, allow_download, batch_size, **options)
        if not isinstance(inner, HFVisionLanguageModel):
            raise ModelSpecError(f"{spec}: the inner spec must name a generative VLM")
        return VLMScorer(inner, spec=spec)
    if spec.startswith("open_clip:"):
        from faithtests.models.open_clip_adapter import OpenClipScorer  # lazy: torch-free until a load

        return OpenClipScorer(spec, spec.removeprefix("open_clip:"), device=dev, dtype=dt,
                              batch_size=batch_size, allow_download=allow_download, resize_pos_embed=resize,
                              defer_to=options.get("defer_to"))
    if spec.startswith("hf:"):
        return _load_hf(spec, spec.removeprefix("hf:"), dev, dt, allow_download, batch_size, options)
    context = {"device": dev, "dtype": dt, "batch_size": batch_size}
    if spec.startswith(PY_PREFIX):
        return load_py(spec, **context)  # type: ignore[no-any-return]
    return load_entry_point(spec, spec.split(":", 1)[0], **context)  # type: ignore[no-any-return]
