"""LGIP paraphrases (App. A.1): templates, advanced rules, filtering, the K_same cap, tagging."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithtests.protocols.lgip.flips import LGIP_VOCABULARIES
from faithtests.protocols.lgip.paraphrase import (
    LGIP_SIMPLE_MARKERS,
    PARAPHRASE_LABELS,
    SIMPLE_TEMPLATES,
    filter_candidates,
    make_paraphrases,
    paraphrase_candidates,
    paraphrase_kinds,
    sample_capped,
    tag_paraphrase,
)
from faithtests.protocols.lgip.rewrite_rules import (
    SYNONYM_TABLE,
    discourse_marker,
    front_prepositional_phrase,
    front_while_clause,
    passive_voice,
    synonym_swap,
    usable_synonyms,
)


def test_templates_are_the_nine_of_appendix_a1() -> None:
    c = "a dog on a couch"
    assert [t.format(c=c) for t in SIMPLE_TEMPLATES] == [
        "a photo of a dog on a couch", "an image of a dog on a couch", "a picture of a dog on a couch",
        "a dog on a couch", "a dog on a couch in the scene", "a scene showing a dog on a couch",
        "In this image, a dog on a couch", "In the picture, a dog on a couch",
        "This image shows a dog on a couch",
    ]


def test_filter_strips_drops_short_dedupes_in_order_and_drops_original() -> None:
    cands = [("  a cat sits. ", 1), ("abcd", 2), ("a cat sits.", 3), ("b", 4), ("a dog", 5),
             ("a cat sits on", 6), ("a dog", 7)]
    out = filter_candidates(cands, original=" a cat sits on ")
    # "abcd" < 5 chars, "b" too, duplicate "a cat sits." keeps label 1, original dropped, "a dog" once
    assert out == [("a cat sits.", 1), ("a dog", 5)]


def test_sample_capped_keeps_all_when_small_and_consumes_no_randomness() -> None:
    rng = np.random.default_rng(42)
    assert sample_capped([1, 2, 3], 6, rng) == [1, 2, 3]
    assert rng.integers(1 << 30) == np.random.default_rng(42).integers(1 << 30)


def test_sample_capped_is_the_documented_numpy_draw() -> None:
    items = list("abcdefgh")
    expected_idx = np.sort(np.random.default_rng(42).choice(8, size=6, replace=False))
    got = sample_capped(items, 6, np.random.default_rng(42))
    assert got == [items[i] for i in expected_idx]
    assert len(set(got)) == 6


def test_make_paraphrases_caps_at_six_and_never_returns_the_original() -> None:
    cap = "A man holding a kite on a beach."
    paras = make_paraphrases(cap, np.random.default_rng(42))
    assert len(paras) == 6
    texts = [p.text for p in paras]
    assert cap not in texts and len(set(texts)) == 6
    # without the cap: 8 templates (the "{c}" one is the original) + passive + pp_front + discourse
    everything = make_paraphrases(cap, np.random.default_rng(0), k_same=100)
    assert [p.rule for p in everything] == [*SIMPLE_TEMPLATES[:3], *SIMPLE_TEMPLATES[4:],
                                            "passive", "pp_front", "discourse"]
    assert {p.kind for p in everything[:8]} == {"simple"} and {p.kind for p in everything[8:]} == {"advanced"}


def test_make_paraphrases_is_deterministic_for_a_seed() -> None:
    cap = "A cat sitting on a small table near a window."
    a = make_paraphrases(cap, np.random.default_rng(42))
    b = make_paraphrases(cap, np.random.default_rng(42))
    assert a == b


def test_empty_caption_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty caption"):
        paraphrase_candidates("   ")


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        ("A man holding a kite on a beach.", "A kite being held by a man on a beach."),
        ("A woman is holding an umbrella.", "An umbrella is being held by a woman."),
        ("A man holds two bananas.", "Two bananas are held by a man."),
        ("The young man in jeans is throwing a Frisbee.",
         "A Frisbee is being thrown by the young man in jeans."),
        # plural objects take "are" (a plural head noun after "the"; "glass" is not plural)
        ("Some kids are eating the pizzas.", "The pizzas are being eaten by some kids."),
        ("A dog chases the cats in a park.", "The cats are chased by a dog in a park."),
        ("A man holds the glass.", "The glass is held by a man."),
        ("A girl riding a bike next to a car.", "A bike being ridden by a girl next to a car."),
        # a trailing clause is not a locative phrase
        ("Two dogs chasing a ball while running.", None),
        # a trailing non-locative phrase could change attachment: no passive
        ("A man riding a horse with a dog.", None),
        # no determiner-led object
        ("A man riding skis.", None),
        # subject is a clause, not a noun phrase
        ("A person sits holding a cup.", None),
        ("A BIPLANE AND A SMALL BOAT", None),
    ],
)
def test_passive_voice(caption: str, expected: str | None) -> None:
    assert passive_voice(caption) == expected


def test_passive_keeps_every_content_word() -> None:
    cap = "A man riding a snowboard down a snowy slope."
    out = passive_voice(cap)
    assert out is not None
    before = set(re.findall(r"\w+", cap.lower())) - {"riding"}
    after = set(re.findall(r"\w+", out.lower())) - {"ridden", "being", "by"}
    assert before == after


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        ("A man standing in front of a mirror in a room.", "In a room, a man standing in front of a mirror."),
        ("Sheep are standing in the snow behind a wire fence.",
         "Behind a wire fence, sheep are standing in the snow."),
        ("A man is in a kitchen.", None),  # would strand the copula
        ("A polar bear standing on a large rock with its mouth open.", None),
    ],
)
def test_front_prepositional_phrase(caption: str, expected: str | None) -> None:
    assert front_prepositional_phrase(caption) == expected


def test_front_while_clause_and_discourse_marker() -> None:
    assert front_while_clause("Two people wearing helmets while riding their motorcycles.") == \
        "While riding their motorcycles, two people wearing helmets."
    assert front_while_clause("A dog runs.") is None
    assert discourse_marker("A man on skis.") == "In the image, a man on skis."


def test_synonym_swap_fixes_articles_and_skips_proper_nouns() -> None:
    syn = usable_synonyms(LGIP_VOCABULARIES.values())
    assert synonym_swap("A large jet in a cloudy sky.", syn) == "A big jet in an overcast sky."
    assert synonym_swap("Large dogs.", syn) == "Big dogs."
    assert synonym_swap("The Little Mermaid statue.", syn) is None


def test_synonym_table_never_touches_flip_vocabulary() -> None:
    """App. A.1(ii) 2: synonym keys and values exclude every colour, number and object word."""
    flip_words = {w for words in LGIP_VOCABULARIES.values() for w in words}
    used = {w.lower() for pair in SYNONYM_TABLE.items() for w in pair}
    assert used.isdisjoint(flip_words)


def test_synonyms_touching_a_custom_vocabulary_are_removed() -> None:
    world = {"size": ("small", "large"), "color": ("red", "blue")}
    syn = usable_synonyms(world.values())
    # keys and values: "little"->"small" and "big"->"large" go too
    assert {"small", "large", "little", "big"}.isdisjoint(syn)
    assert "huge" in syn
    cap = "A small red square next to a little circle."
    paras = make_paraphrases(cap, np.random.default_rng(0), k_same=100, vocabularies=world)
    for p in paras:
        assert re.findall(r"\b(?:small|large|red|blue)\b", p.text) == ["small", "red"], p


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", "man", "dog", "holding", "small", "on", "the", "red", "kite",
                                 "in", "front", "of", "two", "while", "is", "big", "cat"]),
                min_size=1, max_size=12))
def test_advanced_rules_never_change_a_flip_word(words: list[str]) -> None:
    """Whatever the caption, every flip-vocabulary word keeps its count in every paraphrase."""
    cap = " ".join(words).capitalize() + "."
    flip_words = [w for ws in LGIP_VOCABULARIES.values() for w in ws]
    for p in make_paraphrases(cap, np.random.default_rng(0), k_same=100, vocabularies=LGIP_VOCABULARIES):
        for w in flip_words:
            assert len(re.findall(rf"\b{w}\b", p.text.lower())) == len(re.findall(rf"\b{w}\b", cap.lower()))


def test_tagging_by_markers_is_the_paper_rule() -> None:
    assert tag_paraphrase("A PHOTO OF a dog") == "simple"
    assert tag_paraphrase("In this image, a dog") == "simple"
    # templates 5 and 6 carry no App. A.1 marker: tagged advanced by the string rule
    assert tag_paraphrase("a dog in the scene") == "advanced"
    assert tag_paraphrase("a scene showing a dog") == "advanced"
    assert tag_paraphrase("In the image, a dog") == "advanced"
    assert len(LGIP_SIMPLE_MARKERS) == 6


def test_provenance_agrees_with_markers_except_templates_5_and_6(shared_data: Path) -> None:
    coco = shared_data / "coco-mini/annotations/captions_val2017.json"
    caps = [a["caption"] for a in json.loads(coco.read_text())["annotations"]]
    disagree = set()
    for cap in caps:
        if re.search("|".join(LGIP_SIMPLE_MARKERS), cap, re.IGNORECASE):
            continue  # a caption that itself says "a picture of" tags everything simple
        for p in make_paraphrases(cap, np.random.default_rng(0), k_same=100):
            if p.kind != tag_paraphrase(p.text):
                disagree.add(p.rule)
    assert disagree == {"{c} in the scene", "a scene showing {c}"}


def test_paraphrase_kinds_follow_the_paper_markers_by_default() -> None:
    """App. A.1 "Simple vs. advanced labels" (and the public script): simple iff a marker is in the string.
    Templates 5 and 6 are advanced; a rewrite of a caption that says "a picture of" is simple."""
    texts = ["a photo of a dog", "A dog in the scene", "a scene showing a dog", "A dog is seen",
             "A picture of a dog is shown"]
    provenance: list[str | None] = ["simple", "simple", "simple", "advanced", "advanced"]
    assert PARAPHRASE_LABELS == ("markers", "provenance")
    assert paraphrase_kinds(texts, provenance) == ["simple", "advanced", "advanced", "advanced", "simple"]
    assert paraphrase_kinds(texts, provenance, "provenance") == provenance
    # without provenance (an LGIP JSONL string) the provenance labelling falls back to the markers
    assert paraphrase_kinds(["In the picture, a dog", "a dog lies"], [None, None], "provenance") == [
        "simple", "advanced"]


def test_paraphrase_kinds_refuse_what_they_cannot_label() -> None:
    with pytest.raises(ValueError, match="provenance labels"):
        paraphrase_kinds(["a dog"], [])
    with pytest.raises(ValueError, match="unknown paraphrase labels"):
        paraphrase_kinds(["a dog"], ["simple"], "rule")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'passive'"):
        paraphrase_kinds(["a dog"], ["passive"], "provenance")


def test_marker_labels_on_coco_mini_move_templates_5_and_6(shared_data: Path) -> None:
    """On COCO-MINI's captions (one seed-42 stream, K_same = 6) a template is relabelled advanced only when
    it is template 5 or 6; the only other change is a rewrite of a caption that carries a marker itself
    (advanced -> simple)."""
    coco = shared_data / "coco-mini/annotations/captions_val2017.json"
    caps = [a["caption"] for a in json.loads(coco.read_text())["annotations"]]
    rng = np.random.default_rng(42)
    paras = [q for cap in caps for q in make_paraphrases(cap, rng)]
    kinds = paraphrase_kinds([q.text for q in paras], [q.kind for q in paras])
    moved = {(q.kind, k) for q, k in zip(paras, kinds, strict=True) if q.kind != k}
    assert ("simple", "advanced") in moved and moved <= {("simple", "advanced"), ("advanced", "simple")}
    for q, k in zip(paras, kinds, strict=True):
        if q.kind == "simple" and k == "advanced":
            assert q.rule in ("{c} in the scene", "a scene showing {c}")
