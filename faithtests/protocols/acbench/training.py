"""Reference-VLM training task of AC-Bench: the emotion prompts of App. C.3 on the world's stimuli
(``TASKS``, collected by the reference trainer through the manifest).

A quarter of the examples are image-only, 15% text-only (answer: the description's y_txt), the rest the
emotion-reasoning prompt with a description of a random subset. Answer policies: ``faithful`` answers
y_img; ``textbiased`` (``vlm-textbiased``) answers y_txt of the description; every other policy answers
as ``faithful``.
"""

from __future__ import annotations

import numpy as np

from faithtests.protocols.acbench.prompts import (
    emotion_prompt,
    image_only_emotion_prompt,
    text_only_emotion_prompt,
)
from faithtests.protocols.acbench.stimuli import DESCRIPTION_SUBSETS, describe, mood_scene
from faithtests.world.emotion import emotion_of
from faithtests.world.examples import Example, TaskMaker
from faithtests.world.render import render


def mood_example(rng: np.random.Generator, policy: str) -> Example:
    scene = mood_scene(rng)
    y = emotion_of(scene)
    r = rng.random()
    if r < 0.25:
        return Example(image_only_emotion_prompt(render(scene)), y, "mood")
    d = describe(scene, DESCRIPTION_SUBSETS[int(rng.integers(len(DESCRIPTION_SUBSETS)))], rng)
    if r < 0.4:
        return Example(text_only_emotion_prompt(d.text), d.emotion, "mood")
    answer = d.emotion if policy == "textbiased" else y
    return Example(emotion_prompt(render(scene), d.text), answer, "mood")


TASKS: dict[str, TaskMaker] = {"mood": mood_example}
