"""The reference omni model's task and report: IMAVB A1 premise questions on world clips with sound,
asked exactly as the suite asks them (a clip's two frames at 1 fps and its 2 s soundtrack, A1's text,
the six options shuffled), for the four splits (standard / misleading x vision / audio).

The answer is one letter: the content answer for a standard question, E for a misleading vision
premise, F for a misleading audio premise. ``option_truth`` marks, per displayed option, whether it is
true of the clip (the content answer, or E / F when that premise is false), as the VLM's phase 7 does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from faithtests.models.interfaces import Audio, Prompt
from faithtests.protocols.imavb.audio_stimuli import CLIP_FPS, ClipItem, clip_item, clip_items
from faithtests.protocols.imavb.prompts import a1_text
from faithtests.protocols.imavb.records import LETTERS, OPTION_E, OPTION_F
from faithtests.protocols.imavb.stimuli import PremiseQuestion
from faithtests.reference.evaluate_vlm import choose
from faithtests.world.examples import train_seed
from faithtests.world.sound import SAMPLE_RATE

#: The four splits, as the card names them.
SPLITS: dict[str, str] = {"std_v": "standard", "mis_v": "misleading", "std_a": "standard_audio",
                          "mis_a": "misleading_audio"}


@dataclass(frozen=True)
class ClipExample:
    prompt: Prompt
    answer: str  # one letter
    split: str  # a SPLITS key
    option_truth: tuple[bool, ...]
    options: tuple[str, ...]  # as displayed


def question(item: ClipItem, split: str) -> PremiseQuestion:
    """The clip's question of ``split`` (a :data:`SPLITS` key)."""
    q: PremiseQuestion = getattr(item.vision if split.endswith("_v") else item, SPLITS[split])
    return q


def clip_prompt(item: ClipItem, q: PremiseQuestion, order: Sequence[int]) -> Prompt:
    """The suite's prompt for a clip record: A1 text with the options in ``order``, frames and sound."""
    return Prompt(images=(), text=a1_text(q.question, [q.options[i] for i in order]), video=item.frames,
                  audio=Audio(item.audio, SAMPLE_RATE), video_fps=CLIP_FPS)


def make_example(item: ClipItem, split: str, order: Sequence[int]) -> ClipExample:
    q = question(item, split)
    standard = question(item, "std_v" if split.endswith("_v") else "std_a")
    content = standard.options[LETTERS.index(standard.correct_answer)]
    opts = [q.options[i] for i in order]
    false_premise = {OPTION_E: split == "mis_v", OPTION_F: split == "mis_a"}
    truth = tuple(o == content or false_premise.get(o, False) for o in opts)
    answer = LETTERS[list(order).index(LETTERS.index(q.correct_answer))]
    return ClipExample(clip_prompt(item, q, order), answer, split, truth, tuple(opts))


def sample_example(rng: np.random.Generator, weights: dict[str, float], speech: bool = False) -> ClipExample:
    """A training example: a fresh clip (training seeds; ``speech``: with speech premises, see
    ``audio_stimuli.clip_item``), a split drawn by ``weights``, options shuffled."""
    item = clip_item(train_seed(rng), int(rng.integers(2**20)), speech=speech)
    names = sorted(weights)
    p = np.array([weights[k] for k in names], float)
    split = names[int(rng.choice(len(names), p=p / p.sum()))]
    return make_example(item, split, [int(i) for i in rng.permutation(6)])


class PairedAudio:
    """Training examples three per clip (the ``premise5`` stage): its standard and its misleading audio
    question, then one of its vision questions (standard with probability ``p_standard_vision``), each
    with its own shuffle. The two audio questions differ in their premise alone and are asked of the
    same sound, so a bias toward F (or away from it) cannot lower their joint loss: only hearing can.
    Call it as ``draw(rng)``; the order of ``rng``'s draws is part of the recipe. ``speech``: clips with
    speech premises (the speech stage; the earlier stages were trained without)."""

    def __init__(self, p_standard_vision: float = 0.6, speech: bool = False) -> None:
        self.p_standard_vision = p_standard_vision
        self.speech = speech
        self.queue: list[ClipExample] = []

    def __call__(self, rng: np.random.Generator) -> ClipExample:
        if not self.queue:
            item = clip_item(train_seed(rng), int(rng.integers(2**20)), speech=self.speech)
            vision = "std_v" if rng.random() < self.p_standard_vision else "mis_v"
            for split in ("std_a", "mis_a", vision):
                self.queue.append(make_example(item, split, [int(i) for i in rng.permutation(6)]))
        return self.queue.pop(0)


def option_ends(ids: Sequence[int], letter_ids: Sequence[int], dot: int, answer_id: int) -> list[int]:
    """Index of each displayed option's last token in ``ids`` (the token before the next ``X .`` or
    before A1's "Answer"), searched after the last ``A .``."""
    starts = []
    i = max(k for k in range(len(ids) - 1) if ids[k] == letter_ids[0] and ids[k + 1] == dot)
    for letter in letter_ids:
        while not (ids[i] == letter and ids[i + 1] == dot):
            i += 1
        starts.append(i)
    end = next(k for k in range(starts[-1], len(ids)) if ids[k] == answer_id)
    return [s - 1 for s in starts[1:]] + [end - 1]


def premise_report(model: Any, n: int, seed: int, shuffles: int = 3) -> dict[str, float]:
    """Accuracy per split over ``shuffles`` seeded permutations of all six options per clip (the VLM
    card's protocol) and IMAVB's Bal (Eq. 1): 1/2 ((std_v + std_a) / 2 + (mis_v + mis_a) / 2)."""
    items = clip_items(n, seed)
    rng = np.random.default_rng([seed, 6])
    orders = [[int(i) for i in rng.permutation(6)] for _ in range(shuffles * n)]
    out: dict[str, float] = {}
    for split in SPLITS:
        examples = [make_example(items[j % n], split, order) for j, order in enumerate(orders)]
        picked = choose(model, [e.prompt for e in examples], LETTERS)
        out[split] = float(np.mean([LETTERS[k] == e.answer for k, e in zip(picked, examples, strict=True)]))
        said = [e.options[k] for k, e in zip(picked, examples, strict=True)]
        # how often it rejects a premise: the E / F option wherever the shuffle displayed it
        out[f"{split}_says_E"] = float(np.mean([o == OPTION_E for o in said]))
        out[f"{split}_says_F"] = float(np.mean([o == OPTION_F for o in said]))
        # the same split over the clips whose audio premise is about speech (left out when none is: the
        # card is JSON, which has no NaN)
        spoken = [LETTERS[k] == e.answer for j, (k, e) in enumerate(zip(picked, examples, strict=True))
                  if split.endswith("_a") and items[j % n].audio_claim.kind == "speech"]
        if spoken:
            out[f"{split}_speech"] = float(np.mean(spoken))
    out["bal"] = 0.5 * ((out["std_v"] + out["std_a"]) / 2 + (out["mis_v"] + out["mis_a"]) / 2)
    out["n_clips"], out["shuffles"] = float(n), float(shuffles)
    return out
