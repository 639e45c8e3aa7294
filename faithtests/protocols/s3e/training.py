"""Reference-VLM training task of S3E: the A/B caption choice of App. A (``TASKS``, collected by the
reference trainer through the manifest).

Answer policies: ``faithful`` picks the true caption; ``positionbiased`` (``vlm-positionbiased``) says
"A" for 70% of trials whatever the image shows, otherwise answers correctly; every other policy answers
as ``faithful``.
"""

from __future__ import annotations

import numpy as np

from faithtests.protocols.lgip.paraphrase import SIMPLE_TEMPLATES
from faithtests.protocols.s3e.prompts import s3e_prompt
from faithtests.world.examples import Example, TaskMaker, true_and_foil
from faithtests.world.render import render


def ab_example(rng: np.random.Generator, policy: str) -> Example:
    """A/B caption choice (S3E App. A): the true caption against a foil, in a random order; captions in
    one surface form, LGIP's simple templates among them (the records' lexical controls use them too)."""
    scene, pos, neg = true_and_foil(rng, SIMPLE_TEMPLATES)
    pos_first = bool(rng.random() < 0.5)
    a, b = (pos, neg) if pos_first else (neg, pos)
    answer = "A" if pos_first else "B"
    if policy == "positionbiased" and rng.random() < 0.7:
        answer = "A"
    return Example(s3e_prompt(render(scene), a.text, b.text), answer, "ab", context_caption=pos.text,
                   truth=(a, b))


TASKS: dict[str, TaskMaker] = {"ab": ab_example}
