"""SPD-Faith session fixtures (registered by the plugin): the pairs and every variant's answers, once per
(VLM, dataset).

Datasets: the reference world always (``SPD_WORLD_PAIRS`` edit pairs cycling single easy / medium / hard,
multi 2-5 and identical controls); ``--faith-data coco=PATH`` (COCO-style folder: pairs generated from
its instance masks, seeded by ``--faith-seed``, cached under ``--faith-cache DIR`` or the user cache
``$XDG_CACHE_HOME/faithtests``); ``--faith-data spdfaith=PATH`` (a local copy of the public
SPD-Faith-Bench JSONL). ``--faith-limit N`` keeps the first N pairs.

``--faith-spd-judge MODULE:CALLABLE`` (ini ``faith_spd_judge``) replaces the deterministic claim judge
by the user's (``fn(answer, record) -> Judgement``, e.g. an LLM judge they run); every number says which
judge produced it. ``--faith-sage KEY=VALUE,...`` (ini ``faith_sage``) sets SAGE's open parameters
(``sage.SageConfig`` fields; a typo is a usage error).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Final

import pytest

from faithtests.config import run_config
from faithtests.data.invalid import Counted, invalid_rows

if TYPE_CHECKING:
    from faithtests.models.interfaces import VisionLanguageModel
    from faithtests.protocols.spdfaith.judge import Judge
    from faithtests.protocols.spdfaith.run import Answers, Usable
    from faithtests.protocols.spdfaith.sage import SageConfig

#: Reference-world pairs per run: 30 per slot of the five-slot cycle (90 single, 30 multi, 30 identical).
SPD_WORLD_PAIRS: Final = 150
#: COCO pairs generated from the instance masks (single, multi, identical).
SPD_COCO_PAIRS: Final = (60, 20, 10)
#: Bootstrap resamples over images (pairs made from one original resampled together).
SPD_BOOTSTRAP: Final = 10_000
_DATA = pytest.StashKey[dict[tuple[str, str], "SpdData"]]()
_RECORDS = pytest.StashKey[dict[str, Any]]()
_SETTINGS = pytest.StashKey["tuple[Judge | None, SageConfig | None]"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("faithtests")
    judge_help = ("SPD-Faith claim judge MODULE:CALLABLE, fn(answer, record) -> Judgement (default: the "
                  "deterministic judge)")
    g.addoption("--faith-spd-judge", dest="faith_spd_judge", default=None, metavar="MODULE:CALLABLE",
                help=judge_help + " (ini: faith_spd_judge)")
    parser.addini("faith_spd_judge", judge_help, default="")
    sage_help = "SAGE parameters KEY=VALUE,... (faithtests.protocols.spdfaith.sage.SageConfig fields)"
    g.addoption("--faith-sage", dest="faith_sage", default=None, metavar="KEY=VALUE,...",
                help=sage_help + " (ini: faith_sage)")
    parser.addini("faith_sage", sage_help, default="")


def _option(config: pytest.Config, name: str) -> str:
    value = config.getoption(name, None)
    return str(value if value is not None else config.getini(name)).strip()


def load_judge(spec: str) -> Judge:
    """``package.module:function`` → a judge named after it; a clear UsageError for anything else."""
    from faithtests.protocols.spdfaith.judge import callable_judge

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
    from faithtests.protocols.spdfaith.sage import SageConfig

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


def pytest_configure(config: pytest.Config) -> None:
    spec = _option(config, "faith_spd_judge")
    config.stash[_SETTINGS] = (load_judge(spec) if spec else None, parse_sage(_option(config, "faith_sage")))


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
    _answers: dict[str, Answers] = field(default_factory=dict)

    def answers(self, variant: str) -> Answers:
        if variant not in self._answers:
            from faithtests.protocols.spdfaith.run import run_variant

            self._answers[variant] = run_variant(self.vlm, self.usable, variant, self.judge, self.sage)
        return self._answers[variant]

    def data_invalid(self) -> list[tuple[str, int, int, list[str]]]:
        """(kind, count, out of, examples) of the loader's rejections (out of the rows read) and of the
        image check's (out of the records loaded)."""
        return invalid_rows(self.loaded, self.loaded_total, self.usable, self.usable.total)


def _records(config: pytest.Config, dataset: str) -> Any:
    cache = config.stash.setdefault(_RECORDS, {})
    run = run_config(config)
    if dataset not in cache:
        from faithtests.protocols.spdfaith import sources

        if dataset == "world":
            recs = sources.world_records(run.capped(SPD_WORLD_PAIRS), seed=run.seed)
            cache[dataset] = sources.Loaded(records=recs, total=len(recs))
        elif dataset == "coco":
            single, multi, same = (run.capped(n) for n in SPD_COCO_PAIRS)
            from faithtests.protocols.spdfaith.coco_edits import default_cache_dir

            where = run.cache / "spdfaith-coco" if run.cache else default_cache_dir()
            cache[dataset] = sources.coco_records(run.data["coco"], single, multi, same, run.seed, where)
        elif dataset == "spdfaith":
            cache[dataset] = sources.load_spdfaith_bench(run.data["spdfaith"], limit=run.limit)
        else:
            raise ValueError(f"unknown SPD-Faith dataset {dataset!r}")
    return cache[dataset]


def _vocabulary_judge(dataset: str, loaded: Any) -> Judge:
    """The deterministic judge on the dataset's vocabulary: the world's shapes / colours / places, or
    the categories of the COCO-based records with common colour names and shift directions."""
    from faithtests.protocols.spdfaith.judge import DeterministicJudge, world_judge

    return world_judge() if dataset == "world" else DeterministicJudge.for_records(loaded.records)


@pytest.fixture
def spdfaith_data(request: pytest.FixtureRequest, faith_vlm: Any) -> SpdData:
    """One VLM on one dataset (pairs decoded; answers computed on first use), once per session."""
    from faithtests.protocols.spdfaith.run import usable

    dataset = str(request.param)
    cache = request.config.stash.setdefault(_DATA, {})
    key = (faith_vlm.spec, dataset)
    if key not in cache:
        loaded = _records(request.config, dataset)
        judge, sage = request.config.stash[_SETTINGS]
        cache[key] = SpdData(
            dataset, usable(loaded.records), Counted.copy_of(loaded),  # with kinds' own totals (COCO)
            max(loaded.total, len(loaded.records)), faith_vlm,
            judge or _vocabulary_judge(dataset, loaded), sage,
        )
    return cache[key]
