"""The reference VLM's training inputs are exactly what its public loading path feeds at test time."""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.world.vlm_tasks import POLICIES, sample_example


@pytest.fixture(scope="module")
def processor():  # type: ignore[no-untyped-def]
    from faithtests.world.train_vlm import build_processor

    return build_processor()


def test_world_prompts_have_no_unknown_words(processor) -> None:  # type: ignore[no-untyped-def]
    from faithtests.world.local_models import render_prompt

    tok = processor.tokenizer
    rng = np.random.default_rng(0)
    for policy in POLICIES:
        for _ in range(150):
            ex = sample_example(rng, policy)
            ids = tok.encode(render_prompt(processor, ex.prompt) + " " + ex.answer, add_special_tokens=False)
            assert tok.unk_token_id not in ids, (ex.task, ex.prompt.text)


def test_answers_used_as_options_are_single_tokens(processor) -> None:  # type: ignore[no-untyped-def]
    from faithtests.world.captions import NUMBER_WORDS
    from faithtests.world.mood import EMOTIONS

    for word in ("A", "B", "C", "D", "E", "F", "Yes", "No", *EMOTIONS, *NUMBER_WORDS):
        assert len(processor.tokenizer.encode(word, add_special_tokens=False)) == 1, word


def test_training_encoding_matches_the_public_path(processor, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Prompt ids + answer labels of ``encode`` equal what LocalVlm (AutoProcessor from the saved dir)
    builds for the same prompt, and the image placeholder expands to 36 tokens per image."""
    from faithtests.world.local_models import LocalVlm
    from faithtests.world.train_vlm import IMAGE_TOKENS, build_model, encode

    build_model(processor, 0).save_pretrained(str(tmp_path))
    processor.save_pretrained(str(tmp_path))
    vlm = LocalVlm(tmp_path)
    rng = np.random.default_rng(3)
    examples = [sample_example(rng, "faithful") for _ in range(12)]
    batch = encode(processor, examples)
    for row, labels, ex in zip(batch["input_ids"], batch["labels"], examples, strict=True):
        public = vlm._inputs([ex.prompt])["input_ids"][0].tolist()
        n_prompt = int((labels == -100).sum()) - int((row == processor.tokenizer.pad_token_id).sum())
        assert row[:n_prompt].tolist() == public
        assert public.count(processor.image_token_id) == IMAGE_TOKENS * len(ex.prompt.images)
        answer = labels[labels != -100].tolist()
        assert answer[-1] == processor.tokenizer.eos_token_id
        assert processor.tokenizer.decode(answer[:-1]).strip() == ex.answer
