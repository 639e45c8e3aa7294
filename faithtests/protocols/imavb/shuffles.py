"""Option shuffling with deterministic MD5 seeds (IMAVB §3, App. C A1, App. D).

Each sample is shown under K = 3 permutations of all six options, the permutation of shuffle ``k``
seeded by MD5(video_id + correct_answer + shuffle_id); the model's answer (a displayed letter) is mapped
back to the canonical letter through the inverse permutation. The paper names the hash and its inputs
but not the generator: here the seed is the MD5 digest read as a big-endian integer modulo 2**32, and
the permutation is ``numpy.random.default_rng(seed).permutation(6)``. The fixed order (identity) is its
own slice (Table 1, "Fixed Order").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

K_SHUFFLES: Final = 3
FIXED: Final = "fixed"

IntArray = NDArray[np.int64]


def shuffle_seed(video_id: str, correct_answer: str, shuffle_id: int | str) -> int:
    """MD5(video_id + correct_answer + shuffle_id) as an unsigned 32-bit seed (App. C, App. D)."""
    digest = hashlib.md5(f"{video_id}{correct_answer}{shuffle_id}".encode()).hexdigest()
    return int(digest, 16) % (2**32)


def permutation(video_id: str, correct_answer: str, shuffle_id: int | str, n: int = 6) -> IntArray:
    """``perm[j]`` = canonical index of the option displayed at position ``j``."""
    rng = np.random.default_rng(shuffle_seed(video_id, correct_answer, shuffle_id))
    return rng.permutation(n).astype(np.int64)


def inverse(perm: ArrayLike) -> IntArray:
    """``inv[c]`` = displayed position of canonical option ``c`` (so ``perm[inv[c]] == c``)."""
    p = np.asarray(perm, dtype=np.int64)
    if sorted(p.tolist()) != list(range(p.size)):
        raise ValueError(f"not a permutation: {p.tolist()}")
    inv = np.empty_like(p)
    inv[p] = np.arange(p.size)
    return inv


def displayed(options: Sequence[str], perm: ArrayLike) -> list[str]:
    """The option texts in displayed order."""
    return [options[int(c)] for c in np.asarray(perm)]


def to_canonical(displayed_logits: ArrayLike, perm: ArrayLike) -> NDArray[np.float64]:
    """Logits of the displayed letters [..., 6] → logits of the canonical options [..., 6].

    Displayed letter ``j`` shows canonical option ``perm[j]``, so canonical option ``c`` gets the logit
    of displayed letter ``inv[c]``; an argmax taken after this is the answer mapped back (App. C).
    """
    x = np.asarray(displayed_logits, dtype=np.float64)
    return x[..., inverse(perm)]


def answer_to_canonical(displayed_index: int, perm: ArrayLike) -> int:
    """The canonical option index of a displayed answer letter index."""
    return int(np.asarray(perm)[displayed_index])


def shuffle_ids(k: int = K_SHUFFLES) -> tuple[str | int, ...]:
    """The fixed order first, then shuffles 0..k-1."""
    return (FIXED, *range(k))


def record_permutation(video_id: str, correct_answer: str, shuffle_id: int | str) -> IntArray:
    """Identity for the fixed order, else the MD5-seeded permutation."""
    if shuffle_id == FIXED:
        return np.arange(6, dtype=np.int64)
    return permutation(video_id, correct_answer, shuffle_id)
