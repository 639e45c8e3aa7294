"""A user-supplied SPD-Faith judge for the gate tests (``--faith-spd-judge``): it reads the claims with
the deterministic judge's parser but grounds none of them, like an LLM judge that finds every claimed
difference absent. The DRF gate must fail under it, and the scorecard must name it."""

from __future__ import annotations

from dataclasses import replace

from faithtests.protocols.spdfaith.judge import Judgement, world_judge
from faithtests.protocols.spdfaith.records import DiffRecord

_PARSER = world_judge()


def nothing_grounded(answer: str, record: DiffRecord) -> Judgement:
    j = _PARSER(answer, record)
    return replace(j, matched=tuple(None for _ in j.claims))
