"""Image-caption items: a scene with five distinct true captions (the world's stand-in for a captioned
image set such as COCO).

Items are drawn per index (:mod:`faithtests.world.ids`); :mod:`faithtests.world.refs` resolves their
``image_ref`` back to pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image

from faithtests.world.captions import human_captions
from faithtests.world.ids import image_ref, item_rng
from faithtests.world.refs import register_image_kind
from faithtests.world.render import render
from faithtests.world.scene import Scene, sample_scene

#: Item-stream kind (``item_rng`` / ``image_ref``): changing it changes every item.
KIND = "caption"


@dataclass(frozen=True)
class CaptionItem:
    """An image with five true captions."""

    item_id: str
    scene: Scene
    captions: tuple[str, ...]

    def image(self) -> Image.Image:
        return render(self.scene)


def caption_scene(seed: int, index: int) -> Scene:
    return sample_scene(item_rng(KIND, seed, index), n_groups=(1, 3))


def caption_items(n: int, seed: int, start: int = 0) -> list[CaptionItem]:
    """Items ``start .. start+n-1``: scenes of 1-3 groups with five distinct true captions each."""
    out = []
    for i in range(start, start + n):
        rng = item_rng(KIND, seed, i)
        scene = sample_scene(rng, n_groups=(1, 3))
        out.append(CaptionItem(image_ref(KIND, seed, i), scene, tuple(human_captions(scene, rng))))
    return out


register_image_kind(KIND, lambda seed, index: render(caption_scene(seed, index)))
