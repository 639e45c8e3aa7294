"""Caption grammar of the reference world, its paraphrase templates and its flip vocabularies.

A caption is rendered from a list of :class:`Mention` (structured claims about groups) plus an optional
background claim, so every caption has an exact truth value against a scene (:func:`satisfies`): a
positive caption is true by construction and a foil is checked to be false, never assumed.

Grammar (canonical form)::

    caption  := slot_clause ("," slot_clause)* ["and" slot_clause] [background]
    slot_clause := group ("and" group)* where
    group    := number size colour shape[s]          e.g. "two small red circles"
    where    := "on the left" | "on the right" | "at the top" | "at the bottom" | "in the center"
    background := "on a" brightness warmth "background"

Numbers are always spelled ("one", never "a") so string-substitution number flips find a word to replace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from faithtests.world.scene import COLOURS, POSITIONS, SHAPES, Background, Scene

NUMBER_WORDS: tuple[str, ...] = ("zero", "one", "two", "three", "four", "five", "six")
PLURAL: dict[str, str] = {
    "circle": "circles", "square": "squares", "triangle": "triangles", "cross": "crosses",
}
WHERE: dict[str, str] = {
    "left": "on the left", "right": "on the right", "top": "at the top",
    "bottom": "at the bottom", "center": "in the center",
}

#: The world's flip vocabularies, in the shape of LGIP App. A.2 (type -> words). Like LGIP's COCO lists
#: they hold singular nouns only: a whole-word flip never turns "circles" into "circle" (a non-flip).
FLIP_VOCABULARIES: dict[str, tuple[str, ...]] = {
    "colour": COLOURS,
    "number": ("one", "two", "three", "four"),
    "object": SHAPES,
}


#: Meaning-preserving word swaps of the world (never a flip-vocabulary word): used for lexical controls
#: and as "advanced" rewrites in the reference models' training captions.
SYNONYMS: dict[str, str] = {
    "large": "big", "small": "little", "in the center": "in the middle",
    "on a": "against a", "background": "backdrop",
}


@dataclass(frozen=True)
class Mention:
    """A claim "there are exactly ``count`` shapes of this kind at ``position``".

    ``colour``/``size`` None means the caption does not say (colour-blind captions omit colour).
    """

    count: int
    shape: str
    position: str
    colour: str | None = None
    size: str | None = None


@dataclass(frozen=True)
class CaptionSpec:
    mentions: tuple[Mention, ...]
    background: Background | None = None  # only brightness/warmth are claimed, jitter is ignored


def scene_spec(scene: Scene, with_background: bool = True, with_colour: bool = True,
               with_size: bool = True) -> CaptionSpec:
    """The complete, true description of a scene."""
    ms = tuple(
        Mention(g.count, g.shape, g.position, g.colour if with_colour else None,
                g.size if with_size else None)
        for g in scene.groups()
    )
    return CaptionSpec(ms, scene.background if with_background else None)


def mention_matches(scene: Scene, m: Mention) -> bool:
    """True iff exactly ``m.count`` objects at ``m.position`` fit the mention's shape/colour/size."""
    n = sum(
        1 for o in scene.objects_at(m.position)
        if o.shape == m.shape and (m.colour is None or o.colour == m.colour)
        and (m.size is None or o.size == m.size)
    )
    return n == m.count


def satisfies(scene: Scene, spec: CaptionSpec) -> bool:
    """Exact truth of a caption: every mention and the background claim hold in the scene."""
    if spec.background is not None and (
        spec.background.brightness != scene.background.brightness
        or spec.background.warmth != scene.background.warmth
    ):
        return False
    return all(mention_matches(scene, m) for m in spec.mentions)


def noun_phrase(m: Mention, synonyms: bool = False) -> str:
    words = [NUMBER_WORDS[m.count]]
    if m.size is not None:
        words.append(SYNONYMS[m.size] if synonyms else m.size)
    if m.colour is not None:
        words.append(m.colour)
    words.append(m.shape if m.count == 1 else PLURAL[m.shape])
    return " ".join(words)


def _join(parts: Sequence[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def render_caption(spec: CaptionSpec, order: Sequence[int] | None = None, synonyms: bool = False) -> str:
    """Canonical sentence for a spec; ``order`` permutes the mentions (a meaning-preserving reorder).

    Mentions sharing a position are kept together ("one red circle and two blue squares on the left").
    """
    ms = [spec.mentions[i] for i in (order if order is not None else range(len(spec.mentions)))]
    clauses: list[tuple[str, list[str]]] = []
    for m in ms:
        if clauses and clauses[-1][0] == m.position:
            clauses[-1][1].append(noun_phrase(m, synonyms))
        else:
            clauses.append((m.position, [noun_phrase(m, synonyms)]))
    where = {p: WHERE[p] for p in POSITIONS}
    if synonyms:
        where["center"] = "in the middle"
    text = _join([" and ".join(nps) + " " + where[p] for p, nps in clauses])
    if spec.background is not None:
        bg = f"{spec.background.brightness} {spec.background.warmth}"
        text += f" against a {bg} backdrop" if synonyms else f" on a {bg} background"
    return text


def caption(scene: Scene, with_background: bool = True, with_colour: bool = True) -> str:
    """The canonical caption of a scene."""
    return render_caption(scene_spec(scene, with_background, with_colour))


def there_is_caption(spec: CaptionSpec) -> str:
    """A second surface form: "there is one red circle on the left and ...". Same meaning."""
    first = spec.mentions[0]
    verb = "there is" if first.count == 1 else "there are"
    return f"{verb} {render_caption(spec)}"


def human_captions(scene: Scene, rng: np.random.Generator, k: int = 5) -> list[str]:
    """``k`` distinct true captions of a scene (the world's stand-in for COCO's five human captions):
    canonical, reordered, "there is" form, without background, with synonyms."""
    spec = scene_spec(scene)
    no_bg = replace(spec, background=None)
    n = len(spec.mentions)
    rev = list(range(n))[::-1]
    candidates = [
        render_caption(spec),
        render_caption(no_bg),
        there_is_caption(spec),
        render_caption(spec, order=rev),
        render_caption(spec, synonyms=True),
        render_caption(no_bg, order=[int(i) for i in rng.permutation(n)]),
        there_is_caption(no_bg),
    ]
    seen: list[str] = []
    for c in candidates:
        if c not in seen:
            seen.append(c)
    return seen[:k]

