"""Model adapters behind two protocols (:mod:`.protocols`), a spec-string registry (:mod:`.registry`) and
content-hash caches. Importing this package is cheap: adapters import torch/transformers when loaded."""

from faithtests.models.errors import (
    CheckpointError,
    ModelNotFoundError,
    ModelSpecError,
    UnsupportedModelError,
)

__all__ = ["CheckpointError", "ModelNotFoundError", "ModelSpecError", "UnsupportedModelError"]
