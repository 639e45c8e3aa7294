"""The thread policy: option > the user's environment > auto (1 thread for small models, else cores
shared between xdist workers)."""

from __future__ import annotations

from typing import Any

import pytest

from faithtests.models.threads import (
    SMALL_MODEL_PARAMS,
    ThreadChoice,
    choose_threads,
    parameter_count,
    tokenizers_parallelism,
    xdist_workers,
)

BIG = SMALL_MODEL_PARAMS * 10


def test_option_wins_over_everything() -> None:
    assert choose_threads(3, {"OMP_NUM_THREADS": "1"}, 2, 2, 10) == ThreadChoice(3, "--faith-threads")
    with pytest.raises(ValueError, match=">= 1"):
        choose_threads(0, {}, 2, 1, None)


@pytest.mark.parametrize("var", ["OMP_NUM_THREADS", "MKL_NUM_THREADS"])
def test_user_environment_is_left_alone(var: str) -> None:
    choice = choose_threads(None, {var: " 4 "}, 2, 1, BIG)
    assert choice.threads is None and choice.reason == f"{var}=4 (user setting)"
    assert choose_threads(None, {var: ""}, 2, 1, BIG).threads == 2  # an empty variable is no setting


def test_auto_small_models_get_one_thread() -> None:
    assert choose_threads(None, {}, 16, 1, SMALL_MODEL_PARAMS - 1).threads == 1
    assert choose_threads(None, {}, 16, 1, SMALL_MODEL_PARAMS).threads == 16


@pytest.mark.parametrize(("cores", "workers", "expected"), [(2, 1, 2), (2, 2, 1), (16, 3, 5), (2, 4, 1)])
def test_auto_shares_cores_between_workers(cores: int, workers: int, expected: int) -> None:
    choice = choose_threads(None, {}, cores, workers, BIG)
    assert choice.threads == expected and f"{cores} core(s) / {workers} worker(s)" in choice.reason
    assert choose_threads(None, {}, cores, workers, None).threads == expected  # size unknown


def test_xdist_worker_count_from_the_environment() -> None:
    assert xdist_workers({"PYTEST_XDIST_WORKER_COUNT": "3"}) == 3
    assert xdist_workers({}) == 1 and xdist_workers({"PYTEST_XDIST_WORKER_COUNT": "x"}) == 1


def test_parameter_count_of_an_adapter_and_of_a_wrapped_vlm() -> None:
    import torch

    class Adapter:
        model = torch.nn.Linear(3, 2)  # 3*2 weights + 2 biases

    class Wrapper:
        vlm = Adapter()

    assert parameter_count(Adapter()) == 8 == parameter_count(Wrapper())
    nothing: Any = object()
    assert parameter_count(nothing) is None


def test_tokenizers_parallelism_off_when_cores_are_taken() -> None:
    assert tokenizers_parallelism({}, threads=1, workers=1) == "false"  # torch runs one thread
    assert tokenizers_parallelism({}, threads=2, workers=2) == "false"  # other workers share the cores
    assert tokenizers_parallelism({}, threads=4, workers=1) is None  # a whole machine to itself
    assert tokenizers_parallelism({"TOKENIZERS_PARALLELISM": "true"}, threads=1, workers=2) is None  # user's
