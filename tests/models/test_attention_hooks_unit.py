"""The registered attention function against a hand-written eager attention, on random tensors."""

from __future__ import annotations

import torch
from torch import nn

from faithtests.models.hooks import AttentionContext, attention_context, hookable_attention
from faithtests.models.interfaces import TokenSpans


class FakeAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer_idx = 0
        self.num_key_value_groups = 2
        self.is_causal = True


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """softmax(q k^T / sqrt(d) + mask) v, with the 2 key/value heads repeated for 4 query heads."""
    k4, v4 = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    w = torch.softmax(q @ k4.transpose(2, 3) / q.shape[-1] ** 0.5 + mask, dim=-1)
    return (w @ v4).transpose(1, 2), w


def inputs() -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 5, 8, generator=g)
    k = torch.randn(2, 2, 5, 8, generator=g)
    v = torch.randn(2, 2, 5, 8, generator=g)
    allowed = torch.ones(5, 5).tril().bool()[None, None].repeat(2, 1, 1, 1)
    allowed[1, :, :, 3:] = False  # row 1: two right pads (keys 3, 4 masked)
    allowed[1, :, 3:, :] = torch.eye(5, dtype=torch.bool)[3:]  # pads see themselves (no all -inf rows)
    mask = torch.zeros(2, 1, 5, 5).masked_fill(~allowed, torch.finfo(torch.float32).min)
    return q, k, v, mask


def test_fast_path_matches_eager_reference() -> None:
    q, k, v, mask = inputs()
    out, _ = hookable_attention(FakeAttention(), q, k, v, mask, scaling=8**-0.5)
    want, _ = reference(q, k, v, mask)
    assert torch.allclose(out, want, atol=1e-5)


def test_modifier_path_and_capture() -> None:
    q, k, v, mask = inputs()
    want_out, want_w = reference(q, k, v, mask)
    spans = TokenSpans(image=[(0, 2), (0, 2)], description=[(0, 0), (0, 0)], length=[5, 3])
    seen: list[torch.Tensor] = []

    def identity(layer: int, w: torch.Tensor, s: TokenSpans) -> torch.Tensor:
        assert layer == 0 and s is spans
        seen.append(w)
        return w

    ctx = AttentionContext(modifiers={0: identity}, spans=spans, capture_rows=torch.tensor([4, 2]))
    with attention_context(ctx):
        out, w = hookable_attention(FakeAttention(), q, k, v, mask, scaling=8**-0.5)
    assert seen and torch.allclose(out, want_out, atol=1e-5) and w is not None
    assert torch.allclose(ctx.captured[0][0], want_w[0, :, 4], atol=1e-6)
    assert torch.allclose(ctx.captured[0][1], want_w[1, :, 2], atol=1e-6)
    assert float(ctx.captured[0][1, :, 3:].abs().sum()) == 0.0  # padded keys get no weight

    # Capture without a modifier (SDPA output, weights recomputed for the captured rows only).
    ctx = AttentionContext(capture_rows=torch.tensor([4, 2]))
    with attention_context(ctx):
        out, _ = hookable_attention(FakeAttention(), q, k, v, mask, scaling=8**-0.5)
    assert torch.allclose(out, want_out, atol=1e-5)
    assert torch.allclose(ctx.captured[0][1], want_w[1, :, 2], atol=1e-6)


def test_missing_mask_means_causal() -> None:
    q, k, v, _ = inputs()
    causal = torch.zeros(5, 5).masked_fill(~torch.ones(5, 5).tril().bool(), torch.finfo(torch.float32).min)
    want_out, want_w = reference(q, k, v, causal[None, None])
    spans = TokenSpans(image=[(0, 0)] * 2, description=[(0, 0)] * 2, length=[5, 5])
    rows = torch.tensor([1, 3])
    ctx = AttentionContext(modifiers={0: lambda layer, w, s: w}, spans=spans, capture_rows=rows)
    with attention_context(ctx):
        out, _ = hookable_attention(FakeAttention(), q, k, v, None, scaling=8**-0.5)
    assert torch.allclose(out, want_out, atol=1e-5)
    assert torch.allclose(ctx.captured[0][0], want_w[0, :, 1], atol=1e-6)
    assert float(ctx.captured[0][0, :, 2:].abs().sum()) == 0.0
