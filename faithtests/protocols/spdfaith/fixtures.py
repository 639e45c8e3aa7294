"""SPD-Faith session fixtures (registered by the plugin): the pairs and every variant's answers, once per
(VLM, dataset).

Datasets: the reference world always (``SPD_WORLD_PAIRS`` edit pairs cycling single easy / medium / hard,
multi 2-5 and identical controls); ``--faith-data coco=PATH`` (COCO-style folder: pairs generated from
its instance masks, seeded by ``--faith-seed``, cached under ``--faith-cache DIR`` or the user cache
``$XDG_CACHE_HOME/faithtests``); ``--faith-data spdfaith=PATH`` (a local copy of the public
SPD-Faith-Bench JSONL). ``--faith-limit N`` keeps the first N pairs (on the world: N of each of its five
strata, :func:`world_pairs`; on COCO: N of each subset).

``--faith-spd-judge MODULE:CALLABLE`` (ini ``faith_spd_judge``) replaces the deterministic claim judge
by the user's (``fn(answer, record) -> Judgement``, e.g. an LLM judge they run); every number says which
judge produced it. ``--faith-sage KEY=VALUE,...`` (ini ``faith_sage``) sets SAGE's open parameters
(``sage.SageConfig`` fields; a typo is a usage error). A model without option log-probabilities, or
``--faith-answer-mode generated``, answers the Yes / No and count questions by generation (``.run``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields
from typing import Any, Final

import pytest

from faithtests.config import RunConfig, run_config, session_memo
from faithtests.data.invalid import Counted
from faithtests.models.capabilities import require
from faithtests.models.errors import NotApplicable
from faithtests.models.interfaces import VisionLanguageModel
from faithtests.models.letters import generated_by, states_not_read
from faithtests.progress import label
from faithtests.protocols.spdfaith import sources, stimuli
from faithtests.protocols.spdfaith.api_judge import load_api_judge
from faithtests.protocols.spdfaith.coco_edits import default_cache_dir
from faithtests.protocols.spdfaith.judge import DeterministicJudge, Judge, callable_judge, world_judge
from faithtests.protocols.spdfaith.manifest import JUDGE, MANIFEST, SAGE
from faithtests.protocols.spdfaith.run import Answers, Usable, run_variant, usable
from faithtests.protocols.spdfaith.sage import SageConfig

#: Reference-world pairs per run: 30 per slot of the five-slot cycle (90 single, 30 multi, 30 identical).
SPD_WORLD_PAIRS: Final = 150


def world_pairs(run: RunConfig) -> int:
    """How many world pairs the run makes: :data:`SPD_WORLD_PAIRS`, or under ``--faith-limit N`` N of
    each gated stratum (single easy / medium / hard, multi, identical: the pairs cycle through them),
    so a quick run checks every subset instead of leaving each N/5 pairs, under the checks' minimum of
    10 (issue 49: at N = 40 every SPD check was INSUFFICIENT with 8 pairs)."""
    turns = len(stimuli.CYCLE)
    return min(SPD_WORLD_PAIRS * run.scale, run.capped(SPD_WORLD_PAIRS // turns, "spdfaith") * turns)
#: COCO pairs generated from the instance masks (single, multi, identical).
SPD_COCO_PAIRS: Final = (60, 20, 10)
#: Bootstrap resamples over images (pairs made from one original resampled together).
SPD_BOOTSTRAP: Final = MANIFEST.bootstrap
_DATA = pytest.StashKey[dict[tuple[str, str], "SpdData"]]()
_RECORDS = pytest.StashKey[dict[str, Any]]()
_SETTINGS = pytest.StashKey["tuple[Judge | None, SageConfig | None]"]()


def load_judge(spec: str) -> Judge:
    """``package.module:function`` → a judge named after it, ``openai:MODEL@URL`` → an LLM judge behind
    that endpoint (:mod:`.api_judge`); a clear UsageError for anything else."""
    if spec.startswith("openai:"):
        try:
            return load_api_judge(spec)
        except Exception as e:  # the endpoint's own words: a wrong URL or model name, a dead server
            raise pytest.UsageError(f"--faith-spd-judge: {e}") from None
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise pytest.UsageError(f"--faith-spd-judge: {spec!r} is not MODULE:CALLABLE")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise pytest.UsageError(f"--faith-spd-judge: cannot load {spec!r}: {e}") from None
    if not callable(fn):
        raise pytest.UsageError(f"--faith-spd-judge: {spec!r} is not callable")
    return callable_judge(fn, spec)


def parse_sage(text: str) -> SageConfig | None:
    """``"alpha=0.2,eta=0.5"`` → ``SageConfig`` with those fields replaced; empty → None (defaults)."""
    if not text:
        return None
    known = {f.name: f for f in fields(SageConfig)}
    values: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep or key not in known:
            raise pytest.UsageError(
                f"--faith-sage: {part!r} is not KEY=VALUE with KEY one of {', '.join(sorted(known))}")
        try:
            values[key] = _sage_value(key, raw.strip())
        except ValueError:
            raise pytest.UsageError(f"--faith-sage: {key}={raw!r} is not a valid {key}") from None
    try:
        return SageConfig(**values)
    except ValueError as e:
        raise pytest.UsageError(f"--faith-sage: {e}") from None


#: How ``--faith-sage`` values are read, per SageConfig field (tuples are "+"-joined: stages=see+analyze).
_SAGE_INT = {"shallow_layers", "top_k"}
_SAGE_STR = {"fallback"}


def _sage_value(key: str, raw: str) -> Any:
    if key == "stages":
        return tuple(s for s in raw.split("+") if s)
    if key == "renormalize":
        if raw.lower() not in ("true", "false", "1", "0"):
            raise ValueError(raw)
        return raw.lower() in ("true", "1")
    if raw.lower() == "none" and key in ("alpha0", "shallow_layers"):
        return None
    if key in _SAGE_STR:
        return raw
    return int(raw) if key in _SAGE_INT else float(raw)


@pytest.hookimpl(trylast=True)  # after the plugin has read the options (faithtests.plugin.options)
def pytest_configure(config: pytest.Config) -> None:
    run = run_config(config)
    spec = run.option(JUDGE)
    config.stash[_SETTINGS] = (load_judge(spec) if spec else None, parse_sage(run.option(SAGE)))


def spdfaith_datasets(config: pytest.Config) -> list[str]:
    data = run_config(config).data
    return ["world", *(name for name in ("coco", "spdfaith") if name in data)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "spdfaith_data" in metafunc.fixturenames:
        metafunc.parametrize("spdfaith_data", spdfaith_datasets(metafunc.config), indirect=True,
                             scope="session")


@dataclass
class SpdData:
    """One VLM on one dataset: the usable pairs and, computed on first use, each variant's answers."""

    dataset: str
    usable: Usable
    loaded: Counted  # the loader's rejections
    loaded_total: int
    vlm: VisionLanguageModel
    judge: Judge
    sage: SageConfig | None = None
    generated: str = ""  # why the answers are generated ("" when read from option logits): models.letters
    _answers: dict[str, Answers] = field(default_factory=dict)

    def answers(self, variant: str) -> Answers:
        if variant not in self._answers:
            with label(f"SPD {variant}"):  # names the model calls' progress stages
                self._answers[variant] = run_variant(self.vlm, self.usable, variant, self.judge, self.sage,
                                                        self.generated)
        return self._answers[variant]

    def require_states(self) -> None:
        """The residual-stream check is not applicable to a model without states (a served one), nor to
        generated answers (no pre-answer state is read)."""
        if self.generated:
            raise NotApplicable(self.vlm.spec, "hidden_states", states_not_read(self.generated))
        require(self.vlm, "hidden_states")


