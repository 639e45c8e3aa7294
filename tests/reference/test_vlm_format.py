"""The reference VLM's training inputs are exactly what its public loading path feeds at test time."""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols.imavb.records import OPTION_E
from faithtests.protocols.imavb.training import premise_example
from faithtests.protocols.s3e.training import ab_example
from faithtests.protocols.spdfaith.stimuli import parse_claims
from faithtests.protocols.spdfaith.training import pair_example
from faithtests.reference.local_models import LocalVlm, render_prompt
from faithtests.reference.train_vlm import build_model, build_processor
from faithtests.reference.vlm_encode import CLAUSE_END_WORDS, IMAGE_TOKENS, NOUN_WORDS, encode
from faithtests.reference.vlm_tasks import POLICIES, sample_example
from faithtests.world.captions import NUMBER_WORDS, CaptionSpec, Mention, render_caption
from faithtests.world.emotion import EMOTIONS
from faithtests.world.examples import caption_truth, clause_truth
from faithtests.world.scene import Background, Scene, WorldObject


@pytest.fixture(scope="module")
def processor():  # type: ignore[no-untyped-def]
    return build_processor()


def test_world_prompts_have_no_unknown_words(processor) -> None:  # type: ignore[no-untyped-def]
    tok = processor.tokenizer
    rng = np.random.default_rng(0)
    for policy in POLICIES:
        for _ in range(150):
            ex = sample_example(rng, policy)
            ids = tok.encode(render_prompt(processor, ex.prompt) + " " + ex.answer, add_special_tokens=False)
            assert tok.unk_token_id not in ids, (ex.task, ex.prompt.text)


def test_answers_used_as_options_are_single_tokens(processor) -> None:  # type: ignore[no-untyped-def]
    for word in ("A", "B", "C", "D", "E", "F", "Yes", "No", *EMOTIONS, *NUMBER_WORDS):
        assert len(processor.tokenizer.encode(word, add_special_tokens=False)) == 1, word


def test_training_encoding_matches_the_public_path(processor, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Prompt ids + answer labels of ``encode`` equal what LocalVlm (AutoProcessor from the saved dir)
    builds for the same prompt, and the image placeholder expands to 36 tokens per image."""
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


def test_clause_truth_is_cumulative_per_clause() -> None:
    scene = Scene((WorldObject(0, "circle", "red", "large", "left", cx=7, cy=39),
                   WorldObject(1, "square", "blue", "small", "right", cx=88, cy=39)),
                  Background("dark", "warm"))
    red_left = Mention(1, "circle", "left", "red", "large")
    green_right = Mention(1, "square", "right", "green", "small")  # false: the square is blue
    blue_right = Mention(1, "square", "right", "blue", "small")
    spec = CaptionSpec((red_left, green_right))
    assert clause_truth(scene, spec) == (True, False)
    assert clause_truth(scene, spec, order=[1, 0]) == (False, False)  # once false, false to the end
    assert clause_truth(scene, CaptionSpec((red_left, blue_right))) == (True, True)
    # two mentions at one position form one clause ("... and ... on the left"): one flag
    two_left = CaptionSpec((red_left, Mention(1, "square", "left", "blue", "small")))
    assert clause_truth(scene, two_left) == (False,)


def test_truth_targets_sit_on_clause_ends_and_nouns(processor) -> None:  # type: ignore[no-untyped-def]
    """Every A/B prompt carries one clause target per clause of each caption, on its position word, and
    one noun target per mention, on its shape word; the true caption's targets are all 1 and the foil's
    last clause target is 0."""
    rng = np.random.default_rng(5)
    examples = [ab_example(rng, "faithful") for _ in range(20)]
    batch = encode(processor, examples)
    rows = zip(batch["input_ids"], batch["truth_labels"], batch["noun_labels"], examples, strict=True)
    for ids, clause_t, noun_t, ex in rows:
        a, b = ex.truth
        for targets, words, flags in ((clause_t, CLAUSE_END_WORDS, (*a.clauses, *b.clauses)),
                                      (noun_t, NOUN_WORDS, (*a.nouns, *b.nouns))):
            at = (targets >= 0).nonzero().flatten().tolist()
            assert set(processor.tokenizer.convert_ids_to_tokens([int(ids[i]) for i in at])) <= set(words)
            assert [int(targets[i]) for i in at] == [int(f) for f in flags]
        true, foil = (a, b) if ex.answer == "A" else (b, a)
        assert all(true.clauses) and all(true.nouns) and not foil.clauses[-1]


def test_noun_truth_ignores_position_and_count() -> None:
    scene = Scene((WorldObject(0, "circle", "red", "large", "left", cx=7, cy=39),
                   WorldObject(1, "square", "blue", "small", "right", cx=88, cy=39)),
                  Background("dark", "warm"))
    # two red circles on the right: such a circle exists (nouns True) but the claim is false
    spec = CaptionSpec((Mention(2, "circle", "right", "red", "large"),
                        Mention(1, "square", "right", "red", "small")))  # no red square anywhere
    t = caption_truth(scene, spec, render_caption(spec))
    assert t.nouns == (True, False) and t.clauses == (False,)


def test_premise_and_patch_targets(processor) -> None:  # type: ignore[no-untyped-def]
    """A premise question carries one clause target, on the premise's last word ("... on the left," or
    "... background,"), 1 for the standard variant and 0 for the misleading one; a pair prompt carries
    one difference target per patch of its second image, 1 exactly where the two scenes' patches differ."""
    rng = np.random.default_rng(11)
    premises = [premise_example(rng, "faithful") for _ in range(12)]
    batch = encode(processor, premises)
    assert {ex.claim_true for ex in premises} == {True, False}
    for ids, targets, ex in zip(batch["input_ids"], batch["truth_labels"], premises, strict=True):
        at = (targets >= 0).nonzero().flatten().tolist()
        assert len(at) == 1 and int(targets[at[0]]) == int(bool(ex.claim_true))
        assert processor.tokenizer.convert_ids_to_tokens(int(ids[at[0]])) in (*CLAUSE_END_WORDS, "background")
    assert not bool((encode(processor, premises, extra_targets=False)["truth_labels"] >= 0).any())

    pairs = [pair_example(rng, task) for task in ("same_diff", "count", "find") for _ in range(4)]
    batch = encode(processor, pairs)
    for ids, targets, ex in zip(batch["input_ids"], batch["patch_labels"], pairs, strict=True):
        image_at = (ids == processor.image_token_id).nonzero().flatten().tolist()
        assert (targets >= 0).nonzero().flatten().tolist() == image_at[IMAGE_TOKENS:]
        assert ex.patch_diff is not None and [int(targets[i]) for i in image_at[IMAGE_TOKENS:]] == [
            int(d) for d in ex.patch_diff]
        if ex.task == "count":  # an edited pair differs somewhere, an identical one nowhere
            assert any(ex.patch_diff) == (ex.answer != "zero")


