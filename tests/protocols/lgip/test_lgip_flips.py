"""LGIP semantic flips (App. A.2), combined flips (Table 3) and the seeded end-to-end generation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithtests.protocols.lgip.flips import (
    LGIP_VOCABULARIES,
    count_change,
    flip_one,
    make_combined_flips,
    make_flips,
)
from faithtests.protocols.lgip.jsonl import load_lgip_jsonl
from faithtests.protocols.lgip.paraphrase import Paraphrase
from faithtests.protocols.lgip.perturb import (
    PerturbConfig,
    coverage,
    pairs_from_lgip_record,
    perturb_captions,
    perturbation_pairs,
)


def test_vocabularies_are_appendix_a2() -> None:
    assert len(LGIP_VOCABULARIES["color"]) == 11
    assert LGIP_VOCABULARIES["number"] == ("one", "two", "three", "four", "five")
    assert len(LGIP_VOCABULARIES["object"]) == 11
    assert list(LGIP_VOCABULARIES) == ["color", "number", "object"]


def test_flip_one_replaces_only_the_first_match_with_the_drawn_other_word() -> None:
    words = ("red", "blue", "green")
    cap = "a red car next to a red bus"
    # the draw: one rng.integers(2) over the others ("blue", "green")
    expected = ("blue", "green")[int(np.random.default_rng(7).integers(2))]
    out = flip_one(cap, words, np.random.default_rng(7))
    assert out == (f"a {expected} car next to a red bus", "red", expected)


def test_flip_one_is_whole_word_and_case_sensitive_by_default() -> None:
    rng = np.random.default_rng(0)
    assert flip_one("a reddish boat", ("red", "blue"), rng) is None  # no partial-word match
    assert flip_one("Two dogs", ("one", "two"), rng) is None  # public code: case-sensitive
    assert flip_one("Two dogs", ("one", "two"), rng, ignore_case=True) == ("One dogs", "Two", "one")
    assert flip_one("TWO dogs", ("one", "two"), rng, ignore_case=True) == ("ONE dogs", "TWO", "one")


def test_make_flips_one_per_type_in_vocabulary_order() -> None:
    cap = "A red bus and two dogs near a blue car."
    flips = make_flips(cap, np.random.default_rng(42))
    assert [f.flip_type for f in flips] == ["color", "number", "object"]
    color, number, obj = flips
    assert color.original_word == "red" and color.text.replace(color.new_word, "red", 1) == cap
    assert number.original_word == "two" and number.new_word in {"one", "three", "four", "five"}
    assert obj.original_word == "bus"  # first object word in the caption, not "car"
    assert all(f.source == cap for f in flips)
    for f in flips:  # exactly one word differs
        diff = [(a, b) for a, b in zip(cap.split(), f.text.split(), strict=True) if a != b]
        assert len(diff) == 1


def test_make_flips_dedupes_keeping_first_type_and_drops_short() -> None:
    vocab = {"a": ("x", "y"), "b": ("x", "y")}  # both types flip "x" -> "y": identical strings
    flips = make_flips("an x here", np.random.default_rng(0), vocabularies=vocab)
    assert [(f.text, f.flip_type) for f in flips] == [("an y here", "a")]
    assert make_flips("x", np.random.default_rng(0), vocabularies=vocab) == ()  # "y" < 5 chars


def test_make_flips_caps_at_k_diff() -> None:
    vocab = {f"t{i}": (f"w{i}", f"v{i}") for i in range(9)}
    cap = " ".join(f"w{i}" for i in range(9))
    flips = make_flips(cap, np.random.default_rng(42), vocabularies=vocab)
    assert len(flips) == 6 and len({f.flip_type for f in flips}) == 6


def test_bad_vocabularies_are_rejected() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        make_flips("a red car", np.random.default_rng(0), vocabularies={"color": ("red",)})
    with pytest.raises(ValueError, match="duplicate"):
        make_flips("a red car", np.random.default_rng(0), vocabularies={"color": ("red", "Red")})
    with pytest.raises(ValueError, match="empty caption"):
        make_flips("  ", np.random.default_rng(0))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([*LGIP_VOCABULARIES["color"][:3], *LGIP_VOCABULARIES["object"][:3],
                                 "two", "a", "near", "the"]), min_size=1, max_size=10),
       st.integers(0, 2**31))
def test_every_flip_changes_exactly_one_vocabulary_word_to_another_of_its_type(words: list[str],
                                                                              seed: int) -> None:
    cap = " ".join(words)
    for f in make_flips(cap, np.random.default_rng(seed)):
        vocab = LGIP_VOCABULARIES[f.flip_type]
        assert f.original_word in vocab and f.new_word in vocab and f.new_word != f.original_word
        i = cap.split().index(f.original_word)
        assert f.text.split() == [*cap.split()[:i], f.new_word, *cap.split()[i + 1 :]]


def test_combined_flips_flip_the_paraphrase_and_keep_the_type() -> None:
    cap = "A dog on a red couch."
    paras = (Paraphrase("a photo of A dog on a red couch.", "simple", "a photo of {c}"),
             Paraphrase("On a red couch, a dog.", "advanced", "pp_front"))
    comb = make_combined_flips(cap, paras, np.random.default_rng(1))
    assert len(comb) == 4  # 2 paraphrases x (color, object), cap 6 not reached
    for c in comb:
        assert c.flip.source == c.paraphrase.text
        assert c.text != cap and c.flip_type in {"color", "object"}
    assert [c.flip_type for c in comb] == ["color", "object", "color", "object"]


def test_perturb_captions_is_reproducible_and_streams_are_independent() -> None:
    caps = ["A red bus on a street.", "Two cats on a bed.", "A man holding a kite on a beach."]
    a = perturb_captions(caps)
    assert a == perturb_captions(caps)
    no_comb = perturb_captions(caps, config=PerturbConfig(combined=False))
    assert [(x.paraphrases, x.flips) for x in a] == [(x.paraphrases, x.flips) for x in no_comb]
    assert all(x.combined == () for x in no_comb)
    with pytest.raises(ValueError, match="caption #1 is empty"):
        perturb_captions(["A dog.", " "])


def test_perturb_captions_draw_order_is_the_public_code_order() -> None:
    """Per caption: paraphrase cap draw, then one draw per matched flip type, on one stream."""
    caps = ["A red bus on a street.", "A blue car near a dog."]
    out = perturb_captions(caps, config=PerturbConfig(combined=False))
    rng = np.random.default_rng(42)
    from faithtests.protocols.lgip.paraphrase import make_paraphrases

    for cap, got in zip(caps, out, strict=True):
        assert make_paraphrases(cap, rng, vocabularies=LGIP_VOCABULARIES) == got.paraphrases
        assert make_flips(cap, rng) == got.flips


def test_coverage_on_coco_mini(shared_data: Path) -> None:
    coco = shared_data / "coco-mini/annotations/captions_val2017.json"
    caps = [a["caption"] for a in json.loads(coco.read_text())["annotations"]]
    cov = coverage(perturb_captions(caps))
    assert cov["captions"] == 395
    assert cov["paraphrases_per_caption"] == 6.0  # >= 8 candidates for every caption
    assert cov["simple_per_caption"] + cov["advanced_per_caption"] == pytest.approx(6.0)
    # share with a flip of a type == captions where a lower-case vocabulary word occurs
    for t, words in LGIP_VOCABULARIES.items():
        pattern = re.compile(r"\b(" + "|".join(words) + r")\b")
        expected = sum(bool(pattern.search(c.strip())) for c in caps) / len(caps)
        assert cov[f"share_with_{t}_flip"] == pytest.approx(expected)
    assert cov["flips_per_caption"] == pytest.approx(
        cov["color_flips_per_caption"] + cov["number_flips_per_caption"] + cov["object_flips_per_caption"])


def test_perturbation_pairs_flatten_every_variant() -> None:
    (p,) = perturb_captions(["A red bus near a dog."])
    pairs = perturbation_pairs("img1", "7", p)
    fams = [q.family for q in pairs]
    assert fams.count("paraphrase") == len(p.paraphrases) == 6
    assert fams.count("flip") == len(p.flips) == 2 and fams.count("combined") == len(p.combined)
    assert all(q.caption == "A red bus near a dog." and q.image_id == "img1" for q in pairs)
    flips = [q for q in pairs if q.family == "flip"]
    assert [q.label for q in flips] == ["color", "object"] and flips[0].rule.startswith("red->")


def test_pairs_from_an_lgip_file_tag_paraphrases_by_marker() -> None:
    fixture = Path(__file__).parent / "lgip_small.jsonl"
    res = load_lgip_jsonl(fixture, check_images=False)
    pairs = pairs_from_lgip_record(res.records[0])
    paras = [(q.caption_id, q.label) for q in pairs if q.family == "paraphrase"]
    assert paras == [("0", "simple"), ("0", "advanced"), ("1", "simple")]
    assert [q.label for q in pairs if q.family == "flip"] == ["color", "number", "object"]


@pytest.mark.parametrize(("rule", "want"), [
    ("two->three", (2, 3)), ("Three->one", (3, 1)), ("simple+four->two", (4, 2)),  # a combined flip's rule
    ("red->blue", None), ("file", None), ("two->two", None), ("two->dog", None),
])
def test_count_change_reads_the_count_pair_of_a_number_flip(rule: str, want: tuple[int, int] | None) -> None:
    assert count_change(rule) == want


def test_number_flips_name_the_count_pair_in_their_rule() -> None:
    """What the flip suite's count-pair slices read: every number flip's rule gives (true, flipped)."""
    flips = make_flips("three red dogs and a car", np.random.default_rng(42))
    (number,) = [f for f in flips if f.flip_type == "number"]
    pair = count_change(f"{number.original_word}->{number.new_word}")
    assert pair is not None and pair[0] == 3 and pair[1] in (1, 2, 4, 5)
