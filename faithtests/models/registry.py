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
  image, :mod:`.vlm_scorer`), so LGIP metrics run on generative models.

Loading never touches the network unless ``allow_download=True``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faithtests.models.errors import ModelNotFoundError, ModelSpecError, UnsupportedModelError
from faithtests.models.locations import fixtures_root

if TYPE_CHECKING:
    import torch

    from faithtests.models.interfaces import ImageTextScorer, VisionLanguageModel

PREFIXES = ("reference:", "open_clip:", "hf:", "vlm-scorer:")
_DTYPES = {
    "float32": "float32", "fp32": "float32", "float": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
}


def resolve_device(device: str | None) -> torch.device:
    import torch

    if device in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    import torch

    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    name = _DTYPES.get(str(dtype).lower().removeprefix("torch."))
    if name is None:
        raise ModelSpecError(f"unknown dtype {dtype!r}; use one of {sorted(_DTYPES)}")
    return getattr(torch, name)  # type: ignore[no-any-return]


def _hf_dir(spec: str, target: str, allow_download: bool) -> tuple[str, bool]:
    """(path or repo id, local_files_only) for an ``hf:`` target; a missing model names what was tried."""
    path = Path(target).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{spec}: directory {path} has no config.json")
        return str(path), True
    if allow_download:
        return target, False
    looked = [f"local directory {path.resolve()}"]
    if target.count("/") == 1 and not target.startswith((".", "/", "~")):
        from huggingface_hub import snapshot_download

        looked.append(f"Hugging Face cache entry for repo {target!r}")
        try:
            return snapshot_download(target, local_files_only=True), True
        except Exception:
            pass
    raise ModelNotFoundError(
        f"{spec}: model not found locally and downloads are off. Looked for: {'; '.join(looked)}. "
        "Pass a local directory (hf:/path/to/model) or allow downloads."
    )


def _read_config(path_or_repo: str, local_only: bool) -> dict[str, Any]:
    path = Path(path_or_repo)
    if path.is_dir():
        return dict(json.loads((path / "config.json").read_text(encoding="utf-8")))
    from transformers import AutoConfig

    return dict(AutoConfig.from_pretrained(path_or_repo, local_files_only=local_only).to_dict())


def _load_hf(spec: str, target: str, device: torch.device, dtype: torch.dtype, allow_download: bool,
             batch_size: int, options: dict[str, Any]) -> ImageTextScorer | VisionLanguageModel:
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    from faithtests.models.hf_dual import DUAL_MODEL_TYPES, HFDualEncoder

    where, local_only = _hf_dir(spec, target, allow_download)
    config = _read_config(where, local_only)
    model_type = str(config.get("model_type", ""))
    if model_type in DUAL_MODEL_TYPES:
        return HFDualEncoder(spec, where, device=device, dtype=dtype, batch_size=batch_size,
                             local_files_only=local_only)
    if model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        from faithtests.models.hf_vlm import HFVisionLanguageModel

        return HFVisionLanguageModel(spec, where, device=device, dtype=dtype, batch_size=batch_size,
                                     local_files_only=local_only, **options)
    raise UnsupportedModelError(
        f"{spec}: model_type {model_type!r} (architectures {config.get('architectures')}) is neither a dual "
        f"encoder ({sorted(DUAL_MODEL_TYPES)}) nor an image-text-to-text model known to transformers"
    )


def _reference_target(spec: str, name: str) -> str:
    root = fixtures_root()
    folder = root / name
    if (folder / "open_clip_config.json").is_file():
        return f"open_clip:local-dir:{folder}"
    if (folder / "config.json").is_file():
        return f"hf:{folder}"
    available = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    raise ModelNotFoundError(
        f"{spec}: looked for {folder} holding open_clip_config.json (open_clip local-dir) or config.json "
        f"(HF model); available reference models in {root}: {available or 'none'} "
        "(train them with `faithtests train-reference`, or set FAITHTESTS_FIXTURES)"
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
    (``prefix_cache``, ``answer_prefix``)."""
    if not isinstance(spec, str) or not spec.startswith(PREFIXES):
        raise ModelSpecError(f"unknown model spec {spec!r}; it must start with one of {list(PREFIXES)}")
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    if spec.startswith("reference:"):
        name = spec.removeprefix("reference:")
        if not name or "/" in name or name.startswith("."):
            raise ModelSpecError(f"{spec}: a reference name is a folder name under fixtures/")
        target = _reference_target(spec, name)
        model = load_model(target, device, dtype, allow_download, batch_size, **options)
        model.spec = spec
        return model
    if spec.startswith("vlm-scorer:"):
        from faithtests.models.hf_vlm import HFVisionLanguageModel
        from faithtests.models.vlm_scorer import VLMScorer

        inner_spec = spec.removeprefix("vlm-scorer:")
        inner = load_model(inner_spec, device, dtype, allow_download, batch_size, **options)
        if not isinstance(inner, HFVisionLanguageModel):
            raise ModelSpecError(f"{spec}: the inner spec must name a generative VLM")
        return VLMScorer(inner, spec=spec)
    if spec.startswith("open_clip:"):
        from faithtests.models.open_clip_adapter import OpenClipScorer

        body = spec.removeprefix("open_clip:")
        if not body:
            raise ModelSpecError(f"{spec}: empty open_clip spec")
        return OpenClipScorer(spec, body, device=dev, dtype=dt, batch_size=batch_size,
                              allow_download=allow_download)
    target = spec.removeprefix("hf:")
    if not target:
        raise ModelSpecError(f"{spec}: empty hf spec")
    return _load_hf(spec, target, dev, dt, allow_download, batch_size, options)
