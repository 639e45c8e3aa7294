"""The SPD-Faith judge: claim fragments, overall judgements skipped (App. B.2), unparseable fragments counted,
φ on type + category + attribute (Eq. 14), Eq. 15 literally, the world's grammar, the callable wrapper."""

from __future__ import annotations

import pytest
from PIL import Image

from faithtests.protocols.spdfaith.judge import (
    COCO_CATEGORIES,
    DeterministicJudge,
    Judge,
    JudgedClaim,
    Judgement,
    callable_judge,
    coco_judge,
    world_judge,
)
from faithtests.protocols.spdfaith.metrics import category_f1, dqr, drf, type_f1
from faithtests.protocols.spdfaith.records import SUBSETS, DiffRecord, EditTruth, Subset
from faithtests.protocols.spdfaith.stimuli import claims_text, pair_item, parse_claims

COCO = ["person", "car", "bus", "truck", "microwave", "oven", "bowl", "tv", "backpack", "dining table",
        "knife", "bench", "cup", "cell phone", "dog"]

# App. B.3, Figs. 41 and 42: the model responses (verbatim, with the figure's marks and bold)
FIG41 = """There are three differences between the images. ✓

First, the person walking in the crosswalk in the first image is removed in the second image. ✓

Second, the red car near the gas station in the first image is removed in the second image. ✗

Third, the dark car and white car in the background of the first image are removed in the second image. ✗"""
FIG42 = """There are three differences between the images.

First, the **microwave** above the stove is **removed** from the scene. ✓

Second, the **bowl** on the counter changes **color from brown to pink**. ✓

Third, the **TV** above the fireplace changes **color from green to black**. ✗"""


def _blank() -> tuple[Image.Image, Image.Image]:
    img = Image.new("RGB", (4, 4))
    return img, img


def record(*edits: EditTruth, item_id: str = "x") -> DiffRecord:
    subset: Subset = "identical" if not edits else ("single" if len(edits) == 1 else "multi")
    return DiffRecord(item_id, item_id, subset, None, tuple(edits), "coco", item_id, _blank)


def test_world_claims_text_is_judged_exactly_and_all_matched() -> None:
    """Every claim ``claims_text`` writes for 400 generated pairs (all subsets, multi up to 5 edits) parses
    to the edit's type, shape and new colour / place, agrees with the strict world parser, and matches
    its own edit: DRF 1, nothing unparseable."""
    judge = world_judge()
    items = [pair_item(7, i) for i in range(300)] + [pair_item(8, i, "multi", 5) for i in range(100)]
    assert {it.subset for it in items} == {"single", "multi", "identical"}
    hits = []
    for it in items:
        truth = tuple(EditTruth(e.type, e.category, e.new_colour or e.new_position, e.colour)
                      for e in it.edits)
        subset = next(s for s in SUBSETS if s == it.subset)
        rec = DiffRecord(it.item_id, it.item_id, subset, it.difficulty, truth, "world", it.item_id, it.images)
        text = claims_text(it.edits)
        j = judge(text, rec)
        assert j.unparseable == 0 and j.judge == "deterministic-v1"
        assert [(c.type, c.category, c.attribute) for c in j.claims] == [
            (e.type, e.category, e.new_colour or e.new_position) for e in it.edits]
        strict = parse_claims(text) if text else []
        assert [(c.type, c.category) for c in j.claims] == [(c.type, c.category) for c in strict]
        assert j.matched == tuple(range(len(it.edits)))
        hits.append(j.hits)
    got = drf(hits)
    assert got.value == 1.0 and got.n_no_claims == sum(it.subset == "identical" for it in items)