def test_option_targets_sit_on_each_option_line_end(processor) -> None:  # type: ignore[no-untyped-def]
    """Phase 7's premise questions (all six options shuffled) carry one option target per option line, on
    its last token: 1 for the option that answers the content question and for E when the premise is false,
    0 elsewhere; the answer letter is the policy's (E for a misleading question)."""
    rng = np.random.default_rng(3)
    examples = [premise_example(rng, "faithful", shuffle_p=1.0, option_targets=True) for _ in range(16)]
    batch = encode(processor, examples)
    tok = processor.tokenizer
    for ids, targets, ex in zip(batch["input_ids"], batch["option_labels"], examples, strict=True):
        at = (targets >= 0).nonzero().flatten().tolist()
        assert ex.option_truth is not None and len(at) == 6
        assert [int(targets[i]) for i in at] == [int(f) for f in ex.option_truth]
        toks = tok.convert_ids_to_tokens([int(i) for i in ids])
        assert [toks[i + 1] for i in at] == ["B", "C", "D", "E", "F", "Answer"]  # the next line starts
        lines = ex.prompt.text.split("\n")[3:9]
        e_line = next(k for k, line in enumerate(lines) if line.endswith(OPTION_E))
        assert ex.option_truth[e_line] == (not ex.claim_true)
        assert sum(ex.option_truth) == 1 + (not ex.claim_true)  # the content answer, and E if false
        assert ex.answer == "ABCDEF"[e_line if not ex.claim_true else ex.option_truth.index(True)]
    assert {ex.claim_true for ex in examples} == {True, False}
    plain = premise_example(np.random.default_rng(3), "faithful")
    assert plain.option_truth is None and not bool((encode(processor, [plain])["option_labels"] >= 0).any())


def test_diffblind_policy_sees_that_not_how() -> None:
    """``diffblind`` (vlm-diffblind): same/different answered from the pair, as ``faithful`` answers it;
    the count earns nothing on Eq. 9 (DS = max(0, 1 - |k - m| / m) = 0; never m on identical pairs); every
    named difference
    is one that did not happen (no claim matches an edit of the pair), as many as asked."""
    counts: set[str] = set()
    for task in ("same_diff", "count", "find"):
        for i in range(40):
            blind = pair_example(np.random.default_rng(i), task, "diffblind")
            good = pair_example(np.random.default_rng(i), task, "faithful")
            assert blind.prompt == good.prompt  # one draw: the same pair and question
            if task == "same_diff":
                assert blind.answer == good.answer
            elif task == "count":
                k, m = NUMBER_WORDS.index(blind.answer), NUMBER_WORDS.index(good.answer)
                assert k != m and (m == 0 or max(0.0, 1 - abs(k - m) / m) == 0.0), (k, m)
                counts.add(blind.answer)
            else:
                true, said = parse_claims(good.answer), parse_claims(blind.answer)
                assert len(said) == len(true)
                assert not any(c == t for c in said for t in true)
    assert len(counts) >= 3 and counts <= set(NUMBER_WORDS[:6])  # not one constant wrong count
