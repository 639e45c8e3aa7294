"""S3E record construction and degenerate-record filtering (S3E Eq. 11, Table 3, App. B)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithtests.data.loaded import AROItem, ImageRef, OrderItem, WinogroundItem
from faithtests.data.sugarcrepe import load_sugarcrepe_split
from faithtests.protocols.s3e.records import S3ERecord
from faithtests.protocols.s3e.roles import (
    RoleSource,
    build_s3e_records,
    candidate_rewrite,
    clean_caption,
    default_lexical,
    first_of,
    normalize_caption,
    role_source,
    template_rewrite,
)
from faithtests.protocols.s3e.sources import (
    from_aro,
    from_coco_order,
    from_sugarcrepe,
    from_winoground,
    stress_type_for,
)


def _src(i: int, image: str | None = None, **kw: str | None) -> RoleSource:
    base: dict[str, str | None] = dict(
        item_id=f"x/{i}",
        image_ref=image or f"img{i}.jpg",
        c_pos=f"a red cube number {i}",
        c_stress=f"a blue cube number {i}",
        stress_type="attribute",
        source="world",
    )
    base.update(kw)
    return RoleSource(**base)  # type: ignore[arg-type]


def test_stress_types_from_split_names() -> None:
    assert stress_type_for("sugarcrepe", "replace_obj") == "object"
    assert stress_type_for("sugarcrepe", "swap_obj") == "object"
    assert stress_type_for("sugarcrepe", "add_obj") == "object"
    assert {stress_type_for("sugarcrepe", s) for s in ("replace_att", "swap_att", "add_att")} == {"attribute"}
    assert stress_type_for("sugarcrepe", "replace_rel") == "relation"
    assert stress_type_for("aro", "VG-Relation") == "relation"
    assert stress_type_for("aro", "relation") == "relation"  # AROItem.subset spelling
    assert stress_type_for("aro", "VG_Attribution") == "attribute"
    assert stress_type_for("aro", "COCO_Order") == "compositional"
    assert stress_type_for("winoground") == "compositional"
    with pytest.raises(ValueError, match="unknown source/split"):
        stress_type_for("sugarcrepe", "replace_color")


def test_template_rewrite_default_rule() -> None:
    rw = template_rewrite(("In this photo, {caption}.",))
    rng = np.random.default_rng(0)
    assert rw("A dog runs on the beach.", rng) == "In this photo, a dog runs on the beach."
    assert rw("TV on a table", rng) == "In this photo, TV on a table."  # acronyms keep their case
    assert rw("  . ", rng) is None  # nothing to rewrite -> the item is excluded, not guessed
    with pytest.raises(ValueError, match="caption"):
        template_rewrite(("no slot",))


def test_default_lexical_prefers_synonym_then_structure_then_template() -> None:
    lex = default_lexical()
    rng = np.random.default_rng(0)
    # word-level synonym rewrite (paraphrase.SYNONYM_TABLE: small -> little)
    assert lex("A tan toilet and sink combination in a small room.", rng) == (
        "A tan toilet and sink combination in a little room."
    )
    # no synonym: a structural rewrite (PP fronting)
    assert lex("cars are stopped at a traffic light on a highway", rng) == (
        "On a highway, cars are stopped at a traffic light"
    )
    # neither applies: a discourse-marker template
    assert lex("zebras", rng) in {"As shown here, zebras.", "Pictured here: zebras."}


def test_candidate_rewrite_and_first_of() -> None:
    def cands(c: str) -> list[tuple[str, tuple[str, str]]]:
        return [(c, ("simple", "{c}")), ("x " + c, ("advanced", "b")), ("y " + c, ("advanced", "b"))]

    rng = np.random.default_rng(0)
    # rule "a" never fires; rule "b" gives two candidates, one chosen by the rng; "{c}" equals the caption
    assert candidate_rewrite(cands, ("a", "b"))("cat", rng) in {"x cat", "y cat"}
    assert candidate_rewrite(cands, ("{c}",))("cat", rng) is None
    chain = first_of(candidate_rewrite(cands, ("a",)), template_rewrite(("T {caption}",)))
    assert chain("cat", rng) == "T cat"


def test_caption_normalisation() -> None:
    assert normalize_caption("  A  Cat.\n") == normalize_caption("a cat") == "a cat"
    assert clean_caption("A man and a woman playing a game\n") == "A man and a woman playing a game"


def test_build_records_hand_example_counts_every_exclusion() -> None:
    def no_lex(caption: str, rng: np.random.Generator) -> str | None:
        return None if "number 9" in caption else f"there is {caption}"

    sources = [
        _src(0),
        _src(1),
        _src(2, c_pos=""),  # missing_field:c_pos
        _src(3, c_stress="A red cube number 3."),  # identical after normalisation -> identical:c_pos=c_stress
        _src(0),  # duplicate_item_id (x/0 again)
        _src(5, stress_type="colour"),  # invalid_stress_type
        _src(6, c_rand="a green ball", rand_item_id="x/6", rand_image_ref="other.jpg"),  # random_same_item
        _src(7, c_rand="a green ball", rand_item_id="y/1", rand_image_ref="img7.jpg"),  # random_same_image
        _src(8, c_rand="a green ball"),  # preset random without provenance -> random_unverified
        _src(9),  # lexical rewrite fails -> no_lexical
        _src(10, c_pres="a red cube number 10", c_lex="there is a red cube number 10"),  # identical pos=pres
        _src(11, image="missing.jpg"),  # missing_image
    ]
    records, excluded = build_s3e_records(
        sources, seed=0, lexical=no_lex, image_exists=lambda ref: ref != "missing.jpg"
    )
    assert excluded == Counter(
        {
            "missing_field:c_pos": 1,
            "identical:c_pos=c_stress": 1,
            "duplicate_item_id": 1,
            "invalid_stress_type": 1,
            "random_same_item": 1,
            "random_same_image": 1,
            "random_unverified": 1,
            "no_lexical": 1,
            "identical:c_pos=c_pres": 1,
            "missing_image": 1,
        }
    )
    # the two survivors take each other's positive as their random negative
    assert [r.item_id for r in records] == ["x/0", "x/1"]
    r0, r1 = records
    assert r0.c_rand == r1.c_pos and r0.rand_item_id == "x/1" and r0.rand_image_ref == "img1.jpg"
    assert r1.c_rand == r0.c_pos
    assert (
        r0.c_pres == "In this photo, a red cube number 0."
        or r0.c_pres == "In this picture, a red cube number 0."
    )
    assert r0.c_lex == "there is a red cube number 0"
    assert r0.captions()["stress"] == "a blue cube number 0"


def test_random_negative_never_from_the_same_image() -> None:
    # three items on one image and one on another: the lone image's item is the only valid negative for
    # the three; the lone item can take any of the three.
    sources = [_src(0, image="a.jpg"), _src(1, image="a.jpg"), _src(2, image="a.jpg"), _src(3, image="b.jpg")]
    records, excluded = build_s3e_records(sources, seed=5)
    assert not excluded
    assert [r.rand_item_id for r in records[:3]] == ["x/3"] * 3
    assert records[3].rand_image_ref == "a.jpg"


def test_no_random_candidate_is_counted() -> None:
    records, excluded = build_s3e_records([_src(0, image="a.jpg"), _src(1, image="a.jpg")], seed=0)
    assert records == [] and excluded == Counter({"no_random_candidate": 2})


def test_random_within_source_by_default() -> None:
    sources = [_src(0), _src(1), _src(2, source="other"), _src(3, source="other")]
    records, _ = build_s3e_records(sources, seed=0)
    assert [r.rand_item_id for r in records] == ["x/1", "x/0", "x/3", "x/2"]
    # one item per source: within-source has no candidate; across sources each takes the other's c+
    pair = [_src(0), _src(1, source="other")]
    assert build_s3e_records(pair, seed=0)[1] == Counter({"no_random_candidate": 2})
    mixed, excluded = build_s3e_records(pair, seed=0, rand_within_source=False)
    assert not excluded and [r.rand_item_id for r in mixed] == ["x/1", "x/0"]


def test_sugarcrepe_real_split(shared_data: Path) -> None:
    SUGARCREPE, COCO_IMAGES = shared_data / "sugarcrepe", shared_data / "coco-mini/val2017"
    entries = json.loads((SUGARCREPE / "replace_rel.json").read_text())
    loaded = load_sugarcrepe_split(SUGARCREPE / "replace_rel.json", COCO_IMAGES, check_images=False)
    ss = from_sugarcrepe(loaded.records)
    records, excluded = build_s3e_records(ss.sources, seed=0)
    assert len(records) + sum(excluded.values()) == len(entries)
    first = records[0]
    assert first.item_id == "sugarcrepe/replace_rel/0" and first.stress_type == "relation"
    assert first.c_pos == clean_caption(entries["0"]["caption"])
    assert first.c_stress == clean_caption(entries["0"]["negative_caption"])
    assert first.image_ref == str(COCO_IMAGES / entries["0"]["filename"]) and first.source == "sugarcrepe"
    assert ss.images[first.item_id].path == COCO_IMAGES / entries["0"]["filename"]
    assert all(r.rand_image_ref != r.image_ref for r in records)
    assert all("\n" not in r.c_rand for r in records)  # SugarCrepe captions carry stray newlines


def test_aro_and_order_adapters() -> None:
    img = ImageRef(Path("vg/1.jpg"), box=(0.0, 0.0, 5.0, 5.0))
    rel = AROItem(
        "0", "relation", img, "the horse is eating the grass", "the grass is eating the horse", "eating"
    )
    att = AROItem(
        "1", "attribution", img, "the white dog and the black cat", "the black dog and the white cat", "x"
    )
    ss = from_aro([rel, att])
    assert [(s.item_id, s.stress_type, s.image_ref) for s in ss.sources] == [
        ("aro/relation/0", "relation", "vg/1.jpg"),
        ("aro/attribution/1", "attribute", "vg/1.jpg"),
    ]
    assert ss.images["aro/relation/0"].box == (0.0, 0.0, 5.0, 5.0)  # the crop travels with the item
    # two crops of one photo are one image: neither may be the other's random negative
    assert build_s3e_records(ss.sources, seed=0)[1] == Counter({"no_random_candidate": 2})
    order = OrderItem(
        "7/0", ImageRef(Path("coco/7.jpg")), "a man rides a horse", ("a horse rides a man",), ("swap",)
    )
    empty = OrderItem("7/1", ImageRef(Path("coco/7.jpg")), "a man on a horse", (), ())
    os_ = from_coco_order([order, empty], seed=0)
    assert os_.sources[0].c_stress == "a horse rides a man" and os_.sources[0].stress_type == "compositional"
    assert build_s3e_records(os_.sources, seed=0)[1]["missing_field:c_stress"] == 1


def test_winoground_pairs_give_two_records() -> None:
    old_young, young_old = "an old person kisses a young person", "a young person kisses an old person"
    item = WinogroundItem("0", ImageRef(Path("w/ex_0_img_0.png")), ImageRef(Path("w/ex_0_img_1.png")),
                          old_young, young_old, "Object", "", 1, "")  # fmt: skip
    ss = from_winoground([item])
    assert [(x.image_ref, x.c_pos, x.c_stress) for x in ss.sources] == [
        ("w/ex_0_img_0.png", old_young, young_old),
        ("w/ex_0_img_1.png", young_old, old_young),
    ]
    assert {x.stress_type for x in ss.sources} == {"compositional"}
    assert ss.images["winoground/0/1"].path == Path("w/ex_0_img_1.png")


def test_prebuilt_records_are_rechecked_unchanged() -> None:
    # preset roles are used as given; a valid record survives, a degenerate one is counted
    good = S3ERecord("w/0", "w/0", "two red squares", "red squares, two", "there are two red boxes",
                     "two blue squares", "one green circle", "attribute", "world", "w/1", "w/1")  # fmt: skip
    bad = S3ERecord("w/2", "w/2", "a cat", "a cat", "there is a cat", "a dog", "a cow", "object", "world",
                    "w/3", "w/3")  # fmt: skip
    records, excluded = build_s3e_records([role_source(good), role_source(bad)], seed=0)
    assert records == [good] and excluded == Counter({"identical:c_pos=c_pres": 1})


def test_deterministic_for_a_seed() -> None:
    sources = [_src(i, image=f"img{i % 7}.jpg") for i in range(40)]
    a, _ = build_s3e_records(sources, seed=11)
    b, _ = build_s3e_records(sources, seed=11)
    c, _ = build_s3e_records(sources, seed=12)
    assert a == b and a != c


words = st.sampled_from(["cat", "dog", "red", "blue", "on", "under", "a", "the"])
caption = st.lists(words, min_size=0, max_size=4).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(caption, caption, st.integers(0, 3)), min_size=0, max_size=12), st.integers(0, 99))
def test_invariants_on_random_pools(rows: list[tuple[str, str, int]], seed: int) -> None:
    sources = [
        RoleSource(f"i{k}", f"img{img}", pos, neg, "object", "s") for k, (pos, neg, img) in enumerate(rows)
    ]
    records, excluded = build_s3e_records(sources, seed=seed)
    assert len(records) + sum(excluded.values()) == len(sources)  # every item kept or counted once
    for r in records:
        assert isinstance(r, S3ERecord)
        texts = [normalize_caption(t) for t in r.captions().values()]
        assert len(set(texts)) == 5 and all(texts)  # five distinct, non-empty roles
        assert r.rand_image_ref != r.image_ref and r.rand_item_id != r.item_id