def _records(config: pytest.Config, dataset: str) -> Any:
    def load() -> Any:
        run = run_config(config)
        if dataset == "world":
            recs = sources.world_records(world_pairs(run), seed=run.seed)
            return sources.Loaded(records=recs, total=len(recs))
        if dataset == "coco":
            single, multi, same = (run.capped(n) for n in SPD_COCO_PAIRS)
            where = run.cache / "spdfaith-coco" if run.cache else default_cache_dir()
            return sources.coco_records(run.data["coco"], single, multi, same, run.seed, where)
        if dataset == "spdfaith":
            return sources.load_spdfaith_bench(run.data["spdfaith"], limit=run.limit)
        raise ValueError(f"unknown SPD-Faith dataset {dataset!r}")
    return session_memo(config, _RECORDS, dataset, load)


def _vocabulary_judge(dataset: str, loaded: Any) -> Judge:
    """The deterministic judge on the dataset's vocabulary: the world's shapes / colours / places, or
    the categories of the COCO-based records with common colour names and shift directions."""
    return world_judge() if dataset == "world" else DeterministicJudge.for_records(loaded.records)


@pytest.fixture
def spdfaith_data(request: pytest.FixtureRequest, faith_vlm: Any) -> SpdData:
    """One VLM on one dataset (pairs decoded; answers computed on first use), once per session."""
    dataset, config = str(request.param), request.config

    def make() -> SpdData:
        loaded = _records(config, dataset)
        judge, sage = config.stash[_SETTINGS]
        return SpdData(
            dataset, usable(loaded.records), Counted.copy_of(loaded),  # with kinds' own totals (COCO)
            max(loaded.total, len(loaded.records)), faith_vlm,
            judge or _vocabulary_judge(dataset, loaded), sage,
            generated_by(faith_vlm, run_config(config).answer_mode),
        )
    return session_memo(config, _DATA, (faith_vlm.spec, dataset), make)
