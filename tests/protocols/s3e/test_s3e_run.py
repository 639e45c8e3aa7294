"""run_forced_choice fills the metrics' [items, orders, roles] layout from vlm.decide's rows."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
import torch
from PIL import Image

from faithtests.models.interfaces import Decision, Hooks, Prompt
from faithtests.protocols.s3e.layout import ORIG, POS, RAND, STRESS, SWAP
from faithtests.protocols.s3e.records import S3ERecord
from faithtests.protocols.s3e.run import run_forced_choice


class FakeVLM:
    """Logit A = prompt's running index, states encode (call, row) so placement can be checked."""

    spec = "fake"
    num_layers = 2

    def __init__(self, nan: bool = False) -> None:
        self.calls: list[int] = []
        self.nan = nan

    def decide(self, prompts: Sequence[Prompt], options: Sequence[str],
               hooks: Hooks | None = None) -> Decision:
        base = sum(self.calls)
        self.calls.append(len(prompts))
        idx = torch.arange(base, base + len(prompts), dtype=torch.float32)
        logits = torch.stack([idx, -idx], dim=1)
        if self.nan:
            logits[0, 0] = float("nan")
        states = idx.view(1, -1, 1).expand(2, -1, 3).clone()
        return Decision(logits=logits, states=states)


def _rec(i: int) -> S3ERecord:
    return S3ERecord(item_id=f"r{i}", image_ref=f"r{i}", c_pos=f"pos {i}", c_pres=f"pres {i}",
                     c_lex=f"lex {i}", c_stress=f"stress {i}", c_rand=f"rand {i}", stress_type="object",
                     source="t",
                     rand_item_id="x", rand_image_ref="x")


def test_layout_and_batching() -> None:
    vlm = FakeVLM()
    recs = [_rec(i) for i in range(5)]
    run = run_forced_choice(vlm, recs, lambda r: Image.new("RGB", (4, 4)), records_per_call=2)  # type: ignore[arg-type]
    assert vlm.calls == [18, 18, 9]  # 9 prompts per record, whole records per call
    assert run.logits.shape == (5, 2, 5, 2) and run.states.shape == (2, 5, 2, 5, 3)
    # record 1's prompts are rows 9..17: pos first (both orders), then (orig, swap) per role
    assert run.logits[1, ORIG, POS, 0] == run.logits[1, SWAP, POS, 0] == 9
    assert run.logits[1, ORIG, STRESS, 0] == 9 + 5 and run.logits[1, SWAP, STRESS, 0] == 9 + 6
    assert run.logits[1, SWAP, RAND, 0] == 17
    np.testing.assert_array_equal(run.states[:, 4, SWAP, RAND], np.full((2, 3), 44.0))


def test_non_finite_outputs_are_an_error() -> None:
    with pytest.raises(FloatingPointError, match="non-finite"):
        run_forced_choice(FakeVLM(nan=True), [_rec(0)], lambda r: Image.new("RGB", (4, 4)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no records"):
        run_forced_choice(FakeVLM(), [], lambda r: Image.new("RGB", (4, 4)))  # type: ignore[arg-type]


class TalkingVLM:
    """Generates "A" for every prompt but the ``mute``-th (a reply naming neither letter)."""

    spec = "talking"

    def __init__(self, mute: int) -> None:
        self.mute, self.seen = mute, 0

    def decide(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("generated letters are never scored")

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> list[str]:
        out = []
        for p in prompts:
            assert p.text.rstrip().endswith('"') and "Answer only A or B." in p.text
            out.append("Neither caption" if self.seen == self.mute else "A")
            self.seen += 1
        return out


def test_generated_letters_fill_the_layout_as_indicators_without_states() -> None:
    from faithtests.protocols.s3e.metrics import positive_chosen, stress_behaviour, strict_correct

    recs = [_rec(i) for i in range(3)]
    # row 9 + 5 is record 1's (orig, stress) prompt: its reply names no letter
    run = run_forced_choice(TalkingVLM(mute=14), recs, lambda r: Image.new("RGB", (4, 4)),  # type: ignore[arg-type]
                            generated="--faith-answer-mode generated")
    assert run.states.shape == (0, 3, 2, 5, 0)
    np.testing.assert_array_equal(run.logits[0, ORIG, STRESS], [1, 0])
    np.testing.assert_array_equal(run.logits[1, ORIG, STRESS], [0, 0])  # no letter: a tie, counted
    chosen = positive_chosen(run.logits[:, :, STRESS])  # "A" is c+ in orig, the candidate in swap
    assert chosen[:, 0].tolist() == [True, False, True] and not chosen[:, 1].any()
    assert not strict_correct(run.logits[:, :, STRESS]).any()  # a one-letter policy is never strict-correct
    assert stress_behaviour(run.logits[:, :, STRESS]).n_ties == 1
