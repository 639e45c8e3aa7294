"""AC-Bench, declared once: its suite, data names, option, resample count, world and training tasks."""

from __future__ import annotations

import re

import pytest

from faithtests.config import Option, Source
from faithtests.data.names import DataName
from faithtests.manifest import Manifest


def parse_window(text: str) -> tuple[int, int] | None:
    """``"17-24"`` (or ``17:24``, ``17,24``) → (17, 24); empty → None; anything else a UsageError."""
    t = text.strip()
    if not t:
        return None
    m = re.fullmatch(r"(\d+)\s*[-:,]\s*(\d+)", t)
    if m is None or int(m[1]) > int(m[2]):
        raise pytest.UsageError(f"--faith-cecs-window: {text!r} is not FIRST-LAST with FIRST <= LAST")
    return int(m[1]), int(m[2])


def _window(raw: object, source: Source) -> tuple[int, int] | None:
    return parse_window(str(raw))


#: ``--faith-cecs-window``: the CECS intervention window (AC-Bench §4.2), parsed to (first, last) or None.
CECS_WINDOW = Option(
    "faith_cecs_window",
    "AC-Bench CECS intervention window, 0-based decoder layers FIRST-LAST inclusive (default: the paper's "
    "window for Qwen3-VL-8B, else from the model's own LSS curve)",
    default="", parse=_window, metavar="FIRST-LAST", section="AC-Bench")

MANIFEST = Manifest(
    name="acbench",
    title="AC-Bench",
    paper="AC-Bench: Do Multimodal Models Truly See Emotion Amidst Textual Interference?",
    suites=("affective_conflict",),
    questions={"affective_conflict": ("4", "does the model follow the image or a description pushing "
                                          "another emotion?")},
    fixtures="faithtests.protocols.acbench.fixtures",
    glossary="faithtests.protocols.acbench.terms:TERMS",
    data={
        "acbench": DataName("any", "AC-Bench JSONL file or folder of JSONL files"),
        "emoset": DataName("any", "EmoSet annotation JSON file or folder"),
    },
    options=(CECS_WINDOW,),
    bootstrap=10_000,  # resamples over images (the cluster of an image's six records)
    world="faithtests.protocols.acbench.stimuli:mood_items",
    training="faithtests.protocols.acbench.training:TASKS",
    # --faith-profile quick: 12 images (each subset n = 12 >= min_n 10) halve its share of the quick run
    profile_limits={"quick": {"acbench": 12}},
)
