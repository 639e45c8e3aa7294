"""LGIP workloads: deterministic, typed, and missing images counted rather than dropped."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from faithtests.protocols.lgip.metrics import flip_summary
from faithtests.protocols.lgip.sources import coco_workload, sugarcrepe_workload, world_workload


def test_world_workload_is_deterministic_and_typed() -> None:
    a, b = world_workload(6, seed=3), world_workload(6, seed=3)
    assert a.pairs == b.pairs and len(a.images) == 6 and a.n_captions == 30
    labels = {p.label for p in a.of_family("flip")}
    assert labels <= {"color", "number", "object"} and labels  # the world's types under LGIP's names
    assert {p.label for p in a.of_family("paraphrase")} <= {"simple", "advanced"}
    assert world_workload(6, seed=4).pairs != a.pairs


def test_coco_workload_on_coco_mini(shared_data: Path) -> None:
    wl = coco_workload(shared_data / "coco-mini")
    assert len(wl.images) == 79 and wl.missing == ()
    assert wl.n_captions == 395
    assert len(wl.of_family("paraphrase")) == 6 * 395  # every caption reaches K_same = 6
    assert wl.images[wl.pairs[0].image_id]().mode == "RGB"


def test_sugarcrepe_pr_equals_text_accuracy(shared_data: Path) -> None:
    """Correctness check: PR (LGIP Eq. 5) over SugarCrepe pairs is SugarCrepe's text accuracy."""
    wl = sugarcrepe_workload(shared_data / "sugarcrepe", shared_data / "coco-mini" / "val2017")
    assert len(wl.pairs) == 211 and len(wl.missing) == 7300  # images absent from COCO-MINI are reported
    rng = np.random.default_rng(0)
    pos, neg = rng.normal(size=211), rng.normal(size=211)
    pr = flip_summary(pos, neg, [p.image_id for p in wl.pairs]).overall.pr.value
    assert pr == float(np.mean(pos > neg))
