"""Running the S3E forced-choice protocol on a VLM: A/B logits and pre-answer states in one pass.

Output layout is the one :mod:`faithtests.protocols.s3e.metrics` consumes: logits
``[items, orders, roles, 2]``
and states ``[layers, items, orders, roles, D]`` (float32, CPU). Each record's 9 prompts go to
``vlm.decide`` together so the shared image+question prefix is computed once per record. Progress
(records done / total) goes to :func:`faithtests.progress.stage`, silent unless a sink is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from faithtests.models.interfaces import Hooks, VisionLanguageModel
from faithtests.models.letters import NO_LETTER as NO_LETTER
from faithtests.models.letters import choose
from faithtests.progress import stage
from faithtests.protocols.s3e.layout import ORIG, POS, ROLES, SWAP
from faithtests.protocols.s3e.prompts import PROMPT_SLOTS, record_prompts
from faithtests.protocols.s3e.records import S3ERecord

AB = ("A", "B")


@dataclass(frozen=True)
class ForcedChoiceRun:
    logits: NDArray[np.float32]  # [N, 2, 5, 2]
    states: NDArray[np.float32]  # [L, N, 2, 5, D]


def run_forced_choice(
    vlm: VisionLanguageModel,
    records: Sequence[S3ERecord],
    image_of: Callable[[S3ERecord], Image.Image],
    *,
    hooks: Hooks | None = None,
    records_per_call: int = 4,
    keep_nonfinite: bool = False,
    generated: str = "",
) -> ForcedChoiceRun:
    """A/B logits and pre-answer states of every (record, order, role) prompt. NaN or inf raises unless
    ``keep_nonfinite`` (the suites: ``fixtures.finite_records`` counts those records as 'non-finite
    score', which fails the model's checks, instead of the run crashing). With ``generated`` (why:
    ``models.letters``) each prompt is answered by a generated letter: indicator scores, no states
    (``states`` is then [0, N, 2, 5, 0])."""
    if not records:
        raise ValueError("run_forced_choice: no records")
    n = len(records)
    logits: NDArray[np.float32] | None = None
    states: NDArray[np.float32] | None = None
    with stage("S3E forced choice", total=n, model=vlm.spec) as progress:
        for start in range(0, n, records_per_call):
            chunk = records[start:start + records_per_call]
            prompts = [p for r in chunk for p in record_prompts(r, image_of(r))]
            got = choose(vlm, prompts, AB, hooks, generated)
            lg = got.scores.astype(np.float32)  # generated letters come with no states: [0, rows, 0]
            st = got.states if got.states is not None else np.zeros((0, len(prompts), 0), np.float32)
            if not keep_nonfinite and not (np.isfinite(lg).all() and np.isfinite(st).all()):
                raise FloatingPointError(f"run_forced_choice: non-finite logits/states in records {start}..")
            if logits is None or states is None:
                logits = np.zeros((n, 2, len(ROLES), 2), dtype=np.float32)
                states = np.zeros((st.shape[0], n, 2, len(ROLES), st.shape[-1]), dtype=np.float32)
            for j in range(len(chunk)):
                for s, (order, role) in enumerate(PROMPT_SLOTS):
                    row = j * len(PROMPT_SLOTS) + s
                    orders = (ORIG, SWAP) if role == POS else (order,)  # c+ vs c+ fills both orders
                    for o in orders:
                        logits[start + j, o, role] = lg[row]
                        states[:, start + j, o, role] = st[:, row]
            progress.advance(len(chunk))
    assert logits is not None and states is not None
    return ForcedChoiceRun(logits, states)
