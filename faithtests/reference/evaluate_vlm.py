"""Held-out per-task accuracy of a reference VLM (any ``VisionLanguageModel``), for the model cards.

Decisions are option logits at the answer position (no sampling); difference naming uses greedy
generation parsed by the strict claim parser (an unparseable answer counts as zero correct claims).
Chance levels: A/B 0.5 per order and 0.25 strict; premise 1/6; mood 1/8; same/different 0.5;
count 1/6 (zero..five).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from faithtests.models.interfaces import Prompt
from faithtests.protocols.acbench.prompts import (
    emotion_prompt,
    image_only_emotion_prompt,
    text_only_emotion_prompt,
)
from faithtests.protocols.acbench.stimuli import mood_items
from faithtests.protocols.imavb.prompts import a1_prompt
from faithtests.protocols.imavb.records import LETTERS
from faithtests.protocols.imavb.stimuli import premise_items
from faithtests.protocols.s3e.layout import LETTERS as AB_LETTERS
from faithtests.protocols.s3e.prompts import s3e_prompt
from faithtests.protocols.s3e.stimuli import s3e_records
from faithtests.protocols.spdfaith.prompts import (
    YES_NO,
    count_prompt,
    different_prompt,
    find_prompt,
    same_prompt,
)
from faithtests.protocols.spdfaith.stimuli import pair_item, parse_claims
from faithtests.world.captions import NUMBER_WORDS
from faithtests.world.emotion import EMOTIONS
from faithtests.world.render import render

EVAL_SEED = 1_000_003
BATCH = 32


def choose(vlm: Any, prompts: Sequence[Prompt], options: Sequence[str]) -> np.ndarray:
    """Index of the highest option logit per prompt, batched."""
    out = []
    for i in range(0, len(prompts), BATCH):
        logits = vlm.option_logits(list(prompts[i:i + BATCH]), list(options))
        out.append(np.asarray(logits.detach().cpu().numpy() if hasattr(logits, "detach") else logits))
    picked: np.ndarray = np.concatenate(out).argmax(axis=1)
    return picked


def ab_report(vlm: Any, n: int, seed: int) -> dict[str, float]:
    recs = s3e_records(n, seed)
    orig, swap, rand_o, rand_s = [], [], [], []
    for w in recs:
        img, r = w.image(), w.record
        orig.append(s3e_prompt(img, r.c_pos, r.c_stress))
        swap.append(s3e_prompt(img, r.c_stress, r.c_pos))
        rand_o.append(s3e_prompt(img, r.c_pos, r.c_rand))
        rand_s.append(s3e_prompt(img, r.c_rand, r.c_pos))
    o = choose(vlm, orig, AB_LETTERS) == 0
    s = choose(vlm, swap, AB_LETTERS) == 1
    ro = choose(vlm, rand_o, AB_LETTERS) == 0
    rs = choose(vlm, rand_s, AB_LETTERS) == 1
    out = {"ab_stress_orig": float(o.mean()), "ab_stress_swap": float(s.mean()),
           "ab_strict": float((o & s).mean()), "ab_random_both_orders": float((ro & rs).mean())}
    types = np.array([w.record.stress_type for w in recs])
    for t in sorted(set(types)):
        out[f"ab_strict_{t}"] = float((o & s)[types == t].mean())
        out[f"n_ab_strict_{t}"] = float((types == t).sum())  # "n_" keys: sample sizes for the card
    return out


def premise_report(vlm: Any, n: int, seed: int, shuffles: int = 3) -> dict[str, float]:
    """Premise accuracy in the fixed order (options as generated, E and F last) and the mean over
    ``shuffles`` seeded permutations of all six options (the suite's protocol, IMAVB App. D)."""
    items = premise_items(n, seed)
    std = [a1_prompt(render(it.scene), it.standard.question, it.standard.options) for it in items]
    mis = [a1_prompt(render(it.scene), it.misleading.question, it.misleading.options) for it in items]
    ps, pm = choose(vlm, std, LETTERS), choose(vlm, mis, LETTERS)
    gold = [it.standard.correct_answer for it in items]
    acc_std = float(np.mean([LETTERS[k] == g for k, g in zip(ps, gold, strict=True)]))
    acc_mis = float(np.mean([LETTERS[k] == "E" for k in pm]))
    rng = np.random.default_rng([seed, 6])
    shuffled: dict[str, float] = {}
    orders = [[int(i) for i in rng.permutation(6)] for _ in range(shuffles * len(items))]
    for key in ("std", "mis"):
        prompts, golds = [], []
        for j, order in enumerate(orders):
            it = items[j % len(items)]
            q = it.standard if key == "std" else it.misleading
            prompts.append(a1_prompt(render(it.scene), q.question, [q.options[i] for i in order]))
            golds.append(order.index(LETTERS.index(q.correct_answer)))
        shuffled[key] = float(np.mean(choose(vlm, prompts, LETTERS) == np.array(golds)))
    return {"premise_std_v": acc_std, "premise_mis_v": acc_mis, "premise_bal_v": 0.5 * (acc_std + acc_mis),
            "premise_std_says_E": float(np.mean(ps == 4)), "premise_std_v_shuffled": shuffled["std"],
            "premise_mis_v_shuffled": shuffled["mis"],
            "premise_bal_v_shuffled": 0.5 * (shuffled["std"] + shuffled["mis"])}


def mood_report(vlm: Any, n: int, seed: int) -> dict[str, float]:
    items = mood_items(n, seed)
    y = np.array([EMOTIONS.index(it.emotion) for it in items])
    img_only = choose(vlm, [image_only_emotion_prompt(it.image()) for it in items], EMOTIONS)
    out = {"mood_image_only": float((img_only == y).mean())}
    conflict_img, conflict_txt = [], []
    for subset in ("aligned", "subjective_opposite", "objective_attribute", "objective_behaviour"):
        descs = [it.description(subset) for it in items]
        pred = choose(vlm, [emotion_prompt(it.image(), d.text) for it, d in zip(items, descs, strict=True)],
                      EMOTIONS)
        yt = np.array([EMOTIONS.index(d.emotion) for d in descs])
        if subset == "aligned":
            out["mood_aligned"] = float((pred == y).mean())
        else:
            conflict_img.append(pred == y)
            conflict_txt.append(pred == yt)
            out[f"mood_P_img_{subset}"] = float((pred == y).mean())
    p_img, p_txt = float(np.concatenate(conflict_img).mean()), float(np.concatenate(conflict_txt).mean())
    out.update({"mood_P_img_conflict": p_img, "mood_P_txt_conflict": p_txt,
                "mood_TBR": p_txt / (p_txt + p_img) if p_txt + p_img > 0 else float("nan")})
    n_conflict = float(sum(len(c) for c in conflict_img))  # three conflict kinds per item
    out.update({f"n_mood_{k}": n_conflict for k in ("P_img_conflict", "P_txt_conflict", "TBR")})
    descs = [it.description("subjective_opposite") for it in items]
    txt_only = choose(vlm, [text_only_emotion_prompt(d.text) for d in descs], EMOTIONS)
    out["mood_text_only"] = float((txt_only == np.array([EMOTIONS.index(d.emotion) for d in descs])).mean())
    return out


def pair_report(vlm: Any, n: int, seed: int, n_generate: int = 40) -> dict[str, float]:
    items = [pair_item(seed, i, subset=("single", "multi", "identical")[i % 3]) for i in range(n)]
    imgs = [it.images() for it in items]
    same_ok = np.array([len(it.edits) == 0 for it in items])
    ys = choose(vlm, [same_prompt(a, b) for a, b in imgs], YES_NO) == 0
    yd = choose(vlm, [different_prompt(a, b) for a, b in imgs], YES_NO) == 0
    cnt = choose(vlm, [count_prompt(a, b) for a, b in imgs], NUMBER_WORDS[:6])
    m = np.array([len(it.edits) for it in items])
    out = {"diff_same_acc": float((ys == same_ok).mean()),
           "diff_different_acc": float((yd != same_ok).mean()),
           "diff_contradiction": float((ys == yd).mean()),
           "diff_count_exact": float((cnt == m)[m > 0].mean()),
           "diff_count_exact_single": float((cnt == m)[m == 1].mean()),
           "n_diff_count_exact": float((m > 0).sum()), "n_diff_count_exact_single": float((m == 1).sum())}
    edited = [(it, ab) for it, ab in zip(items, imgs, strict=True) if it.edits][:n_generate]
    answers = vlm.generate([find_prompt(a, b, len(it.edits)) for it, (a, b) in edited], max_new_tokens=64)
    matched = claimed = unparseable = 0
    for (it, _), text in zip(edited, answers, strict=True):
        try:
            claims = parse_claims(text)
        except ValueError:
            unparseable += 1
            continue
        claimed += len(claims)
        matched += sum(any(c.matches(e) for e in it.edits) for c in claims)
    out["diff_claim_precision"] = matched / claimed if claimed else 0.0
    out["n_diff_claim_precision"] = float(claimed)
    out["diff_unparseable"] = unparseable / max(1, len(edited))
    out["n_diff_unparseable"] = float(len(edited))
    return out


def vlm_report(vlm: Any, n: int = 200, seed: int = EVAL_SEED) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in (ab_report, premise_report, mood_report, pair_report):
        out.update(part(vlm, n, seed))
    return out
