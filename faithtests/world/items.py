"""Item generators for the caption suites: LGIP image-caption items (SPEC §1, §2a) and S3E records (§2b).

Items are drawn per index (:mod:`faithtests.world.ids`); ``faithtests.world.refs`` resolves their
``image_ref`` back to pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image

from faithtests.data.s3e_records import STRESS_TYPES, S3ERecord, StressType
from faithtests.world.captions import (
    CaptionSpec,
    human_captions,
    render_caption,
    satisfies,
    scene_spec,
)
from faithtests.world.flips import flip_spec
from faithtests.world.ids import image_ref, item_rng
from faithtests.world.render import render
from faithtests.world.scene import Scene, sample_scene

#: S3E stress type -> world flip kind.
STRESS_FLIP: dict[str, str] = {
    "object": "object", "attribute": "colour", "relation": "relation", "compositional": "compositional",
}


@dataclass(frozen=True)
class CaptionItem:
    """An image with five true captions (the world's COCO stand-in for LGIP)."""

    item_id: str
    scene: Scene
    captions: tuple[str, ...]

    def image(self) -> Image.Image:
        return render(self.scene)


def caption_scene(seed: int, index: int) -> Scene:
    return sample_scene(item_rng("caption", seed, index), n_groups=(1, 3))


def caption_items(n: int, seed: int, start: int = 0) -> list[CaptionItem]:
    """Items ``start .. start+n-1``: scenes of 1-3 groups with five distinct true captions each."""
    out = []
    for i in range(start, start + n):
        rng = item_rng("caption", seed, i)
        scene = sample_scene(rng, n_groups=(1, 3))
        out.append(CaptionItem(image_ref("caption", seed, i), scene, tuple(human_captions(scene, rng))))
    return out


@dataclass(frozen=True)
class WorldS3E:
    """An S3E record (``faithtests.data.s3e_records.S3ERecord``) with the scene it was built from."""

    record: S3ERecord
    scene: Scene
    stress_spec: CaptionSpec  # the foil as a structured claim, for ground-truth checks

    def image(self) -> Image.Image:
        return render(self.scene)


def _s3e_scene(seed: int, index: int, stress: str) -> tuple[Scene, CaptionSpec, CaptionSpec]:
    rng = item_rng("s3e", seed, index)
    for _ in range(100):
        scene = sample_scene(rng, n_groups=(2, 3))
        spec = scene_spec(scene, with_background=False)
        foil = flip_spec(scene, spec, STRESS_FLIP[stress], rng)
        if foil is not None:
            return scene, spec, foil
    raise RuntimeError(f"no {stress} foil found in 100 scenes (seed={seed}, index={index})")


def s3e_record(seed: int, index: int) -> WorldS3E:
    """Record ``index``: stress types cycle object, attribute, relation, compositional (balanced).

    Roles (S3E Table 3), all from the scene's ground truth and without the background (short captions):
    c+ canonical caption; c_pres the same mentions in reverse order (clause reordering); c_lex a
    "there is/are" sentence with world synonyms (big/little/middle: surface change only); c_stress a
    verified-false flip of the stress type; c_rand the c+ of item ``index+k`` (first k >= 1 whose
    caption is false here).
    """
    stress: StressType = STRESS_TYPES[index % len(STRESS_TYPES)]
    scene, spec, foil = _s3e_scene(seed, index, stress)
    n = len(spec.mentions)
    c_pos = render_caption(spec)
    c_pres = render_caption(spec, order=list(range(n))[::-1])
    verb = "there is" if spec.mentions[0].count == 1 else "there are"
    c_lex = f"{verb} {render_caption(spec, synonyms=True)}"
    k = index + 1
    while True:
        _, other_spec, _ = _s3e_scene(seed, k, STRESS_TYPES[k % len(STRESS_TYPES)])
        if not satisfies(scene, other_spec):
            break
        k += 1
    ref = image_ref("s3e", seed, index)
    record = S3ERecord(
        item_id=ref, image_ref=ref, c_pos=c_pos, c_pres=c_pres, c_lex=c_lex,
        c_stress=render_caption(foil), c_rand=render_caption(other_spec), stress_type=stress,
        source="world", rand_item_id=image_ref("s3e", seed, k), rand_image_ref=image_ref("s3e", seed, k),
    )
    return WorldS3E(record, scene, foil)


def s3e_records(n: int, seed: int, start: int = 0) -> list[WorldS3E]:
    return [s3e_record(seed, i) for i in range(start, start + n)]
