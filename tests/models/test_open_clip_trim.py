"""Trimming the text context to the batch's last EOT is exact for CLIP's causal, EOT-pooled tower."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from faithtests.models.open_clip_adapter import _encode_text_trimmed, _trimmable_text_tower

TEXTS = ["a dog", "two red circles on the left and a large blue square at the top of the picture", "cat"]


def test_trimmed_text_encoding_equals_full_context(load_tiny: Callable[..., Any]) -> None:
    scorer = load_tiny("open_clip")
    assert scorer._loaded().trim_text and _trimmable_text_tower(scorer.model)
    tokens = scorer.tokenizer(TEXTS)
    with torch.inference_mode():
        full = scorer.model.encode_text(tokens)
        trimmed = _encode_text_trimmed(scorer.model, tokens)
    assert int(tokens.argmax(dim=-1).max()) + 1 < tokens.shape[1]  # the test really trims something
    torch.testing.assert_close(trimmed, full, atol=1e-5, rtol=1e-5)


def test_non_causal_tower_is_not_trimmed(load_tiny: Callable[..., Any]) -> None:
    model = load_tiny("open_clip").model
    saved = model.attn_mask
    try:
        model.attn_mask = torch.zeros_like(saved)  # bidirectional: later tokens reach the EOT
        assert not _trimmable_text_tower(model)
    finally:
        model.attn_mask = saved
