"""The regression gate's statistics (faithtests.scorecard.paired, its CI from faithtests.stats) against
hand-computed values, and the per-item link of a metric (ItemValues, ``faith.metric(per_item=...)``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from faithtests import stats
from faithtests.scorecard.model import GATE_RESAMPLES, ItemValues, MetricResult
from faithtests.scorecard.paired import mcnemar_exact, paired_delta, unpaired_ci
from faithtests.scorecard.recording import Faith


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 0, 1.0),
        (3, 0, 0.25),  # 2 * C(3,0) / 2^3
        (0, 5, 0.0625),  # 2 * 1 / 32
        (1, 1, 1.0),  # 2 * (1 + 2) / 4 capped at 1
        (8, 2, 2 * (1 + 10 + 45) / 1024),  # 0.109375
        (2, 8, 2 * (1 + 10 + 45) / 1024),  # symmetric
        (12, 3, 2 * (1 + 15 + 105 + 455) / 2**15),  # 0.03515625
    ],
)
def test_mcnemar_exact(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)


def test_mcnemar_rejects_negative() -> None:
    with pytest.raises(ValueError, match=r"mcnemar_exact: counts must be >= 0, got -1, 2"):
        mcnemar_exact(-1, 2)


def test_unpaired_ci() -> None:
    # half-widths 0.03 and 0.04 -> sqrt(0.03^2 + 0.04^2) = 0.05 around delta -0.1
    lo, hi = unpaired_ci(0.8, (0.77, 0.83), 0.7, (0.66, 0.74))
    assert (lo, hi) == (pytest.approx(-0.15), pytest.approx(-0.05))


def test_paired_ci_constant_and_undefined() -> None:
    same = {"a": 0.5, "b": 0.5, "c": 0.5}
    p = paired_delta(dict.fromkeys(same, 0.0), same, b=50)
    assert p is not None and p.ci == (pytest.approx(0.5), pytest.approx(0.5))  # every replicate is 0.5
    one = paired_delta(dict.fromkeys(same, 0.0), same, dict.fromkeys(same, "img0"))
    assert one is not None and one.ci is None and one.delta == pytest.approx(0.5)  # one cluster: undefined


def test_paired_ci_two_clusters_hand_computed() -> None:
    # cluster A holds deltas (1, 1) (sum 2, size 2), cluster B holds (0,) (sum 0, size 1). Drawing 2
    # clusters: {A,A} -> 4/4 = 1, {B,B} -> 0, {A,B} or {B,A} -> 2/3. Each all-same draw has p 1/4, so
    # the 2.5% / 97.5% quantiles are 0 and 1.
    base, cur = {"a": 0.0, "b": 0.0, "c": 0.5}, {"a": 1.0, "b": 1.0, "c": 0.5}
    clusters = {"a": "A", "b": "A", "c": "B"}
    p = paired_delta(base, cur, clusters, b=4000, seed=3)
    assert p is not None and p.ci == (0.0, 1.0) and p.delta == pytest.approx(2 / 3)
    assert paired_delta(base, cur, clusters, b=4000, seed=3) == p  # seeded: reproducible


def test_paired_ci_is_the_stats_bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """One bootstrap for metrics and gate: the same draws as stats, and stats' small-sample rule."""
    rng = np.random.default_rng(1)
    base = {f"i{k}": float(v) for k, v in enumerate(rng.random(12))}
    cur = {k: v + float(rng.normal()) for k, v in base.items()}
    clusters = {k: f"img{int(k[1:]) % 4}" for k in base}
    p = paired_delta(base, cur, clusters)
    ids = sorted(base)
    d = [cur[i] - base[i] for i in ids]
    assert p is not None and p.ci == stats.cluster_bootstrap_ci(d, [clusters[i] for i in ids],
                                                                n_resamples=GATE_RESAMPLES, seed=0)
    monkeypatch.setattr(stats, "MIN_BOOTSTRAP_UNITS", 5)  # 4 clusters are now too few
    few = paired_delta(base, cur, clusters)
    assert few is not None and few.ci is None


def test_paired_ci_rejects_non_finite_deltas() -> None:
    with pytest.raises(ValueError, match=r"cluster_bootstrap_ci: 1 non-finite value"):
        paired_delta({"a": float("nan"), "b": 1.0}, {"a": 1.0, "b": 0.0})