def test_fig41_and_fig42_are_extracted_as_the_paper_lists_them() -> None:
    """The judged types / categories equal the figures' bracketed extractions; DRF (Eq. 15) is 1/3 and
    2/3 as printed (the public bench's modifications carry type + category only, no attribute); TF1 is
    Eq. 10's 1/3 and 2/3 (the figures print 1/4, 3/5); CF1 1; DQR 1 (three claimed, three true)."""
    judge = coco_judge(COCO)
    r41 = record(EditTruth("remove", "person"), EditTruth("color", "car"), EditTruth("color", "car"))
    r42 = record(EditTruth("remove", "microwave"), EditTruth("color", "bowl"), EditTruth("remove", "tv"))
    j41, j42 = judge(FIG41, r41), judge(FIG42, r42)
    assert [(c.type, c.category) for c in j41.claims] == [("remove", "person"), ("remove", "car"),
                                                          ("remove", "car")]
    assert [(c.type, c.category, c.attribute) for c in j42.claims] == [
        ("remove", "microwave", None), ("color", "bowl", "pink"), ("color", "tv", "black")]
    assert j41.matched == (0, None, None) and j42.matched == (0, 1, None)
    assert [drf([j.hits]).value for j in (j41, j42)] == [pytest.approx(1 / 3), pytest.approx(2 / 3)]
    assert type_f1([j41.types], [[e.type for e in r41.edits]]) == pytest.approx(1 / 3)
    assert type_f1([j42.types], [[e.type for e in r42.edits]]) == pytest.approx(2 / 3)
    gold_categories = [[e.category for e in r.edits] for r in (r41, r42)]
    assert category_f1([j41.categories, j42.categories], gold_categories) == 1.0
    assert dqr([len(j41.claims), len(j42.claims)], [3, 3]).tolist() == [1.0, 1.0]
    assert j41.unparseable == j42.unparseable == 0


def test_a_stated_wrong_attribute_is_not_matched() -> None:
    """Eq. 14 with attributes: Fig. 42's ground truth says the bowl turned magenta; "brown to pink" is
    App. B.2's Attribute Error under exact names, so DRF drops to 1/3 (GPT-4o accepted it)."""
    r42 = record(EditTruth("remove", "microwave"), EditTruth("color", "bowl", "magenta", "yellow"),
                 EditTruth("remove", "tv"))
    assert coco_judge(COCO)(FIG42, r42).matched == (0, None, None)


@pytest.mark.parametrize(
    ("answer", "matched"),
    [
        ("the car turned red", (None,)),  # wrong colour stated
        ("the car turned blue", (0,)),
        ("the car changed colour", (0,)),  # no colour stated: not penalised
        ("The car is now a dark blue.", (0,)),
        ("the car next to the red bus changed color to blue", (0,)),
        ("the car was removed", (None,)),  # type confusion
        ("the bus turned blue", (None,)),  # type-category mismatch
    ],
)
def test_phi_eq14_colour(answer: str, matched: tuple[int | None, ...]) -> None:
    """Eq. 14: type and category must agree; a stated colour must equal the edit's."""
    assert coco_judge(COCO)(answer, record(EditTruth("color", "car", "blue", "red"))).matched == matched


@pytest.mark.parametrize(
    ("answer", "attribute", "matched"),
    [
        ("the cup moved to the right", "right", (None,)),
        ("the cup shifted leftwards", "left", (0,)),
        ("The cup moved from the right to the left.", "left", (0,)),
        ("the cup was moved to the top", "up", (None,)),
        ("the cup changed position", None, (0,)),
    ],
)
def test_phi_eq14_position_directions(
    answer: str, attribute: str | None, matched: tuple[int | None, ...]
) -> None:
    """COCO position edits state a direction (left / right / up / down); "to the top" reads as up."""
    j = coco_judge(COCO)(answer, record(EditTruth("position", "cup", "left")))
    assert (j.claims[0].type, j.claims[0].attribute, j.matched) == ("position", attribute, matched)


def test_overall_judgements_are_skipped_not_counted() -> None:
    """App. B.2 / Fig. 33: overall yes/no judgements, vague statements and statements of sameness (Fig. 40's
    "... clothing are also identical") are not difference claims."""
    answer = ("Yes, they are different. There are three differences between the images. The images are "
              "not the same. They differ in several ways. Sure! Here are the differences: The background "
              "and the person's clothing are also identical in both images.")
    j = coco_judge(COCO)(answer, record(EditTruth("remove", "dog")))
    assert (j.claims, j.matched, j.unparseable) == ((), (), 0)
    assert drf([j.hits]).n_no_claims == 1


