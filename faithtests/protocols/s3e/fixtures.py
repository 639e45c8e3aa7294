"""S3E session fixtures (registered by the plugin): the A/B logits and pre-answer states of every
record under one VLM, computed once per session. The VLM under test is the plugin's ``faith_vlm``
fixture, requested by name. torch loads only when a fixture runs.

Records: the reference world always; then each forced-choice data set ``--faith-data`` names, its first
:data:`S3E_DATA_RECORDS` usable records: SugarCrepe (with COCO, whose val2017/ holds its images; positive
vs hard negative), ARO (``aro=DIR``: VG-Relation and VG-Attribution, whichever of the two JSONs the
folder holds, images cropped to their boxes; true vs false caption) and Winoground (``winoground=DIR``:
each image with its own caption vs the other one). Records whose image is missing are counted, never
dropped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import numpy as np
import pytest

from faithtests.config import run_config, session_memo
from faithtests.data.aro import VG_FILES, VGSubset, load_vg
from faithtests.data.sugarcrepe import load_sugarcrepe
from faithtests.data.winoground import load_winoground
from faithtests.models.capabilities import lacks
from faithtests.models.errors import NotApplicable
from faithtests.models.letters import generated_by, states_not_read
from faithtests.protocols.s3e import sources
from faithtests.protocols.s3e.roles import build_s3e_records
from faithtests.protocols.s3e.run import run_forced_choice
from faithtests.protocols.s3e.stimuli import s3e_records

#: World records per run (stress types cycle object / attribute / relation / compositional).
S3E_WORLD_RECORDS = 64
#: Records per --faith-data set (sugarcrepe, aro, winoground) per run: the first N with an image present.
S3E_DATA_RECORDS = 64
S3E_SUGARCREPE_RECORDS = S3E_DATA_RECORDS  # the older name
#: The --faith-data names S3E reads, in the order their records join the world's.
S3E_DATASETS = ("sugarcrepe", "aro", "winoground")
#: Eq. 2's reference state. The paper's scores are "preserve-anchored" (Table 6, §3.3, App. M's 8 passes
#: per record): S is measured against the c+-vs-c_pres prompt. Another reading of Eq. 2 is a separate
#: positive-vs-positive prompt ("pos"); both are computed from the same 9-prompt pass, "pres" is reported.
S3E_ANCHOR: Final = "pres"
#: Fewest strict-correct items for a hidden-stress verdict (S3E App. I.3 keeps low-support runs out of its
#: claims); below it Δlex is recorded as undefined and its check fails.
S3E_MIN_SUPPORT = 20
_S3E = pytest.StashKey[dict[str, "S3EData"]]()


@dataclass(frozen=True)
class S3EData:
    records: list[Any]  # S3ERecord
    images: dict[str, Any]  # item_id -> loader
    logits: np.ndarray  # [N, 2, 5, 2]
    states: np.ndarray  # [L, N, 2, 5, D]
    excluded: dict[str, int]  # reason -> records left out (counted in the scorecard)
    spec: str = ""
    no_states: str = ""  # why the model shows no pre-answer states ("" when it does): found at load
    generated: str = ""  # why the answers are generated letters ("" when scored): ``models.letters``


def _s3e_records(config: pytest.Config) -> tuple[list[Any], dict[str, Any], dict[str, int]]:
    run = run_config(config)
    world = s3e_records(run.capped(S3E_WORLD_RECORDS), seed=run.seed)
    records = [w.record for w in world]
    images: dict[str, Any] = {w.record.item_id: w.image for w in world}
    excluded: Counter[str] = Counter()
    for name in (n for n in S3E_DATASETS if n in run.data):
        ss, n_missing = _user_sources(name, run.data)
        built, counts = build_s3e_records(ss.sources, seed=run.seed)
        excluded.update(counts)
        excluded["missing image"] += n_missing
        for r in built[:run.capped(S3E_DATA_RECORDS)]:
            records.append(r)
            images[r.item_id] = ss.images[r.item_id].load
    return records, images, dict(excluded)


def _user_sources(name: str, data: Mapping[str, Path]) -> tuple[Any, int]:
    """The role sources (an ``s3e.sources.SourceSet``) of one --faith-data set and its missing images."""
    if name == "sugarcrepe":  # with coco (the plugin checked): its val2017/ holds the images
        loaded = load_sugarcrepe(data["sugarcrepe"], data["coco"] / "val2017")
        return sources.from_sugarcrepe(loaded.records), len(loaded.missing)
    if name == "aro":
        items: list[Any] = []
        n_missing = 0
        subsets: tuple[VGSubset, ...] = ("relation", "attribution")
        for subset in subsets:
            if (data["aro"] / VG_FILES[subset]).is_file():  # the plugin checked that one of them is there
                vg = load_vg(subset, data["aro"])
                items += vg.records
                n_missing += len(vg.missing)
        return sources.from_aro(items), n_missing
    wino = load_winoground(data["winoground"])
    return sources.from_winoground(wino.records), len(wino.missing)


def s3e_dataset(config: pytest.Config) -> str:
    """The dataset name in S3E test ids (``[world-reference:vlm-orig]``): the world, joined by every
    --faith-data set pooled into the records (``world+sugarcrepe+aro``)."""
    data = run_config(config).data
    return "+".join(("world", *(name for name in S3E_DATASETS if name in data)))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "s3e_data" in metafunc.fixturenames:  # the dataset names the test, as in every other protocol
        metafunc.parametrize("s3e_data", [s3e_dataset(metafunc.config)], indirect=True, scope="session")


@pytest.fixture
def s3e_data(request: pytest.FixtureRequest, faith_vlm: Any) -> S3EData:
    """A/B logits and pre-answer states of every S3E record under one VLM, computed once per session."""

    def make() -> S3EData:
        records, images, excluded = _s3e_records(request.config)
        generated = generated_by(faith_vlm, run_config(request.config).answer_mode)
        run = run_forced_choice(faith_vlm, records, lambda r: images[r.item_id](), keep_nonfinite=True,
                                generated=generated)
        # generated letters come with no states: the white-box half is then not applicable, saying why
        no_states = states_not_read(generated) if generated else lacks(faith_vlm, "hidden_states")
        return S3EData(records, images, run.logits, run.states, excluded, spec=faith_vlm.spec,
                       no_states=no_states, generated=generated)
    return session_memo(request.config, _S3E, faith_vlm.spec, make)


def finite_records(faith: Any, s3e: S3EData, *, states: bool = False) -> S3EData:
    """``s3e`` without the records whose A/B logits (with ``states``, also pre-answer states) hold NaN or
    inf: those are counted per record as 'non-finite score' and fail every later check of the model
    (``Faith.nonfinite``), so the metrics aggregate only usable records instead of crashing."""
    if states and s3e.no_states:  # a served model: the white-box half is not applicable, once, with why
        raise NotApplicable(s3e.spec, "hidden_states", s3e.no_states)
    n = len(s3e.records)
    rows = s3e.logits.reshape(n, -1)
    if states:  # a float64 sum of finite float32 states cannot overflow: NaN/inf iff a state is
        rows = np.concatenate([rows, s3e.states.sum(axis=(0, 2, 3, 4), dtype=np.float64)[:, None]], axis=1)
    ok = faith.nonfinite(rows, [r.item_id for r in s3e.records], what="A/B logits")
    if ok.all():
        return s3e
    return replace(s3e, records=[r for r, k in zip(s3e.records, ok, strict=True) if k], logits=s3e.logits[ok],
                   states=s3e.states[:, ok])
