"""LGIP session fixtures (registered by the plugin): datasets become workloads once per session, and
scores once per (scorer, dataset, pair family).

Each test scores only the pair family it reads (paraphrases for invariance, single-word flips, or
combined flips), so under xdist the three are separate model stages that different workers can run
(``flip_family`` is an indirect parameter: it names the stage; test ids do not show it). The invariance
stage also scores one unrelated caption per base caption (``invariance_unrelated``, for E_inv_rel).

Datasets: the reference world always runs; COCO captions, an LGIP JSONL and SugarCrepe join when
``--faith-data`` names them (``coco=DIR`` with ``annotations/`` and ``val2017/``; ``lgip=FILE``, LGIP's
released perturbation JSONL, whose stored paraphrases feed invariance and whose flips feed the flip
tests; ``sugarcrepe=DIR`` with the split JSONs, whose images are read from the COCO directory's
``val2017/``). The scorer under test is the
plugin's ``faith_scorer`` fixture, requested by name. torch loads only when a fixture runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
import pytest

from faithtests.config import run_config, session_memo
from faithtests.protocols.lgip.manifest import (
    BIN_SCHEME_CHOICES,
    BINS,
    PARAPHRASE_LABEL_CHOICES,
    PARAPHRASE_LABELS,
)
from faithtests.protocols.lgip.paraphrase import ParaphraseLabels
from faithtests.protocols.lgip.perturb import pair_id
from faithtests.protocols.lgip.run import score_pairs
from faithtests.protocols.lgip.separation import unrelated_pairs
from faithtests.protocols.lgip.sources import (
    coco_workload,
    lgip_workload,
    sugarcrepe_workload,
    world_workload,
)
from faithtests.protocols.lgip.strength import BinScheme

#: Scale of the default reference-world run: enough images for CIs of a few points, fast on 2 cores.
WORLD_IMAGES = 64
FLIP_CASES = ("all", "color", "number", "object", "combined")
STRENGTH_BINS = ("weak", "medium", "strong")
__all__ = ["BIN_SCHEME_CHOICES", "PARAPHRASE_LABEL_CHOICES"]
_SCORED = pytest.StashKey[dict[tuple[str, str, tuple[str, ...]], "Scored"]]()
_WORKLOADS = pytest.StashKey[dict[str, Any]]()
_UNRELATED = pytest.StashKey[dict[tuple[str, str], "Unrelated"]]()
_SETTINGS = pytest.StashKey[dict[str, str]]()


@pytest.hookimpl(trylast=True)  # after the plugin has read the options (faithtests.plugin.options)
def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SETTINGS] = {o.name: run_config(config).option(o) for o in (BINS, PARAPHRASE_LABELS)}


@pytest.fixture(scope="session")
def lgip_bin_scheme(request: pytest.FixtureRequest) -> BinScheme:
    """``--faith-lgip-bins``: how flips are cut into weak / medium / strong (``strength.bin_flips``)."""
    return cast("BinScheme", request.config.stash[_SETTINGS]["faith_lgip_bins"])


@pytest.fixture(scope="session")
def lgip_paraphrase_labels(request: pytest.FixtureRequest) -> ParaphraseLabels:
    """``--faith-lgip-paraphrase-labels``: simple / advanced by markers or by provenance."""
    return cast("ParaphraseLabels", request.config.stash[_SETTINGS]["faith_lgip_paraphrase_labels"])


def bin_slice(scheme: str, strength_bin: str) -> str:
    """The slice of a strength bin: ``bin=weak`` (within-type), ``paper_bin=weak``, ``pooled_bin=weak``."""
    return f"bin={strength_bin}" if scheme == "within-type" else f"{scheme}_bin={strength_bin}"


def kind_slice(labels: str, kind: str) -> str:
    """The slice of a paraphrase kind: ``simple`` / ``advanced`` (markers), ``provenance=simple`` ..."""
    return kind if labels == "markers" else f"{labels}={kind}"


def datasets(config: pytest.Config, *, flips: bool) -> list[str]:
    """The world, then COCO, an LGIP JSONL and (for flips) SugarCrepe when ``--faith-data`` names them."""
    data = run_config(config).data
    names = ["world"]
    names += [name for name in ("coco", "lgip") if name in data]
    if flips and "sugarcrepe" in data:
        names.append("sugarcrepe")
    return names


#: A user's LGIP file brings its own flip types: one overall case (types as slices) and the combined flips.
FILE_FLIP_CASES = ("all", "combined")
_FIELDS = {"paraphrase": "paraphrases (same_caps)", "flip": "flips (diff_caps)",
           "combined": "combined flips (combined_caps)"}


def _absent(config: pytest.Config, dataset: str, family: str) -> list[pytest.MarkDecorator]:
    """A skip mark naming what an LGIP file lacks when it has no pairs of ``family`` (a file may carry
    only flips, say); the file is read here, at collection (model-free, once per session)."""
    if dataset != "lgip" or _workload(config, dataset).of_family(family):
        return []
    return [pytest.mark.skip(reason=f"--faith-data lgip: the file has no {_FIELDS[family]}")]


def _cases(dataset: str) -> tuple[str, ...]:
    # SugarCrepe brings its own flip types (its splits): one overall case, splits as slices.
    return ("all",) if dataset == "sugarcrepe" else FILE_FLIP_CASES if dataset == "lgip" else FLIP_CASES


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if "invariance_data" in metafunc.fixturenames:
        metafunc.parametrize("invariance_data", [
            pytest.param(d, id=d, marks=_absent(config, d, "paraphrase"))
            for d in datasets(config, flips=False)], indirect=True, scope="session")
    if "flip_case" in metafunc.fixturenames:
        cases = [(d, t) for d in datasets(config, flips=True) for t in _cases(d)]
        metafunc.parametrize("flip_data,flip_family,flip_case", [
            pytest.param(d, family_of_case(t), t, id=f"{d}-{t}", marks=_absent(config, d, family_of_case(t)))
            for d, t in cases], indirect=["flip_data", "flip_family"], scope="session")
    if "strength_bin" in metafunc.fixturenames:
        names = datasets(config, flips=False)
        metafunc.parametrize("flip_data,flip_family,strength_bin", [
            pytest.param(d, "flip", b, id=f"{d}-{b}", marks=_absent(config, d, "flip"))
            for d in names for b in STRENGTH_BINS], indirect=["flip_data", "flip_family"], scope="session")


def family_of_case(case: str) -> str:
    """The pair family a flip case reads: the combined case its own, every other case the flips."""
    return "combined" if case == "combined" else "flip"


def _workload(config: pytest.Config, name: str) -> Any:
    def load() -> Any:
        run = run_config(config)
        if name == "world":
            return world_workload(run.capped(WORLD_IMAGES, "lgip"), seed=run.seed)
        if name == "coco":
            return coco_workload(run.data["coco"], limit=run.limit)
        if name == "lgip":
            return lgip_workload(run.data["lgip"], limit=run.limit)
        # the plugin checked that COCO (its val2017/ holds the images) comes with SugarCrepe
        return sugarcrepe_workload(run.data["sugarcrepe"], run.data["coco"] / "val2017", limit=run.limit)
    return session_memo(config, _WORKLOADS, name, load)


@dataclass(frozen=True)
class Scored:
    """A workload with s(I, c) and s(I, c') of every pair under one scorer."""

    workload: Any  # an LGIPWorkload
    base: np.ndarray  # s(I, c)
    perturbed: np.ndarray  # s(I, c')


def _scored(request: pytest.FixtureRequest, scorer: Any, name: str, family: str) -> Scored:
    """Scores of one pair family of a dataset's workload (``Scored.workload`` holds only those pairs)."""

    def make() -> Scored:
        whole = _workload(request.config, name)
        wl = replace(whole, pairs=whole.of_family(family))
        if not wl.pairs:
            raise ValueError(f"dataset {name!r} produced no {family} pairs")
        s = score_pairs(scorer, wl.images, wl.pairs)
        return Scored(wl, s.base, s.perturbed)
    return session_memo(request.config, _SCORED, (scorer.spec, name, (family,)), make)


@dataclass(frozen=True)
class Unrelated:
    """s(I, c) and s(I, c_u) for one unrelated caption c_u per base (I, c) of the paraphrase pairs
    (:mod:`faithtests.protocols.lgip.separation`); ``pairs`` is empty when the dataset has one image."""

    pairs: tuple[Any, ...]  # UnrelatedPair
    base: np.ndarray  # s(I, c)
    unrelated: np.ndarray  # s(I, c_u)


def _unrelated(request: pytest.FixtureRequest, scorer: Any, name: str) -> Unrelated:
    """Scores of the unrelated-caption pairs of a dataset's paraphrase pairs, once per (scorer, dataset)."""

    def make() -> Unrelated:
        base_pairs = _workload(request.config, name).of_family("paraphrase")
        if len({p.image_id for p in base_pairs}) < 2:
            return Unrelated((), np.zeros(0), np.zeros(0))
        pairs = unrelated_pairs(base_pairs)
        s = score_pairs(scorer, _workload(request.config, name).images, pairs)
        return Unrelated(pairs, s.base, s.perturbed)
    return session_memo(request.config, _UNRELATED, (scorer.spec, name), make)


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


@pytest.fixture
def invariance_unrelated(request: pytest.FixtureRequest, faith_scorer: Any,
                         invariance_data: str) -> Unrelated:
    return _unrelated(request, faith_scorer, invariance_data)


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





def finite_pairs(faith: Any, scored: Scored, idx: Any) -> np.ndarray:
    """The pairs of ``idx`` with both scores finite. The others (NaN or inf from a broken model) are
    counted per pair as 'non-finite score' and fail every later check of the model
    (``Faith.nonfinite``), so the metrics aggregate only usable pairs instead of crashing."""
    return finite_invariance(faith, scored, idx, None)[0]


def finite_invariance(faith: Any, scored: Scored, idx: Any,
                      unrel: Unrelated | None) -> tuple[np.ndarray, Unrelated]:
    """:func:`finite_pairs` of the paraphrase pairs ``idx`` and of the unrelated-caption pairs, screened
    together so the scorecard counts them once (one 'non-finite score' entry per test)."""
    idx = np.asarray(idx, dtype=int)
    unrel = unrel or Unrelated((), np.zeros(0), np.zeros(0))
    scores = np.stack([np.concatenate([scored.base[idx], unrel.base]),
                       np.concatenate([scored.perturbed[idx], unrel.unrelated])], axis=1)
    ids = [pair_id(scored.workload.pairs[int(i)]) for i in idx] + [pair_id(p) for p in unrel.pairs]
    ok = faith.nonfinite(scores, ids)
    ok_p, ok_u = ok[:idx.size], ok[idx.size:]
    kept = Unrelated(tuple(p for p, k in zip(unrel.pairs, ok_u, strict=True) if k), unrel.base[ok_u],
                     unrel.unrelated[ok_u])
    return cast("np.ndarray", idx[ok_p]), kept
