"""LGIP per-test results (``protocols/lgip/results.py``): hand-computed subsets, per-item values and
exemplar picks over a few pairs; the equations themselves are tested in test_lgip_metrics.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from faithtests.protocols.lgip.metrics import Estimate, flip_summary
from faithtests.protocols.lgip.perturb import PerturbationPair
from faithtests.protocols.lgip.results import (
    ci_bars,
    count_pairs,
    flip_indices,
    flip_rate,
    paraphrase_indices,
    paraphrase_invariance,
    strength_bins,
    worst_flips,
)
from faithtests.protocols.lgip.strength import STRENGTH_BINS, bin_flips, flip_strength


def _pair(image: str, cap: str, perturbed: str, family: str, label: str | None, rule: str = "r"
          ) -> PerturbationPair:
    return PerturbationPair(image, cap, f"caption {cap}", perturbed, family, label, rule)  # type: ignore[arg-type]


def test_ci_bars_gives_nan_for_a_missing_estimate_or_ci() -> None:
    bars = ci_bars([Estimate(0.5, (0.4, 0.6), 3, 2), Estimate(0.2, None, 3, 2), None])
    values, lo, hi = bars
    assert values[:2] == [0.5, 0.2] and math.isnan(values[2])
    assert lo[0] == 0.4 and hi[0] == 0.6
    assert all(math.isnan(x) for x in (*lo[1:], *hi[1:]))


def test_worst_flips_are_the_failures_of_eq5_furthest_above_first() -> None:
    base = np.array([0.3, 0.2, 0.5, 0.1, 0.9])
    flip = np.array([0.1, 0.4, 0.5, 0.4, 0.0])
    # failures (flip >= original): 1 (+0.2), 2 (tie, 0), 3 (+0.3); index 0 and 4 are won
    assert worst_flips(np.arange(5), base, flip).tolist() == [3, 1, 2]
    assert worst_flips(np.arange(5), base, flip, k=1).tolist() == [3]
    assert worst_flips(np.array([0, 4]), base, flip).size == 0


# three images, a paraphrase and an unrelated caption each; a flip pair is ignored by the paraphrase test
PARA_PAIRS = [
    _pair("i1", "a", "p1", "paraphrase", "simple"),
    _pair("i1", "a", "p2", "paraphrase", "advanced"),
    _pair("i2", "b", "p3", "paraphrase", "simple"),
    _pair("i2", "b", "p3", "paraphrase", "simple"),  # a repeat: its item id gets "#1"
    _pair("i3", "c", "red", "flip", "color"),
    _pair("i3", "c", "p4", "paraphrase", "advanced"),
]
PARA_BASE = np.array([0.30, 0.30, 0.20, 0.20, 0.50, 0.40])
PARA_PERT = np.array([0.28, 0.35, 0.20, 0.24, 0.10, 0.30])
UNRELATED = ([0.30, 0.20, 0.40], [0.10, 0.10, 0.10], ["i1", "i2", "i3"])


def test_paraphrase_indices_skip_other_families() -> None:
    assert paraphrase_indices(PARA_PAIRS) == [0, 1, 2, 3, 5]


def test_paraphrase_invariance_all_eq2_and_delta_u() -> None:
    """LGIP Eq. 2 pooled: |Δ| = 0.02, 0.05, 0, 0.04, 0.10 -> E_inv = 0.21 / 5 = 0.042; Δ_u (Eq. 4 with
    c† = c_u) = mean(0.2, 0.1, 0.3) = 0.2."""
    idx = np.array(paraphrase_indices(PARA_PAIRS))
    r = paraphrase_invariance(PARA_PAIRS, PARA_BASE, PARA_PERT, idx, "all", UNRELATED, labels="provenance",
                              seed=0)
    assert r is not None
    assert r.estimate.value == pytest.approx(0.042)
    assert r.estimate.n_pairs == 5
    assert r.relative.separation.value == pytest.approx(0.2)
    assert r.per_pair.values == pytest.approx({
        "i1|a|p1": 0.02, "i1|a|p2": 0.05, "i2|b|p3": 0.0, "i2|b|p3#1": 0.04, "i3|c|p4": 0.10})
    assert r.per_pair.clusters == {"i1|a|p1": "i1", "i1|a|p2": "i1", "i2|b|p3": "i2", "i2|b|p3#1": "i2",
                                   "i3|c|p4": "i3"}
    assert r.worst.tolist() == [5, 1, 3, 0]  # workload indices, moved most first (k = 4)
    # Table 4: simple 0.06 / 3 = 0.02, advanced 0.15 / 2 = 0.075 -> +275 %
    assert r.summary.relative_increase_pct is not None
    assert r.summary.relative_increase_pct.value == pytest.approx(275.0)


def test_paraphrase_invariance_of_one_kind() -> None:
    """Simple paraphrases only: |Δ| = 0.02, 0, 0.04 -> E_inv^simple = 0.02; the others are neither
    items nor exemplars."""
    idx = np.array(paraphrase_indices(PARA_PAIRS))
    r = paraphrase_invariance(PARA_PAIRS, PARA_BASE, PARA_PERT, idx, "simple", UNRELATED,
                              labels="provenance", seed=0)
    assert r is not None
    assert r.estimate.value == pytest.approx(0.02)
    assert set(r.per_pair.values) == {"i1|a|p1", "i2|b|p3", "i2|b|p3#1"}
    assert r.worst[:3].tolist() == [3, 0, 2]


def test_paraphrase_invariance_without_the_kind_is_none() -> None:
    idx = np.array([0, 2])  # simple paraphrases only
    assert paraphrase_invariance(PARA_PAIRS, PARA_BASE, PARA_PERT, idx, "advanced", UNRELATED,
                                 labels="provenance", seed=0) is None


FLIPS = [
    _pair("i1", "a", "f1", "flip", "color", "red->blue"),
    _pair("i1", "a", "f2", "flip", "number", "two->three"),
    _pair("i2", "b", "f3", "flip", "number", "three->two"),
    _pair("i2", "b", "f4", "combined", "number", "passive+two->one"),
    _pair("i3", "c", "f5", "flip", "number", "two->three"),
    _pair("i3", "c", "f6", "flip", None, "file flip"),
]
FLIP_BASE = np.array([0.5, 0.4, 0.3, 0.3, 0.2, 0.6])
FLIP_PERT = np.array([0.1, 0.5, 0.1, 0.4, 0.2, 0.2])


def test_flip_indices_by_family_and_case() -> None:
    assert flip_indices(FLIPS, "flip", "all").tolist() == [0, 1, 2, 4, 5]
    assert flip_indices(FLIPS, "flip", "number").tolist() == [1, 2, 4]
    assert flip_indices(FLIPS, "combined", "combined").tolist() == [3]


def test_flip_rate_eq5_per_item_and_per_type() -> None:
    """LGIP Eq. 5 (strict): won = 1, 0, 1, 0 (tie), 1 -> PR = 3/5; number flips 1/3; untyped 1/1."""
    idx = flip_indices(FLIPS, "flip", "all")
    r = flip_rate(FLIPS, FLIP_BASE, FLIP_PERT, idx, seed=0)
    assert r.summary.overall.pr.value == pytest.approx(0.6)
    assert r.summary.overall.gap.value == pytest.approx((0.4 - 0.1 + 0.2 + 0.0 + 0.4) / 5)
    assert r.won.values == {"i1|a|f1": 1.0, "i1|a|f2": 0.0, "i2|b|f3": 1.0, "i3|c|f5": 0.0, "i3|c|f6": 1.0}
    assert r.won.clusters is not None and r.won.clusters["i2|b|f3"] == "i2"
    assert list(r.won_by_type) == ["color", "number", "untyped"]
    assert r.won_by_type["number"].values == {"i1|a|f2": 0.0, "i2|b|f3": 1.0, "i3|c|f5": 0.0}
    assert r.summary.by_type["number"].pr.value == pytest.approx(1 / 3)
    assert r.preferred_original == {"i1|a|f1": True, "i1|a|f2": False, "i2|b|f3": True, "i3|c|f5": False,
                                    "i3|c|f6": True}
    assert r.worst.tolist() == [1, 4]  # +0.1 above its original, then the tie


def test_count_pairs_by_count_and_direction() -> None:
    """Number flips 2->3 (won 0 of 2: items 1, 4) and 3->2 (won 1 of 1); "more" = 2->3, "fewer" = 3->2;
    the combined flip's rule reads after its "+" (2->1, fewer, lost)."""
    r = count_pairs(FLIPS, FLIP_BASE, FLIP_PERT, np.array([0, 1, 2, 3, 4]), seed=0)
    assert r is not None
    assert sorted(r.by_pair) == ["2->1", "2->3", "3->2"]
    assert r.by_pair["2->3"].pr.value == 0.0 and r.by_pair["2->3"].pr.n_pairs == 2
    assert r.by_pair["3->2"].pr.value == 1.0
    assert r.by_direction["more"].pr.value == 0.0
    assert r.by_direction["fewer"].pr.value == pytest.approx(0.5)  # 3->2 won, 2->1 lost
    assert r.worst == "2->1"  # PR 0 like 2->3; ties go to the first key in sorted order
    assert r.worst_flips.tolist() == [3]
    assert count_pairs(FLIPS, FLIP_BASE, FLIP_PERT, np.array([0, 5]), seed=0) is None  # no count flips


