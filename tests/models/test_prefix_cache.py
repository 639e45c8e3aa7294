"""Shared-prefix option scoring: exact (1e-4, fp32) against full-prompt forwards in the hard cases."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from faithtests.models.interfaces import Hooks, Prompt
from faithtests.models.prefix import fork_cache
from faithtests.models.registry import load_model


def s3e_prompts(image: Any, n: int) -> list[Prompt]:
    """S3E-shaped: one image, many caption pairs in both orders (10 prompts per record in the paper)."""
    caps = ["a red circle", "a blue square", "two dog", "one cat", "a white triangle", "three red square"]
    out = []
    for i in range(n):
        a, b = caps[i % len(caps)], caps[(i + 1) % len(caps)]
        pair = (a, b) if i % 2 == 0 else (b, a)
        text = f'Which caption better matches the image? Answer only A or B.\nA: "{pair[0]}"\nB: "{pair[1]}"'
        out.append(Prompt((image,), text))
    return out


@pytest.mark.parametrize("name", ["llava", "qwen2_vl"])
def test_groups_larger_than_a_batch_and_mixed_rows(
    name: str, tiny_dir: Callable[[str], Path], images: list[Any]
) -> None:
    spec = f"hf:{tiny_dir(name)}"
    shared = load_model(spec, device="cpu", batch_size=3)
    full = load_model(spec, device="cpu", batch_size=3, prefix_cache=False)
    text_only = Prompt((), "Answer only A or B. A or B ?")
    prompts = [*s3e_prompts(images[0], 7), text_only, *s3e_prompts(images[1], 2)]
    prompts.insert(3, Prompt((), "Is it A or B ?"))
    got, want = shared.decide(prompts, ["A", "B"]), full.decide(prompts, ["A", "B"])
    assert shared.cache_stats()["prefix_calls"] >= 3  # 7 rows of image 0 in chunks of <= 3, plus image 1
    assert (got.logits - want.logits).abs().max() < 1e-4
    assert (got.states - want.states).abs().max() < 1e-4
    # order is the input order: each row equals its own single-prompt forward
    for row in (0, 3, 7, 9):
        single = full.decide([prompts[row]], ["A", "B"])
        assert (single.logits[0] - got.logits[row]).abs().max() < 1e-4


def test_sliding_window_shorter_than_prefix(tmp_path: Path, images: list[Any]) -> None:
    """Gemma3 with an 8-token sliding window: the cached prefix keeps only the window, still exact."""
    from faithtests.testing.tiny import build_tiny_gemma3

    path = build_tiny_gemma3(tmp_path / "g3", sliding_window=8)
    shared = load_model(f"hf:{path}", device="cpu")
    full = load_model(f"hf:{path}", device="cpu", prefix_cache=False)
    prompts = s3e_prompts(images[2], 4)
    got, want = shared.decide(prompts, ["A", "B"]), full.decide(prompts, ["A", "B"])
    assert shared.cache_stats()["prefix_calls"] == 1
    assert (got.logits - want.logits).abs().max() < 1e-4
    assert (got.states - want.states).abs().max() < 1e-4
    caps = ["a red circle", "two dog on the red square"]
    got_lp = shared.caption_logprob([images[2]] * 2, caps)
    want_lp = full.caption_logprob([images[2]] * 2, caps)
    assert (got_lp - want_lp).abs().max() < 1e-4


def test_fork_leaves_the_prefix_cache_untouched(load_tiny: Callable[..., Any], images: list[Any]) -> None:
    vlm = load_tiny("llava")
    enc = vlm.encode(s3e_prompts(images[0], 1))
    with torch.inference_mode():
        cache = vlm.model(**enc.inputs, use_cache=True).past_key_values
        keys = [layer.keys.clone() for layer in cache.layers]
        forked = fork_cache(cache, 3)
        vlm.model(input_ids=torch.tensor([[5, 6]] * 3), past_key_values=forked, use_cache=True)
    assert all(torch.equal(layer.keys, k) for layer, k in zip(cache.layers, keys, strict=True))
    assert forked.layers[0].keys.shape[0] == 3 and forked.get_seq_length() == keys[0].shape[2] + 2


def test_attention_modifiers_use_the_full_path(load_tiny: Callable[..., Any], images: list[Any]) -> None:
    vlm = load_tiny("llava")
    prompts = s3e_prompts(images[0], 4)
    before = vlm.cache_stats()["prefix_calls"]
    vlm.decide(prompts, ["A", "B"], Hooks(attention={0: lambda layer, w, spans: w}))
    assert vlm.cache_stats()["prefix_calls"] == before
    vlm.decide(prompts, ["A", "B"], Hooks(mlp_scale={0: 0.5}))  # MLP scales apply to both passes
    assert vlm.cache_stats()["prefix_calls"] == before + 1
    full = load_tiny("llava", prefix_cache=False)
    a = vlm.decide(prompts, ["A", "B"], Hooks(mlp_scale={0: 0.5}))
    b = full.decide(prompts, ["A", "B"], Hooks(mlp_scale={0: 0.5}))
    assert (a.logits - b.logits).abs().max() < 1e-4
