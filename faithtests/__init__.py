"""faithtests: behavioural faithfulness suites for vision-language models, as a pytest plugin.

Importing the package is cheap: torch and the model adapters load only when a model is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from faithtests.models.interfaces import ImageTextScorer, VisionLanguageModel


def load_model(spec: str, device: str | None = None, dtype: str | None = None, **kwargs: Any) -> (
    ImageTextScorer | VisionLanguageModel
):
    """Load a model from a spec string (``reference:clip``, ``open_clip:...``, ``hf:...``)."""
    from faithtests.models.registry import load_model as _load  # lazy: importing faithtests stays cheap

    return _load(spec, device=device, dtype=dtype, **kwargs)


__all__ = ["__version__", "load_model"]
