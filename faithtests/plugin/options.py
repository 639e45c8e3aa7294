"""The plugin's options read once, at configure time, into a typed :class:`FaithOptions`.

The options are declared in :mod:`.option_table` and read with :func:`faithtests.config.setting`
(command line > ini > default; paths on the command line relative to the invocation directory, paths in
the ini file relative to its folder). The plugin stores the result in ``config.stash[FAITH_OPTIONS]``;
fixtures elsewhere (model fixtures, data loaders) read it with :func:`get_options`; protocol fixtures
read the :class:`~faithtests.config.RunConfig` built from it (:func:`run_config_of`). No other plugin
module reads an option (``tests/test_options_declared_once.py``); a protocol's fixtures read the
options its manifest declares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import pytest

from faithtests.config import Option, RunConfig, Source, setting, setting_source
from faithtests.data.names import DataNameError, resolve_path
from faithtests.plugin import option_table as o
from faithtests.plugin.model_spec import DEFAULT_SCORER, DEFAULT_VLM, ModelSpec, Role
from faithtests.protocols import manifests
from faithtests.scorecard.baseline import Tolerance
from faithtests.scorecard.family import Control
from faithtests.scorecard.glossary import MetricTerm
from faithtests.scorecard.history_run import DEFAULT_ROOT, default_report_dir, default_run_name
from faithtests.scorecard.model import GateMode
from faithtests.scorecard.recording import json_safe
from faithtests.scorecard.thresholds import Thresholds

__all__ = ["DEFAULT_SCORER", "DEFAULT_THRESHOLDS", "DEFAULT_VLM", "FAITH_DECLARED", "FAITH_MODEL_INFO",
           "FAITH_OPTIONS", "FAITH_THRESHOLDS", "MISMATCH_FIELDS", "FaithOptions", "ModelSpec",
           "RegressionTest", "Role", "get_options", "parse_options", "register_model_info", "run_config_of"]

DEFAULT_THRESHOLDS = o.DEFAULT_THRESHOLDS
MISMATCH_FIELDS = o.MISMATCH_FIELDS
RegressionTest = Literal["paired", "point"]


@dataclass(frozen=True)
class ApiSettings:
    """``--faith-api-*``: what an ``openai:`` model is configured with after it loads."""

    concurrency: int | None = None
    timeout_s: float | None = None
    max_requests: int | None = None
    estimate: bool = False  # --faith-api-estimate: probe, then count what would be sent (plugin.api_cost)


@dataclass(frozen=True)
class FaithOptions:
    report_dir: Path
    baseline: Path | None = None
    update_baseline: bool = False
    tolerance: Tolerance = field(default_factory=Tolerance)
    gate: GateMode = "point"
    thresholds_file: Path | None = None  # --faith-thresholds (user file)
    default_thresholds: Path | None = None  # ini faith_default_thresholds, resolved
    default_thresholds_explicit: bool = False  # set in the ini file: then it must exist
    models: tuple[ModelSpec, ...] = ()
    vlms: tuple[ModelSpec, ...] = ()
    data: dict[str, Path] = field(default_factory=dict)
    limit: int | None = None
    profile: str = "default"  # --faith-profile: named sizes (option_table.PROFILES)
    seed: int = 0
    max_exemplars: int = 8
    allow_missing: bool = False  # --faith-allow-missing: baseline keys absent from the run do not fail
    allow_mismatch: frozenset[str] = frozenset()  # --faith-allow-mismatch: fingerprint fields let differ
    regression: RegressionTest = "paired"  # --faith-regression: the baseline gate's test
    regression_all: bool = False  # --faith-regression-all: gate every metric, not only the checked ones
    regression_control: Control = "holm"  # --faith-regression-control: over the gated metrics' p-values
    allow_insufficient: bool = False  # --faith-allow-insufficient: INSUFFICIENT checks do not fail the run
    force_update_baseline: bool = False  # --faith-force-update-baseline: write it despite the refusals
    report_named: bool = False  # --faith-report was given on the command line
    cache: Path | None = None  # --faith-cache / ini faith_cache, as given (None: off)
    answer_mode: str = "auto"  # --faith-answer-mode
    run_name: str = ""  # --faith-run-name, or the default (the model labels): the scorecard's run name
    step: int | None = None  # --faith-step: the checkpoint's training step
    device: str = "auto"  # --faith-device: auto, cpu, cuda or cuda:N
    dtype: str = "float32"  # --faith-dtype
    batch_size: int = 16  # --faith-batch-size
    threads: int | None = None  # --faith-threads / ini faith_threads (None: the thread policy decides)
    no_vlm_scorer: bool = False  # --faith-no-vlm-scorer
    shard: str | None = None  # --faith-shard K/N, as given
    no_progress: bool = False  # --faith-no-progress
    api: ApiSettings = field(default_factory=ApiSettings)  # --faith-api-*
    #: --faith-ray, --faith-ray-actors, --faith-ray-gpus, --faith-device-map: (text, where it was set), as
    #: given (faithtests.plugin.scaleout checks them and names where a bad one came from)
    scale: dict[str, tuple[str, str]] = field(default_factory=dict)
    protocol: dict[str, Any] = field(default_factory=dict)  # each manifest's options: name -> value

    @property
    def regression_gate(self) -> GateMode:
        """The rule ``baseline.compare`` applies: ``ci`` (paired / unpaired delta CI) or ``point``."""
        return "ci" if self.regression == "paired" else "point"

    def model_specs(self) -> dict[str, str]:
        """label -> spec for every ``--faith-model`` and ``--faith-vlm``."""
        return {m.label: m.spec for m in (*self.models, *self.vlms)}


FAITH_OPTIONS = pytest.StashKey[FaithOptions]()
FAITH_THRESHOLDS = pytest.StashKey[Thresholds]()
# label -> info registered by (session-scoped) model fixtures on this process; see register_model_info
FAITH_MODEL_INFO = pytest.StashKey[dict[str, dict[str, Any]]]()
# (label, role) -> what the adapter loaded in that role declares (family, score kind): the threshold family
FAITH_DECLARED = pytest.StashKey[dict[tuple[str, str], dict[str, Any]]]()
# metric base name -> its glossary term (every protocol's): the one declaration of each metric's direction
FAITH_TERMS = pytest.StashKey[dict[str, MetricTerm]]()


def get_options(config: pytest.Config) -> FaithOptions:
    return config.stash[FAITH_OPTIONS]


def register_model_info(config: pytest.Config, label: str, info: dict[str, Any],
                        role: Role | None = None) -> None:
    """For model fixtures: record fingerprint info (spec, checkpoint hash, family, ...) of a loaded
    model. It travels to the controller on the next test report and lands in ``fingerprint.models``
    (merged per label: a VLM and that VLM as a scorer share one). With ``role``, the info is also what
    the model declares in that role: its ``family`` and, for a non-cosine scorer, its ``score`` kind
    select the family thresholds of checks on tests parametrised with that model and role."""
    safe = json_safe(info, f"model info {label!r}")
    config.stash.setdefault(FAITH_MODEL_INFO, {}).setdefault(label, {}).update(safe)
    if role is not None:
        config.stash.setdefault(FAITH_DECLARED, {})[(label, role)] = safe


def _models(config: pytest.Config) -> tuple[tuple[ModelSpec, ...], tuple[ModelSpec, ...]]:
    models, vlms = setting(config, o.MODEL), setting(config, o.VLM)
    labels = [m.label for m in (*models, *vlms)]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise pytest.UsageError(f"--faith-model/--faith-vlm: label(s) used twice: {', '.join(dupes)}")
    return models, vlms


def _default_report(where: Source, run_name: str, step: int | None) -> Path:
    """``faith-report/`` beside the ini file (else the invocation folder), unless it holds another run's
    report (:func:`~faithtests.scorecard.history_run.default_report_dir`); a symlink loop is a usage error."""
    try:
        root = resolve_path(where.base, DEFAULT_ROOT, "--faith-report")
    except DataNameError as exc:
        raise pytest.UsageError(str(exc)) from None
    return default_report_dir(root, run_name, step)


def parse_options(config: pytest.Config) -> FaithOptions:
    """Read every faithtests option of the plugin; malformed values raise :class:`pytest.UsageError`
    (the first malformed one, in the order below)."""
    report, where = setting_source(config, o.REPORT)
    tolerance, gate = setting(config, o.TOLERANCE), setting(config, o.GATE)
    models, vlms = _models(config)
    named = [m.label for m in (*models, *vlms)] or [DEFAULT_SCORER, DEFAULT_VLM]
    run_name = setting(config, o.RUN_NAME) or default_run_name(named, setting(config, o.SEED))
    step = setting(config, o.STEP)
    report = report or _default_report(where, run_name, step)
    data, regression = setting(config, o.DATA), setting(config, o.REGRESSION)
    baseline, update = setting(config, o.BASELINE), setting(config, o.UPDATE_BASELINE)
    thresholds_file = setting(config, o.THRESHOLDS)
    default_thresholds, explicit = setting(config, o.DEFAULT_THRESHOLDS_FILE)
    limit, profile = _sized(config)
    return FaithOptions(
        report_dir=report, baseline=baseline, update_baseline=update, tolerance=tolerance,
        gate=cast(GateMode, gate), thresholds_file=thresholds_file, default_thresholds=default_thresholds,
        default_thresholds_explicit=explicit, models=models, vlms=vlms, data=data,
        limit=limit, profile=profile, seed=setting(config, o.SEED),
        max_exemplars=setting(config, o.MAX_EXEMPLARS), allow_missing=setting(config, o.ALLOW_MISSING),
        allow_mismatch=setting(config, o.ALLOW_MISMATCH), regression=cast(RegressionTest, regression),
        regression_all=setting(config, o.REGRESSION_ALL),
        regression_control=cast(Control, setting(config, o.REGRESSION_CONTROL)),
        allow_insufficient=setting(config, o.ALLOW_INSUFFICIENT),
        force_update_baseline=setting(config, o.FORCE_UPDATE_BASELINE), report_named=where.cli,
        run_name=run_name, step=step,
        cache=setting(config, o.CACHE), answer_mode=setting(config, o.ANSWER_MODE),
        device=str(setting(config, o.DEVICE)), dtype=str(setting(config, o.DTYPE)),
        batch_size=int(setting(config, o.BATCH_SIZE)), threads=setting(config, o.THREADS),
        no_vlm_scorer=bool(setting(config, o.NO_VLM_SCORER)), shard=setting(config, o.SHARD) or None,
        no_progress=bool(setting(config, o.NO_PROGRESS)),
        api=ApiSettings(setting(config, o.API_CONCURRENCY), setting(config, o.API_TIMEOUT),
                        setting(config, o.API_MAX_REQUESTS), bool(setting(config, o.API_ESTIMATE))),
        scale={opt.name: _as_given(config, opt) for opt in (o.RAY, o.RAY_ACTORS, o.RAY_GPUS, o.DEVICE_MAP)},
        protocol={opt.name: setting(config, opt) for m in manifests() for opt in m.options},
    )


def _sized(config: pytest.Config) -> tuple[int | None, str]:
    """(--faith-limit, --faith-profile): a profile names a limit, so giving both is ambiguous."""
    limit, profile = setting(config, o.LIMIT), str(setting(config, o.PROFILE))
    named = o.PROFILES[profile].limit
    if named is not None and limit is not None and limit != named:
        raise pytest.UsageError(f"--faith-profile {profile} runs with --faith-limit {named}; "
                                f"--faith-limit {limit} contradicts it: give one of them")
    return (named if named is not None else limit), profile


def _as_given(config: pytest.Config, option: Option) -> tuple[str, str]:
    text, source = setting_source(config, option)
    return str(text or ""), source.label


def run_config_of(opts: FaithOptions) -> RunConfig:
    """What protocol fixtures may know about the run, from the parsed options (built once)."""
    return RunConfig(data=dict(opts.data), limit=opts.limit, scale=o.PROFILES[opts.profile].scale,
                     limits=o.profile_limits(opts.profile), seed=opts.seed, cache=opts.cache,
                     answer_mode=opts.answer_mode, protocol=dict(opts.protocol))