def test_strength_bins_match_the_summary_of_their_bins() -> None:
    """The result is flip_summary over strength.bin_flips' labels; makeup and present read it."""
    rng = np.random.default_rng(3)
    pairs = [_pair(f"i{k % 5}", f"c{k}", f"flip {k}", "flip", ("color", "object")[k % 2]) for k in range(24)]
    base, pert = rng.normal(size=24), rng.normal(size=24)
    # positive entries: cos in (0, 1), so every type has distinct strengths
    vectors = {t: rng.uniform(0.1, 1.0, size=4) for p in pairs for t in (p.caption, p.perturbed)}

    def encode(texts: list[str]) -> np.ndarray:
        return np.stack([vectors[t] for t in texts])

    idx = np.arange(24)
    r = strength_bins(pairs, base, pert, idx, encode, "within-type", seed=0)
    types = [p.label or "untyped" for p in pairs]
    cos = np.array([float(vectors[p.caption] @ vectors[p.perturbed]
                          / np.linalg.norm(vectors[p.caption]) / np.linalg.norm(vectors[p.perturbed]))
                    for p in pairs])
    bins = bin_flips(types, cos, "within-type")
    expected = flip_summary(base, pert, [p.image_id for p in pairs], flip_types=types,
                            strengths=flip_strength(types, cos), bins=bins.labels, seed=0)
    assert r.summary.by_bin["weak"].pr.value == expected.by_bin["weak"].pr.value
    assert r.present() == [b for b in STRENGTH_BINS if b in expected.by_bin]
    assert [t for t, _ in r.makeup("strong")] == ["color", "object"]
    color_strong = r.makeup("strong")[0][1]
    assert color_strong.pr == expected.by_type_bin[("color", "strong")].pr
    assert color_strong.weighted_gap is not None  # strengths were given
    assert color_strong.weighted_gap.value == pytest.approx(
        expected.by_type_bin[("color", "strong")].weighted_gap.value)  # type: ignore[union-attr]
    lo, hi = bins.thresholds["color"]
    assert r.cuts.startswith(f"color {lo:.3f}/{hi:.3f}, object ")
