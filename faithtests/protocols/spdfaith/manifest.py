"""SPD-Faith, declared once: its suite, data name, options, resample count, world and training tasks.

The options are read as text here; the fixtures turn them into a judge and a ``SageConfig`` at configure
time (those modules import numpy, which a manifest must not).
"""

from __future__ import annotations

from faithtests.config import Option, Source
from faithtests.data.names import DataName
from faithtests.manifest import Manifest


def _text(raw: object, source: Source) -> str:
    return str(raw).strip()


#: ``--faith-spd-judge``: the claim judge ``MODULE:CALLABLE`` ("" = the deterministic judge).
JUDGE = Option(
    "faith_spd_judge",
    "SPD-Faith claim judge: MODULE:CALLABLE, fn(answer, record) -> Judgement, or openai:MODEL@URL, an LLM "
    "judge behind an OpenAI-compatible endpoint (default: the deterministic judge)",
    default="", parse=_text, metavar="JUDGE", section="SPD-Faith")
#: ``--faith-sage``: SAGE parameters (SPD-Faith §5) as ``KEY=VALUE,...`` text ("" = the defaults).
SAGE = Option(
    "faith_sage", "SAGE parameters KEY=VALUE,... (faithtests.protocols.spdfaith.sage.SageConfig fields)",
    default="", parse=_text, metavar="KEY=VALUE,...", section="SPD-Faith")

MANIFEST = Manifest(
    name="spdfaith",
    title="SPD-Faith",
    paper="SPD-Faith Bench: Diagnosing and Improving Faithfulness in Chain-of-Thought for Multimodal Large "
          "Language Models",
    suites=("difference_consistency",),
    questions={"difference_consistency": ("5", "does it count and name the differences of an image pair "
                                              "without contradicting itself?")},
    fixtures="faithtests.protocols.spdfaith.fixtures",
    glossary="faithtests.protocols.spdfaith.terms:TERMS",
    data={"spdfaith": DataName("any", "SPD-Faith-Bench JSONL file or folder")},
    reads=("coco",),
    options=(JUDGE, SAGE),
    bootstrap=10_000,  # resamples over images (pairs made from one original resampled together)
    world="faithtests.protocols.spdfaith.stimuli:pair_items",
    training="faithtests.protocols.spdfaith.training:TASKS",
    # run._named: the naming question goes only to the pairs the model counts differences in
    answer_dependent="the naming question goes only to the pairs the model counts at least one difference "
                     "in: up to one more request per pair (as many as the count questions), and with "
                     "--faith-spd-judge openai:... one judge request per claim in those answers",
)
