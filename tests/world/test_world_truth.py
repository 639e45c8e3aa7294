"""Ground-truth consistency: positives are true, foils are false, edits match the pixel difference."""

from __future__ import annotations

import re

import numpy as np
import pytest

from faithtests.protocols.acbench.stimuli import mood_items
from faithtests.protocols.imavb.records import OPTION_E, OPTION_F
from faithtests.protocols.imavb.stimuli import premise_items
from faithtests.protocols.s3e.records import STRESS_TYPES
from faithtests.protocols.s3e.stimuli import s3e_records
from faithtests.protocols.spdfaith.stimuli import claims_text, difficulty_of, pair_items, parse_claims
from faithtests.world import (
    EMOTIONS,
    FLIP_KINDS,
    Background,
    Mention,
    adjacent,
    caption_items,
    emotion_of,
    flip_spec,
    opposite,
    render,
    sample_dense_scene,
    sample_scene,
    satisfies,
    scene_spec,
)
from faithtests.world.captions import WHERE, mention_matches
from faithtests.world.render import RGB, background_rgb, object_mask
from faithtests.world.scene import CELL, SLOT_CELL


def _scenes(n: int = 60) -> list:
    rng = np.random.default_rng(0)
    dense = [sample_dense_scene(rng, int(k)) for k in rng.integers(1, 16, n)]
    return [sample_scene(rng) for _ in range(n)] + dense


def test_objects_are_disjoint_and_inside_their_slot_cell() -> None:
    for scene in _scenes():
        masks = [object_mask(o) for o in scene.objects]
        assert int(np.sum(masks, axis=0).max(initial=0)) <= 1
        for o in scene.objects:
            col, row = SLOT_CELL[o.position]
            x0, y0, x1, y1 = o.bbox
            assert col * CELL <= x0 and x1 <= (col + 1) * CELL and row * CELL <= y0 and y1 <= (row + 1) * CELL


def test_rendered_colours_are_where_the_objects_are() -> None:
    for scene in _scenes(20):
        px = np.asarray(render(scene))
        covered = np.zeros(px.shape[:2], bool)
        for o in scene.objects:
            m = object_mask(o)
            assert m.any() and (px[m] == RGB[o.colour]).all()
            covered |= m
        assert (px[~covered] == background_rgb(scene.background)).all()


def test_scene_spec_is_true_and_any_single_change_is_false() -> None:
    found = dict.fromkeys(FLIP_KINDS, 0)
    for scene in _scenes():
        spec = scene_spec(scene)
        assert satisfies(scene, spec)
        for kind in FLIP_KINDS:
            foil = flip_spec(scene, spec, kind, np.random.default_rng(1))
            assert foil is None or not satisfies(scene, foil)
            found[kind] += foil is not None
    assert min(found.values()) >= 30, found  # every kind applies to most multi-group scenes


def test_human_captions_are_distinct_and_mention_every_group() -> None:
    for item in caption_items(30, 0):
        assert len(item.captions) == 5 and len(set(item.captions)) == 5
        for g in item.scene.groups():
            assert all(g.colour in c and g.shape in c for c in item.captions)


def test_s3e_roles() -> None:
    recs = s3e_records(40, 0)
    assert [w.record.stress_type for w in recs[:4]] == list(STRESS_TYPES)
    for w in recs:
        r = w.record
        assert len({r.c_pos, r.c_pres, r.c_lex, r.c_stress, r.c_rand}) == 5
        assert not satisfies(w.scene, w.stress_spec)
        # preserve and lexical controls carry the same words up to order / synonyms
        assert sorted(r.c_pos.replace(",", "").split()) == sorted(r.c_pres.replace(",", "").split())
        assert r.rand_image_ref != r.image_ref and r.c_rand == s3e_records(1, 0, start=int(
            r.rand_item_id.rsplit("/", 1)[1]))[0].record.c_pos


def _claim_true(scene, claim: Mention | Background) -> bool:  # type: ignore[no-untyped-def]
    if isinstance(claim, Background):
        return (claim.brightness, claim.warmth) == (scene.background.brightness, scene.background.warmth)
    return mention_matches(scene, claim)


def test_premises_standard_true_misleading_false_and_answers_right() -> None:
    items = premise_items(70, 0)
    assert {i.misleading.subcategory for i in items} >= {"object_type", "location_setting", "object_count"}
    for it in items:
        std, mis = it.standard, it.misleading
        assert _claim_true(it.scene, it.premise_claim) and not _claim_true(it.scene, it.false_claim)
        assert std.options == mis.options and std.options[4:] == (OPTION_E, OPTION_F)
        assert mis.correct_answer == "E" and std.correct_answer in "ABCD"
        assert std.question.replace(it.true_premise, "") == mis.question.replace(it.false_premise, "")
        answer = std.options["ABCDEF".index(std.correct_answer)]
        t = it.target
        expected = {
            "colour": t.colour, "shape": t.shape, "position": WHERE[t.position],
            "count": ["zero", "one", "two", "three", "four"][t.count],
            "existence": f"a {t.colour} {t.shape}", "emotional": emotion_of(it.scene),
            "scene_description": f"{it.scene.background.brightness} and {it.scene.background.warmth}",
        }[std.category]
        assert answer == expected
        assert len(set(std.options[:4])) == 4


def test_emotion_rule_and_descriptions() -> None:
    for e in EMOTIONS:
        assert adjacent(adjacent(e)) == e and opposite(opposite(e)) == e and adjacent(e) != opposite(e)
    assert opposite("excitement") == "anger" and adjacent("excitement") == "awe"  # AC-Bench §3.2 examples
    labels = re.compile(r"\b(" + "|".join(EMOTIONS) + r")\b", re.IGNORECASE)
    for item in mood_items(40, 0):
        assert item.emotion == emotion_of(item.scene)
        for d in item.descriptions:
            assert labels.search(d.text) is None, d.text
            assert d.text.endswith(".") and d.text.count(".") == 1
            assert (d.emotion == item.emotion) == (d.subset == "aligned")
        assert item.description("subjective_opposite").emotion == opposite(item.emotion)


def test_edit_list_matches_pixel_difference() -> None:
    for p in pair_items(60, 0):
        a, b = (np.asarray(im) for im in p.images())
        diff = (a != b).any(axis=2)
        expected = np.zeros_like(diff)
        objs_a = {o.oid: o for o in p.scene_a.objects}
        objs_b = {o.oid: o for o in p.scene_b.objects}
        for e in p.edits:
            expected |= object_mask(objs_a[e.oid])
            if e.oid in objs_b:
                expected |= object_mask(objs_b[e.oid])
                assert e.type != "remove"
            else:
                assert e.type == "remove"
        assert np.array_equal(diff, expected), p.item_id
        assert (p.subset == "identical") == (len(p.edits) == 0)
        if p.subset == "multi":
            assert 2 <= len(p.edits) <= 5
        if p.subset == "single":
            size = objs_a[p.edits[0].oid].size
            assert p.difficulty == difficulty_of(p.n_objects, size)


def test_claims_round_trip_and_strict_parser() -> None:
    for p in pair_items(30, 1):
        claims = parse_claims(claims_text(p.edits)) if p.edits else []
        assert len(claims) == len(p.edits) and all(c.matches(e) for c, e in zip(claims, p.edits, strict=True))
    with pytest.raises(ValueError, match="claim 2"):
        parse_claims("the red circle on the left was removed; the dog ran away")
