"""Item generators for the caption suites: image-caption items (LGIP, SPEC §1, §2a) and foil scenes (a
scene, its canonical claim and a verified-false flip of it; the S3E records of SPEC §2b are built on them
in ``faithtests.protocols.s3e.world``).

Items are drawn per index (:mod:`faithtests.world.ids`); ``faithtests.world.refs`` resolves their
``image_ref`` back to pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image

from faithtests.world.captions import (
    CaptionSpec,
    human_captions,
    scene_spec,
)
from faithtests.world.flips import flip_spec
from faithtests.world.ids import image_ref, item_rng
from faithtests.world.render import render
from faithtests.world.scene import Scene, sample_scene


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


#: World flip kind of foil scene ``index`` (cycled, so every kind is balanced).
FOIL_KINDS: tuple[str, ...] = ("object", "colour", "relation", "compositional")


def foil_scene(seed: int, index: int) -> tuple[Scene, CaptionSpec, CaptionSpec]:
    """Scene ``index`` of the foil stream (2-3 groups), its claim without the background, and a flip of
    kind ``FOIL_KINDS[index % 4]`` that is false in the scene."""
    kind = FOIL_KINDS[index % len(FOIL_KINDS)]
    rng = item_rng("s3e", seed, index)
    for _ in range(100):
        scene = sample_scene(rng, n_groups=(2, 3))
        spec = scene_spec(scene, with_background=False)
        foil = flip_spec(scene, spec, kind, rng)
        if foil is not None:
            return scene, spec, foil
    raise RuntimeError(f"no {kind} foil found in 100 scenes (seed={seed}, index={index})")
