"""The session-scoped model fixtures ``faith_scorer`` and ``faith_vlm`` (loaded by ``faithtests.plugin``).

- Options (declared in :mod:`.option_table`): ``--faith-device`` (``auto``: cuda if available, else
  cpu), ``--faith-dtype`` (float32), ``--faith-batch-size`` (16). The models come from ``--faith-model`` /
  ``--faith-vlm``, parsed once into :class:`~faithtests.plugin.options.ModelSpec`. The bundled
  ``reference:clip`` and ``reference:vlm`` join only a run that names no model of either kind: naming
  any ``--faith-model`` or ``--faith-vlm`` asks about those models alone, and a fixture with nothing to
  run over is one test skipped with the reason (id ``none``). The bundled ``reference:omni`` joins such
  a run only in the suites whose protocol manifest declares ``audio`` (:func:`default_omni`).
- ``faith_scorer`` runs over every ``--faith-model`` and then each ``--faith-vlm`` used as a scorer
  (its caption log-likelihood; ``--faith-no-vlm-scorer`` turns that off).
- Every test using a fixture is parametrised over the specs (ids = labels), carries one
  ``xdist_group`` mark per model (:mod:`.distribution`: a model stays on one worker, a small one per
  model stage), and the ``gpu`` mark when the device was set to CUDA explicitly (such tests skip on
  machines without CUDA).
- Models are loaded once per process and kept (a per-session cache keyed by spec, device, dtype, batch
  size), even when pytest reorders parametrised session fixtures.
- Under xdist, worker ``gwN`` uses ``cuda:N % device_count`` when the device is CUDA without an index.
- ``--faith-cache DIR`` (ini ``faith_cache``): model outputs persist in DIR (:mod:`faithtests.models.store`)
  and each model's hits/writes land in its fingerprint (``output_cache``).
- Each loaded model's fingerprint (spec, checkpoint sha256, dtype, device, declared family and score
  kind) is registered so it lands in the scorecard and selects family thresholds.

torch is imported only inside the fixtures, never at plugin load.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from typing import Any

import pytest

from faithtests.config import run_config
from faithtests.models.capabilities import lacks as lacks_of
from faithtests.models.checks import check_spec
from faithtests.models.errors import FEATURES, NotApplicable
from faithtests.models.interfaces import ImageTextScorer, VisionLanguageModel
from faithtests.models.letters import answer_mode_of
from faithtests.models.locations import fixtures_root
from faithtests.models.ray_pool import PooledVLM
from faithtests.models.registry import load_model
from faithtests.models.threads import (
    apply_threads,
    choose_threads,
    parameter_count,
    pool_threads,
    tokenizers_parallelism,
    usable_cores,
    xdist_workers,
)
from faithtests.models.work import work_of
from faithtests.plugin import api_cost, scaleout, usage
from faithtests.plugin.distribution import group_name, worker_device
from faithtests.plugin.item_keys import suite_name
from faithtests.plugin.model_spec import DEFAULT_OMNI
from faithtests.plugin.options import (
    DEFAULT_SCORER,
    DEFAULT_VLM,
    FAITH_THRESHOLDS,
    ModelSpec,
    Role,
    get_options,
    register_model_info,
)
from faithtests.progress import stage
from faithtests.protocols import manifests

_LOADED = pytest.StashKey[dict[tuple[str, str, str, int], Any]]()
_LARGEST = pytest.StashKey[int]()  # parameters of the largest model this process loaded
_THREADS = pytest.StashKey[dict[str, Any]]()  # the thread choice in effect (fingerprinted per model)
_STORE = pytest.StashKey[Any]()  # this process's OutputStore (a session one without --faith-cache)
_REGISTERED = pytest.StashKey[dict[str, Any]]()  # label -> a loaded model, for its cache counts


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, object, object]:
    """Before xdist reads it: a crashing worker is restarted once, not 4 x -n times (usage module)."""
    usage.default_max_worker_restart(config)
    return (yield)


@pytest.hookimpl(trylast=True)  # after faithtests.plugin.pytest_hooks has parsed the options
def pytest_configure(config: pytest.Config) -> None:
    # usage errors now, before any model loads: a device this machine lacks (else every test skipped),
    # a batch size below 1, a threshold family no adapter declares, a baseline of other models
    # (--collect-only loads nothing: listing a GPU run's tests, e.g. to plan shards, works on any machine)
    opts = get_options(config)
    usage.check_device(opts.device, present=not config.option.collectonly)
    usage.check_batch_size(opts.batch_size)
    specs = [*scorer_specs(config), *vlm_specs(config)]
    if FAITH_THRESHOLDS in config.stash:
        usage.check_families(config.stash[FAITH_THRESHOLDS], specs)
    if names_any_model(config):  # the labels the user chose (bundled defaults: fixtures may register others)
        usage.check_baseline_labels(config, [m.label for m in specs])
    requested_threads(config)  # a bad --faith-threads / faith_threads is a usage error now, not at load
    check_named_specs(config)  # a spec that cannot load is a usage error now, before any model loads
    cache_dir(config)  # a symlink loop in --faith-cache is a usage error now, not an INTERNALERROR later
    scaleout.ray_settings(config)  # --faith-ray* and --faith-device-map mistakes: usage errors now
    scaleout.device_map(config)
    if not config.pluginmanager.has_plugin("xdist"):
        config.addinivalue_line("markers", "xdist_group(name): models of one label stay on one xdist worker")


def check_named_specs(config: pytest.Config) -> None:
    """Every ``--faith-model`` / ``--faith-vlm`` spec checked without loading (prefix, files, configs,
    weights headers): a bad one is one ``ERROR:`` line and exit 4, before any test runs. The bundled
    defaults are not checked here: an untrained one skips with the reason (:func:`_untrained_default`)."""
    for m in (*named_specs(config, "scorer"), *named_specs(config, "vlm")):
        try:
            check_spec(m.spec)
        except (ValueError, OSError) as exc:
            where = m.option if m.label == m.spec else f"{m.option} {m.label}"
            raise pytest.UsageError(f"{where}: {exc}") from None


def named_specs(config: pytest.Config, source: Role) -> tuple[ModelSpec, ...]:
    """The ``--faith-model`` (source "scorer") or ``--faith-vlm`` ("vlm") specs the user named, on the
    command line or in the ini file; empty when the default applies."""
    opts = get_options(config)
    return opts.models if source == "scorer" else opts.vlms


def names_any_model(config: pytest.Config) -> bool:
    """Whether the run names a ``--faith-model`` or a ``--faith-vlm`` (then no bundled default joins)."""
    return bool(named_specs(config, "scorer") or named_specs(config, "vlm"))


def model_specs(config: pytest.Config, source: Role) -> tuple[ModelSpec, ...]:
    """The specs of ``source``: the named ones, or the bundled default (``reference:clip`` /
    ``reference:vlm``) when the run names no model of either kind, else none."""
    if names_any_model(config):
        return named_specs(config, source)
    return (ModelSpec.parse(DEFAULT_SCORER if source == "scorer" else DEFAULT_VLM, source),)


def scorer_specs(config: pytest.Config) -> list[ModelSpec]:
    """What ``faith_scorer`` runs over: every ``--faith-model`` spec, then each ``--faith-vlm`` as a
    scorer (its caption log-likelihood), defaults included only when the run
    names no model."""
    out = list(model_specs(config, "scorer"))
    if get_options(config).no_vlm_scorer:
        return out
    taken = {m.label for m in out}
    return out + [m.as_scorer() for m in model_specs(config, "vlm") if m.label not in taken]


def vlm_specs(config: pytest.Config) -> list[ModelSpec]:
    return list(model_specs(config, "vlm"))


def _untrained_default(config: pytest.Config, m: ModelSpec) -> str | None:
    """Why a *default* reference model cannot run (its checkpoint is not in fixtures/), else None.

    Only defaults: a spec the user named always loads, and a missing one is an error naming the path.
    """
    defaults = (DEFAULT_SCORER,) if m.source == "scorer" else (DEFAULT_VLM, DEFAULT_OMNI)
    if m.spec not in defaults or names_any_model(config):
        return None
    default = m.spec
    name = default.removeprefix("reference:")
    if (fixtures_root() / name).is_dir():
        return None
    return (f"the default {default} is not trained yet (no {fixtures_root() / name}); "
            f"pass {m.option} SPEC, or train it with `faithtests train-reference {name}`")


def audio_suites() -> frozenset[str]:
    """The suites whose protocol manifest declares ``audio`` (their prompts carry sound)."""
    return frozenset(s for m in manifests() if m.audio for s in m.suites)


def default_omni(metafunc: pytest.Metafunc) -> list[ModelSpec]:
    """The bundled omni reference for a test of a suite that uses audio, in a run naming no model (it
    joins ``reference:vlm`` there, and no other suite: it is trained for the audio suites alone)."""
    if names_any_model(metafunc.config) or suite_name(metafunc.definition) not in audio_suites():
        return []
    return [ModelSpec.parse(DEFAULT_OMNI, "vlm")]


def _explicit_cuda(config: pytest.Config) -> bool:
    return get_options(config).device.startswith("cuda")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for fixture, specs in (("faith_scorer", scorer_specs), ("faith_vlm", vlm_specs)):
        if fixture not in metafunc.fixturenames:
            continue
        params = []
        extra = default_omni(metafunc) if fixture == "faith_vlm" else []
        for m in [*specs(metafunc.config), *extra]:
            marks: list[pytest.MarkDecorator] = []  # xdist_group: at collection, below
            if _explicit_cuda(metafunc.config):
                marks.append(pytest.mark.gpu)
            if (why := _untrained_default(metafunc.config, m)) is not None:
                marks.append(pytest.mark.skip(reason=why))
            params.append(pytest.param(m, id=m.label, marks=marks))
        if not params:  # e.g. --faith-model alone: the VLM tests say why they do not run
            params.append(pytest.param(None, id="none", marks=pytest.mark.skip(reason=_none_named(fixture))))
        metafunc.parametrize(fixture, params, indirect=True, scope="session")


def _none_named(fixture: str) -> str:
    if fixture == "faith_vlm":
        return ("no --faith-vlm named (the bundled reference:vlm runs only when no --faith-model and no "
                "--faith-vlm is named)")
    return ("no scorer to run: no --faith-model named and --faith-no-vlm-scorer (the bundled reference:clip "
            "runs only when no model is named)")


@pytest.hookimpl(tryfirst=True)  # before xdist's hook reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """One ``xdist_group`` per model a test is parametrised with (:func:`.distribution.group_name`)."""
    for item in items:
        params: dict[str, object] = getattr(getattr(item, "callspec", None), "params", {})
        for fixture in ("faith_scorer", "faith_vlm"):
            m = params.get(fixture)
            if isinstance(m, ModelSpec):
                item.add_marker(pytest.mark.xdist_group(name=group_name(item, fixture, m.label, m.spec)))


def resolved_device(config: pytest.Config) -> str:
    import torch  # lazy: torch

    device = get_options(config).device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    count = torch.cuda.device_count() if device.startswith("cuda") else 0
    return worker_device(device, os.environ.get("PYTEST_XDIST_WORKER"), count)


def loading(spec: str, **options: Any) -> Any:
    """:func:`load_model` as a progress stage: a real checkpoint loads for minutes, and the line names it
    (a load shorter than the printer's minimum stays quiet)."""
    with stage("loading", model=spec):
        return load_model(spec, **options)


def load_cached(config: pytest.Config, spec: str) -> Any:
    """Load ``spec`` with the session's device/dtype/batch size, once per process."""
    device = resolved_device(config)
    dtype, batch = get_options(config).dtype, get_options(config).batch_size
    if batch < 1:
        raise pytest.UsageError(f"--faith-batch-size must be >= 1, got {batch}")
    cache = config.stash.setdefault(_LOADED, {})
    key = (spec, device, dtype, batch)
    if key not in cache:
        options = scaleout.load_options(config)
        if scaleout.ray_settings(config) is not None:
            # the driver loads its own copy only for calls that cannot ship (faithtests.models.ray_pool)
            def local() -> Any:
                model = loading(spec, device=device, dtype=dtype, batch_size=batch, **options)
                _set_threads(config, model)
                return model

            raw_device = get_options(config).device
            cache[key] = scaleout.start_pool(config, spec, raw_device, dtype, batch, local)
            return cache[key]
        store = output_store(config)
        if store is not None:  # a checkpoint whose outputs the cache holds loads on its first miss
            options["defer_to"] = store
        cache[key] = loading(spec, device=device, dtype=dtype, batch_size=batch, **options)
        _set_threads(config, cache[key])
        attach_store(config, cache[key])
        _configure_endpoint(config, cache[key])
    return cache[key]


def _configure_endpoint(config: pytest.Config, model: Any) -> None:
    """A served model (``openai:``) gets the run's ``--faith-api-*`` settings."""
    if hasattr(model, "configure") and hasattr(model, "max_requests"):
        api = get_options(config).api
        model.configure(concurrency=api.concurrency, timeout_s=api.timeout_s, max_requests=api.max_requests)


def cache_dir(config: pytest.Config) -> str | None:
    """``--faith-cache``, else the ini ``faith_cache`` (relative to the ini file's folder, like every ini
    path), else None (off)."""
    where = get_options(config).cache
    return None if where is None else str(where)


def output_store(config: pytest.Config) -> Any:
    """This process's one :class:`~faithtests.models.store.OutputStore`: in ``--faith-cache``, else a
    temporary one for this session (a row computed once is served again, bit for bit); None under
    ``--faith-ray``, whose pooled models keep their own caches."""
    if _STORE not in config.stash:
        where = cache_dir(config)
        if where is None and scaleout.ray_settings(config) is not None:
            return None
        from faithtests.models.store import OutputStore  # lazy: numpy and sqlite, only with a model

        config.stash[_STORE] = OutputStore(where)
    return config.stash[_STORE]


def attach_store(config: pytest.Config, model: Any) -> None:
    """The process's store (:func:`output_store`), shared by every model that can use one."""
    store = output_store(config)
    if store is not None and hasattr(model, "use_store"):
        model.use_store(store)


@pytest.fixture(scope="session")
def faith_output_store(request: pytest.FixtureRequest) -> Any:
    """The session's output store (:func:`output_store`), or None: for model outputs a suite computes
    outside the adapters (e.g. a text-only baseline's embeddings)."""
    return output_store(request.config)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Refresh each registered model's cache counters and counts of inputs longer than its context
    (``truncated_inputs``); the teardown report carries them to the controller."""
    for label, model in item.config.stash.get(_REGISTERED, {}).items():
        if hasattr(model, "truncation_info"):
            register_model_info(item.config, label, {"truncated_inputs": model.truncation_info()})
        if hasattr(model, "max_requests"):  # a served model: what this run has asked of its endpoint
            register_model_info(item.config, label, {"endpoint": api_cost.endpoint_info(item, model)})
        if (work := work_of(model)) is not None:  # what its forwards computed, summed over workers
            register_model_info(item.config, label, {"work": work})
        if hasattr(model, "in_process_calls"):  # a Ray-pooled model: calls that ran in the driver
            register_model_info(item.config, label, {"ray": model.fingerprint()["ray"]})
    store = item.config.stash.get(_STORE, None)
    if store is None or not store.persistent:  # the session store is not in the fingerprint
        return
    for label, model in item.config.stash.get(_REGISTERED, {}).items():
        counts = store.stats(getattr(model, "store_namespace", None)).as_dict()
        # no role: these counts are not what the model declares (its threshold family)
        register_model_info(item.config, label, {"output_cache": {"dir": str(store.root), **counts}})


def pytest_unconfigure(config: pytest.Config) -> None:
    store = config.stash.get(_STORE, None)
    if store is not None:
        store.close()
    scaleout.stop(config)


def requested_threads(config: pytest.Config) -> int | None:
    """``--faith-threads``, else the ini ``faith_threads``, else None (the policy decides)."""
    threads = get_options(config).threads
    return threads


def _set_threads(config: pytest.Config, model: Any) -> None:
    """Apply the thread policy (faithtests.models.threads) after each load: the largest model so far
    decides the automatic choice."""
    params = parameter_count(model)
    largest = max(config.stash.get(_LARGEST, 0), params or 0)
    config.stash[_LARGEST] = largest
    workers = xdist_workers(os.environ)
    choice = choose_threads(requested_threads(config), os.environ, usable_cores(), workers,
                            largest if params is not None else None)
    threads = apply_threads(choice, workers)  # torch, BLAS/OpenMP (threadpoolctl), tokenizers
    if (value := tokenizers_parallelism(os.environ, threads, workers)) is not None:
        os.environ["TOKENIZERS_PARALLELISM"] = value
    config.stash[_THREADS] = {"torch_threads": threads, "thread_policy": choice.reason,
                              "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM", "default"),
                              **pool_threads()}


def thread_info(config: pytest.Config) -> dict[str, Any]:
    """The thread choice in effect in this process (empty before the first model load)."""
    info: dict[str, Any] = config.stash.get(_THREADS, {})
    return dict(info)


def _register(config: pytest.Config, m: ModelSpec, model: Any) -> None:
    """A loaded model's fingerprint, threads and (a VLM) answer mode, under its label and in its role."""
    info = {**model.fingerprint(), "label": m.label, "option": m.option, **thread_info(config)}
    lacks = {f: why for f in FEATURES if (why := lacks_of(model, f))}
    if lacks:  # found once at its load: the scorecard says so once per model (its tests say n/a)
        info["lacks"] = lacks
    info |= {"answers": answer_mode_of(model, run_config(config).answer_mode)} if m.role == "vlm" else {}
    register_model_info(config, m.label, info, role=m.role)
    config.stash.setdefault(_REGISTERED, {})[m.label] = model


def _spec(request: pytest.FixtureRequest, role: Role) -> ModelSpec:
    param = getattr(request, "param", None)
    if isinstance(param, ModelSpec):
        return param  # for faith_scorer, possibly a --faith-vlm used as a scorer
    # Requested indirectly (e.g. by another fixture) without parametrisation: the first spec.
    specs = (scorer_specs if role == "scorer" else vlm_specs)(request.config)
    if not specs:
        pytest.skip(_none_named("faith_scorer" if role == "scorer" else "faith_vlm"))
    return specs[0]


@pytest.fixture(scope="session")
def faith_load_model(request: pytest.FixtureRequest) -> Callable[[str], Any]:
    """``load(spec)`` with the session's device/dtype/batch size and per-process cache (for variants
    such as ``reference:clip-colorblind`` that a suite loads beside the model under test)."""

    def load(spec: str) -> Any:
        return load_cached(request.config, spec)

    return load


@pytest.fixture(scope="session")
def faith_scorer(request: pytest.FixtureRequest) -> ImageTextScorer:
    """The image-text scorer under test: one per ``--faith-model``, then one per ``--faith-vlm`` (see
    :func:`scorer_specs`). A generative VLM is used through its caption log-likelihood
    (:class:`~faithtests.models.vlm_scorer.VLMScorer`), which declares its own score family."""
    from faithtests.models.hf_vlm import HFVisionLanguageModel  # lazy: torch
    from faithtests.models.vlm_scorer import VLMScorer  # lazy: torch

    m = _spec(request, "scorer")
    model = load_cached(request.config, m.spec)
    if isinstance(model, PooledVLM):
        model = model.as_scorer()  # the same actors, in the scorer role
    elif isinstance(model, HFVisionLanguageModel):
        model = VLMScorer(model)
        attach_store(request.config, model)
    elif isinstance(model, VisionLanguageModel) and not isinstance(model, ImageTextScorer):
        # a plug-in VLM answers prompts but scores no captions: the scorer suites do not apply to it
        why = NotApplicable(m.spec, "caption_scores", "only the transformers adapters score captions")
        pytest.skip(str(why))
    if not isinstance(model, ImageTextScorer):
        raise TypeError(f"{m.option} {m.spec!r} loaded a {type(model).__name__}, not an image-text scorer")
    _register(request.config, m, model)
    return model


@pytest.fixture(scope="session")
def faith_vlm(request: pytest.FixtureRequest) -> VisionLanguageModel:
    """The vision-language model under test (one per ``--faith-vlm``)."""
    m = _spec(request, "vlm")
    model = load_cached(request.config, m.spec)
    if not isinstance(model, VisionLanguageModel):
        raise TypeError(
            f"{m.option} {m.spec!r} loaded a {type(model).__name__}, not a generative VLM "
            "(dual encoders go to --faith-model)"
        )
    _register(request.config, m, model)
    return model
