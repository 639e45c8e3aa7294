"""LGIP session fixtures (registered by the plugin): datasets become workloads once per session, and
scores once per (scorer, dataset, pair family).

Each test scores only the pair family it reads (paraphrases for invariance, single-word flips, or
combined flips), so under xdist the three are separate model stages that different workers can run
(``flip_family`` is an indirect parameter: it names the stage; test ids do not show it).

Datasets: the reference world always runs; COCO captions and SugarCrepe join when ``--faith-data``
names them (``coco=DIR`` with ``annotations/`` and ``val2017/``; ``sugarcrepe=DIR`` with the split
JSONs, whose images are read from the COCO directory's ``val2017/``). The scorer under test is the
plugin's ``faith_scorer`` fixture, requested by name. torch loads only when a fixture runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pytest

from faithtests.config import run_config

if TYPE_CHECKING:  # numpy is not imported at plugin load
    import numpy as np

#: Scale of the default reference-world run: enough images for CIs of a few points, fast on 2 cores.
WORLD_IMAGES = 64
FLIP_CASES = ("all", "color", "number", "object", "combined")
STRENGTH_BINS = ("weak", "medium", "strong")
_SCORED = pytest.StashKey[dict[tuple[str, str, tuple[str, ...]], "Scored"]]()
_WORKLOADS = pytest.StashKey[dict[str, Any]]()


def datasets(config: pytest.Config, *, flips: bool) -> list[str]:
    """The world, then COCO and (for flips) SugarCrepe when ``--faith-data`` names them."""
    data = run_config(config).data
    names = ["world"]
    if "coco" in data:
        names.append("coco")
    if flips and "sugarcrepe" in data:
        names.append("sugarcrepe")
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "invariance_data" in metafunc.fixturenames:
        metafunc.parametrize("invariance_data", datasets(metafunc.config, flips=False), indirect=True,
                             scope="session")
    if "flip_case" in metafunc.fixturenames:
        # SugarCrepe brings its own flip types (its splits): one overall case, splits as slices.
        cases = [(d, t) for d in datasets(metafunc.config, flips=True)
                 for t in (("all",) if d == "sugarcrepe" else FLIP_CASES)]
        metafunc.parametrize("flip_data,flip_family,flip_case", [(d, family_of_case(t), t) for d, t in cases],
                             indirect=["flip_data", "flip_family"], ids=[f"{d}-{t}" for d, t in cases],
                             scope="session")
    if "strength_bin" in metafunc.fixturenames:
        names = datasets(metafunc.config, flips=False)
        metafunc.parametrize("flip_data,flip_family,strength_bin",
                             [(d, "flip", b) for d in names for b in STRENGTH_BINS],
                             indirect=["flip_data", "flip_family"],
                             ids=[f"{d}-{b}" for d in names for b in STRENGTH_BINS], scope="session")


def family_of_case(case: str) -> str:
    """The pair family a flip case reads: the combined case its own, every other case the flips."""
    return "combined" if case == "combined" else "flip"


def _workload(config: pytest.Config, name: str) -> Any:
    from faithtests.protocols.lgip.sources import coco_workload, sugarcrepe_workload, world_workload

    cache = config.stash.setdefault(_WORKLOADS, {})
    if name not in cache:
        run = run_config(config)
        if name == "world":
            cache[name] = world_workload(run.capped(WORLD_IMAGES), seed=run.seed)
        elif name == "coco":
            cache[name] = coco_workload(run.data["coco"], limit=run.limit)
        else:  # the plugin checked that COCO (its val2017/ holds the images) comes with SugarCrepe
            cache[name] = sugarcrepe_workload(run.data["sugarcrepe"], run.data["coco"] / "val2017",
                                              limit=run.limit)
    return cache[name]


@dataclass(frozen=True)
class Scored:
    """A workload with s(I, c) and s(I, c') of every pair under one scorer."""

    workload: Any  # an LGIPWorkload
    base: np.ndarray  # s(I, c)
    perturbed: np.ndarray  # s(I, c')


def _scored(request: pytest.FixtureRequest, scorer: Any, name: str, family: str) -> Scored:
    """Scores of one pair family of a dataset's workload (``Scored.workload`` holds only those pairs)."""
    from faithtests.protocols.lgip.run import score_pairs

    cache = request.config.stash.setdefault(_SCORED, {})
    key = (scorer.spec, name, (family,))
    if key not in cache:
        whole = _workload(request.config, name)
        wl = replace(whole, pairs=whole.of_family(family))
        if not wl.pairs:
            raise ValueError(f"dataset {name!r} produced no {family} pairs")
        s = score_pairs(scorer, wl.images, wl.pairs)
        cache[key] = Scored(wl, s.base, s.perturbed)
    return cache[key]


@pytest.fixture(scope="session")
def invariance_data(request: pytest.FixtureRequest) -> str:
    """The dataset of an invariance test (parametrised: world, coco)."""
    return str(request.param)


@pytest.fixture(scope="session")
def flip_data(request: pytest.FixtureRequest) -> str:
    """The dataset of a flip test (parametrised: world, coco, sugarcrepe)."""
    return str(request.param)


@pytest.fixture
def invariance_scored(request: pytest.FixtureRequest, faith_scorer: Any, invariance_data: str) -> Scored:
    return _scored(request, faith_scorer, invariance_data, "paraphrase")


@pytest.fixture(scope="session")
def flip_family(request: pytest.FixtureRequest) -> str:
    """The pair family a flip test reads: "flip" (single-word flips) or "combined" (parametrised)."""
    return str(request.param)


@pytest.fixture
def flip_scored(request: pytest.FixtureRequest, faith_scorer: Any, flip_data: str,
                flip_family: str) -> Scored:
    return _scored(request, faith_scorer, flip_data, flip_family)


def pair_exemplars(scored: Scored, indices: Any, reason: str) -> list[dict[str, Any]]:
    """Exemplar dicts for the ``faith`` recorder: the image, both captions and both scores."""
    out = []
    for i in indices:
        p = scored.workload.pairs[int(i)]
        out.append({
            "image": scored.workload.images[p.image_id](),
            "texts": {"caption": p.caption, "perturbed": p.perturbed, "rule": p.rule},
            "scores": {"s(I,c)": float(scored.base[i]), "s(I,c')": float(scored.perturbed[i])},
            "reason": reason,
        })
    return out


def record_missing(faith: Any, scored: Scored) -> None:
    """Missing images are counted in the scorecard, never silently dropped (an explicit zero too)."""
    wl = scored.workload
    faith.invalid("missing image", len(wl.missing), total=len(wl.missing) + len(wl.images),
                  examples=[str(m.path) for m in wl.missing[:5]])
