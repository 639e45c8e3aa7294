"""Training examples for the reference VLMs: (prompt, answer, task) triples drawn from the world.

Each protocol's tasks live in its ``training.py`` (``TASKS``, named by its manifest's ``training``) and
build their prompts with the protocol's own prompt module, so training and the suites ask the same
questions; :func:`training_tasks` collects them through :func:`faithtests.protocols.manifests`. This
module adds the generic grounding tasks (``verify``: one caption, Yes/No; ``slot``: "What is on the
left?"; ``caption``: "Describe the image.") and the mixtures that weight all tasks per training phase.
The answer is what the *intended* model should say; the degraded twins change the answer policy, never
the questions (each protocol's ``training.py`` says what its tasks do under each policy):

- ``faithful`` (``vlm``): answers from the image;
- ``textbiased`` (``vlm-textbiased``): follows the text where a prompt carries a misleading one;
- ``positionbiased`` (``vlm-positionbiased``): on A/B choice says "A" for 70% of trials;
- ``sameprior`` (``vlm-sameprior``): answers "Yes" to "Are the two pictures the same?" whatever it sees;
- ``diffblind`` (``vlm-diffblind``): sees *that* two pictures differ, not *how* (wrong counts, names
  edits of another pair).

The generic grounding tasks answer the same under every policy.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from faithtests.manifest import load_attr
from faithtests.protocols import manifests
from faithtests.protocols.lgip.paraphrase import SIMPLE_TEMPLATES
from faithtests.reference.grounding_prompts import caption_prompt, slot_prompt, verify_prompt
from faithtests.world.captions import WHERE, noun_phrase, render_caption, scene_spec
from faithtests.world.examples import Example, TaskMaker, pick, true_and_foil
from faithtests.world.render import render
from faithtests.world.scene import POSITIONS, sample_scene

POLICIES: tuple[str, ...] = ("faithful", "textbiased", "positionbiased", "sameprior", "diffblind")
#: Sampling weights of the tasks in a training batch.
TASK_WEIGHTS: dict[str, float] = {
    "ab": 0.32, "verify": 0.07, "slot": 0.05, "caption": 0.08, "premise": 0.16, "mood": 0.14,
    "same_diff": 0.08, "count": 0.05, "find": 0.05,
}
#: Phase 2 of ``vlm`` (continued from phase 1): the decision tasks get most of the batch.
FOCUS_WEIGHTS: dict[str, float] = {
    "ab": 0.42, "verify": 0.10, "slot": 0.03, "caption": 0.05, "premise": 0.14, "mood": 0.08,
    "same_diff": 0.10, "count": 0.04, "find": 0.04,
}
#: Phases 4-5 of ``vlm``: the tasks still near chance after "focus" (premise, same/different,
#: counting and naming differences, mood from text) get most of the batch; A/B and verification
#: keep a fifth.
REST_WEIGHTS: dict[str, float] = {
    "ab": 0.16, "verify": 0.06, "slot": 0.03, "caption": 0.03, "premise": 0.22, "mood": 0.14,
    "same_diff": 0.14, "count": 0.11, "find": 0.11,
}
#: The last phase of ``vlm``: premise questions get half of the batch.
PREMISE_WEIGHTS: dict[str, float] = {
    "ab": 0.15, "verify": 0.05, "slot": 0.03, "caption": 0.02, "premise": 0.5, "mood": 0.05,
    "same_diff": 0.08, "count": 0.06, "find": 0.06,
}
#: Phase 7 of ``vlm``: the premise mixture with every premise question's six options shuffled and a
#: per-option target (``Example.option_truth``); the suites ask under K = 3 shuffles of all six.
SHUFFLED_PREMISE_WEIGHTS: dict[str, float] = {
    **{k: v for k, v in PREMISE_WEIGHTS.items() if k != "premise"}, "premise_shuffled": 0.5,
}
#: Phase 8 of ``vlm`` (AC-Bench App. C.3 layout): phase 7's mixture with mood (whose emotion prompt now
#: carries the description between "IMAGE + DESCRIPTION:" and "Question:") weighted up, and premise
#: questions split between shuffled ones and ones half in the fixed order (the cards measure both).
LAYOUT_WEIGHTS: dict[str, float] = {
    "ab": 0.15, "verify": 0.05, "slot": 0.03, "caption": 0.02, "premise": 0.15, "premise_shuffled": 0.15,
    "mood": 0.25, "same_diff": 0.08, "count": 0.06, "find": 0.06,
}
#: Only the caption decisions (diagnostics and curricula).
DECISION_WEIGHTS: dict[str, float] = {"ab": 0.5, "verify": 0.5}
GROUNDING_WEIGHTS: dict[str, float] = {"slot": 0.35, "caption": 0.3, "verify": 0.15, "ab": 0.2}
#: Task mixtures by name (``stage`` of :func:`sample_example`, ``mixture`` of a training phase).
MIXTURES: dict[str, dict[str, float]] = {
    "full": TASK_WEIGHTS, "grounding": GROUNDING_WEIGHTS, "focus": FOCUS_WEIGHTS,
    "decision": DECISION_WEIGHTS, "rest": REST_WEIGHTS, "premise": PREMISE_WEIGHTS,
    "premise_shuffled": SHUFFLED_PREMISE_WEIGHTS, "layout": LAYOUT_WEIGHTS,
}


def verify_example(rng: np.random.Generator, policy: str = "faithful") -> Example:
    """One caption, true or a foil (half each): "Does this caption match the image?" -> Yes / No."""
    scene, pos, neg = true_and_foil(rng, SIMPLE_TEMPLATES)
    shown = pos if rng.random() < 0.5 else neg
    true = shown is pos
    return Example(verify_prompt(render(scene), shown.text), "Yes" if true else "No", "verify",
                   context_caption=pos.text if true else None, truth=(shown,))


def slot_example(rng: np.random.Generator, policy: str = "faithful") -> Example:
    """"What is at the top?" -> the noun phrases of that slot ("two small blue squares"), or "nothing"."""
    scene = sample_scene(rng, n_groups=(1, 3))
    occupied = sorted({o.position for o in scene.objects})
    pool = occupied if rng.random() < 0.75 else list(POSITIONS)
    position = pool[int(rng.integers(len(pool)))]
    spec = scene_spec(scene, with_background=False)
    phrases = [noun_phrase(m) for m in spec.mentions if m.position == position]
    answer = " and ".join(phrases) if phrases else "nothing"
    return Example(slot_prompt(render(scene), WHERE[position]), answer, "slot")


def caption_example(rng: np.random.Generator, policy: str = "faithful") -> Example:
    scene = sample_scene(rng, n_groups=(1, 3))
    return Example(caption_prompt(render(scene)), render_caption(scene_spec(scene)), "caption")


#: The tasks that tie words to pixels, owned by no protocol.
GROUNDING_TASKS: dict[str, TaskMaker] = {
    "verify": verify_example, "slot": slot_example, "caption": caption_example,
}


@cache
def _collected() -> tuple[tuple[str, TaskMaker], ...]:
    found: dict[str, TaskMaker] = dict(GROUNDING_TASKS)
    for m in manifests():
        if m.training is None:
            continue
        tasks: dict[str, TaskMaker] = load_attr(m.training)
        clash = sorted(set(tasks) & set(found))
        if clash:
            raise ValueError(f"protocol {m.name!r} declares training task(s) already declared: {clash}")
        found.update(tasks)
    return tuple(found.items())


def training_tasks() -> dict[str, TaskMaker]:
    """Task name -> maker: the grounding tasks and every protocol's ``Manifest.training`` tasks."""
    return dict(_collected())


def sample_example(rng: np.random.Generator, policy: str, stage: str = "full") -> Example:
    """One example; ``stage="grounding"`` (the first steps of training from scratch) draws only the
    tasks that tie words to pixels (captioning, verification, A/B)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; expected one of {POLICIES}")
    if stage not in MIXTURES:
        raise ValueError(f"unknown task mixture {stage!r}; expected one of {sorted(MIXTURES)}")
    makers = training_tasks()
    task = pick(rng, MIXTURES[stage])
    if task not in makers:
        raise ValueError(f"mixture {stage!r} names task {task!r}, which no protocol's manifest declares "
                         f"(known: {sorted(makers)})")
    return makers[task](rng, policy)
