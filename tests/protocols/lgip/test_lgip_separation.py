"""E_inv relative to the true-vs-unrelated separation (LGIP Eq. 2 over Eq. 4): unrelated-caption choice,
hand-computed values, and the scorers it must fail (constant, no separation, unresolved separation)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pytest

from faithtests.protocols.lgip.separation import (
    relative_invariance,
    relative_invariance_summary,
    separation,
    unrelated_pairs,
)
from faithtests.stats import cluster_bootstrap_sums_ci


class Base(NamedTuple):
    image_id: str
    caption_id: str
    caption: str


def test_unrelated_caption_is_the_same_index_of_the_image_half_way_round() -> None:
    """M = 3 sorted images, offset ⌊3/2⌋ = 1: a -> b, b -> c, c -> a; caption index n modulo the count."""
    pairs = [Base("c", "c0", "C zero"), Base("a", "a0", "A zero"), Base("a", "a0", "A zero"),
             Base("b", "b0", "B zero"), Base("a", "a1", "A one"), Base("c", "c1", "C one"),
             Base("c", "c2", "C two")]
    got = {(p.image_id, p.caption_id): p.perturbed for p in unrelated_pairs(pairs)}
    assert got == {("a", "a0"): "B zero", ("a", "a1"): "B zero", ("b", "b0"): "C zero",
                   ("c", "c0"): "A zero", ("c", "c1"): "A one", ("c", "c2"): "A zero"}
    assert [p.caption for p in unrelated_pairs(pairs)][:2] == ["A zero", "A one"]  # c of the base pair


def test_an_unrelated_caption_is_never_one_of_the_images_own() -> None:
    """b's caption at index 0 is also a's: a skips b for the next image, c."""
    pairs = [Base("a", "a0", "same"), Base("b", "b0", "same"), Base("c", "c0", "other")]
    got = {p.image_id: p.perturbed for p in unrelated_pairs(pairs)}
    assert got == {"a": "other", "b": "other", "c": "same"}
    with pytest.raises(ValueError, match="at least 2 images"):
        unrelated_pairs([Base("a", "a0", "x")])
    with pytest.raises(ValueError, match="every other image"):
        unrelated_pairs([Base("a", "a0", "x"), Base("b", "b0", "x")])


# Image x: paraphrase gaps |0.5-0.4| = 0.1, |0.5-0.55| = 0.05; image y: |0.3-0.3| = 0.
PB, PP, PI = [0.5, 0.5, 0.3], [0.4, 0.55, 0.3], ["x", "x", "y"]
# Unrelated: x 0.5 - 0.2 = 0.3, y 0.3 - 0.2 = 0.1.
UB, UU, UI = [0.5, 0.3], [0.2, 0.2], ["x", "y"]


def test_relative_invariance_hand_computed() -> None:
    """LGIP Eq. 2 over Eq. 4: E_inv = (0.1 + 0.05 + 0) / 3 = 0.05, Δ_u = (0.3 + 0.1) / 2 = 0.2, ratio 0.25."""
    assert separation(UB, UU) == pytest.approx(0.2)
    assert relative_invariance(0.05, 0.2) == pytest.approx(0.25)
    r = relative_invariance_summary(PB, PP, PI, UB, UU, UI, n_resamples=0)
    assert r.relative.value == pytest.approx(0.25) and r.relative.ci is None
    assert r.separation.value == pytest.approx(0.2)
    assert (r.separation.n_pairs, r.separation.n_images) == (2, 2)
    # two images, so the resamples are {x,x}: 0.075 / 0.3 = 0.25, {x,y}: 0.25, {y,y}: 0 / 0.1 = 0
    b = relative_invariance_summary(PB, PP, PI, UB, UU, UI, n_resamples=2000, seed=3)
    assert b.relative.value == pytest.approx(0.25)
    assert b.relative.ci == pytest.approx((0.0, 0.25), abs=1e-12)
    assert b.separation.ci == pytest.approx((0.1, 0.3))


def test_ratio_ci_matches_a_direct_percentile_bootstrap() -> None:
    """Where every resampled Δ_u > 0, the CI through θ = atan2(Δ_u, E_inv) is the ratio's own."""
    rng = np.random.default_rng(0)
    n = 40
    pb, pp = rng.normal(0.3, 0.02, 6 * n), rng.normal(0.3, 0.02, 6 * n)
    ub, uu = rng.normal(0.3, 0.02, n), rng.normal(0.1, 0.05, n)
    pi, ui = [f"i{k // 6}" for k in range(6 * n)], [f"i{k}" for k in range(n)]
    r = relative_invariance_summary(pb, pp, pi, ub, uu, ui, seed=1)
    cols = np.zeros((7 * n, 4))
    cols[: 6 * n, 0], cols[: 6 * n, 1] = np.abs(pb - pp), 1
    cols[6 * n :, 2], cols[6 * n :, 3] = ub - uu, 1
    direct = cluster_bootstrap_sums_ci(cols, [*pi, *ui], lambda t: (t[:, 0] / t[:, 1]) / (t[:, 2] / t[:, 3]),
                                       seed=1)
    assert r.relative.ci == pytest.approx(direct, rel=1e-3)
    assert r.relative.ci is not None and r.relative.ci[0] < r.relative.value < r.relative.ci[1]


def test_a_constant_scorer_is_undefined_not_perfect() -> None:
    """Every score equal: E_inv = 0 and Δ_u = 0, so E_inv_rel is NaN (fails any gate), not 0."""
    r = relative_invariance_summary([0.2] * 3, [0.2] * 3, PI, [0.2] * 2, [0.2] * 2, UI)
    assert math.isnan(r.relative.value) and r.relative.ci is None
    assert r.separation.value == 0.0 and r.separation.ci == (0.0, 0.0)
    assert math.isnan(relative_invariance(0.0, 0.0)) and math.isnan(relative_invariance(0.01, -0.2))


def test_an_unresolved_separation_is_undefined() -> None:
    """Δ_u = (5·1.0 − 5·0.9) / 10 = 0.05 > 0, but its bootstrap CI straddles 0: the ratio's CI is
    unbounded (Fieller), so E_inv_rel is NaN; without a bootstrap only Δ_u > 0 is asked (0.02 / 0.05)."""
    ub, uu = [1.0] * 5 + [0.0] * 5, [0.0] * 5 + [0.9] * 5
    ui = [f"i{k}" for k in range(10)]
    pb, pp = [0.5] * 10, [0.48] * 10
    r = relative_invariance_summary(pb, pp, ui, ub, uu, ui, seed=0)
    assert r.separation.value == pytest.approx(0.05)
    assert r.separation.ci is not None and r.separation.ci[0] < 0 < r.separation.ci[1]
    assert math.isnan(r.relative.value) and r.relative.ci is None
    r0 = relative_invariance_summary(pb, pp, ui, ub, uu, ui, n_resamples=0)
    assert r0.relative.value == pytest.approx(0.4)


def test_no_unrelated_pairs_leave_it_undefined() -> None:
    r = relative_invariance_summary(PB, PP, PI, [], [], [])
    assert math.isnan(r.relative.value) and math.isnan(r.separation.value)
    with pytest.raises(ValueError, match="one image id per pair"):
        relative_invariance_summary(PB, PP, PI[:2], UB, UU, UI)
