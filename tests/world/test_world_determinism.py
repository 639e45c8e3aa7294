"""Same seed -> same pixels and records; items depend only on (seed, index)."""

from __future__ import annotations

import numpy as np
import pytest

from faithtests.protocols.acbench.stimuli import mood_items
from faithtests.protocols.imavb.stimuli import premise_items
from faithtests.protocols.s3e.stimuli import s3e_records
from faithtests.protocols.spdfaith.stimuli import pair_items
from faithtests.world import (
    caption_items,
    render,
    resolve_image_ref,
    resolve_pair_ref,
    sample_dense_scene,
    sample_scene,
)

GENERATORS = {
    "caption": caption_items, "s3e": s3e_records, "premise": premise_items,
    "mood": mood_items, "pair": pair_items,
}


def _pixels(item: object) -> list[np.ndarray]:
    if hasattr(item, "images"):
        return [np.asarray(im) for im in item.images()]
    return [np.asarray(item.image())]  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_same_seed_same_records_and_pixels(kind: str) -> None:
    gen = GENERATORS[kind]
    a, b = gen(6, 3), gen(6, 3)
    assert a == b  # frozen dataclasses: field-by-field equality, scenes included
    for x, y in zip(a, b, strict=True):
        for px, py in zip(_pixels(x), _pixels(y), strict=True):
            assert np.array_equal(px, py)


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_other_seed_other_items(kind: str) -> None:
    gen = GENERATORS[kind]
    assert gen(6, 3) != gen(6, 4)


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_item_depends_only_on_seed_and_index(kind: str) -> None:
    gen = GENERATORS[kind]
    assert gen(8, 5)[5:] == gen(3, 5, start=5)


def test_scene_sampling_is_a_function_of_the_generator_state() -> None:
    s1 = sample_scene(np.random.default_rng(11))
    s2 = sample_scene(np.random.default_rng(11))
    assert s1 == s2 and np.array_equal(np.asarray(render(s1)), np.asarray(render(s2)))
    d1 = sample_dense_scene(np.random.default_rng(11), 12)
    assert d1 == sample_dense_scene(np.random.default_rng(11), 12)


def test_image_refs_resolve_to_the_item_pixels() -> None:
    for kind in ("caption", "s3e", "premise", "mood"):
        item = GENERATORS[kind](2, 9)[1]
        ref = item.record.image_ref if kind == "s3e" else getattr(item, "item_id", None) or item.stimulus_id
        assert np.array_equal(np.asarray(resolve_image_ref(ref)), _pixels(item)[0])
    pair = pair_items(2, 9)[1]
    a, b = resolve_pair_ref(pair.item_id)
    assert np.array_equal(np.asarray(a), _pixels(pair)[0]) and np.array_equal(np.asarray(b), _pixels(pair)[1])


@pytest.mark.parametrize("ref", ["world/caption/x/1", "coco/123", "world/nope/1/2", "world/pair/1/2"])
def test_bad_image_ref_is_a_clear_error(ref: str) -> None:
    with pytest.raises(ValueError, match="world"):
        resolve_image_ref(ref)


def test_an_unregistered_kind_is_unknown_and_the_known_kinds_are_named() -> None:
    """Kinds are registered by the modules that generate them (the world's captions, each protocol's
    stimuli); the error names them."""
    with pytest.raises(ValueError, match=r"unknown kind 'nope' \(known: .*caption.*premise"):
        resolve_image_ref("world/nope/1/2")
    with pytest.raises(ValueError, match="names an image pair; use resolve_pair_ref"):
        resolve_image_ref("world/pair/1/2")
    with pytest.raises(ValueError, match="is not a pair ref"):
        resolve_pair_ref("world/caption/1/2")