def test_unparseable_fragments_are_counted_never_guessed() -> None:
    """A claim without a readable type or category is kept (never matched) and counted."""
    answer = ("The lighting is darker in the second image. Something was removed. The car looks odd. "
              "The dog moved and was removed. The dog is missing.")
    j = coco_judge(COCO)(answer, record(EditTruth("remove", "dog")))
    assert [(c.type, c.category) for c in j.claims] == [
        (None, None), ("remove", None), (None, "car"), (None, "dog"), ("remove", "dog")]
    assert j.unparseable == 4 and j.matched == (None, None, None, None, 0)
    assert drf([j.hits]).value == pytest.approx(1 / 5)


def test_plural_aliases_possessives_and_longest_match() -> None:
    judge = DeterministicJudge(["table", "dining table", "person", "bus", "knife", "backpack", "cross"],
                               ["red", "blue", "green", "black"])
    cases = {
        "the buses were removed": ("remove", "bus"),
        "two people are missing": ("remove", "person"),
        "the knives are gone": ("remove", "knife"),
        "the dining tables moved to the left": ("position", "dining table"),
        "the person's backpack changed from black to green": ("color", "backpack"),
        "the man disappeared": ("remove", "person"),
        "a bus drove across the table and it was removed": ("remove", "bus"),  # "across" is not "cross"
    }
    for answer, want in cases.items():
        (claim,), _ = judge.parse(answer)
        assert (claim.type, claim.category) == want, answer


def test_a_colour_word_that_is_also_a_category_yields_to_the_object() -> None:
    """COCO has an "orange" category: "the orange car" is a car, "the orange" alone is the fruit."""
    judge = coco_judge()
    assert len(COCO_CATEGORIES) == len(set(COCO_CATEGORIES)) == 80
    (car,), _ = judge.parse("the orange car turned blue")
    (fruit,), _ = judge.parse("the orange was removed")
    assert (car.category, car.attribute, fruit.category) == ("car", "blue", "orange")


def test_for_records_picks_the_vocabulary_and_widens_it_by_the_records() -> None:
    """World records get the world's shapes and places; other sources COCO's 80 categories, common colours
    and shift directions, plus any category or attribute a record names (no vocabulary error later)."""
    it = pair_item(7, 2)
    truth = tuple(EditTruth(e.type, e.category, e.new_colour or e.new_position) for e in it.edits)
    world = DiffRecord(it.item_id, it.item_id, "single", it.difficulty, truth, "world", "w", it.images)
    assert DeterministicJudge.for_records([world])(claims_text(it.edits), world).hits == (True,)
    odd = record(EditTruth("color", "zebra", "chartreuse"))
    j = DeterministicJudge.for_records([odd], name="coco-judge")
    got = j("the zebra is now chartreuse; the giraffe moved up", odd)
    assert got.matched == (0, None) and got.judge == "coco-judge"
    assert got.claims[1].attribute == "up"


def test_enumerators_and_separators() -> None:
    answer = ("Here are the differences:\n1. The car turned red\n2) the bus was removed 3) the dog moved\n"
              "- **Difference 4:** the truck is missing; Firstly, the cup moved to the left\n"
              "Finally the knife was removed.")
    claims, unparseable = coco_judge(COCO).parse(answer)
    assert [(c.type, c.category) for c in claims] == [
        ("color", "car"), ("remove", "bus"), ("position", "dog"), ("remove", "truck"), ("position", "cup"),
        ("remove", "knife")]
    assert unparseable == 0
    assert claims[0].text == "The car turned red" and claims[4].text == "the cup moved to the left"


def test_fig39_left_right_colour_contrast() -> None:
    """Fig. 39's phrasing: the new colour is the one stated for the right image."""
    answer = ("The two pictures are almost identical, but there is a difference in the color of the truck. "
              "In the left image, the truck is blue, while in the right image, the truck is red.")
    claims, _ = coco_judge(COCO).parse(answer)
    assert [(c.type, c.category, c.attribute) for c in claims] == [("color", "truck", None),
                                                                    ("color", "truck", "red")]