def test_paired_delta_binary_counts_and_direction() -> None:
    base = {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0, "only_base": 1.0}
    cur = {"a": 0.0, "b": 0.0, "c": 1.0, "d": 1.0, "only_cur": 0.0}
    p = paired_delta(base, cur)
    assert p is not None and p.n == 4 and p.binary
    assert p.delta == pytest.approx((-1 - 1 + 1 + 0) / 4)
    assert (p.good_to_bad, p.bad_to_good) == (2, 1) and p.mcnemar_p == pytest.approx(1.0)  # 2*(1+3)/8
    low = paired_delta(base, cur, higher_is_better=False)  # 0 is good: 0 -> 1 is good -> bad
    assert low is not None and (low.good_to_bad, low.bad_to_good) == (1, 2)
    assert paired_delta({"x": 1.0}, {"y": 1.0}) is None


def test_paired_delta_self_is_zero_and_clusters_matter() -> None:
    rng = np.random.default_rng(0)
    vals = {f"i{k}": float(v) for k, v in enumerate(rng.random(60))}
    p = paired_delta(vals, vals)
    assert p is not None and p.delta == 0.0 and p.ci == (0.0, 0.0) and not p.binary and p.mcnemar_p is None
    # a shift that is +1 on every item of half the images, 0 elsewhere: clustered CI is wider
    cur = {k: v + (1.0 if int(k[1:]) % 6 < 3 else 0.0) for k, v in vals.items()}
    clusters = {k: f"img{int(k[1:]) // 3}" for k in vals}  # items of an image share the shift
    flat, clustered = paired_delta(vals, cur), paired_delta(vals, cur, clusters)
    assert flat is not None and clustered is not None and flat.ci and clustered.ci
    assert flat.delta == clustered.delta == pytest.approx(0.5)
    assert clustered.ci[1] - clustered.ci[0] > flat.ci[1] - flat.ci[0]


def test_item_values_json_round_trip_and_rounding() -> None:
    iv = ItemValues.make({"p1": 1 / 3, 2: True}, {"p1": "img7", 2: "img7"})
    assert iv.values == {"p1": 0.3333333, "2": 1.0}
    d = iv.to_json()
    assert d == {"ids": ["p1", "2"], "values": [0.3333333, 1.0], "cluster_names": ["img7"],
                 "clusters": [0, 0]}
    assert ItemValues.from_json(json.loads(json.dumps(d))) == iv
    r = MetricResult("s", "t.py::t", "PR", 2 / 3, per_item=iv)
    assert MetricResult.from_json(json.loads(json.dumps(r.to_json()))).per_item == iv
    assert "per_item" not in MetricResult("s", "t.py::t", "PR", 0.5).to_json()  # old JSON unchanged


def test_item_values_bad_input() -> None:
    with pytest.raises(ValueError, match=r"per_item\['a'\] is not finite \(nan\); leave the item out"):
        ItemValues.make({"a": float("nan")})
    with pytest.raises(ValueError, match=r"per_item: clusters must name exactly the items of values "
                                         r"\(1 item\(s\) differ\)"):
        ItemValues.make({"a": 1.0}, {"a": "x", "b": "y"})


def test_faith_metric_per_item() -> None:
    faith = Faith("t.py::t", "s")
    r = faith.metric("PR", 0.5, per_item={"a": True, "b": False})
    assert r.per_item is not None and r.per_item.values == {"a": 1.0, "b": 0.0}
    r2 = faith.metric("E", 0.25, per_item=ItemValues({"a": 0.5, "b": 0.0}, {"a": "i", "b": "j"}))
    assert r2.per_item is not None and r2.per_item.clusters == {"a": "i", "b": "j"}
    with pytest.raises(ValueError, match=r"s/X: value 0.9 is not the mean of per_item \(0.5\)"):
        faith.metric("X", 0.9, per_item={"a": 1.0, "b": 0.0})
    assert faith.metric("U", float("nan"), per_item={"a": 1.0}).value is None  # undefined: no mean check


def test_pair_keys_match_across_runs_and_stay_unique() -> None:
    from faithtests.protocols.lgip.perturb import PerturbationPair, pair_keys

    p = PerturbationPair("img1", "c0", "a red cube", "a blue cube", "flip", "color", "red->blue")
    q = PerturbationPair("img1", "c0", "a red cube", "a red ball", "flip", "object", "cube->ball")
    assert pair_keys([p, q, p, p]) == ["img1|c0|a blue cube", "img1|c0|a red ball", "img1|c0|a blue cube#1",
                                       "img1|c0|a blue cube#2"]
