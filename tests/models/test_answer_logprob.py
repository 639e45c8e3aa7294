"""``answer_logprob``: whole answers scored as the reply (AC-Bench constrained labels, IMAVB A2)."""

from __future__ import annotations

import pytest
import torch

from faithtests.models.interfaces import Prompt
from faithtests.models.registry import load_model
from faithtests.protocols.acbench.stimuli import mood_items
from faithtests.world.emotion import EMOTIONS


@pytest.fixture(scope="module")
def vlm():  # type: ignore[no-untyped-def]
    return load_model("reference:vlm", device="cpu", dtype="float32")


def test_single_token_answers_are_the_next_token_log_softmax(vlm) -> None:  # type: ignore[no-untyped-def]
    items = mood_items(3, seed=5)
    prompts = [Prompt(images=(it.image(),), text="What is the main emotion?") for it in items]
    prompts.append(Prompt(images=(), text="What is the main emotion?"))  # text-only rows too
    got = vlm.answer_logprob(prompts, list(EMOTIONS))
    lp = torch.log_softmax(vlm.next_token_logits(prompts), dim=-1)
    ids = [vlm.processor.tokenizer.encode(" " + e, add_special_tokens=False) for e in EMOTIONS]
    assert all(len(i) == 1 for i in ids)
    assert got.shape == (4, 8) and torch.allclose(got, lp[:, [i[0] for i in ids]], atol=1e-4)


def test_multi_token_answers_sum_their_tokens_and_the_prefix_cache_changes_nothing(vlm) -> None:  # type: ignore[no-untyped-def]
    items = mood_items(2, seed=7)
    instruction = "Describe the image."
    captions = ["two red circles on the left", "one blue square"]
    prompts = [Prompt(images=(it.image(),), text=instruction) for it in items]
    got = vlm.answer_logprob(prompts, captions)
    for j, cap in enumerate(captions):  # caption_logprob is the per-token mean of the same tokens
        n = len(vlm.processor.tokenizer.encode(" " + cap, add_special_tokens=False))
        mean = vlm.caption_logprob([it.image() for it in items], [cap] * 2, instruction)
        assert torch.allclose(got[:, j], mean * n, atol=1e-4)
    vlm.prefix_cache = False
    try:
        assert torch.allclose(vlm.answer_logprob(prompts, captions), got, atol=1e-4)
    finally:
        vlm.prefix_cache = True


def test_empty_answers_are_refused(vlm) -> None:  # type: ignore[no-untyped-def]
    p = [Prompt(images=(), text="What?")]
    with pytest.raises(ValueError, match="empty answer"):
        vlm.answer_logprob(p, ["anger", " "])
    with pytest.raises(ValueError, match="at least one"):
        vlm.answer_logprob(p, [])
