"""AC-Bench session fixtures (registered by the plugin): the records, every answer run, the conflict
scores, the LSS curves and the CECS variant, once per (VLM, dataset).

Datasets: the reference world always (``ACBENCH_WORLD_IMAGES`` mood scenes, six records each: aligned
and the five conflicts); ``--faith-data acbench=PATH`` (an AC-Bench-style JSONL file or folder) and
``--faith-data emoset=PATH`` (EmoSet annotation JSON: image-only records, so only the image-only
baseline runs there) when given; ``--faith-limit N`` keeps the first N images with all their records.
Bad rows are counted by kind by the loaders (``sources``) and by the runner (unreadable images, ties,
unparseable answers), never dropped silently.

``--faith-cecs-window FIRST-LAST`` (ini ``faith_cecs_window``; 0-based decoder layers, both ends
included) sets the CECS intervention window; without it the paper's window applies to Qwen3-VL-8B by
name, and any other model gets ``cecs.window_from_lss`` on its own base LSS curve of the S-Opp records
(the subset App. D.3 diagnoses; all conflict records when a dataset has no S-Opp). The rule that chose
the window is recorded with it.

Everything is computed lazily, once, on :class:`AcData` (the variant ``cecs`` reuses the base run for
every prompt the hard gate keeps in Default Mode; ``run.gate_check`` shows on the model that this is
exact up to float rounding). The VLM under test is the plugin's ``faith_vlm``; torch loads only when a
fixture runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
import pytest

from faithtests.config import run_config, session_memo
from faithtests.data.invalid import Counted
from faithtests.models.interfaces import Hooks, VisionLanguageModel
from faithtests.protocols.acbench import sources
from faithtests.protocols.acbench.manifest import CECS_WINDOW, MANIFEST, parse_window
from faithtests.protocols.acbench.metrics import lss_curve
from faithtests.protocols.acbench.records import AcRecord
from faithtests.protocols.acbench.run import (
    AnswerMode,
    Answers,
    GateCheck,
    LssRun,
    PromptKind,
    Usable,
    answer,
    conflict_scores,
    gate_check,
    label_token_counts,
    lss_run,
    mass_check,
    monitored_run,
    prompts_for,
    rescored,
    usable,
)
from faithtests.protocols.acbench.sources import Loaded
from faithtests.protocols.acbench.steering import (
    MassMonitor,
    active_rows,
    check_window_option,
    choose_window,
    steering_hooks,
)

__all__ = ["ACBENCH_BOOTSTRAP", "ACBENCH_VARIANTS", "AcData", "CecsUnavailable", "parse_window"]


#: Reference-world mood scenes per run (x 6 records: 1 aligned + 5 conflicts): 30 scenes give 150
#: conflict records (30 per subset) and the whole suite (both answer modes, base and CECS) runs in
#: about 40 s on reference:vlm on 2 cores (40 scenes: about 46 s).
ACBENCH_WORLD_IMAGES: Final = 30
#: Bootstrap resamples over images (the cluster of an image's six records); one vectorised draw each.
ACBENCH_BOOTSTRAP: Final = MANIFEST.bootstrap
ACBENCH_VARIANTS: Final = ("base", "cecs")
#: Prompts run through the hooks for the mass-preservation and below-the-gate checks.
CHECK_PROMPTS: Final = 4
_DATA = pytest.StashKey[dict[tuple[str, str], "AcData"]]()
_RECORDS = pytest.StashKey[dict[str, Loaded]]()
_WINDOW = pytest.StashKey["tuple[int, int] | None"]()


@pytest.hookimpl(trylast=True)  # after the plugin has read the options (faithtests.plugin.options)
def pytest_configure(config: pytest.Config) -> None:
    config.stash[_WINDOW] = run_config(config).option(CECS_WINDOW)


def acbench_datasets(config: pytest.Config) -> list[str]:
    data = run_config(config).data
    return ["world", *(name for name in ("acbench", "emoset") if name in data)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "acbench_data" in metafunc.fixturenames:
        metafunc.parametrize(
            "acbench_data", acbench_datasets(metafunc.config), indirect=True, scope="session"
        )


class CecsUnavailable(RuntimeError):
    """No intervention window could be chosen (no option, no paper window, no sink in the LSS curve)."""


@dataclass
class AcData:
    """One VLM on one dataset: the usable records and, computed on first use, every run."""

    dataset: str
    usable: Usable
    loaded: Counted  # the loader's rejections
    loaded_total: int
    vlm: VisionLanguageModel
    window_option: tuple[int, int] | None = None
    _answers: dict[tuple[str, str], Answers] = field(default_factory=dict)
    _baselines: dict[tuple[str, str], Answers] = field(default_factory=dict)
    _scores: tuple[np.ndarray, dict[str, int], dict[str, list[str]]] | None = None
    _lss: dict[str, LssRun] = field(default_factory=dict)
    _window: tuple[tuple[int, int], str] | None = None
    _mass: MassMonitor | None = None
    _steered_mass: MassMonitor | None = None
    _gate: GateCheck | None = None
    _normalised: list[Answers | None] = field(default_factory=list)

    @property
    def records(self) -> list[AcRecord]:
        """The described records that run (rows of every emotion, text-only and probe result)."""
        return self.usable.records

    # -- answers ------------------------------------------------------------------------------------
    def answers(self, variant: str, mode: AnswerMode) -> Answers:
        """The emotion prompt (image + description) in ``mode`` under ``variant`` (base / cecs)."""
        if (variant, mode) not in self._answers:
            if variant == "base":
                self._answers[variant, mode] = answer(
                    self.vlm, prompts_for("emotion", self.records), self._ids(self.records), mode
                )
            elif variant == "cecs":
                base = self.answers("base", mode)
                s = self.scores()
                rows = active_rows(s)
                window, _ = self.window()
                lengths = self.lss("base").lengths
                recs = [self.records[i] for i in rows]

                def hooks_for(j: int) -> Hooks:
                    i = rows[j]
                    length = lengths[i] if mode == "constrained" else None
                    return steering_hooks(float(s[i]), window, prompt_length=length)

                hooked = answer(self.vlm, prompts_for("emotion", recs), self._ids(recs), mode, hooks_for)
                self._answers[variant, mode] = base.take(rows, hooked, range(len(rows)))
            else:
                raise ValueError(f"unknown variant {variant!r}; expected one of {ACBENCH_VARIANTS}")
        return self._answers[variant, mode]

    def normalised(self) -> Answers | None:
        """The base constrained answers re-decided by mean per-token label log-probability
        (``run.rescored``; recorded as ``scoring=length_normalised``, not gated); None when the adapter
        exposes no tokenizer to count label tokens with."""
        if not self._normalised:
            counts = label_token_counts(self.vlm, prompts_for("emotion", self.records))
            base = self.answers("base", "constrained")
            self._normalised.append(None if counts is None else rescored(base, counts))
        return self._normalised[0]

    def baseline(self, kind: PromptKind, mode: AnswerMode) -> Answers:
        """The unimodal baselines (App. C.1): ``image-only`` on one record per image (gold y_img),
        ``text-only`` on every described record (gold y_txt)."""
        if (kind, mode) not in self._baselines:
            if kind not in ("image-only", "text-only"):
                raise ValueError(f"baseline kind {kind!r} is not image-only or text-only")
            recs = self.usable.images if kind == "image-only" else self.records
            self._baselines[kind, mode] = answer(self.vlm, prompts_for(kind, recs), self._ids(recs), mode)
        return self._baselines[kind, mode]

    @staticmethod
    def _ids(records: list[AcRecord]) -> list[str]:
        return [r.item_id for r in records]

    # -- CECS ---------------------------------------------------------------------------------------
    def scores(self) -> np.ndarray:
        """Conflict score s (Eq. 5) per described record; NaN where the probe was not finite."""
        return self.score_run()[0]

    def score_run(self) -> tuple[np.ndarray, dict[str, int], dict[str, list[str]]]:
        if self._scores is None:
            s, bad = conflict_scores(self.vlm, self.records)
            self._scores = (s, bad.invalid, bad.examples)
        return self._scores

    def lss(self, variant: str) -> LssRun:
        """Per-item LSS (Eq. 22) of the emotion prompts under ``variant``."""
        if variant not in self._lss:
            if variant == "base":
                self._lss[variant] = lss_run(self.vlm, prompts_for("emotion", self.records))
            elif variant == "cecs":
                base = self.lss("base")
                s = self.scores()
                rows = active_rows(s)
                window, _ = self.window()
                recs = [self.records[i] for i in rows]
                hooked = lss_run(
                    self.vlm,
                    prompts_for("emotion", recs),
                    lambda j: steering_hooks(float(s[rows[j]]), window),
                )
                per_item = base.per_item.copy()
                per_item[:, rows] = hooked.per_item
                self._lss[variant] = LssRun(per_item, list(base.lengths))
            else:
                raise ValueError(f"unknown variant {variant!r}; expected one of {ACBENCH_VARIANTS}")
        return self._lss[variant]

    def sink_rows(self) -> tuple[list[int], str]:
        """Rows of the window rule's LSS curve: S-Opp (App. D.3), else every conflict record."""
        opp = [i for i, r in enumerate(self.records) if r.subset == "S-Opp"]
        if opp:
            return opp, "S-Opp"
        return [i for i, r in enumerate(self.records) if r.conflict], "conflict"

    def window(self) -> tuple[tuple[int, int], str]:
        """(CECS window, the rule that chose it); ``CecsUnavailable`` when none can be chosen."""
        if self._window is None:
            if self.window_option is not None:  # the user's option outside the model: an error, not a skip
                check_window_option(self.window_option, self.vlm.num_layers)
            rows, name = self.sink_rows()
            mean = None
            if rows and self.window_option is None:
                mean = lss_curve(self.lss("base").per_item[:, rows]).mean
            try:
                self._window = choose_window(
                    self.vlm.num_layers,
                    self.vlm.spec,
                    mean,
                    self.window_option,
                    curve_name=f"base {name} LSS (n={len(rows)})",
                )
            except ValueError as e:
                raise CecsUnavailable(str(e)) from e
        return self._window

    def mass(self) -> MassMonitor:
        """The CECS update at s = 1 (gate open) on the first ``CHECK_PROMPTS`` emotion prompts."""
        if self._mass is None:
            self._mass = mass_check(
                self.vlm, prompts_for("emotion", self.records[:CHECK_PROMPTS]), self.window()[0]
            )
        return self._mass

    def steered_mass(self) -> MassMonitor:
        """The real CECS attention runs (every steered record at its own s) re-run under a monitor
        (:func:`~faithtests.protocols.acbench.run.monitored_run`: its totals are stored with the outputs)."""
        if self._steered_mass is None:
            s = self.scores()
            rows = active_rows(s)
            window, _ = self.window()
            self._steered_mass = MassMonitor()
            if rows:
                self._steered_mass = monitored_run(
                    self.vlm, prompts_for("emotion", [self.records[i] for i in rows]),
                    lambda j, m: steering_hooks(float(s[rows[j]]), window, monitor=m))
        return self._steered_mass

    def gate(self) -> GateCheck:
        """Below the gate, the hooked outputs of the first ``CHECK_PROMPTS`` prompts against base."""
        if self._gate is None:
            recs = self.records[:CHECK_PROMPTS]
            self._gate = gate_check(
                self.vlm,
                prompts_for("emotion", recs),
                self.lss("base").lengths[:CHECK_PROMPTS],
                self.window()[0],
            )
        return self._gate


