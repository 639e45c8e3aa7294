"""The thread policy: option > the user's environment > auto (1 thread for small models, else cores
shared between xdist workers)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np  # noqa: F401  (its BLAS is the pool the policy limits)
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from faithtests.models.threads import (
    MARKER,
    POOL_VARIABLES,
    SMALL_MODEL_PARAMS,
    ThreadChoice,
    apply_threads,
    choose_threads,
    parameter_count,
    pool_threads,
    pool_variables,
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


def test_pools_loaded_later_get_the_count_and_are_not_taken_for_the_user() -> None:
    env = pool_variables({}, threads=1, workers=1)
    assert env == {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", MARKER: "1",
                   "TOKENIZERS_PARALLELISM": "false"}
    # the next load in this process (or a worker started from it) sees the policy's own values
    assert choose_threads(None, env, 2, 1, BIG) == choose_threads(None, {}, 2, 1, BIG)
    bigger = pool_variables({k: v for k, v in env.items() if k != "TOKENIZERS_PARALLELISM"}, 4, 1)
    assert bigger["OMP_NUM_THREADS"] == "4" == bigger["RAYON_NUM_THREADS"] == bigger[MARKER]
    assert "TOKENIZERS_PARALLELISM" not in bigger  # a whole machine: the tokenizers' pool gets 4 threads
    assert pool_variables({"OMP_NUM_THREADS": "3"}, threads=1, workers=1) == {}  # the user's setting
    assert pool_variables({"TOKENIZERS_PARALLELISM": "true"}, 2, 1).get("RAYON_NUM_THREADS") is None


def test_apply_threads_limits_numpys_blas_pool() -> None:
    saved = {k: os.environ.get(k) for k in (*POOL_VARIABLES, "FAITH_THREADS_SET", "TOKENIZERS_PARALLELISM",
                                             "RAYON_NUM_THREADS")}
    torch_threads = torch.get_num_threads()
    with threadpool_limits(limits=2):  # restores the pools' own limits on the way out
        try:
            for k in saved:  # no user setting: the policy sets the variables
                os.environ.pop(k, None)
            assert apply_threads(ThreadChoice(1, "test"), workers=1) == 1
            blas = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
            assert blas and all(n == 1 for n in blas)
            assert pool_threads()["blas_threads"] == 1
            assert os.environ["OMP_NUM_THREADS"] == "1" == os.environ["FAITH_THREADS_SET"]
        finally:
            torch.set_num_threads(torch_threads)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
