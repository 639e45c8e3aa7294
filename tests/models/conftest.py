"""Tiny models of every supported family, built once per session into a temp dir and loaded back through
``load_model`` exactly as a user's checkpoint would be."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from faithtests.models.tiny import FAMILIES, build_tiny
from faithtests.models.tiny_duals import build_tiny_clip_hf, build_tiny_open_clip, build_tiny_siglip_hf

DUAL_BUILDERS: dict[str, Callable[..., Path]] = {
    "open_clip": build_tiny_open_clip,
    "clip": build_tiny_clip_hf,
    "siglip": build_tiny_siglip_hf,
}


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``tiny_dir(name)``: the directory of tiny model ``name`` (a VLM family or a dual encoder)."""
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            out = tmp_path_factory.mktemp(f"tiny_{name}")
            built[name] = DUAL_BUILDERS[name](out) if name in DUAL_BUILDERS else build_tiny(name, out)
        return built[name]

    return get


@pytest.fixture(scope="session")
def load_tiny(tiny_dir: Callable[[str], Path]) -> Callable[..., Any]:
    """``load_tiny(name, **kw)`` through the public registry; memoised per (name, kwargs)."""
    from faithtests.models.registry import load_model

    loaded: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}

    def get(name: str, **kwargs: Any) -> Any:
        key = (name, tuple(sorted(kwargs.items())))
        if key not in loaded:
            prefix = "open_clip:local-dir:" if name == "open_clip" else "hf:"
            loaded[key] = load_model(f"{prefix}{tiny_dir(name)}", device="cpu", **kwargs)
        return loaded[key]

    return get


@pytest.fixture(scope="session", params=FAMILIES)
def family(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def images() -> list[Any]:
    """Six seeded noise images of different sizes (distinct content, distinct aspect ratios)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    sizes = [(40, 30), (30, 40), (32, 32), (48, 36), (36, 48), (64, 64)]
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes]
