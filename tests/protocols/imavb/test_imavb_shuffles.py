"""MD5-seeded option shuffles and the inverse permutation (IMAVB App. C A1, App. D)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from faithtests.protocols.imavb.metrics import answers
from faithtests.protocols.imavb.shuffles import (
    FIXED,
    answer_to_canonical,
    displayed,
    inverse,
    permutation,
    record_permutation,
    shuffle_ids,
    shuffle_seed,
    to_canonical,
)


def test_md5_seed_hand_computed() -> None:
    """App. C: seed = MD5(video_id + correct_answer + shuffle_id). MD5("clip_0007E1") =
    d7f19d0e9fb05a810aa6064d16c22536; modulo 2**32 keeps the last 8 hex digits 0x16c22536 = 381822262."""
    assert shuffle_seed("clip_0007", "E", 1) == 0x16C22536 == 381822262
    assert shuffle_seed("clip_0007", "E", "1") == 381822262  # the id is concatenated as text
    assert shuffle_seed("clip_0007", "E", 2) != shuffle_seed("clip_0007", "E", 1)


def test_inverse_permutation_hand_computed() -> None:
    """App. D: displayed letter j shows canonical option perm[j]; inv[c] is where option c is shown.
    perm = [5, 0, 1, 4, 2, 3] → F is shown as A, A as B, ..., so inv = [1, 2, 4, 5, 3, 0]."""
    perm = np.array([5, 0, 1, 4, 2, 3])
    assert inverse(perm).tolist() == [1, 2, 4, 5, 3, 0]
    assert displayed(["a", "b", "c", "d", "E", "F"], perm) == ["F", "a", "b", "E", "c", "d"]
    # the model answers displayed "D" (index 3), which shows canonical E (index 4)
    assert answer_to_canonical(3, perm) == 4
    shown = np.array([0.0, 0.0, 0.0, 9.0, 0.0, 0.0])  # logit peak on displayed D
    canon = to_canonical(shown, perm)
    assert canon.tolist() == [0, 0, 0, 0, 9, 0] and int(answers(canon)) == 4


def test_fixed_order_is_identity_and_comes_first() -> None:
    assert shuffle_ids(3) == (FIXED, 0, 1, 2)
    assert record_permutation("v", "A", FIXED).tolist() == [0, 1, 2, 3, 4, 5]
    assert permutation("v", "A", 0).tolist() == record_permutation("v", "A", 0).tolist()


def test_positions_are_about_uniform() -> None:
    """App. D checks the shuffles put the correct answer at each position about 1/6 of the time."""
    pos = [int(inverse(permutation(f"v{i}", "B", k))[1]) for i in range(600) for k in range(3)]
    freq = np.bincount(pos, minlength=6) / len(pos)
    assert np.all(np.abs(freq - 1 / 6) < 0.03), freq


@given(st.text(min_size=1, max_size=12), st.sampled_from("ABCDEF"), st.integers(0, 5))
def test_mapping_back_recovers_the_canonical_answer(vid: str, ans: str, k: int) -> None:
    perm = permutation(vid, ans, k)
    assert sorted(perm.tolist()) == list(range(6))
    for c in range(6):
        shown = np.zeros(6)
        shown[inverse(perm)[c]] = 1.0
        assert int(answers(to_canonical(shown, perm))) == c
