"""Work around an adapter's calls stored with its outputs (``faithtests.models.adapter_store``): a
decision's step-0 auxiliary prompts (a :class:`SplitStep` rule) and answer token counts are exactly
what the uncached computation gives, and a warm store answers them without loading the model (tiny
real model)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from faithtests.models.answer_tokens import answer_token_counts
from faithtests.models.interfaces import Prompt
from faithtests.models.registry import load_model
from faithtests.models.step_contrast import SplitStep, StepContrast, StepReading, decision_aux
from faithtests.models.store import OutputStore

OPTIONS = ("A", "B")


class TopLogits:
    """A :class:`SplitStep` whose choice is the step's first three logits, written into the text: any
    difference of the stored rows from the computed ones (even the last bit) shows in the prompt."""

    def choice(self, base: Prompt, reading: StepReading) -> NDArray[Any]:
        return np.asarray(reading.logits[:3].numpy(), dtype=np.float32).copy()

    def apply(self, base: Prompt, choice: NDArray[Any]) -> Prompt:
        return Prompt(images=base.images, text=f"{base.text} {[float(v).hex() for v in choice]}")

    def __call__(self, base: Prompt, reading: StepReading) -> Prompt:
        return self.apply(base, self.choice(base, reading))

    def __repr__(self) -> str:
        return "TopLogits()"


def _load(spec: str, cache: Path) -> Any:
    store = OutputStore(cache)
    model: Any = load_model(spec, device="cpu", defer_to=store)
    model.use_store(store)
    return model


@pytest.fixture
def prompts(images: list[Any]) -> list[Prompt]:
    return [Prompt(images=(im,), text=f"Is it {t}?\nA. yes\nB. no")
            for im, t in zip(images[:3], ("red", "round", "small"), strict=True)]


def _aux(vlm: Any, prompts: list[Prompt], tag: str = "top-logits-v1") -> list[str]:
    contrast = StepContrast(tuple(prompts), 1.0, tag, step=TopLogits())
    return [p.text for p in decision_aux(vlm, prompts, OPTIONS, None, contrast, "test", "test aux")]


def test_decision_aux_is_stored_exactly_and_read_back_without_a_model(
    tiny_dir: Callable[[str], Path], prompts: list[Prompt], tmp_path: Path
) -> None:
    assert isinstance(TopLogits(), SplitStep)
    spec, cache = f"hf:{tiny_dir('llava')}", tmp_path / "cache"
    expected = _aux(load_model(spec, device="cpu"), prompts)  # no store: first_step_aux
    assert len(set(expected)) == 3 and all(t.count("0x") == 3 for t in expected)
    cold = _load(spec, cache)
    assert _aux(cold, prompts) == expected
    warm = _load(spec, cache)
    assert not warm.loaded
    assert _aux(warm, prompts[::-1]) == expected[::-1]  # rows are keyed per prompt, any order
    assert not warm.loaded
    assert _aux(warm, prompts, tag="") == expected  # an untagged contrast is never stored: computed
    assert warm.loaded


def test_answer_token_counts_are_stored_exactly_and_read_back_without_a_model(
    tiny_dir: Callable[[str], Path], prompts: list[Prompt], tmp_path: Path
) -> None:
    spec, cache = f"hf:{tiny_dir('llava')}", tmp_path / "cache"
    answers = ("yes", "no way", "perhaps not")
    expected = answer_token_counts(load_model(spec, device="cpu"), prompts, answers)
    assert expected is not None and expected.shape == (3, 3) and (expected >= 1).all()
    assert (expected[:, 1] > expected[:, 0]).all()  # "no way" is more tokens than "yes"
    assert np.array_equal(answer_token_counts(_load(spec, cache), prompts, answers), expected)
    warm = _load(spec, cache)
    got = answer_token_counts(warm, prompts, answers)
    assert got is not None and got.dtype == np.float64 and np.array_equal(got, expected)
    assert not warm.loaded
    assert answer_token_counts(object(), prompts, answers) is None  # no processor to count with
