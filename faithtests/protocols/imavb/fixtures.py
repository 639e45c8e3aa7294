"""IMAVB session fixtures (registered by the plugin): records, six-letter logits under the fixed order
and K shuffles, last-token states, the logit lens and the PGLA variant, once per (VLM, dataset).

Datasets: the reference world always; ``--faith-data imavb=PATH`` adds a local copy of IMAVB (any
layout of ``sources.load_imavb``; videos sampled to ``IMAVB_FRAMES`` = 50 frames, ``--faith-imavb-frames
N`` (ini ``faith_imavb_frames``) to change it, recorded in the fingerprint's ``settings``;
``--faith-limit N`` keeps the first N stimuli with all their variants). What the model is given depends
on whether it hears (its adapter's ``accepts_audio``, ``run.hears``):

* an image-only model: the world's ``PREMISE_WORLD_STIMULI`` scenes × standard / misleading vision, one
  image each; on IMAVB the frames only; the audio splits are recorded as not applicable with the reason
  (:data:`AUDIO_NOT_APPLICABLE`) and Bal is the slice "vision only";
* a model that hears: the world's ``PREMISE_CLIP_STIMULI`` clips with their soundtrack × all four splits
  (``audio_stimuli.clip_records``), IMAVB's videos with their audio tracks; an audio question without a
  soundtrack in the data is not applicable (:data:`NO_SOUNDTRACK`), an undecodable one counted invalid.

The VLM under test is the plugin's ``faith_vlm``; torch and scikit-learn load only when a fixture runs.

What several tests need is computed once per (model, dataset) and kept on :class:`PremiseData`: the
all-rows probe curve of the gap analysis (§4.3), the sentence embeddings, and the PGLA protocol (its own
l* on the probe-training stimuli). The ``pgla`` variant is computed offline from the base run's logits
(Eqs. 5–6 with each row's held-out configuration); the adapter path (``Hooks.logit_adjuster``) runs on a
handful of records as an equivalence check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pytest

from faithtests.config import record_setting, run_config, session_memo
from faithtests.data.invalid import CountsInvalid
from faithtests.models.capabilities import lacks, require
from faithtests.models.errors import NotApplicable
from faithtests.models.interfaces import VisionLanguageModel
from faithtests.models.letters import generated_by, states_not_read
from faithtests.protocols.imavb import sources
from faithtests.protocols.imavb.gap import GapInputs
from faithtests.protocols.imavb.manifest import FRAMES, IMAVB_FRAMES, MANIFEST, parse_frames
from faithtests.protocols.imavb.pgla import GateProbe, PGLAResult, pgla_cv, pgla_gate, pgla_layer
from faithtests.protocols.imavb.probes import group_folds, layer_curve
from faithtests.protocols.imavb.records import PremiseRecord, modality
from faithtests.protocols.imavb.run import (
    ChoiceRun,
    VariantRun,
    hears,
    logit_lens,
    pgla_hooks,
    run_choice,
    run_variant,
    sentence_embeddings,
)
from faithtests.protocols.imavb.sources import Loaded, load_imavb
from faithtests.scorecard.coverage import NONFINITE

if TYPE_CHECKING:  # lazy: torch (the output store)
    from faithtests.models.store import OutputStore

#: Reference-world stimuli per run (each gives a standard and a misleading question): enough for CIs
#: of about ±0.05 on a split, and the whole suite runs in well under a minute on 2 cores.
PREMISE_WORLD_STIMULI = 200
#: Reference-world clips per run for a model that hears (each gives all four splits): the same 400 rows.
PREMISE_CLIP_STIMULI = 100
#: Bootstrap resamples over stimuli: the paper's 10,000 (one vectorised draw per call costs a few ms at
#: this suite's 200 stimuli, so the default run reports the final numbers; no ``slow`` tier needed).
PREMISE_BOOTSTRAP = MANIFEST.bootstrap
PREMISE_VARIANTS = ("base", "pgla")
#: Records run again through ``Hooks.logit_adjuster`` to check the adapter path equals Eqs. 5–6 offline.
PGLA_HOOK_CHECK_RECORDS = 8
AUDIO_NOT_APPLICABLE = (
    "the model takes no audio (its adapter's accepts_audio is False): prompts carry the frames only, so "
    "the audio splits are not run (vision splits only; Bal is vision only)"
)
NO_SOUNDTRACK = "audio question without a soundtrack in the data: nothing for the model to hear"
_DATA = pytest.StashKey[dict[tuple[str, str], "PremiseData"]]()
_RECORDS = pytest.StashKey[dict[tuple[str, bool], Loaded]]()
_FRAMES = pytest.StashKey[int]()
__all__ = ["IMAVB_FRAMES", "PREMISE_BOOTSTRAP", "PREMISE_VARIANTS", "PremiseData", "parse_frames"]


@pytest.hookimpl(trylast=True)  # after the plugin has read the options (faithtests.plugin.options)
def pytest_configure(config: pytest.Config) -> None:
    frames: int = run_config(config).option(FRAMES)
    config.stash[_FRAMES] = frames
    # a setting that changes what IMAVB measures: recorded in the scorecard's fingerprint
    record_setting(config, "imavb_frames", frames)


def imavb_frames(config: pytest.Config) -> int:
    """Frames per IMAVB clip in this run (``--faith-imavb-frames``)."""
    return config.stash.get(_FRAMES, IMAVB_FRAMES)


def premise_datasets(config: pytest.Config) -> list[str]:
    return ["world", *(["imavb"] if "imavb" in run_config(config).data else [])]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "premise_data" in metafunc.fixturenames:
        metafunc.parametrize(
            "premise_data", premise_datasets(metafunc.config), indirect=True, scope="session"
        )


def runnable(
    records: Sequence[PremiseRecord], hearing: bool = False
) -> tuple[list[PremiseRecord], dict[str, int], str]:
    """(records to run, split → records not applicable, the reason): for a model that takes no audio the
    vision splits run and the audio splits are not applicable (:data:`AUDIO_NOT_APPLICABLE`); for one
    that hears every record runs except audio questions without a soundtrack (:data:`NO_SOUNDTRACK`)."""
    def skipped(r: PremiseRecord) -> bool:
        return modality(r.split) == "audio" and (not hearing or r.audio is None)

    todo = [r for r in records if not skipped(r)]
    na: dict[str, int] = {}
    for r in records:
        if skipped(r):
            na[r.split] = na.get(r.split, 0) + 1
    return todo, na, (NO_SOUNDTRACK if hearing else AUDIO_NOT_APPLICABLE) if na else ""


@dataclass
class PremiseData(CountsInvalid):
    """One VLM on one dataset: the A1 run, its lens, what was left out (counted by kind), and cached
    analyses."""

    dataset: str
    run: ChoiceRun
    lens: np.ndarray | None  # [L, N, 6] letter probabilities; None with ``lens_reason``
    invalid: dict[str, int]
    examples: dict[str, list[str]]
    not_applicable: dict[str, int] = field(default_factory=dict)  # split -> records not run
    reason: str = ""
    vlm: VisionLanguageModel | None = None
    lens_reason: str = ""
    store: OutputStore | None = None  # the session's --faith-cache store (text-baseline embeddings)
    read: int = 0  # rows read that apply to the model (its not-applicable splits left out): coverage's total
    _pgla: dict[tuple[int, Literal["shuffled", "fixed"]], PGLAResult] = field(default_factory=dict)
    _pgla_layer: dict[int, tuple[int, tuple[float, ...]]] = field(default_factory=dict)
    _pgla_gate: dict[int, GateProbe] = field(default_factory=dict)
    _pgla_run: dict[int, ChoiceRun] = field(default_factory=dict)
    _gap: dict[tuple[int, str], GapInputs] = field(default_factory=dict)
    _emb: np.ndarray | None = None
    _prompts: dict[str, VariantRun] = field(default_factory=dict)

    def splits(self) -> list[str]:
        return [r.split for r in self.run.records]

    def no_states(self) -> str:
        """Why the run holds no hidden states ("" when it does): a served model shows none, and
        generated letters (``--faith-answer-mode``) come with none."""
        if self.run.generated:
            return states_not_read(self.run.generated)
        return lacks(self.vlm, "hidden_states") if self.vlm is not None else ""

    def require_states(self) -> None:
        """The white-box tests (probes, lens, PGLA) are not applicable to a run without states."""
        if self.run.generated:
            spec = str(getattr(self.vlm, "spec", self.dataset))
            raise NotApplicable(spec, "hidden_states", self.no_states())
        if self.vlm is not None:
            require(self.vlm, "hidden_states")

    def stimuli(self) -> list[str]:
        return [r.stimulus_id for r in self.run.records]

    def modality_rows(self, target: str = "vision") -> np.ndarray:
        """Indices of the records whose question targets ``target`` ("vision" or "audio")."""
        return np.flatnonzero([modality(r.split) == target for r in self.run.records]).astype(np.int64)

    def gap_inputs(self, seed: int, target: str = "vision") -> GapInputs:
        """The §4.3 gap analysis's rows within one modality (mis_v vs std_v, or mis_a vs std_a, on
        :meth:`modality_rows`): their states, labels, stimuli and questions, the probe per layer and its
        folds (4-fold CV grouped by stimulus; indices into those rows); computed once."""
        if (seed, target) not in self._gap:
            self.require_states()
            if self.run.states is None:
                raise ValueError(f"{self.dataset}: the run kept no hidden states")
            rows = self.modality_rows(target)
            recs = [self.run.records[int(i)] for i in rows]
            y = np.array([r.misleading for r in recs], dtype=np.int64)
            stim = [r.stimulus_id for r in recs]
            folds = group_folds(y, stim, seed=seed, what=f"the §4.3 {target}-grounded probe")
            states = self.run.states[:, rows]
            curve = layer_curve(states, y, folds, seed=seed)
            self._gap[seed, target] = GapInputs(states, y, stim, [r.question for r in recs], curve, folds)
        return self._gap[seed, target]

    def embeddings(self) -> np.ndarray:
        """all-MiniLM-L6-v2 embeddings of the question texts (raises ``EmbedderUnavailable``); once."""
        if self._emb is None:
            self._emb = sentence_embeddings([r.question for r in self.run.records], store=self.store)
        return self._emb

    def prompt_run(self, prompt: str) -> VariantRun:
        """The A2 / A3 / A4 prompt variant on the records A1 ran (``run_variant``); once per variant."""
        if prompt not in self._prompts:
            if self.vlm is None:
                raise ValueError("prompt_run needs the VLM")
            self._prompts[prompt] = run_variant(self.vlm, self.run.records, prompt,
                                                generated=self.run.generated)
        return self._prompts[prompt]

    def pgla(self, seed: int, orders: Literal["shuffled", "fixed"] = "shuffled") -> PGLAResult:
        """The App. G protocol on this run (l* on the probe-training stimuli, 162-config CV, held-out
        outcomes), tuned and scored on the K shuffles (the suite's metric) or on the fixed order (the
        paper's Table 4); β from the same orders. Too few stimuli for it raises ``InsufficientData``
        (``pgla.check_pgla_data``): its tests are INSUFFICIENT, the base verdicts stand without it."""
        if orders not in ("shuffled", "fixed"):
            raise ValueError(f"orders must be 'shuffled' or 'fixed', got {orders!r}")
        if (seed, orders) not in self._pgla:
            self.require_states()
            r = self.run
            if r.states is None:
                raise ValueError(f"{self.dataset}: PGLA needs the run's hidden states")
            if seed not in self._pgla_layer:  # l*, its curve and the gate probe: once for both protocols
                self._pgla_layer[seed] = pgla_layer(r.states, self.splits(), self.stimuli(), seed=seed)
                self._pgla_gate[seed] = pgla_gate(r.states, self._pgla_layer[seed][0], self.splits(),
                                                  self.stimuli(), seed=seed)
            gold = np.array([rec.correct_index for rec in r.records])
            lg = r.logits[:, 1:] if orders == "shuffled" else r.logits[:, 0]
            self._pgla[seed, orders] = pgla_cv(
                r.states,
                lg,
                gold,
                self.splits(),
                self.stimuli(),
                layer=self._pgla_layer[seed],
                gate=self._pgla_gate[seed],
                seed=seed,
            )
        return self._pgla[seed, orders]

    def pgla_run(self, seed: int) -> ChoiceRun:
        """The ``pgla`` variant: the held-out (75%) records with Eqs. 5–6 applied offline to the base
        run's logits (every order), each record with its fold's configuration and P_mis."""
        if seed not in self._pgla_run:
            res = self.pgla(seed)
            ev = res.eval_rows
            self._pgla_run[seed] = ChoiceRun(
                [self.run.records[int(i)] for i in ev],
                self.run.orders,
                res.adjusted(self.run.logits[ev]),
                self.run.perms[ev],
                None,
                total=len(ev),
            )
        return self._pgla_run[seed]

    def pgla_hook_check(self, seed: int, n: int = PGLA_HOOK_CHECK_RECORDS) -> tuple[float, int]:
        """(max |hooked − offline| over the first ``n`` evaluation records and all orders, records run):
        the adapter path ``Hooks.logit_adjuster`` against the offline ``pgla`` variant."""
        if self.vlm is None:
            raise ValueError("pgla_hook_check needs the VLM")
        res, offline = self.pgla(seed), self.pgla_run(seed)
        recs = offline.records[:n]
        cfg = {r.item_id: res.configs[int(f)] for r, f in zip(recs, res.fold_of, strict=False)}
        p = {r.item_id: float(v) for r, v in zip(recs, res.p_mis, strict=False)}
        hooked = run_choice(self.vlm, recs, hooks_for=pgla_hooks(cfg, p, res.beta), want_states=False)
        at = {r.item_id: j for j, r in enumerate(recs)}
        err = max(
            (
                float(np.abs(offline.logits[at[r.item_id]] - hooked.logits[j]).max())
                for j, r in enumerate(hooked.records)
            ),
            default=float("nan"),
        )
        return err, len(hooked.records)


def cap_stimuli(loaded: Loaded, n: int | None) -> Loaded:
    """A copy of ``loaded`` keeping the first ``n`` stimuli with all their variants (``--faith-limit``),
    the loaded object itself untouched."""
    if not n:
        return loaded
    keep: list[str] = []
    for r in loaded.records:
        if r.stimulus_id not in keep:
            if len(keep) == n:
                continue
            keep.append(r.stimulus_id)
    kept = set(keep)
    return replace(loaded, records=[r for r in loaded.records if r.stimulus_id in kept])


def world_clips(n: int, seed: int) -> list[PremiseRecord]:
    """The reference world's ``n`` clips with their soundtrack, all four splits (for a model that hears)."""
    from faithtests.protocols.imavb import audio_stimuli  # local: synthesises audio (numpy), only if used

    return list(audio_stimuli.clip_records(audio_stimuli.clip_items(n, seed)))


def _records(config: pytest.Config, dataset: str, hearing: bool) -> Loaded:
    """The dataset's records: the world as one image per scene (image-only model) or as clips with sound
    (a model that hears); IMAVB the same for both (what a prompt carries is the runner's choice)."""
    run = run_config(config)

    def load() -> Loaded:
        if dataset == "world" and hearing:
            recs = world_clips(run.capped(PREMISE_CLIP_STIMULI, "imavb-clips"), run.seed)
            return sources.Loaded(records=recs, total=len(recs))
        if dataset == "world":
            recs = sources.world_records(run.capped(PREMISE_WORLD_STIMULI, "imavb"), seed=run.seed)
            return sources.Loaded(records=recs, total=len(recs))
        return load_imavb(run.data["imavb"], n_frames=imavb_frames(config))
    loaded = session_memo(config, _RECORDS, (dataset, hearing and dataset == "world"), load)
    return loaded if dataset == "world" else cap_stimuli(loaded, run.limit)


@pytest.fixture
def premise_data(request: pytest.FixtureRequest, faith_vlm: Any) -> PremiseData:
    """The A1 run of every record under one VLM and dataset, computed once per session."""
    dataset = str(request.param)
    return session_memo(request.config, _DATA, (faith_vlm.spec, dataset),
                        lambda: _premise_data(request, faith_vlm, dataset))


def _premise_data(request: pytest.FixtureRequest, faith_vlm: Any, dataset: str) -> PremiseData:
    hearing = hears(faith_vlm)
    loaded = _records(request.config, dataset, hearing)
    todo, na, reason = runnable(loaded.records, hearing)
    reason = reason if hearing else AUDIO_NOT_APPLICABLE  # the world's image records hold no audio split
    generated = generated_by(faith_vlm, run_config(request.config).answer_mode)
    run = finite_run(run_choice(faith_vlm, todo, generated=generated))
    lens, lens_reason = (None, "the run kept no hidden states")
    if run.states is not None and run.records:
        lens, lens_reason = logit_lens(faith_vlm, run.states)
    read, invalid = load_counts(loaded, hearing, na)
    for k, v in run.invalid.items():
        invalid[k] = invalid.get(k, 0) + v
    examples = {**loaded.examples, **run.examples}
    return PremiseData(
        dataset, run, lens, invalid, examples, na, reason, faith_vlm, lens_reason=lens_reason,
        store=request.getfixturevalue("faith_output_store"),
        read=read,
    )


def load_counts(loaded: Loaded, hearing: bool, not_applicable: dict[str, int]) -> tuple[int, dict[str, int]]:
    """(rows read, rows rejected at load by kind) over the splits the model runs: coverage's total and
    counts. A row rejected at load counts out of the rows read, never out of the rows that ran (issue
    46); a model that takes no audio runs no audio split, so neither its rows nor their rejections
    count; records left out as not applicable (``runnable``) are not read for it either."""
    skip = set() if hearing else {s for s in loaded.read_by_split if modality(s) == "audio"}
    read = max(loaded.total, len(loaded.records)) - sum(loaded.read_by_split[s] for s in skip)
    read -= sum(n for s, n in not_applicable.items() if s not in skip)
    invalid = dict(loaded.invalid)
    for s in skip:
        for kind, n in loaded.rejected_by_split.get(s, {}).items():
            invalid[kind] -= n
    return read, {k: v for k, v in invalid.items() if v}


def finite_run(run: ChoiceRun) -> ChoiceRun:
    """``run`` without the records whose letter logits or states hold NaN or inf (a broken model): each is
    counted as 'non-finite score' in ``run.invalid``, which the tests record, so every check of the model
    fails saying so while the metrics use the finite records only."""
    if not run.records:  # every row rejected at load or in the run: nothing to check, counted already
        return run
    ok = np.isfinite(run.logits.reshape(len(run.records), -1)).all(axis=1)
    if run.states is not None:  # a float64 sum of finite float32 states cannot overflow
        ok &= np.isfinite(run.states.sum(axis=(0, 2), dtype=np.float64))
    ok = np.asarray(ok, dtype=bool)
    if ok.all():
        return run
    for r in (r for r, k in zip(run.records, ok, strict=True) if not k):
        run.reject(NONFINITE, r.item_id)
    return replace(run, records=[r for r, k in zip(run.records, ok, strict=True) if k], logits=run.logits[ok],
                   perms=run.perms[ok], states=None if run.states is None else run.states[:, ok])