def test_eq15_literal_two_claims_may_match_one_edit() -> None:
    """Eq. 15 takes max_j φ per claim: a repeated claim counts twice (DRF 1); ``matched`` prefers an edit
    no earlier claim took, so two cars recoloured are both covered."""
    judge = coco_judge(COCO)
    one = judge("the car was removed; the car is missing", record(EditTruth("remove", "car")))
    assert one.matched == (0, 0) and drf([one.hits]).value == 1.0
    two = judge("the car turned blue; the car changed colour",
                record(EditTruth("color", "car", "blue"), EditTruth("color", "car", "red")))
    assert two.matched == (0, 1)


def test_records_outside_the_vocabulary_raise() -> None:
    judge = coco_judge(COCO)
    with pytest.raises(ValueError, match="category 'zebra' outside"):
        judge("the zebra was removed", record(EditTruth("remove", "zebra")))
    with pytest.raises(ValueError, match="attribute 'chartreuse' outside"):
        judge("the car turned green", record(EditTruth("color", "car", "chartreuse")))


def test_callable_judge_stamps_its_name_and_validates() -> None:
    def fn(answer: str, rec: DiffRecord) -> Judgement:
        return Judgement((JudgedClaim("remove", "dog", None, answer),), (0,), 0, "whatever")

    judge: Judge = callable_judge(fn, "my-llm-judge")
    rec = record(EditTruth("remove", "dog"))
    got = judge("the dog is gone", rec)
    assert judge.name == "my-llm-judge" and got.judge == "my-llm-judge" and got.hits == (True,)

    def out_of_range(answer: str, rec: DiffRecord) -> Judgement:
        return Judgement((JudgedClaim("remove", "dog", None, answer),) * 2, (0, 3), 0, "j")

    with pytest.raises(ValueError, match="claim 1 matched edit 3 but x has 1 edit"):
        callable_judge(out_of_range, "bad")("text", rec)
    with pytest.raises(TypeError, match="not a Judgement"):
        callable_judge(lambda a, r: {"claims": []}, "bad")("text", rec)  # type: ignore[arg-type, return-value]
    with pytest.raises(ValueError, match="needs a name"):
        callable_judge(fn, " ")


def test_judgement_and_claim_invariants() -> None:
    claim = JudgedClaim("color", "car", "red", "the car turned red")
    with pytest.raises(ValueError, match="1 claims but 2 match entries"):
        Judgement((claim,), (0, None), 0, "j")
    with pytest.raises(ValueError, match="unparseable must be >= 0"):
        Judgement((claim,), (0,), -1, "j")
    with pytest.raises(ValueError, match="unknown claim type 'recolour'"):
        JudgedClaim("recolour", "car", None, "x")
    j = Judgement((claim, JudgedClaim(None, "bus", None, "the bus")), (0, None), 1, "j")
    assert (j.types, j.categories, j.hits) == (("color",), ("car", "bus"), (True, False))
    judge: Judge = world_judge()  # the deterministic judge is a Judge
    assert judge.name == "deterministic-v1"
    with pytest.raises(ValueError, match="non-empty"):
        DeterministicJudge([], ["red"])


@pytest.mark.parametrize(
    ("answer", "matched"),
    [
        ("the red car was removed", (0,)),
        ("the green car was removed", (None,)),  # names another object: not grounded by this edit
        ("the car changed colour from green to blue", (None,)),
        ("the car changed colour from red to blue", (1,)),
        ("the car was removed", (0,)),  # no colour stated: not penalised
    ],
)
def test_phi_eq14_the_object_named_before_the_edit(answer: str, matched: tuple[int | None, ...]) -> None:
    """Eq. 14 identifies the object: where the claim and the ground truth both give the object's colour
    before the edit ("the red car"), they must agree (world scenes hold several objects of one shape)."""
    r = record(EditTruth("remove", "car", None, "red"), EditTruth("color", "car", "blue", "red"))
    assert coco_judge(COCO)(answer, r).matched == matched
