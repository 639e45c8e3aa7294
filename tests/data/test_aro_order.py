"""ARO word-order negatives (COCO-Order) and ARO's caption normalisation."""

from __future__ import annotations

from collections import Counter

import numpy as np

from faithtests.data.aro_order import (
    order_negatives,
    pre_caption,
    shuffle_allbut_nouns_and_adj,
    shuffle_nouns_and_adj,
    shuffle_trigrams,
    shuffle_within_trigrams,
    tokenize,
)


def test_pre_caption_matches_aro() -> None:
    assert pre_caption("A Man (on skis)!  Going down.", 30) == "a man on skis going down"
    assert pre_caption("one two three four", 2) == "one two"
    assert pre_caption("it's a dog, near a bus") == "it's a dog, near a bus"  # commas/apostrophes kept


def test_trigram_shuffles_permute_tokens_within_their_groups() -> None:
    cap = "a b c d e f g"
    rng = np.random.default_rng(3)
    within = shuffle_within_trigrams(cap, rng).split()
    assert [set(within[i : i + 3]) for i in (0, 3, 6)] == [{"a", "b", "c"}, {"d", "e", "f"}, {"g"}]
    across = shuffle_trigrams(cap, rng)
    groups = {"a b c", "d e f", "g"}
    assert Counter(across.split()) == Counter(cap.split())
    assert all(g in across for g in groups)


def test_noun_and_adjective_shuffles_use_the_tagger() -> None:
    tags = {"a": "DT", "red": "JJ", "dog": "NN", "near": "IN", "big": "JJ", "cat": "NN", "sits": "VBZ"}

    def tagger(text: str) -> list[tuple[str, str]]:
        return [(t, tags[t]) for t in text.split()]

    cap = "a red dog near a big cat"
    na = shuffle_nouns_and_adj(cap, np.random.default_rng(1), tagger).split()
    assert [na[i] for i in (0, 3, 4)] == ["a", "near", "a"]  # determiners/prepositions untouched
    assert {na[2], na[6]} == {"dog", "cat"} and {na[1], na[5]} == {"red", "big"}
    rest = shuffle_allbut_nouns_and_adj(cap, np.random.default_rng(1), tagger).split()
    assert [rest[i] for i in (1, 2, 5, 6)] == ["red", "dog", "big", "cat"]


def test_order_negatives_without_tagger_lists_what_was_made() -> None:
    negs, names = order_negatives("A man riding a wave on a surfboard.", np.random.default_rng(0))
    assert names == ("shuffle_within_trigrams", "shuffle_trigrams")
    assert len(negs) == 2
    base = Counter(pre_caption("A man riding a wave on a surfboard .").split())
    for n in negs:
        assert Counter(n.split()) == base
    assert tokenize("a dog's toy, well-made.") == ["a", "dog's", "toy", ",", "well-made", "."]
