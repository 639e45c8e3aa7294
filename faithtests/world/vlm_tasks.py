"""Training examples for the reference VLMs: (prompt, answer, task) triples drawn from the world.

Every prompt is built by :mod:`faithtests.world.prompts`, so training and the suites ask the same
questions. The answer is what the *intended* model should say; the degraded twins change the answer
policy, never the questions:

- ``faithful`` (``vlm``): answers from the image (mood = y_img, misleading premise -> "E");
- ``textbiased`` (``vlm-textbiased``): follows the text (mood = y_txt of the description, a misleading
  premise is taken at its word and the content question answered; everything else as ``faithful``);
- ``positionbiased`` (``vlm-positionbiased``): on A/B choice says "A" for 70% of trials whatever the
  image shows, otherwise answers correctly; everything else as ``faithful``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from faithtests.models.protocols import Prompt
from faithtests.world import prompts as P
from faithtests.world.captions import (
    NUMBER_WORDS,
    SIMPLE_TEMPLATES,
    WHERE,
    noun_phrase,
    render_caption,
    satisfies,
    scene_spec,
)
from faithtests.world.edits import claims_text, pair_item
from faithtests.world.flips import FLIP_KINDS, flip_spec
from faithtests.world.mood import DESCRIPTION_SUBSETS, describe, mood_of, mood_scene
from faithtests.world.premise import LETTERS, premise_item
from faithtests.world.render import render
from faithtests.world.scene import POSITIONS, Scene, sample_scene

POLICIES: tuple[str, ...] = ("faithful", "textbiased", "positionbiased")
#: Sampling weights of the tasks in a training batch.
TASK_WEIGHTS: dict[str, float] = {
    "ab": 0.32, "verify": 0.07, "slot": 0.05, "caption": 0.08, "premise": 0.16, "mood": 0.14,
    "same_diff": 0.08, "count": 0.05, "find": 0.05,
}


#: Training draws generator items with seeds >= TRAIN_SEED_FLOOR; evaluation and suites use smaller seeds.
TRAIN_SEED_FLOOR = 2**20


def _train_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(TRAIN_SEED_FLOOR, 2**31))

GROUNDING_WEIGHTS: dict[str, float] = {"slot": 0.35, "caption": 0.3, "verify": 0.15, "ab": 0.2}


@dataclass(frozen=True)
class Example:
    prompt: Prompt
    answer: str
    task: str
    #: a true caption that occurs verbatim in the prompt (A/B, verification): trained as in-context
    #: captioning, so the states that predict each caption word exist where a foil's word must clash
    context_caption: str | None = None


def _positive_form(scene: Scene, rng: np.random.Generator) -> str:
    """c+ in one of the surface forms S3E records use (canonical, reordered, lexical, templated)."""
    spec = scene_spec(scene, with_background=False)
    r = rng.random()
    n = len(spec.mentions)
    if r < 0.6:
        return render_caption(spec)
    if r < 0.75:
        return render_caption(spec, order=list(range(n))[::-1])
    if r < 0.9:
        verb = "there is" if spec.mentions[0].count == 1 else "there are"
        return f"{verb} {render_caption(spec, synonyms=True)}"
    return SIMPLE_TEMPLATES[int(rng.integers(len(SIMPLE_TEMPLATES)))].format(c=render_caption(spec))


def _true_and_foil(rng: np.random.Generator) -> tuple[Scene, str, str]:
    """A scene, one true caption form and a verified-false foil (a flip, or 1 in 6 another scene's)."""
    while True:
        scene = sample_scene(rng, n_groups=(1, 3))
        spec = scene_spec(scene, with_background=False)
        if rng.random() < 1 / 6:
            other = sample_scene(rng, n_groups=(1, 3))
            foil_spec = scene_spec(other, with_background=False)
            if satisfies(scene, foil_spec):
                continue
        else:
            kind = FLIP_KINDS[int(rng.integers(len(FLIP_KINDS)))]
            maybe = flip_spec(scene, spec, kind, rng)
            if maybe is None:
                continue
            foil_spec = maybe
        return scene, _positive_form(scene, rng), render_caption(foil_spec)


def ab_example(rng: np.random.Generator, policy: str) -> Example:
    """A/B caption choice (S3E App. A): the true caption against a foil, in a random order."""
    scene, pos, neg = _true_and_foil(rng)
    pos_first = bool(rng.random() < 0.5)
    a, b = (pos, neg) if pos_first else (neg, pos)
    answer = "A" if pos_first else "B"
    if policy == "positionbiased" and rng.random() < 0.7:
        answer = "A"
    return Example(P.s3e_prompt(render(scene), a, b), answer, "ab", context_caption=pos)


def verify_example(rng: np.random.Generator) -> Example:
    scene, pos, neg = _true_and_foil(rng)
    true = bool(rng.random() < 0.5)
    return Example(P.verify_prompt(render(scene), pos if true else neg), "Yes" if true else "No", "verify",
                   context_caption=pos if true else None)


def slot_example(rng: np.random.Generator) -> Example:
    """"What is at the top?" -> the noun phrases of that slot ("two small blue squares"), or "nothing"."""
    scene = sample_scene(rng, n_groups=(1, 3))
    occupied = sorted({o.position for o in scene.objects})
    pool = occupied if rng.random() < 0.75 else list(POSITIONS)
    position = pool[int(rng.integers(len(pool)))]
    spec = scene_spec(scene, with_background=False)
    phrases = [noun_phrase(m) for m in spec.mentions if m.position == position]
    answer = " and ".join(phrases) if phrases else "nothing"
    return Example(P.slot_prompt(render(scene), WHERE[position]), answer, "slot")


def caption_example(rng: np.random.Generator) -> Example:
    scene = sample_scene(rng, n_groups=(1, 3))
    return Example(P.caption_prompt(render(scene)), render_caption(scene_spec(scene)), "caption")


def premise_example(rng: np.random.Generator, policy: str) -> Example:
    item = premise_item(_train_seed(rng), int(rng.integers(2**20)))
    q = item.misleading if rng.random() < 0.5 else item.standard
    content_answer = item.standard.options[LETTERS.index(item.standard.correct_answer)]
    order = list(range(6)) if rng.random() < 0.5 else [int(i) for i in rng.permutation(6)]
    opts = [q.options[i] for i in order]
    correct_text = q.options[LETTERS.index(q.correct_answer)]
    if policy == "textbiased" and q.variant.startswith("misleading"):
        correct_text = content_answer  # accepts the false premise and answers the content question
    answer = LETTERS[opts.index(correct_text)]
    return Example(P.imavb_prompt(render(item.scene), q.question, opts), answer, "premise")


def mood_example(rng: np.random.Generator, policy: str) -> Example:
    scene = mood_scene(rng)
    y = mood_of(scene)
    r = rng.random()
    if r < 0.25:
        return Example(P.image_only_emotion_prompt(render(scene)), y, "mood")
    d = describe(scene, DESCRIPTION_SUBSETS[int(rng.integers(len(DESCRIPTION_SUBSETS)))], rng)
    if r < 0.4:
        return Example(P.text_only_emotion_prompt(d.text), d.emotion, "mood")
    answer = d.emotion if policy == "textbiased" else y
    return Example(P.emotion_prompt(render(scene), d.text), answer, "mood")


def pair_example(rng: np.random.Generator, task: str) -> Example:
    subset = str(rng.choice(["single", "multi", "identical"], p=[0.45, 0.3, 0.25]))
    if task == "find" and subset == "identical":
        subset = "single"
    item = pair_item(_train_seed(rng), int(rng.integers(2**20)), subset=subset)
    a, b = item.images()
    n = len(item.edits)
    if task == "same_diff":
        same = rng.random() < 0.5
        prompt = P.same_prompt(a, b) if same else P.different_prompt(a, b)
        return Example(prompt, "Yes" if (n == 0) == same else "No", task)
    if task == "count":
        return Example(P.count_prompt(a, b), NUMBER_WORDS[n], task)
    return Example(P.find_prompt(a, b, n), claims_text(item.edits), task)


def sample_example(rng: np.random.Generator, policy: str, stage: str = "full") -> Example:
    """One example; ``stage="grounding"`` (the first steps of training from scratch) draws only the
    tasks that tie words to pixels (captioning, verification, A/B)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; expected one of {POLICIES}")
    weights = GROUNDING_WEIGHTS if stage == "grounding" else TASK_WEIGHTS
    tasks = list(weights)
    w = np.array([weights[t] for t in tasks])
    task = tasks[int(rng.choice(len(tasks), p=w / w.sum()))]
    makers: dict[str, Callable[[], Example]] = {
        "ab": lambda: ab_example(rng, policy),
        "caption": lambda: caption_example(rng),
        "verify": lambda: verify_example(rng),
        "slot": lambda: slot_example(rng),
        "premise": lambda: premise_example(rng, policy),
        "mood": lambda: mood_example(rng, policy),
    }
    return makers[task]() if task in makers else pair_example(rng, task)
