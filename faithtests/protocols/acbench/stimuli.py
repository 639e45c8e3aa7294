"""Reference-world stimuli of AC-Bench (§3): a scene, its emotion y_img (the world's emotion rule,
:mod:`faithtests.world.emotion`) and six conflicting descriptions.

Descriptions follow App. C.3's six variants, one sentence each, never naming an emotion label:
- ``aligned``: true facts + framing cues of the true emotion;
- ``subjective_adjacent`` / ``subjective_opposite``: true facts, framing of the adjacent/opposite emotion;
- ``objective_object``: shapes swapped to the other family (y_txt = the emotion those shapes would give);
- ``objective_attribute``: background brightness distorted (y_txt = the opposite emotion);
- ``objective_behaviour``: a behaviour the static shapes cannot show, toward the opposite emotion. The
  world has no people; "behaviour-like" here is shapes described as acting (fleeing, smashing, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from PIL import Image

from faithtests.world.captions import CaptionSpec, render_caption, scene_spec
from faithtests.world.emotion import adjacent, emotion_from, emotion_of, opposite, shape_family
from faithtests.world.ids import image_ref, item_rng
from faithtests.world.refs import register_image_kind
from faithtests.world.render import render
from faithtests.world.scene import SHAPE_FAMILY, SHAPES, Background, Scene, sample_scene

#: Item-stream kind (``item_rng`` / ``image_ref``): changing it changes every item.
KIND = "mood"
OTHER_FAMILY_SHAPE: dict[str, str] = {
    "circle": "triangle", "square": "cross", "triangle": "circle", "cross": "square",
}

DESCRIPTION_SUBSETS: tuple[str, ...] = (
    "aligned", "subjective_adjacent", "subjective_opposite",
    "objective_object", "objective_attribute", "objective_behaviour",
)

#: Framing cues per emotion (implied, never the label or a direct synonym).
FRAMING: dict[str, tuple[str, ...]] = {
    "amusement": ("like a silly cartoon", "with a goofy, playful charm", "as if it were a joke"),
    "excitement": ("buzzing with energy", "like a race about to start", "full of electric thrills"),
    "contentment": ("in a cozy, quiet stillness", "gentle and peaceful", "like a lazy warm afternoon"),
    "awe": ("vast and majestic", "like a towering cathedral", "grand beyond measure"),
    "anger": ("harsh and hostile", "like a clenched fist", "seething and aggressive"),
    "disgust": ("grimy and rotten", "like something spoiled and slimy", "foul and filthy"),
    "fear": ("looming and threatening", "like a shadow creeping closer", "menacing and dangerous"),
    "sadness": ("lonely and gloomy", "like a forgotten rainy day", "heavy with loss"),
}
#: Behaviour-like claims per emotion: what the (static) shapes are said to do.
BEHAVIOUR: dict[str, str] = {
    "amusement": "the shapes tumble over each other clumsily",
    "excitement": "the shapes race and leap across the frame",
    "contentment": "the shapes rest side by side",
    "awe": "the shapes rise slowly into a towering sky",
    "anger": "the shapes smash violently into one another",
    "disgust": "the shapes ooze and rot",
    "fear": "the shapes flee and hide in the corners",
    "sadness": "the shapes droop and sink",
}


@dataclass(frozen=True)
class Description:
    subset: str
    text: str
    emotion: str  # y_txt: the emotion the description steers toward

    @property
    def conflict(self) -> bool:
        return self.subset != "aligned"


@dataclass(frozen=True)
class MoodItem:
    item_id: str
    scene: Scene
    emotion: str  # y_img
    descriptions: tuple[Description, ...]  # one per DESCRIPTION_SUBSETS entry, in that order

    def image(self) -> Image.Image:
        return render(self.scene)

    def description(self, subset: str) -> Description:
        for d in self.descriptions:
            if d.subset == subset:
                return d
        raise KeyError(f"{self.item_id}: no description of subset {subset!r}")


def _sentence(facts: str, tail: str) -> str:
    text = f"{facts}, {tail}."
    return text[0].upper() + text[1:]


def describe(scene: Scene, subset: str, rng: np.random.Generator) -> Description:
    """One description of ``subset`` for ``scene``; y_txt follows the module docstring's rules."""
    y = emotion_of(scene)
    spec = scene_spec(scene)

    def frame(e: str) -> str:
        return FRAMING[e][int(rng.integers(len(FRAMING[e])))]

    if subset == "aligned":
        return Description(subset, _sentence(render_caption(spec), frame(y)), y)
    if subset in ("subjective_adjacent", "subjective_opposite"):
        e = adjacent(y) if subset == "subjective_adjacent" else opposite(y)
        return Description(subset, _sentence(render_caption(spec), frame(e)), e)
    if subset == "objective_object":
        ms = tuple(replace(m, shape=OTHER_FAMILY_SHAPE[m.shape]) for m in spec.mentions)
        fam = "calm" if shape_family(scene) == "sharp" else "sharp"
        e = emotion_from(scene.background.brightness, scene.background.warmth, fam)
        return Description(subset, _sentence(render_caption(CaptionSpec(ms, spec.background)), frame(e)), e)
    if subset == "objective_attribute":
        bg = scene.background
        flipped = Background("dark" if bg.brightness == "bright" else "bright", bg.warmth)
        e = opposite(y)
        return Description(subset, _sentence(render_caption(replace(spec, background=flipped)), frame(e)), e)
    if subset == "objective_behaviour":
        e = opposite(y)
        return Description(subset, _sentence(render_caption(spec), f"and {BEHAVIOUR[e]}"), e)
    raise ValueError(f"unknown description subset {subset!r}; expected one of {DESCRIPTION_SUBSETS}")


def mood_scene(rng: np.random.Generator) -> Scene:
    """1-3 groups of a single shape family, so the family axis is never a near-tie."""
    family = str(rng.choice(["calm", "sharp"]))
    shapes = [s for s in SHAPES if SHAPE_FAMILY[s] == family]
    return sample_scene(rng, n_groups=(1, 3), shapes=shapes)


def mood_item(seed: int, index: int) -> MoodItem:
    rng = item_rng(KIND, seed, index)
    scene = mood_scene(rng)
    descs = tuple(describe(scene, s, rng) for s in DESCRIPTION_SUBSETS)
    return MoodItem(image_ref(KIND, seed, index), scene, emotion_of(scene), descs)


def mood_items(n: int, seed: int, start: int = 0) -> list[MoodItem]:
    return [mood_item(seed, i) for i in range(start, start + n)]


register_image_kind(KIND, lambda seed, index: mood_item(seed, index).image())
