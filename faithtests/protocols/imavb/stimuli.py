"""Reference-world stimuli of IMAVB (§2.3, App. H, App. I.1): premise questions with standard and
misleading variants.

Each stimulus (one scene) yields a standard question, whose premise is true and whose answer is one of
A-D, and a misleading copy with exactly one premise detail swapped to a false one, whose answer is E.
Both share the same A-D options. Options E and F are always shown (App. I.1 A1). These image items
are silent: F ("The audio detail in the question is incorrect") is shown and never correct here. The
world's clips with sound (:mod:`.audio_stimuli`) keep these vision questions bit for bit and add the
standard_audio / misleading_audio variants (answer F when the audio premise is false).

Question categories (IMAVB's eight are video reasoning types; the world's are what a still scene can
ask): colour, shape, count, position, existence, scene_description, emotional. Misleading
subcategories reuse IMAVB's vision names where they fit (object_type, object_attribute,
object_location, location_setting, location_detail) and add object_count and object_size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from PIL import Image

from faithtests.protocols.imavb.records import LETTERS, OPTION_E, OPTION_F
from faithtests.world.captions import NUMBER_WORDS, PLURAL, WHERE, Mention, mention_matches
from faithtests.world.emotion import EMOTIONS, emotion_of
from faithtests.world.ids import image_ref, item_rng
from faithtests.world.refs import register_image_kind
from faithtests.world.render import render
from faithtests.world.scene import (
    BRIGHTNESS,
    COLOURS,
    POSITIONS,
    SHAPES,
    SIZES,
    WARMTH,
    Background,
    Group,
    Scene,
    sample_scene,
)

#: Item-stream kind (``item_rng`` / ``image_ref``): changing it changes every item.
KIND = "premise"

CATEGORIES: tuple[str, ...] = (
    "colour", "shape", "count", "position", "existence", "scene_description", "emotional",
)
GROUP_SUBCATEGORIES: tuple[str, ...] = (
    "object_type", "object_attribute", "object_count", "object_size", "object_location",
)
BACKGROUND_SUBCATEGORIES: tuple[str, ...] = ("location_setting", "location_detail")
SUBCATEGORIES: tuple[str, ...] = GROUP_SUBCATEGORIES + BACKGROUND_SUBCATEGORIES
BACKGROUND_OPTIONS: tuple[str, ...] = ("dark and warm", "dark and cool", "bright and warm", "bright and cool")


@dataclass(frozen=True)
class PremiseQuestion:
    """One question variant in IMAVB's record shape (``to_imavb`` gives its JSONL fields)."""

    question_id: str
    stimulus_id: str
    variant: str  # "standard_vision" | "misleading_vision"
    question: str
    options: tuple[str, ...]  # six texts, A-F
    correct_answer: str  # a letter
    category: str
    subcategory: str | None  # the swapped detail's subcategory (misleading only)

    def to_imavb(self) -> dict[str, str]:
        d = {"video_id": self.stimulus_id, "question": self.question, "correct_answer": self.correct_answer}
        d.update({f"option_{k.lower()}": v for k, v in zip(LETTERS, self.options, strict=True)})
        return d


@dataclass(frozen=True)
class PremiseItem:
    stimulus_id: str
    scene: Scene
    standard: PremiseQuestion
    misleading: PremiseQuestion
    true_premise: str  # the premise phrase of the standard question
    false_premise: str  # the swapped phrase of the misleading question
    target: Group  # the group the query asks about
    premise_claim: Mention | Background  # structured premise: true in the scene
    false_claim: Mention | Background  # structured swapped premise: false in the scene

    def image(self) -> Image.Image:
        return render(self.scene)


def _premise_np(m: Mention) -> str:
    count = "single" if m.count == 1 else NUMBER_WORDS[m.count]
    noun = m.shape if m.count == 1 else PLURAL[m.shape]
    return f"the {count} {m.size} {m.colour} {noun} {WHERE[m.position]}"


def _mention(g: Group) -> Mention:
    return Mention(g.count, g.shape, g.position, g.colour, g.size)


def _swap_group(scene: Scene, m: Mention, sub: str, rng: np.random.Generator) -> Mention | None:
    cands: list[Mention]
    if sub == "object_type":
        cands = [replace(m, shape=s) for s in SHAPES]
    elif sub == "object_attribute":
        cands = [replace(m, colour=c) for c in COLOURS]
    elif sub == "object_count":
        cands = [replace(m, count=n) for n in (1, 2, 3, 4)]
    elif sub == "object_size":
        cands = [replace(m, size=z) for z in SIZES]
    else:  # object_location
        cands = [replace(m, position=p) for p in POSITIONS]
    for k in rng.permutation(len(cands)):
        cand = cands[int(k)]
        if cand != m and not mention_matches(scene, cand):
            return cand
    return None


#: (query text, four content options, correct option text) of a question about ``target``.
Query = tuple[str, list[str], str]


def _be(target: Group) -> str:
    return "are" if target.count > 1 else "is"


def _shape_word(target: Group) -> str:
    return PLURAL[target.shape] if target.count > 1 else target.shape


def _colour_query(scene: Scene, target: Group, rng: np.random.Generator) -> Query:
    others = [str(c) for c in rng.permutation([c for c in COLOURS if c != target.colour])[:3]]
    query = f"what colour {_be(target)} the {_shape_word(target)} {WHERE[target.position]}"
    return query, [target.colour, *others], target.colour