def cap_images(loaded: Loaded, n: int | None) -> Loaded:
    """A copy of ``loaded`` keeping the records of its first ``n`` images (``--faith-limit``)."""
    if not n:
        return loaded
    keep: dict[str, None] = {}
    for r in loaded.records:
        if r.stimulus_id not in keep and len(keep) < n:
            keep[r.stimulus_id] = None
    return replace(loaded, records=[r for r in loaded.records if r.stimulus_id in keep])


def _load(config: pytest.Config, dataset: str) -> Loaded:
    run = run_config(config)
    if dataset == "world":
        recs = sources.world_records(run.capped(ACBENCH_WORLD_IMAGES, "acbench"), seed=run.seed)
        return sources.Loaded(records=recs, total=len(recs))
    if dataset == "acbench":
        return sources.load_acbench(run.data["acbench"])
    if dataset == "emoset":
        return sources.load_emoset(run.data["emoset"])
    raise ValueError(f"unknown AC-Bench dataset {dataset!r}")


def _records(config: pytest.Config, dataset: str) -> Loaded:
    loaded = session_memo(config, _RECORDS, dataset, lambda: _load(config, dataset))
    return loaded if dataset == "world" else cap_images(loaded, run_config(config).limit)


@pytest.fixture
def acbench_data(request: pytest.FixtureRequest, faith_vlm: Any) -> AcData:
    """One VLM on one dataset (the usable records; runs on first use), once per session."""
    dataset, config = str(request.param), request.config

    def make() -> AcData:
        loaded = _records(config, dataset)
        return AcData(dataset, usable(loaded.records), Counted.copy_of(loaded),
                      max(loaded.total, len(loaded.records)), faith_vlm, config.stash.get(_WINDOW, None))
    return session_memo(config, _DATA, (faith_vlm.spec, dataset), make)
