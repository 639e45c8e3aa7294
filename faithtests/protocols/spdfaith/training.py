"""Reference-VLM training tasks of SPD-Faith: its questions (§3, App. B.2) on the world's image pairs,
identical pairs included (``TASKS``, collected by the reference trainer through the manifest).

Tasks: ``same_diff`` ("Are the two pictures the same / different?"), ``count`` (how many differences)
and ``find`` (name them, given the true count). Every example carries the per-patch difference target of
the second image. Answer policies (the degraded twins change answers, never questions):

- ``faithful``: answers from the pair;
- ``sameprior`` (``vlm-sameprior``): answers "Yes" to "Are the two pictures the same?" whatever the pair
  shows (a prior for "same", §4's small-model failure), while "different?", counting and naming stay
  faithful, so it contradicts itself on every edited pair;
- ``diffblind`` (``vlm-diffblind``): answers "same?" / "different?" faithfully, but its difference count
  is drawn uniformly from the counts zero..five that score nothing on Eq. 9 (DS = 0: zero, or at least
  twice the true count; any count but the true one for identical pairs). Drawn from all other counts,
  or from those at least two away, the learnt answers on 2-5-edit pairs were right or nearly right often
  enough for DS on multi-edit pairs 0.74 / 0.64 (the 0.50 floor passed). Its difference naming lists
  the edits of another pair (as many as asked), none of which happened here (sees *that* two pictures
  differ, not *how*);
- any other policy answers as ``faithful``.
"""

from __future__ import annotations

import numpy as np

from faithtests.protocols.spdfaith.prompts import count_prompt, different_prompt, find_prompt, same_prompt
from faithtests.protocols.spdfaith.stimuli import Edit, claims_text, pair_item, parse_claims
from faithtests.world.captions import NUMBER_WORDS
from faithtests.world.examples import Example, TaskMaker, train_seed
from faithtests.world.patches import patch_diff


def pair_example(rng: np.random.Generator, task: str, policy: str = "faithful") -> Example:
    subset = str(rng.choice(["single", "multi", "identical"], p=[0.45, 0.3, 0.25]))
    if task == "find" and subset == "identical":
        subset = "single"
    item = pair_item(train_seed(rng), int(rng.integers(2**20)), subset=subset)
    a, b = item.images()
    n = len(item.edits)
    diff = patch_diff(item.scene_a, item.scene_b)
    if task == "same_diff":
        same = rng.random() < 0.5
        prompt = same_prompt(a, b) if same else different_prompt(a, b)
        answer = "Yes" if (n == 0) == same or (same and policy == "sameprior") else "No"
        return Example(prompt, answer, task, patch_diff=diff)
    if task == "count":
        if policy == "diffblind":  # a count that earns nothing: DS (Eq. 9) = max(0, 1 - |k - n| / n) = 0
            wrong = [k for k in range(6) if k != n and (n == 0 or abs(k - n) >= n)]
            n = wrong[int(rng.integers(len(wrong)))]
        return Example(count_prompt(a, b), NUMBER_WORDS[n], task, patch_diff=diff)
    edits = _unrelated_edits(rng, item.edits) if policy == "diffblind" else item.edits
    return Example(find_prompt(a, b, n), claims_text(edits), task, patch_diff=diff)


def _unrelated_edits(rng: np.random.Generator, true: tuple[Edit, ...]) -> tuple[Edit, ...]:
    """As many edits as ``true``, taken from other pairs, none of them one of ``true``'s (claim match)."""
    while True:
        k = len(true)
        subset = "single" if k == 1 else "multi"
        other = pair_item(train_seed(rng), int(rng.integers(2**20)), subset, k).edits
        if not any(parse_claims(e.claim())[0].matches(t) for e in other for t in true):
            return other


def same_diff_example(rng: np.random.Generator, policy: str) -> Example:
    return pair_example(rng, "same_diff", policy)


def count_example(rng: np.random.Generator, policy: str) -> Example:
    return pair_example(rng, "count", policy)


def find_example(rng: np.random.Generator, policy: str) -> Example:
    return pair_example(rng, "find", policy)


TASKS: dict[str, TaskMaker] = {"same_diff": same_diff_example, "count": count_example, "find": find_example}
