"""Reference-VLM training tasks of IMAVB: A1 premise questions (App. I.1) on the world's stimuli
(``TASKS``, collected by the reference trainer through the manifest).

``premise``: standard or misleading (half each), the six options shuffled half of the time (else in the
item's order, E and F last). ``premise_shuffled``: every question's six options shuffled, with a
per-option target (:attr:`~faithtests.world.examples.Example.option_truth`); the suites ask under
K = 3 shuffles of all six. Answer policies: ``faithful`` answers from the image (a misleading question
-> "E"); ``textbiased`` (``vlm-textbiased``) takes a misleading premise at its word and answers the
content question; every other policy answers as ``faithful``.
"""

from __future__ import annotations

import numpy as np

from faithtests.protocols.imavb.prompts import a1_prompt
from faithtests.protocols.imavb.records import LETTERS, OPTION_E
from faithtests.protocols.imavb.stimuli import premise_item
from faithtests.world.examples import Example, TaskMaker, train_seed
from faithtests.world.render import render


def premise_example(rng: np.random.Generator, policy: str, shuffle_p: float = 0.5,
                    option_targets: bool = False) -> Example:
    """An IMAVB A1 question, standard or misleading (half each); its six options are shuffled with
    probability ``shuffle_p`` (else shown in the item's order, E and F last)."""
    item = premise_item(train_seed(rng), int(rng.integers(2**20)))
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
    return Example(a1_prompt(render(item.scene), q.question, opts), answer, "premise",
                   claim_true=premise_true, option_truth=truth if option_targets else None)


def shuffled_premise_example(rng: np.random.Generator, policy: str) -> Example:
    """:func:`premise_example` with all six options shuffled and the per-option targets."""
    return premise_example(rng, policy, shuffle_p=1.0, option_targets=True)


TASKS: dict[str, TaskMaker] = {"premise": premise_example, "premise_shuffled": shuffled_premise_example}
