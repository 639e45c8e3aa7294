"""Capabilities found at load and the sequence inputs declared once (issue 43), on small stand-ins; the
families themselves are checked in test_vlm_families.py and test_family_matrix.py."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from faithtests.models.capabilities import describe_layers, hook_features, patch_grid_support, require
from faithtests.models.errors import NotApplicable
from faithtests.models.interfaces import Contrast, Hooks, Prompt
from faithtests.models.prefix import fork_cache, forkable
from faithtests.models.sequence_inputs import extended, prefix_inputs, suffix_inputs


class SelfLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.self_attn, self.mlp = nn.Linear(2, 2), nn.Linear(2, 2)


class LinearLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear_attn, self.mlp = nn.Linear(2, 2), nn.Linear(2, 2)


class GatedCrossLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cross_attn, self.mlp = nn.Linear(2, 2), nn.Linear(2, 2)
        self.cross_attn_attn_gate = nn.Parameter(torch.zeros(1))


def test_layers_are_described_by_kind() -> None:
    assert describe_layers(nn.ModuleList([SelfLayer(), SelfLayer()])) == {}
    got = describe_layers(nn.ModuleList([LinearLayer(), LinearLayer(), SelfLayer(), GatedCrossLayer()]))
    assert got["attention"] == ("decoder layers 0, 1 (linear attention, Linear: no attention weights over "
                                "the prompt); layer 3 (cross-attention, Linear: no attention weights over "
                                "the prompt)")
    assert got["residual_hooks"] == "decoder layer 3 (GatedCrossLayer gates its updates)"


def test_a_patch_grid_is_one_square_per_image() -> None:
    assert patch_grid_support(16, (224, 224)) == ""
    assert "88 image tokens, not one square patch grid" in patch_grid_support(88, (224, 224))
    assert patch_grid_support(0, (224, 224)) != ""


class Lacking:
    spec = "hf:/m"

    def lacks(self, feature: str) -> str:
        return {"attention": "decoder layer 1 (convolution)"}.get(feature, "")


def test_require_names_the_first_missing_feature() -> None:
    require(Lacking(), "chat_template", "patch_grid")  # has both
    with pytest.raises(NotApplicable) as info:
        require(Lacking(), "chat_template", "attention", "residual_hooks")
    assert info.value.feature == "attention" and str(info.value) == (
        "not applicable: hf:/m lacks softmax attention weights over the prompt in every decoder layer "
        "(captures, modifiers, the step reading of contrastive decoding): decoder layer 1 (convolution)")
    require(object(), "attention")  # a plug-in model says nothing: nothing is refused for it


def test_hooks_say_what_they_need() -> None:
    def modifier(_l: int, w: torch.Tensor, _s: object) -> torch.Tensor:
        return w

    assert hook_features(None) == () and hook_features(Hooks()) == ()
    both = Hooks(attention={0: modifier}, mlp_scale={1: 0.5})
    assert hook_features(both) == ("attention", "residual_hooks")
    aux = (Prompt((), "x"),)
    assert hook_features(Hooks(contrast=Contrast(aux, 1.0, "t"))) == ("logits_processors",)


def test_sequence_inputs_are_extended_and_sliced_together() -> None:
    inputs = {
        "input_ids": torch.tensor([[0, 5, 6], [7, 8, 9]]),
        "attention_mask": torch.tensor([[0, 1, 1], [1, 1, 1]]),
        "mm_token_type_ids": torch.tensor([[0, 1, 0], [0, 1, 0]]),
        "cross_attention_mask": torch.arange(12).reshape(2, 3, 1, 2),
        "pixel_values": torch.ones(2, 3, 4, 4),
    }
    tail = torch.tensor([[11, 12], [13, 14]])
    out = extended(inputs, tail)
    assert out["input_ids"].tolist() == [[0, 5, 6, 11, 12], [7, 8, 9, 13, 14]]
    assert out["attention_mask"][:, 3:].tolist() == [[1, 1], [1, 1]]
    assert out["mm_token_type_ids"][:, 3:].tolist() == [[0, 0], [0, 0]]  # generated text is text
    assert torch.equal(out["cross_attention_mask"][:, 3], inputs["cross_attention_mask"][:, 2])  # as generate
    assert out["pixel_values"] is inputs["pixel_values"]  # media data untouched
    assert extended(inputs, tail[:, :0])["input_ids"] is inputs["input_ids"]
    pre = prefix_inputs(inputs, 2)
    assert pre["input_ids"].shape == (2, 2) and pre["cross_attention_mask"].shape == (2, 2, 1, 2)
    assert pre["pixel_values"] is inputs["pixel_values"]
    suf = suffix_inputs(inputs, 1, 3)
    assert set(suf) == {"input_ids", "cross_attention_mask"}  # what a cache-continuing call takes
    assert suf["input_ids"].tolist() == [[5, 6], [8, 9]]


def test_only_key_value_caches_are_forked() -> None:
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache()
    cache.update(torch.ones(1, 2, 3, 4), torch.ones(1, 2, 3, 4), 0)
    assert forkable(cache) == "" and isinstance(cache.layers[0], DynamicLayer)
    forked = fork_cache(cache, 3)
    assert forked.layers[0].keys.shape[0] == 3 and cache.layers[0].keys.shape[0] == 1

    class StateLayer:  # stands for a linear-attention layer (state updated in place)
        pass

    cache.layers.append(StateLayer())  # type: ignore[arg-type]
    assert forkable(cache) == "cache layers StateLayer cannot be forked exactly"
    with pytest.raises(ValueError, match="cannot be forked exactly"):
        fork_cache(cache, 2)
