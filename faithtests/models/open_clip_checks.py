"""What open_clip does quietly to weights that do not fit, turned into errors that name the files.

open_clip interpolates position embeddings whose size differs from the config's (an ``image_size`` or
``context_length`` that does not match the weights) with only a log line, and reports a text tower of
another width as a bare ``AssertionError: text pos_embed width changed!``. Here the first becomes a
:class:`CheckpointError` unless resizing was asked for, and every load failure names the spec, the
config and the weights file in one line.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import torch

from faithtests.models.checks import safetensors_shapes
from faithtests.models.errors import CheckpointError, ModelNotFoundError

#: The position embeddings open_clip resizes when loading (vision grid; text context, CLIP or custom text).
POS_EMBED_KEYS = ("visual.positional_embedding", "positional_embedding", "text.positional_embedding")
_SIZE_MISMATCH = re.compile(r"size mismatch for ([\w.]+): copying a param with shape "
                            r"torch\.Size\((\[[^\]]*\])\) from checkpoint, "
                            r"the shape in current model is torch\.Size\((\[[^\]]*\])\)")


def checkpoint_shapes(path: Path) -> dict[str, list[int]]:
    """Shapes of the tensors in a weights file, keyed as open_clip keys them (``state_dict`` unwrapped,
    ``module.`` stripped); empty for a format this cannot read without converting (big_vision .npz)."""
    if path.suffix == ".safetensors":
        return safetensors_shapes(str(path), path)
    if path.suffix in (".npz", ".npy"):
        return {}
    try:
        state: Any = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    except RuntimeError:  # mmap needs the zip format; an old pickle loads whole
        state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    if not isinstance(state, dict):
        return {}
    return {str(k).removeprefix("module."): list(v.shape) for k, v in state.items() if hasattr(v, "shape")}


def resized_pos_embeds(model: torch.nn.Module, weights: Path) -> list[str]:
    """One line per position embedding whose size in ``weights`` differs from the model built from the
    config (open_clip interpolated it while loading)."""
    shapes = checkpoint_shapes(weights)
    own = model.state_dict()
    return [f"{key} is {shapes[key]} in the weights but {list(own[key].shape)} for the config"
            for key in POS_EMBED_KEYS if key in shapes and key in own and list(own[key].shape) != shapes[key]]


def _mismatch(text: str) -> str:
    """A state-dict error of open_clip / torch in one line."""
    if "text pos_embed width changed" in text:
        return "the text tower's width differs (open_clip: text pos_embed width changed!)"
    sizes = _SIZE_MISMATCH.findall(text)
    if sizes:
        key, theirs, ours = sizes[0]
        more = f" (and {len(sizes) - 1} more tensors)" if len(sizes) > 1 else ""
        return f"{key} is {theirs} in the weights but {ours} for the config{more}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    detail = lines[1] if len(lines) > 1 else (lines[0] if lines else type(text).__name__)
    return detail[:300]


def load_error(spec: str, config: str, weights: Path | None, err: BaseException) -> Exception | None:
    """The one-line error for an exception of ``open_clip.create_model_and_transforms``, or None for one
    that is not about the files (a bug elsewhere: raised as it is)."""
    text = str(err)
    files = f"the weights {weights}" if weights is not None else "the weights"
    if isinstance(err, AssertionError) or "Error(s) in loading state_dict" in text:
        return CheckpointError(f"{spec}: {files} do not fit the architecture in {config}: {_mismatch(text)}")
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    if (type(err).__name__ == "SafetensorError" or isinstance(err, pickle.UnpicklingError)
            or "PytorchStreamReader" in text):
        return CheckpointError(f"{spec}: weights file {weights} could not be read: {first}")
    if isinstance(err, OSError | RuntimeError | ValueError):
        return ModelNotFoundError(f"{spec}: open_clip could not load it offline: {first}")
    return None
