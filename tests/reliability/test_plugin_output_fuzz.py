"""Issue 46 item 2, plug-in model outputs: a ``py:`` / entry-point model is code faithtests did not
write. Whatever its protocol methods return (a tensor of any shape with NaN, inf or huge values, a list,
an array, None, text), the checked call either hands it on (the protocol's shapes: NaN and inf are the
suites' per-item 'non-finite score', not a breach) or raises ``PluginContractError`` naming the plug-in
and the call; never another exception deep inside a metric.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from faithtests.models.contracts import ContractChecked
from faithtests.models.errors import PluginContractError
from faithtests.models.interfaces import Attentions, Decision, Hooks, Prompt

EXAMPLES = int(os.environ.get("FAITH_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
H = Hooks | None
VALUES = st.sampled_from([0.0, -1.5, 1e30, -1e30, float("nan"), float("inf"), -float("inf")])


@st.composite
def tensors(draw: st.DrawFn) -> torch.Tensor:
    shape = draw(st.lists(st.integers(0, 4), max_size=4))
    fill = draw(VALUES)
    return torch.full(shape, fill)


OUTPUTS = st.one_of(
    tensors(), st.none(), st.text(max_size=5), st.integers(),
    st.lists(st.text(max_size=3) | st.integers() | st.none(), max_size=4),
    tensors().map(lambda t: t.numpy()),
    st.builds(Decision, logits=tensors(), states=tensors()),
    st.builds(lambda ws: Attentions(weights=ws, spans=None), st.lists(tensors(), max_size=2)),  # type: ignore[arg-type]
)


class _AnyOutput:
    """A plug-in VLM whose every protocol call returns ``out``."""

    spec = "py:fuzz:vlm"
    num_layers = 2

    def __init__(self, out: Any) -> None:
        self.out = out

    def option_logits(self, prompts: Sequence[Prompt], options: Sequence[str], hooks: H = None) -> Any:
        return self.out

    def answer_logprob(self, prompts: Sequence[Prompt], answers: Sequence[str], hooks: H = None) -> Any:
        return self.out

    def states(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Any:
        return self.out

    def decide(self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None) -> Any:
        return self.out

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Any:
        return self.out

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32, hooks: H = None) -> Any:
        return self.out


PROMPTS = [Prompt(images=(), text="a"), Prompt(images=(), text="b")]
CALLS = {
    "option_logits": lambda m: m.option_logits(PROMPTS, ["A", "B"]),
    "answer_logprob": lambda m: m.answer_logprob(PROMPTS, ["yes", "no", "maybe"]),
    "states": lambda m: m.states(PROMPTS),
    "decide": lambda m: m.decide(PROMPTS, ["A", "B"]),
    "attentions": lambda m: m.attentions(PROMPTS),
    "generate": lambda m: m.generate(PROMPTS, 4),
}


@pytest.mark.parametrize("call", list(CALLS))
@FUZZ
@given(out=OUTPUTS)
def test_any_plugin_output_is_handed_on_or_a_named_contract_breach(call: str, out: Any) -> None:
    model = ContractChecked("py:fuzz:vlm", _AnyOutput(out))
    try:
        got = CALLS[call](model)
    except PluginContractError as exc:
        assert str(exc).startswith("plug-in py:fuzz:vlm broke the VisionLanguageModel contract: ")
        return
    # handed on: exactly the protocol's shapes (values may be NaN/inf: counted per item by the suites)
    if call == "generate":
        assert isinstance(got, list) and len(got) == 2 and all(isinstance(s, str) for s in got)
    elif call == "decide":
        assert got.logits.shape == (2, 2) and got.states.shape[:2] == (2, 2)
    elif call == "attentions":
        assert all(w.dim() == 3 and w.shape[0] == 2 for w in got.weights)
    else:
        want = {"option_logits": (2, 2), "answer_logprob": (2, 3), "states": (2, 2)}[call]
        assert isinstance(got, torch.Tensor) and tuple(got.shape[: len(want)]) == want


def test_the_strategy_reaches_both_sides() -> None:
    """Not vacuous: a valid output is handed on, an invalid one is a breach."""
    ok = ContractChecked("py:fuzz:vlm", _AnyOutput(torch.full((2, 2), float("nan"))))
    assert ok.option_logits(PROMPTS, ["A", "B"]).shape == (2, 2)
    bad = ContractChecked("py:fuzz:vlm", _AnyOutput(np.zeros((2, 2))))
    with pytest.raises(PluginContractError) as exc:
        bad.option_logits(PROMPTS, ["A", "B"])
    said = "option_logits() of 2 prompts and 2 options returned ndarray, expected a torch.Tensor [2, 2]"
    assert said in str(exc.value)
