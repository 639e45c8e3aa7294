"""S3E records from the reference world (S3E §3.1, Table 3): foil scenes (a scene, its canonical claim and
a verified-false flip of it) with all five caption roles drawn from exact ground truth."""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image

from faithtests.protocols.s3e.records import STRESS_TYPES, S3ERecord, StressType
from faithtests.world.captions import CaptionSpec, render_caption, satisfies, scene_spec
from faithtests.world.foils import flip_spec
from faithtests.world.ids import image_ref, item_rng
from faithtests.world.refs import register_image_kind
from faithtests.world.render import render
from faithtests.world.scene import Scene, sample_scene

#: Item-stream kind (``item_rng`` / ``image_ref``): changing it changes every item.
KIND = "s3e"
#: World flip kind of foil scene ``index`` (cycled, so every kind is balanced).
FOIL_KINDS: tuple[str, ...] = ("object", "colour", "relation", "compositional")

#: S3E stress type of each world flip kind (the world cycles its kinds in the order of STRESS_TYPES).
STRESS_OF_KIND: dict[str, StressType] = dict(zip(FOIL_KINDS, STRESS_TYPES, strict=True))


def foil_scene(seed: int, index: int) -> tuple[Scene, CaptionSpec, CaptionSpec]:
    """Scene ``index`` of the foil stream (2-3 groups), its claim without the background, and a flip of
    kind ``FOIL_KINDS[index % 4]`` that is false in the scene."""
    kind = FOIL_KINDS[index % len(FOIL_KINDS)]
    rng = item_rng(KIND, seed, index)
    for _ in range(100):
        scene = sample_scene(rng, n_groups=(2, 3))
        spec = scene_spec(scene, with_background=False)
        foil = flip_spec(scene, spec, kind, rng)
        if foil is not None:
            return scene, spec, foil
    raise RuntimeError(f"no {kind} foil found in 100 scenes (seed={seed}, index={index})")


@dataclass(frozen=True)
class WorldS3E:
    """An S3E record with the scene it was built from."""

    record: S3ERecord
    scene: Scene
    stress_spec: CaptionSpec  # the foil as a structured claim, for ground-truth checks

    def image(self) -> Image.Image:
        return render(self.scene)


def s3e_record(seed: int, index: int) -> WorldS3E:
    """Record ``index``: stress types cycle object, attribute, relation, compositional (balanced).

    Roles (S3E Table 3), all from the scene's ground truth and without the background (short captions):
    c+ canonical caption; c_pres the same mentions in reverse order (clause reordering); c_lex a
    "there is/are" sentence with world synonyms (big/little/middle: surface change only); c_stress a
    verified-false flip of the stress type; c_rand the c+ of item ``index+k`` (first k >= 1 whose
    caption is false here).
    """
    stress = STRESS_OF_KIND[FOIL_KINDS[index % len(FOIL_KINDS)]]
    scene, spec, foil = foil_scene(seed, index)
    n = len(spec.mentions)
    c_pos = render_caption(spec)
    c_pres = render_caption(spec, order=list(range(n))[::-1])
    verb = "there is" if spec.mentions[0].count == 1 else "there are"
    c_lex = f"{verb} {render_caption(spec, synonyms=True)}"
    k = index + 1
    while True:
        _, other_spec, _ = foil_scene(seed, k)
        if not satisfies(scene, other_spec):
            break
        k += 1
    ref = image_ref(KIND, seed, index)
    record = S3ERecord(
        item_id=ref, image_ref=ref, c_pos=c_pos, c_pres=c_pres, c_lex=c_lex,
        c_stress=render_caption(foil), c_rand=render_caption(other_spec), stress_type=stress,
        source="world", rand_item_id=image_ref(KIND, seed, k), rand_image_ref=image_ref(KIND, seed, k),
    )
    return WorldS3E(record, scene, foil)


def s3e_records(n: int, seed: int, start: int = 0) -> list[WorldS3E]:
    return [s3e_record(seed, i) for i in range(start, start + n)]


register_image_kind(KIND, lambda seed, index: render(foil_scene(seed, index)[0]))
