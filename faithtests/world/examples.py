"""Training examples drawn from the world: a prompt, the answer the intended model should give, and the
world's ground truth along the prompt (targets of the reference VLMs' training-only heads).

These records sit in the world layer because both sides build them: each protocol's ``training.py``
makes its own tasks' examples (its prompts, its stimuli) and the reference trainer adds the generic
grounding tasks and encodes them all; the truth annotations are functions of a scene alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from faithtests.models.interfaces import Prompt
from faithtests.world.captions import (
    CaptionSpec,
    Mention,
    mention_matches,
    render_caption,
    satisfies,
    scene_spec,
)
from faithtests.world.foils import flip_spec
from faithtests.world.scene import Scene, sample_scene

#: Training draws generator items with seeds >= TRAIN_SEED_FLOOR; evaluation and suites use smaller seeds.
TRAIN_SEED_FLOOR = 2**20


def train_seed(rng: np.random.Generator) -> int:
    """A generator seed reserved for training (never one an evaluation or a suite draws)."""
    return int(rng.integers(TRAIN_SEED_FLOOR, 2**31))


@dataclass(frozen=True)
class CaptionTruth:
    """Ground truth along a caption's text, for the auxiliary verification targets of training.

    ``nouns``: per mention, in text order, whether some object has its shape, colour and size (anywhere,
    any number): answerable at the noun, one look at the image. ``clauses``: per clause ("... on the
    left"), whether every mention up to that clause's end matches exactly (position and count too).
    """

    text: str
    nouns: tuple[bool, ...]
    clauses: tuple[bool, ...]


@dataclass(frozen=True)
class Example:
    prompt: Prompt
    answer: str
    task: str
    #: a true caption that occurs verbatim in the prompt (A/B, verification): trained as in-context
    #: captioning, so the states that predict each caption word exist where a foil's word must clash
    context_caption: str | None = None
    #: per caption quoted in the prompt (A/B, verification): its truth annotations, trained as auxiliary
    #: verification targets (:class:`CaptionTruth`)
    truth: tuple[CaptionTruth, ...] = ()
    #: questions that presuppose a claim ("Next to the single red circle on the left, ...", "On the dark
    #: warm background, ..."): whether the claim holds; a clause target on the claim's last word
    claim_true: bool | None = None
    #: six-option questions: per displayed option A-F, whether it is true of the image (a content option
    #: that answers the question, or E when the claim is false); a target on each option's last token
    option_truth: tuple[bool, ...] | None = None
    #: image pairs: per patch of the second image, whether it differs from the same patch of the first
    patch_diff: tuple[bool, ...] | None = None


#: A training task: draws one example for an answer policy (``"faithful"`` or a degraded twin's).
TaskMaker = Callable[[np.random.Generator, str], Example]


def mention_exists(scene: Scene, m: Mention) -> bool:
    """Some object fits the mention's shape, colour and size (position and count ignored)."""
    return any(o.shape == m.shape and (m.colour is None or o.colour == m.colour)
               and (m.size is None or o.size == m.size) for o in scene.objects)


def clause_truth(scene: Scene, spec: CaptionSpec, order: Sequence[int] | None = None) -> tuple[bool, ...]:
    """Cumulative truth at each clause end of ``render_caption(spec, order)``: clause k is True iff all
    mentions of clauses 0..k match the scene. Clauses group consecutive mentions at one position, as
    :func:`render_caption` does, so the k-th flag belongs to the k-th position phrase of the text."""
    ms = [spec.mentions[i] for i in (order if order is not None else range(len(spec.mentions)))]
    flags: list[bool] = []
    ok = True
    for i, m in enumerate(ms):
        ok = ok and mention_matches(scene, m)
        if i == len(ms) - 1 or ms[i + 1].position != m.position:
            flags.append(ok)
    return tuple(flags)


def caption_truth(scene: Scene, spec: CaptionSpec, text: str,
                  order: Sequence[int] | None = None) -> CaptionTruth:
    """Annotations of ``text``, a surface form of ``render_caption(spec, order)`` (same mention order)."""
    ms = [spec.mentions[i] for i in (order if order is not None else range(len(spec.mentions)))]
    return CaptionTruth(text, tuple(mention_exists(scene, m) for m in ms), clause_truth(scene, spec, order))


#: Surface forms of A/B and verification captions and their shares.
FORMS: dict[str, float] = {"canonical": 0.6, "reversed": 0.15, "there": 0.15, "template": 0.1}
#: Flip kinds of training foils. Relation and compositional flips (the hardest foils) weigh more;
#: number flips less.
FOIL_KIND_WEIGHTS: dict[str, float] = {"colour": 0.2, "number": 0.1, "object": 0.2, "relation": 0.25,
                                       "compositional": 0.25}


def pick(rng: np.random.Generator, weights: dict[str, float]) -> str:
    """One key of ``weights``, drawn with probability proportional to its weight."""
    keys = list(weights)
    w = np.array([weights[k] for k in keys])
    return keys[int(rng.choice(len(keys), p=w / w.sum()))]


def _surface(scene: Scene, spec: CaptionSpec, form: str, template: str) -> CaptionTruth:
    """``spec`` rendered in ``form``, with its annotations against ``scene``."""
    n = len(spec.mentions)
    if form in ("canonical", "reversed"):
        order = list(range(n)) if form == "canonical" else list(range(n))[::-1]
        return caption_truth(scene, spec, render_caption(spec, order=order), order)
    if form == "there":
        verb = "there is" if spec.mentions[0].count == 1 else "there are"
        return caption_truth(scene, spec, f"{verb} {render_caption(spec, synonyms=True)}")
    return caption_truth(scene, spec, template.format(c=render_caption(spec)))


def _foil_spec(rng: np.random.Generator, scene: Scene, spec: CaptionSpec) -> CaptionSpec | None:
    """A verified-false claim about ``scene``: 1 in 6 another scene's caption, else a flip of ``spec``;
    None when this draw found none."""
    if rng.random() < 1 / 6:
        other = sample_scene(rng, n_groups=(1, 3))
        foil_spec = scene_spec(other, with_background=False)
        return None if satisfies(scene, foil_spec) else foil_spec
    return flip_spec(scene, spec, pick(rng, FOIL_KIND_WEIGHTS), rng)


def true_and_foil(rng: np.random.Generator,
                  templates: Sequence[str]) -> tuple[Scene, CaptionTruth, CaptionTruth]:
    """A scene, a true caption and a verified-false foil (a flip, or 1 in 6 another scene's caption),
    both in one surface form (``templates`` fill the "template" form) with their annotations. One form
    for both matters: with the foil always canonical and c+ often reordered or templated, "pick the
    non-canonical one" was a shortcut, and held-out records (both canonical) fell back to "A"."""
    while True:
        scene = sample_scene(rng, n_groups=(1, 3))
        spec = scene_spec(scene, with_background=False)
        foil_spec = _foil_spec(rng, scene, spec)
        if foil_spec is None:
            continue
        form = pick(rng, FORMS)
        template = templates[int(rng.integers(len(templates)))]
        foil = _surface(scene, foil_spec, form, template)
        if foil.clauses[-1]:
            raise AssertionError(f"foil {foil.text!r} is true of its scene")
        return scene, _surface(scene, spec, form, template), foil
