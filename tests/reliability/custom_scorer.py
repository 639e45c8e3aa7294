"""A model from outside faithtests, for the plug-in API tests (``py:custom_scorer:make``): a scorer
that compares the mean grey level of an image with the length of a caption."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image


class GreyScorer:
    def __init__(self, spec: str, device: torch.device | None = None) -> None:
        self.spec = spec
        self.device = device

    def encode_images(self, images: Sequence[Image.Image]) -> torch.Tensor:
        grey = [float(np.asarray(im.convert("L"), dtype=np.float64).mean()) / 255.0 for im in images]
        return torch.nn.functional.normalize(torch.tensor([[g, 1.0 - g] for g in grey]), dim=-1)

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        short = [min(len(t), 100) / 100.0 for t in texts]
        return torch.nn.functional.normalize(torch.tensor([[s, 1.0 - s] for s in short]), dim=-1)

    def similarity(self, images: Sequence[Image.Image], texts: Sequence[str]) -> torch.Tensor:
        return (self.encode_images(images) * self.encode_texts(texts)).sum(dim=-1)

    def fingerprint(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": "scorer", "family": "grey"}


class HalfScorer:
    """Lacks ``similarity`` and ``fingerprint``: refused at load."""

    spec = "half"

    def encode_images(self, images: Sequence[Image.Image]) -> torch.Tensor:
        return torch.zeros(len(images), 2)

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        return torch.zeros(len(texts), 2)


def make(device: torch.device) -> GreyScorer:
    """Declares ``device`` only: it gets the device and nothing else."""
    return GreyScorer("py:custom_scorer:make", device)


def make_half() -> HalfScorer:
    return HalfScorer()


def from_rest(rest: str, **context: Any) -> GreyScorer:
    """An entry point's factory: the rest of the spec, then every load setting."""
    return GreyScorer(f"grey:{rest}", context["device"])
