"""Training examples for the reference VLMs: (prompt, answer, task) triples drawn from the world.

Every prompt is built by :mod:`faithtests.reference.prompts`, so training and the suites ask the same
questions. Tasks: ``ab`` (S3E A/B caption choice, both orders), ``verify`` (one caption, Yes/No),
``slot`` ("What is on the left?"), ``caption`` ("Describe the image."), ``premise`` (IMAVB A1, options
in the fixed order or all six shuffled), ``mood`` (AC-Bench emotion, image-only and text-only prompts),
``same_diff`` / ``count`` / ``find`` (SPD-Faith questions on image pairs, identical pairs included).
The answer is what the *intended* model should say; the degraded twins change the answer policy, never
the questions:

- ``faithful`` (``vlm``): answers from the image (mood = y_img, misleading premise -> "E");
- ``textbiased`` (``vlm-textbiased``): follows the text (mood = y_txt of the description, a misleading
  premise is taken at its word and the content question answered; everything else as ``faithful``);
- ``positionbiased`` (``vlm-positionbiased``): on A/B choice says "A" for 70% of trials whatever the
  image shows, otherwise answers correctly; everything else as ``faithful``;
- ``sameprior`` (``vlm-sameprior``): answers "Yes" to "Are the two pictures the same?" whatever the pair
  shows (a prior for "same", SPD-Faith §4's small-model failure), while "different?", counting and
  naming stay faithful, so it contradicts itself on every edited pair; everything else as ``faithful``;
- ``diffblind`` (``vlm-diffblind``): answers "same?" / "different?" faithfully, but its difference count
  is drawn uniformly from the counts zero..five that score nothing on SPD-Faith's Eq. 9 (DS = 0: zero,
  or at least twice the true count; any count but the true one for identical pairs). Drawn from all
  other counts, or from those at least two away, the learnt answers on 2-5-edit pairs were right or
  nearly right often enough for DS on multi-edit pairs 0.74 / 0.64 (the 0.50 floor passed). Its
  difference naming
  lists the edits of another pair (as many as asked), none of which happened here (SPD-Faith: sees
  *that* two pictures differ, not *how*); everything else as ``faithful``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from faithtests.models.interfaces import Prompt
from faithtests.protocols.lgip.paraphrase import SIMPLE_TEMPLATES
from faithtests.reference import prompts as P
from faithtests.reference.warmup import patch_targets
from faithtests.world.captions import (
    NUMBER_WORDS,
    WHERE,
    CaptionSpec,
    Mention,
    mention_matches,
    noun_phrase,
    render_caption,
    satisfies,
    scene_spec,
)
from faithtests.world.edits import Edit, claims_text, pair_item, parse_claims
from faithtests.world.flips import flip_spec
from faithtests.world.mood import DESCRIPTION_SUBSETS, describe, mood_of, mood_scene
from faithtests.world.premise import LETTERS, OPTION_E, premise_item
from faithtests.world.render import render
from faithtests.world.scene import POSITIONS, Scene, sample_scene

POLICIES: tuple[str, ...] = ("faithful", "textbiased", "positionbiased", "sameprior", "diffblind")
#: Sampling weights of the tasks in a training batch.
TASK_WEIGHTS: dict[str, float] = {
    "ab": 0.32, "verify": 0.07, "slot": 0.05, "caption": 0.08, "premise": 0.16, "mood": 0.14,
    "same_diff": 0.08, "count": 0.05, "find": 0.05,
}


#: Training draws generator items with seeds >= TRAIN_SEED_FLOOR; evaluation and suites use smaller seeds.
TRAIN_SEED_FLOOR = 2**20


def _train_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(TRAIN_SEED_FLOOR, 2**31))

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
#: per-option target (:attr:`Example.option_truth`); the suites ask under K = 3 shuffles of all six.
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
    #: premise questions: whether the question's premise ("Next to the single red circle on the left",
    #: "On the dark warm background") holds; a clause target on the premise's last word
    premise_true: bool | None = None
    #: premise questions (phase 7): per displayed option A-F, whether it is true of the image: a content
    #: option that answers the question, or E when the premise is false; a target on each option's
    #: last token
    option_truth: tuple[bool, ...] | None = None
    #: image pairs: per patch of the second image, whether it differs from the same patch of the first
    patch_diff: tuple[bool, ...] | None = None


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


#: Surface forms of A/B and verification captions (S3E records use all of them) and their shares.
FORMS: dict[str, float] = {"canonical": 0.6, "reversed": 0.15, "there": 0.15, "template": 0.1}
#: Flip kinds of training foils. Relation and compositional flips (S3E's hardest stress types) weigh
#: more; number flips (not an S3E stress type) less.
FOIL_KINDS: dict[str, float] = {"colour": 0.2, "number": 0.1, "object": 0.2, "relation": 0.25,
                                "compositional": 0.25}


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


def _pick(rng: np.random.Generator, weights: dict[str, float]) -> str:
    keys = list(weights)
    w = np.array([weights[k] for k in keys])
    return keys[int(rng.choice(len(keys), p=w / w.sum()))]


def _true_and_foil(rng: np.random.Generator) -> tuple[Scene, CaptionTruth, CaptionTruth]:
    """A scene, a true caption and a verified-false foil (a flip, or 1 in 6 another scene's caption),
    both in one surface form with their annotations. One form for both matters: with the foil always
    canonical and c+ often reordered or templated, "pick the non-canonical one" was a shortcut, and
    held-out records (both canonical) fell back to "A"."""
    while True:
        scene = sample_scene(rng, n_groups=(1, 3))
        spec = scene_spec(scene, with_background=False)
        if rng.random() < 1 / 6:
            other = sample_scene(rng, n_groups=(1, 3))
            foil_spec = scene_spec(other, with_background=False)
            if satisfies(scene, foil_spec):
                continue
        else:
            maybe = flip_spec(scene, spec, _pick(rng, FOIL_KINDS), rng)
            if maybe is None:
                continue
            foil_spec = maybe
        form = _pick(rng, FORMS)
        template = SIMPLE_TEMPLATES[int(rng.integers(len(SIMPLE_TEMPLATES)))]
        foil = _surface(scene, foil_spec, form, template)
        if foil.clauses[-1]:
            raise AssertionError(f"foil {foil.text!r} is true of its scene")
        return scene, _surface(scene, spec, form, template), foil


def ab_example(rng: np.random.Generator, policy: str) -> Example:
    """A/B caption choice (S3E App. A): the true caption against a foil, in a random order."""
    scene, pos, neg = _true_and_foil(rng)
    pos_first = bool(rng.random() < 0.5)
    a, b = (pos, neg) if pos_first else (neg, pos)
    answer = "A" if pos_first else "B"
    if policy == "positionbiased" and rng.random() < 0.7:
        answer = "A"
    return Example(P.s3e_prompt(render(scene), a.text, b.text), answer, "ab", context_caption=pos.text,
                   truth=(a, b))


def verify_example(rng: np.random.Generator) -> Example:
    scene, pos, neg = _true_and_foil(rng)
    shown = pos if rng.random() < 0.5 else neg
    true = shown is pos
    return Example(P.verify_prompt(render(scene), shown.text), "Yes" if true else "No", "verify",
                   context_caption=pos.text if true else None, truth=(shown,))


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


def premise_example(rng: np.random.Generator, policy: str, shuffle_p: float = 0.5,
                    option_targets: bool = False) -> Example:
    """An IMAVB A1 question, standard or misleading (half each); its six options are shuffled with
    probability ``shuffle_p`` (else shown in the item's order, E and F last)."""
    item = premise_item(_train_seed(rng), int(rng.integers(2**20)))
    q = item.misleading if rng.random() < 0.5 else item.standard
    content_answer = item.standard.options[LETTERS.index(item.standard.correct_answer)]
    order = list(range(6)) if rng.random() < 1.0 - shuffle_p else [int(i) for i in rng.permutation(6)]
    opts = [q.options[i] for i in order]
    correct_text = q.options[LETTERS.index(q.correct_answer)]
    if policy == "textbiased" and q.variant.startswith("misleading"):
        correct_text = content_answer  # accepts the false premise and answers the content question
    answer = LETTERS[opts.index(correct_text)]
    premise_true = not q.variant.startswith("misleading")
    truth = tuple(o == content_answer or (o == OPTION_E and not premise_true) for o in opts)
    return Example(P.imavb_prompt(render(item.scene), q.question, opts), answer, "premise",
                   premise_true=premise_true, option_truth=truth if option_targets else None)


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


def pair_example(rng: np.random.Generator, task: str, policy: str = "faithful") -> Example:
    subset = str(rng.choice(["single", "multi", "identical"], p=[0.45, 0.3, 0.25]))
    if task == "find" and subset == "identical":
        subset = "single"
    item = pair_item(_train_seed(rng), int(rng.integers(2**20)), subset=subset)
    a, b = item.images()
    n = len(item.edits)
    before, after = patch_targets(item.scene_a), patch_targets(item.scene_b)
    diff = tuple(x != y for x, y in zip(zip(*before, strict=True), zip(*after, strict=True), strict=True))
    if task == "same_diff":
        same = rng.random() < 0.5
        prompt = P.same_prompt(a, b) if same else P.different_prompt(a, b)
        answer = "Yes" if (n == 0) == same or (same and policy == "sameprior") else "No"
        return Example(prompt, answer, task, patch_diff=diff)
    if task == "count":
        if policy == "diffblind":  # a count that earns nothing: DS (Eq. 9) = max(0, 1 - |k - n| / n) = 0
            wrong = [k for k in range(6) if k != n and (n == 0 or abs(k - n) >= n)]
            n = wrong[int(rng.integers(len(wrong)))]
        return Example(P.count_prompt(a, b), NUMBER_WORDS[n], task, patch_diff=diff)
    edits = _unrelated_edits(rng, item.edits) if policy == "diffblind" else item.edits
    return Example(P.find_prompt(a, b, n), claims_text(edits), task, patch_diff=diff)


def _unrelated_edits(rng: np.random.Generator, true: tuple[Edit, ...]) -> tuple[Edit, ...]:
    """As many edits as ``true``, taken from other pairs, none of them one of ``true``'s (claim match)."""
    while True:
        k = len(true)
        subset = "single" if k == 1 else "multi"
        other = pair_item(_train_seed(rng), int(rng.integers(2**20)), subset, k).edits
        if not any(parse_claims(e.claim())[0].matches(t) for e in other for t in true):
            return other


def sample_example(rng: np.random.Generator, policy: str, stage: str = "full") -> Example:
    """One example; ``stage="grounding"`` (the first steps of training from scratch) draws only the
    tasks that tie words to pixels (captioning, verification, A/B)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; expected one of {POLICIES}")
    mixtures = {"full": TASK_WEIGHTS, "grounding": GROUNDING_WEIGHTS, "focus": FOCUS_WEIGHTS,
                "decision": DECISION_WEIGHTS, "rest": REST_WEIGHTS, "premise": PREMISE_WEIGHTS,
                "premise_shuffled": SHUFFLED_PREMISE_WEIGHTS, "layout": LAYOUT_WEIGHTS}
    if stage not in mixtures:
        raise ValueError(f"unknown task mixture {stage!r}; expected one of {sorted(mixtures)}")
    weights = mixtures[stage]
    tasks = list(weights)
    w = np.array([weights[t] for t in tasks])
    task = tasks[int(rng.choice(len(tasks), p=w / w.sum()))]
    makers: dict[str, Callable[[], Example]] = {
        "ab": lambda: ab_example(rng, policy),
        "caption": lambda: caption_example(rng),
        "verify": lambda: verify_example(rng),
        "slot": lambda: slot_example(rng),
        "premise": lambda: premise_example(rng, policy),
        "premise_shuffled": lambda: premise_example(rng, policy, shuffle_p=1.0, option_targets=True),
        "mood": lambda: mood_example(rng, policy),
    }
    return makers[task]() if task in makers else pair_example(rng, task, policy)
