"""``--faith-spd-judge openai:...`` (issue 45): the LLM judge's prompt, its reading of a verdict, and its
Judgement (Eqs. 14-15). The model here is an in-process object answering from a table (the judge calls
only ``generate``); tests/models/test_openai_served.py runs the judge against a real served model."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from faithtests.models.interfaces import Prompt
from faithtests.protocols.spdfaith.api_judge import APIJudge, edit_words, judge_prompt, read_verdict
from faithtests.protocols.spdfaith.metrics import drf
from faithtests.protocols.spdfaith.records import DiffRecord, EditTruth

EDITS = (EditTruth("color", "circle", "blue", before="red"), EditTruth("remove", "square"),
         EditTruth("position", "triangle", "top left"))
RECORD = DiffRecord("w/1", "w/1", "multi", None, EDITS, "world", "w/1", lambda: (None, None))  # type: ignore[arg-type,return-value]


def test_edits_in_words() -> None:
    assert [edit_words(e) for e in EDITS] == ["the red circle turned blue", "the square was removed",
                                              "the triangle moved to the top left"]
    text = judge_prompt("the circle is now blue", RECORD)
    assert ("1. the red circle turned blue\n2. the square was removed\n"
            "3. the triangle moved to the top left") in text
    assert text.endswith("Reply with the number only.") and "Claim: the circle is now blue" in text


@pytest.mark.parametrize(("reply", "m", "want"), [
    ("1", 3, 0), ("3", 3, 2), ("0", 3, -1), (" 2.", 3, 1), ("Answer: 2", 3, 1),
    ("4", 3, None), ("", 3, None), ("none", 3, None), ("1 or 2", 3, None), ("-1", 3, None)])
def test_a_verdict_is_one_number_0_to_m_or_unparseable(reply: str, m: int, want: int | None) -> None:
    assert read_verdict(reply, m) == want


class _Table:
    """Answers each judge prompt by the claim it carries (the table), recording what it was asked."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table, self.asked = table, []  # type: ignore[var-annotated]

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32) -> list[str]:
        self.asked += list(prompts)
        return [next(v for k, v in self.table.items() if f"Claim: {k}\n" in p.text) for p in prompts]


def test_the_judgement_is_eq_14_per_claim_and_counts_what_it_cannot_read() -> None:
    """Four claims: one matched to edit 1, one to edit 3, one to none ("0"), one unreadable reply.
    DRF (Eq. 15) = (1 + 1 + 0 + 0) / 4 = 0.5 by hand; unparseable = 1; the name is the spec."""
    answer = ("1. The red circle turned blue. 2. The triangle moved to the top left. "
              "3. The green star was removed. 4. The square turned yellow.")
    model = _Table({"The red circle turned blue": "1", "The triangle moved to the top left": "3",
                    "The green star was removed": "0", "The square turned yellow": "maybe"})
    judge = APIJudge("openai:judge@http://x/v1", model)
    j = judge(answer, RECORD)
    assert j.judge == "openai:judge@http://x/v1" and len(j.claims) == 4
    assert j.matched == (0, 2, None, None) and j.unparseable == 1
    assert all(not p.images for p in model.asked)  # the ground truth goes in words, no image
    assert drf([j.hits]).value == pytest.approx(0.5)
    assert judge("The images are different.", RECORD).claims == ()  # an overall judgement: no claim


def test_an_unknown_endpoint_is_a_usage_error_naming_the_option() -> None:
    pytest.importorskip("openai")
    from faithtests.protocols.spdfaith.fixtures import load_judge
    from faithtests.testing.servers import free_port

    with pytest.raises(pytest.UsageError, match=r"--faith-spd-judge: .*refused a one-image probe"):
        load_judge(f"openai:judge@http://127.0.0.1:{free_port()}/v1")
