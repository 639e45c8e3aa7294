"""Item-log rows and exemplars of the premise-rejection suite: what a reader sees of one record (its
question, the options, what the model chose under each order)."""

from __future__ import annotations

import numpy as np

from faithtests.protocols.imavb.metrics import answers
from faithtests.protocols.imavb.records import LETTERS, PremiseRecord
from faithtests.protocols.imavb.run import ChoiceRun, VariantRun


def variant_exemplar(vr: VariantRun, j: int) -> dict[str, object]:
    r = vr.records[j]
    media = r.load_media()
    reply = vr.replies[j] if vr.replies else f"correct in {vr.correct[j]:.0%} of shuffles"
    return {
        "image": media[0] if media else None,
        "texts": {"question": r.question, "gold": r.correct_answer, "split": r.split, "reply": reply},
        "reason": f"{vr.prompt} answered wrong",
    }


def option_label(r: PremiseRecord, index: int) -> str:
    """``"C. the option's text"``, or ``"no answer (tied top logit)"``."""
    return f"{LETTERS[index]}. {r.options[index]}" if index >= 0 else "no answer (tied top logit)"


def item_outputs(
    run: ChoiceRun, recs: list[PremiseRecord], per_item: np.ndarray
) -> dict[str, dict[str, object]]:
    """Item-log rows: the stimulus, question and options, the option chosen in the fixed order and the
    letters chosen under the shuffles (mapped back to the canonical order); outcome: correct share."""
    pos = {r.item_id: i for i, r in enumerate(run.records)}
    picked = answers(run.logits[[pos[r.item_id] for r in recs]])  # [n, orders]
    return {r.item_id: {
        "inputs": {"image": r.stimulus_id, "question": r.question,
                   "options": " | ".join(f"{k}. {o}" for k, o in zip(LETTERS, r.options, strict=True))},
        "output": {"answer": option_label(r, int(a[0])),
                   "shuffles": [LETTERS[int(x)] if x >= 0 else "tie" for x in a[1:]]},
        "outcome": float(v)} for r, a, v in zip(recs, picked, per_item, strict=True)}


def exemplar(run: ChoiceRun, r: PremiseRecord, reason: str) -> dict[str, object]:
    i = run.records.index(r)
    media = r.load_media()
    chosen = int(answers(run.logits[i, 0]))
    return {
        "image": media[0] if media else None,
        "texts": {
            "question": r.question,
            "answer (fixed order)": option_label(r, chosen),
            "gold": option_label(r, r.correct_index),
            "split": r.split,
        },
        "reason": reason,
    }
