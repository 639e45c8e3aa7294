"""An LLM judge behind an OpenAI-compatible endpoint (``--faith-spd-judge openai:MODEL@URL``, issue 45).

SPD-Faith's DRF (App. B.2, Eqs. 14-15) is GPT-4o-judged: for each claim c_i of an answer, the judge
decides φ(c_i, g_j), whether the claim describes the ground-truth difference g_j. Here:

1. the answer is split into claims as the deterministic judge splits it (:meth:`DeterministicJudge.parse`
   on the record's vocabulary: overall judgements and lead-ins are not claims);
2. each claim goes to the endpoint with :data:`JUDGE_PROMPT`: the numbered true differences in words
   and the claim; the judge answers the number of the difference it describes, or 0. That number is
   max_j φ(c_i, g_j) of Eq. 15 (a claim matches at most one edit);
3. a reply that is not one number in 0..m is counted as unparseable, never guessed (the claim then
   matches nothing, as Eq. 14's φ = 0).

The paper's judge also sees the image pair ("jointly considers visual evidence"); this one reads the
ground truth in words only, so one request carries no images (cheaper, and a text-only endpoint can
judge). The paper prints no judging prompt for DRF (Fig. 33 is CR's): :data:`JUDGE_PROMPT` states
App. B.2's matching rule. Numbers of this judge are their own metric, named ``judge=openai:MODEL``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from faithtests.models.interfaces import Prompt
from faithtests.protocols.spdfaith.judge import DeterministicJudge, JudgedClaim, Judgement
from faithtests.protocols.spdfaith.records import DiffRecord, EditTruth

JUDGE_PROMPT: Final = (
    "You judge one claimed difference between two images against the true differences between them. "
    "A claim matches a true difference when both describe the same change (a colour change, a removal "
    "or a position change) of the same object, and, when both state it, the same new colour or place.\n"
    "True differences:\n{edits}\n"
    "Claim: {claim}\n"
    "Reply with the number of the true difference the claim describes, or 0 if it describes none of "
    "them. Reply with the number only.")
#: Tokens a judge may spend on one verdict (a number, perhaps a word around it).
MAX_TOKENS: Final = 8
_NUMBER = re.compile(r"^[^\d-]{0,12}?(\d+)\D{0,20}$")  # one number, not negative, few words around


def edit_words(e: EditTruth) -> str:
    """One ground-truth edit in words ("the red circle turned blue")."""
    obj = f"the {e.before + ' ' if e.before and e.type == 'color' else ''}{e.category}"
    if e.type == "color":
        return f"{obj} turned {e.attribute}" if e.attribute else f"{obj} changed colour"
    if e.type == "remove":
        return f"{obj} was removed"
    return f"{obj} moved to the {e.attribute}" if e.attribute else f"{obj} moved"


def judge_prompt(claim: str, record: DiffRecord) -> str:
    edits = "\n".join(f"{j + 1}. {edit_words(e)}" for j, e in enumerate(record.edits))
    return JUDGE_PROMPT.format(edits=edits, claim=claim)


def read_verdict(reply: str, m: int) -> int | None:
    """The edit index (0-based) a reply names, -1 for "none" (0), None when it is not one number 0..m."""
    found = _NUMBER.match(reply.strip())
    if found is None:
        return None
    n = int(found.group(1))
    return n - 1 if 0 <= n <= m else None


@dataclass
class APIJudge:
    """``openai:MODEL@URL`` as SPD-Faith's claim judge (module doc)."""

    spec: str
    model: Any = None  # the loaded faithtests.models.openai_api.OpenAIModel
    _splitters: dict[tuple[object, ...], DeterministicJudge] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec

    def _split(self, answer: str, record: DiffRecord) -> tuple[JudgedClaim, ...]:
        # the splitter's vocabulary: the world's or COCO's, widened by what the record's edits name
        key = (record.source == "world", *((e.category, e.attribute) for e in record.edits))
        if key not in self._splitters:
            self._splitters[key] = DeterministicJudge.for_records([record])
        claims, _ = self._splitters[key].parse(answer)
        return claims

    def __call__(self, answer: str, record: DiffRecord) -> Judgement:
        claims = self._split(answer, record)
        prompts = [Prompt(images=(), text=judge_prompt(c.text, record)) for c in claims]
        replies = self.model.generate(prompts, max_new_tokens=MAX_TOKENS) if prompts else []
        verdicts = [read_verdict(str(r), record.m) for r in replies]
        matched = tuple(v if v is not None and v >= 0 else None for v in verdicts)
        return Judgement(claims, matched, sum(v is None for v in verdicts), self.name)


def load_api_judge(spec: str) -> APIJudge:
    """Load the endpoint (its probe runs now: a dead one is an error before any test)."""
    from faithtests import load_model  # local: the endpoint loads only when this judge is asked for

    return APIJudge(spec, load_model(spec))