def _shape_query(scene: Scene, target: Group, rng: np.random.Generator) -> Query:
    obj = "objects" if target.count > 1 else "object"
    query = f"what shape {_be(target)} the {target.colour} {obj} {WHERE[target.position]}"
    return query, list(SHAPES), target.shape


def _count_query(scene: Scene, target: Group, rng: np.random.Generator) -> Query:
    query = f"how many {target.colour} {PLURAL[target.shape]} are {WHERE[target.position]}"
    return query, ["one", "two", "three", "four"], NUMBER_WORDS[target.count]


def _position_query(scene: Scene, target: Group, rng: np.random.Generator) -> Query:
    where = WHERE[target.position]
    others = [WHERE[str(p)] for p in rng.permutation([p for p in POSITIONS if p != target.position])[:3]]
    return f"where {_be(target)} the {target.colour} {_shape_word(target)}", [where, *others], where


def _existence_query(scene: Scene, target: Group, rng: np.random.Generator) -> Query:
    present = {(o.colour, o.shape) for o in scene.objects}
    absent = [f"a {c} {s}" for c in COLOURS for s in SHAPES if (c, s) not in present]
    others = [str(a) for a in rng.permutation(absent)[:3]]
    answer = f"a {target.colour} {target.shape}"
    return "which of these shapes is also in the picture", [answer, *others], answer


def _scene_description_query(scene: Scene, target: Group, rng: np.random.Generator) -> Query:
    bg = scene.background
    answer = f"{bg.brightness} and {bg.warmth}"
    return "what kind of background are the shapes on", list(BACKGROUND_OPTIONS), answer


def _emotional_query(scene: Scene, target: Group, rng: np.random.Generator) -> Query:
    y = emotion_of(scene)
    others = [str(e) for e in rng.permutation([e for e in EMOTIONS if e != y])[:3]]
    return "what emotion would a typical viewer feel", [y, *others], y


_QUERIES: dict[str, Callable[[Scene, Group, np.random.Generator], Query]] = {
    "colour": _colour_query, "shape": _shape_query, "count": _count_query, "position": _position_query,
    "existence": _existence_query, "scene_description": _scene_description_query,
    "emotional": _emotional_query,
}


def _query(scene: Scene, target: Group, category: str, rng: np.random.Generator) -> Query:
    """(query text, four content options, correct option text)."""
    if category not in _QUERIES:
        raise ValueError(f"unknown category {category!r}; expected one of {CATEGORIES}")
    return _QUERIES[category](scene, target, rng)


def premise_item(seed: int, index: int) -> PremiseItem:
    """Stimulus ``index``: category cycles through CATEGORIES; the swapped subcategory is drawn uniformly
    among those that can apply (background swaps are not used with scene_description questions)."""
    rng = item_rng(KIND, seed, index)
    category = CATEGORIES[index % len(CATEGORIES)]
    sid = image_ref(KIND, seed, index)
    for _ in range(100):
        scene = sample_scene(rng, n_groups=(2, 3))
        groups = list(scene.groups())
        ti, pi = (int(i) for i in rng.choice(len(groups), size=2, replace=False))
        target, prem = groups[ti], groups[pi]
        subs = GROUP_SUBCATEGORIES if category == "scene_description" else SUBCATEGORIES
        sub = str(rng.choice(subs))
        if sub in GROUP_SUBCATEGORIES:
            m = _mention(prem)
            false_m = _swap_group(scene, m, sub, rng)
            if false_m is None:
                continue
            true_p, false_p = f"Next to {_premise_np(m)}", f"Next to {_premise_np(false_m)}"
            claim: Mention | Background = m
            false_claim: Mention | Background = false_m
        else:
            bg = scene.background
            flip_b = sub == "location_setting"
            b2 = BRIGHTNESS[1 - BRIGHTNESS.index(bg.brightness)] if flip_b else bg.brightness
            w2 = WARMTH[1 - WARMTH.index(bg.warmth)] if sub == "location_detail" else bg.warmth
            true_p = f"On the {bg.brightness} {bg.warmth} background"
            false_p = f"On the {b2} {w2} background"
            claim, false_claim = bg, Background(b2, w2)
        query, content, answer = _query(scene, target, category, rng)
        order = [int(i) for i in rng.permutation(4)]
        opts = tuple([content[i] for i in order] + [OPTION_E, OPTION_F])
        letter = LETTERS[opts.index(answer)]
        std = PremiseQuestion(f"{sid}/standard_vision", sid, "standard_vision", f"{true_p}, {query}?",
                              opts, letter, category, None)
        mis = PremiseQuestion(f"{sid}/misleading_vision", sid, "misleading_vision", f"{false_p}, {query}?",
                              opts, "E", category, sub)
        return PremiseItem(sid, scene, std, mis, true_p, false_p, target, claim, false_claim)
    raise RuntimeError(f"no premise item found in 100 scenes (seed={seed}, index={index})")


def premise_items(n: int, seed: int, start: int = 0) -> list[PremiseItem]:
    return [premise_item(seed, i) for i in range(start, start + n)]


register_image_kind(KIND, lambda seed, index: premise_item(seed, index).image())
