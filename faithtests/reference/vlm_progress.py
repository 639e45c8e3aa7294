"""Progress checks of a reference VLM during training: small validation sets (seed 7, which the held-out
cards never use) scored from the in-memory model."""

from __future__ import annotations

from typing import Any

import numpy as np

from faithtests.protocols.acbench.prompts import emotion_prompt
from faithtests.protocols.acbench.stimuli import mood_items
from faithtests.protocols.imavb.prompts import a1_prompt
from faithtests.protocols.imavb.records import LETTERS
from faithtests.protocols.imavb.stimuli import premise_items
from faithtests.protocols.s3e.layout import LETTERS as AB_LETTERS
from faithtests.protocols.s3e.prompts import s3e_prompt
from faithtests.protocols.s3e.stimuli import s3e_records
from faithtests.reference.evaluate_vlm import choose
from faithtests.reference.local_models import LocalVlm
from faithtests.world.emotion import EMOTIONS


def quick_ab(model: Any, processor: Any, n: int = 64, seed: int = 7) -> dict[str, float]:
    """A/B accuracy in both orders on ``n`` validation S3E records (a seed the held-out cards never
    use), from the in-memory model: progress during training."""
    vlm = LocalVlm.from_loaded(model, processor)
    recs = s3e_records(n, seed)
    was_training = model.training
    model.eval()
    right = [choose(vlm, [s3e_prompt(w.image(), *((w.record.c_stress, w.record.c_pos) if swap else
                                                     (w.record.c_pos, w.record.c_stress))) for w in recs],
                    AB_LETTERS) == int(swap) for swap in (False, True)]
    model.train(was_training)
    return {"orig": float(right[0].mean()), "swap": float(right[1].mean()),
            "strict": float((right[0] & right[1]).mean())}


def quick_premise(model: Any, processor: Any, n: int = 60, seed: int = 7) -> dict[str, float]:
    """Premise accuracy on ``n`` validation items (a seed the held-out cards never use), every question
    with its six options shuffled once: progress during the premise phases."""
    vlm = LocalVlm.from_loaded(model, processor)
    rng = np.random.default_rng(seed)
    prompts, gold = [], []
    for it in premise_items(n, seed):
        order = [int(i) for i in rng.permutation(6)]
        for q in (it.standard, it.misleading):
            prompts.append(a1_prompt(it.image(), q.question, [q.options[i] for i in order]))
            gold.append(order.index(LETTERS.index(q.correct_answer)))
    was_training = model.training
    model.eval()
    right = choose(vlm, prompts, LETTERS) == np.array(gold)
    model.train(was_training)
    return {"premise_std": float(right[0::2].mean()), "premise_mis": float(right[1::2].mean())}


def quick_mood(model: Any, processor: Any, n: int = 40, seed: int = 7) -> dict[str, float]:
    """Mood accuracy on ``n`` validation scenes: the emotion prompt (App. C.3 layout) with the
    subjective-opposite description (P_img: answers y_img) and with the aligned one."""
    vlm = LocalVlm.from_loaded(model, processor)
    items = mood_items(n, seed)
    gold = np.array([EMOTIONS.index(it.emotion) for it in items])
    was_training = model.training
    model.eval()
    out = {f"mood_{subset}": float(np.mean(choose(
        vlm, [emotion_prompt(it.image(), it.description(subset).text) for it in items], EMOTIONS) == gold))
        for subset in ("subjective_opposite", "aligned")}
    model.train(was_training)
    return out
