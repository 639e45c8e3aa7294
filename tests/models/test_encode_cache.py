"""EncodeCache and content keys, independent of any model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from faithtests.models.cache import EncodeCache, checkpoint_sha256, image_key, text_key
from faithtests.models.prefix import common_prefix_length


def test_image_key_is_content_based() -> None:
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (8, 6, 3), dtype=np.uint8)
    a, b = Image.fromarray(pixels), Image.fromarray(pixels.copy())
    assert a is not b and image_key(a) == image_key(b)
    pixels[0, 0, 0] ^= 1
    assert image_key(Image.fromarray(pixels)) != image_key(a)
    assert image_key(a.convert("RGBA")) != image_key(a)  # mode is part of the content
    assert text_key("a cat") != text_key("a cat ")


def test_encode_cache_counts_and_batches() -> None:
    calls: list[list[str]] = []

    def encode(items: list[str]) -> torch.Tensor:
        calls.append(list(items))
        return torch.tensor([[float(len(s)), float(ord(s[0]))] for s in items])

    cache = EncodeCache("ns", text_key, encode, batch_size=2)
    out = cache.get(["aa", "b", "aa", "ccc", "b"])
    assert calls == [["aa", "b"], ["ccc"]]  # first-seen order, deduplicated, batches of 2
    assert out[:, 0].tolist() == [2.0, 1.0, 2.0, 3.0, 1.0]
    assert (cache.stats.encoded, cache.stats.calls, cache.stats.hits) == (3, 2, 2)
    cache.get(["ccc", "dddd"])
    assert calls[-1] == ["dddd"] and cache.stats.encoded == 4 and cache.stats.hits == 3
    with pytest.raises(ValueError, match="at least one"):
        cache.get([])


def test_encode_cache_rejects_wrong_row_count() -> None:
    cache = EncodeCache("ns", text_key, lambda items: torch.zeros(1, 2), batch_size=4)
    with pytest.raises(RuntimeError, match="1 rows for 2 items"):
        cache.get(["a", "b"])


def test_common_prefix_length() -> None:
    ids = torch.tensor([[1, 2, 3, 4, 0], [1, 2, 3, 5, 6], [1, 2, 3, 4, 7]])
    assert common_prefix_length(ids, [4, 5, 5]) == 3
    assert common_prefix_length(ids[[0, 2]], [4, 5]) == 4  # limited by the shorter row
    assert common_prefix_length(ids[:1], [5]) == 5


def test_checkpoint_sha256(tmp_path: object) -> None:
    from pathlib import Path

    root = Path(str(tmp_path))
    (root / "model.safetensors").write_bytes(b"abc")
    (root / "config.json").write_text("{}")
    digests = checkpoint_sha256([root])
    sha_abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256(b"abc")
    assert digests == {"model.safetensors": sha_abc}
