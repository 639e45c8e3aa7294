"""pytest plugin module: the session-scoped model fixtures ``faith_scorer`` and ``faith_vlm``.

Registered as its own ``pytest11`` entry point (and listed in the root conftest for in-repo runs).

- Options (group "faithtests"): ``--faith-device`` (``auto``: cuda if available, else cpu),
  ``--faith-dtype`` (float32), ``--faith-batch-size`` (16). The model specs come from the core plugin's
  ``--faith-model`` / ``--faith-vlm`` (``[LABEL=]SPEC``; defaults ``reference:clip`` / ``reference:vlm``).
- ``faith_scorer`` runs over every ``--faith-model`` and then each ``--faith-vlm`` used as a scorer
  (its caption log-likelihood; ``--faith-no-vlm-scorer`` turns that off); the default VLM joins only a
  run that names no model at all.
- Every test using a fixture is parametrised over the specs (ids = labels), carries one
  ``xdist_group(name=LABEL)`` mark per model so ``--dist loadgroup`` keeps a model on one worker, and the
  ``gpu`` mark when the device was set to CUDA explicitly (such tests skip on machines without CUDA).
- Models are loaded once per process and kept (a per-session cache keyed by spec, device, dtype, batch
  size), even when pytest reorders parametrised session fixtures.
- Under xdist, worker ``gwN`` uses ``cuda:N % device_count`` when the device is CUDA without an index.
- Each loaded model's fingerprint (spec, checkpoint sha256, dtype, device, family) is registered with
  the core plugin so it lands in the scorecard.

torch is imported only inside the fixtures, never at plugin load.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from faithtests.models.protocols import ImageTextScorer, VisionLanguageModel

DEFAULT_SCORER = "reference:clip"
DEFAULT_VLM = "reference:vlm"
#: ``VLMScorer.score_kind`` (kept here so that this module stays torch-free; a test ties the two)
VLM_SCORE_KIND = "caption_mean_logprob"
_LABEL = re.compile(r"^[A-Za-z0-9_.\-]+$")
_LOADED = pytest.StashKey[dict[tuple[str, str, str, int], Any]]()


@dataclass(frozen=True)
class ModelParam:
    label: str
    spec: str
    #: the option the spec came from ("faith_model" or "faith_vlm"): a ``faith_scorer`` param from
    #: ``--faith-vlm`` is that VLM used as a scorer
    via: str = "faith_model"

    @property
    def score_family(self) -> str | None:
        """Threshold family of a ``faith_scorer`` param that is a VLM used as a scorer (the core plugin
        binds it, so the checks use the log-likelihood thresholds)."""
        return VLM_SCORE_KIND if self.via == "faith_vlm" else None


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("faithtests", "faithtests: behavioural suites for vision-language models")
    g.addoption("--faith-device", dest="faith_device", default="auto", metavar="DEVICE",
                help="device for the models: auto (cuda if available, else cpu), cpu, cuda, cuda:N")
    g.addoption("--faith-dtype", dest="faith_dtype", default="float32", metavar="DTYPE",
                choices=("float32", "fp32", "bfloat16", "bf16", "float16", "fp16"),
                help="model dtype (default float32)")
    g.addoption("--faith-batch-size", dest="faith_batch_size", type=int, default=16, metavar="N",
                help="batch size of encoders and forwards (default 16)")
    g.addoption("--faith-no-vlm-scorer", dest="faith_no_vlm_scorer", action="store_true", default=False,
                help="do not run the scorer suites (invariance, LGIP flips) on the caption log-likelihood "
                     "of each --faith-vlm")


def pytest_configure(config: pytest.Config) -> None:
    # The core plugin registers (and implements skipping for) `gpu`; register it when running alone.
    if not config.pluginmanager.has_plugin("faithtests.pytest_plugin"):
        config.addinivalue_line("markers", "gpu: needs CUDA")
    if not config.pluginmanager.has_plugin("xdist"):
        config.addinivalue_line("markers", "xdist_group(name): models of one label stay on one xdist worker")


def _parse(text: str) -> ModelParam:
    """``[LABEL=]SPEC`` (same rule as the core plugin: a label has no ':' and comes before '=')."""
    raw = text.strip()
    head, sep, tail = raw.partition("=")
    if sep and _LABEL.match(head.strip()) and ":" not in head:
        return ModelParam(head.strip(), tail.strip())
    return ModelParam(raw, raw)


def _named_params(config: pytest.Config, kind: str) -> list[ModelParam]:
    """The ``--faith-model`` (kind "faith_model") or ``--faith-vlm`` specs the user named, on the command
    line or in the ini file; empty when the default applies."""
    try:
        from faithtests.options import FAITH_OPTIONS

        opts = config.stash.get(FAITH_OPTIONS, None)
    except ImportError:  # core plugin not installed alongside
        opts = None
    if opts is not None:
        parsed = [ModelParam(m.label, m.spec) for m in (opts.models if kind == "faith_model" else opts.vlms)]
    else:
        try:
            raw = config.getoption(kind) or []
        except ValueError:  # option not registered (core plugin absent)
            raw = []
        parsed = [_parse(str(x)) for x in raw]
    return [ModelParam(p.label, p.spec, via=kind) for p in parsed]


def model_params(config: pytest.Config, kind: str) -> list[ModelParam]:
    """The ``--faith-model`` (kind "faith_model") or ``--faith-vlm`` specs, with the defaults applied."""
    if named := _named_params(config, kind):
        return named
    default = _parse(DEFAULT_SCORER if kind == "faith_model" else DEFAULT_VLM)
    return [ModelParam(default.label, default.spec, via=kind)]


def _named(config: pytest.Config, kind: str) -> bool:
    """Whether the user named specs of ``kind`` (rather than taking the default)."""
    return bool(_named_params(config, kind))


def scorer_params(config: pytest.Config) -> list[ModelParam]:
    """What ``faith_scorer`` runs over: every ``--faith-model`` spec, then each ``--faith-vlm`` as a
    scorer (its caption log-likelihood, SPEC "Common vocabulary"). The default VLM joins only a run
    that names no model at all: naming ``--faith-model X`` alone asks about X."""
    out = model_params(config, "faith_model")
    if config.getoption("faith_no_vlm_scorer", False):
        return out
    if _named(config, "faith_vlm") or not _named(config, "faith_model"):
        taken = {p.label for p in out}
        out += [p for p in model_params(config, "faith_vlm") if p.label not in taken]
    return out


def _untrained_default(config: pytest.Config, kind: str, p: ModelParam) -> str | None:
    """Why a *default* reference model cannot run (its checkpoint is not in fixtures/), else None.

    Only defaults: a spec the user named always loads, and a missing one is an error naming the path.
    """
    default = DEFAULT_SCORER if kind == "faith_model" else DEFAULT_VLM
    if p.spec != default or _named(config, kind):
        return None
    from faithtests.models.locations import fixtures_root

    name = default.removeprefix("reference:")
    if (fixtures_root() / name).is_dir():
        return None
    return (f"the default {default} is not trained yet (no {fixtures_root() / name}); "
            f"pass --faith-{'model' if kind == 'faith_model' else 'vlm'} SPEC, or train it with "
            f"`faithtests train-reference {name}`")


def _explicit_cuda(config: pytest.Config) -> bool:
    return str(config.getoption("faith_device")).startswith("cuda")


def _vlm_params(config: pytest.Config) -> list[ModelParam]:
    return model_params(config, "faith_vlm")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for fixture, specs in (("faith_scorer", scorer_params), ("faith_vlm", _vlm_params)):
        if fixture not in metafunc.fixturenames:
            continue
        params = []
        for p in specs(metafunc.config):
            marks: list[pytest.MarkDecorator] = [pytest.mark.xdist_group(name=p.label)]
            if _explicit_cuda(metafunc.config):
                marks.append(pytest.mark.gpu)
            if (why := _untrained_default(metafunc.config, p.via, p)) is not None:
                marks.append(pytest.mark.skip(reason=why))
            params.append(pytest.param(p, id=p.label, marks=marks))
        metafunc.parametrize(fixture, params, indirect=True, scope="session")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Compatibility shim for ``--dist loadgroup`` on pytest >= 9.2 (pytest-dev/pytest-xdist#1386):
    xdist appends ``@group`` to the legacy ``_nodeid`` field, which pytest 9.2's structured node ids no
    longer read, so groups are silently ignored and a model would load on every worker. Runs on the
    workers after xdist's hook and writes the suffixed id into the structured id; a no-op where xdist's
    own suffix took effect or pytest has no structured ids."""
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return
    for item in items:
        marks = item.iter_markers("xdist_group")
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks})
        suffix = "@" + "_".join(groups)
        if not groups or item.nodeid.endswith(suffix) or not hasattr(item, "_id"):
            continue
        item._id = NodeId.parse(item.nodeid + suffix)


def worker_device(device: str, worker: str | None, device_count: int) -> str:
    """Pin xdist worker ``gwN`` to ``cuda:N % device_count`` when ``device`` is plain "cuda"."""
    if device != "cuda" or not worker or device_count < 2:
        return device
    digits = worker.removeprefix("gw")
    return f"cuda:{int(digits) % device_count}" if digits.isdigit() else device


def resolved_device(config: pytest.Config) -> str:
    import torch

    device = str(config.getoption("faith_device"))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    count = torch.cuda.device_count() if device.startswith("cuda") else 0
    return worker_device(device, os.environ.get("PYTEST_XDIST_WORKER"), count)


def _register(config: pytest.Config, label: str, info: dict[str, Any]) -> None:
    try:
        from faithtests.options import register_model_info
    except ImportError:
        return
    register_model_info(config, label, info)


def load_cached(config: pytest.Config, spec: str) -> Any:
    """Load ``spec`` with the session's device/dtype/batch size, once per process."""
    from faithtests.models.registry import load_model

    device = resolved_device(config)
    dtype = str(config.getoption("faith_dtype"))
    batch = int(config.getoption("faith_batch_size"))
    if batch < 1:
        raise pytest.UsageError(f"--faith-batch-size must be >= 1, got {batch}")
    cache = config.stash.setdefault(_LOADED, {})
    key = (spec, device, dtype, batch)
    if key not in cache:
        cache[key] = load_model(spec, device=device, dtype=dtype, batch_size=batch)
    return cache[key]


def _param(request: pytest.FixtureRequest, kind: str) -> ModelParam:
    param = getattr(request, "param", None)
    if isinstance(param, ModelParam):
        return param  # for faith_scorer, possibly a --faith-vlm used as a scorer
    # Requested indirectly (e.g. by another fixture) without parametrisation: the first spec.
    return model_params(request.config, kind)[0]


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
    :func:`scorer_params`). A generative VLM is used through its caption log-likelihood
    (:class:`~faithtests.models.vlm_scorer.VLMScorer`)."""
    from faithtests.models.hf_vlm import HFVisionLanguageModel
    from faithtests.models.protocols import ImageTextScorer
    from faithtests.models.vlm_scorer import VLMScorer

    p = _param(request, "faith_model")
    model = load_cached(request.config, p.spec)
    if isinstance(model, HFVisionLanguageModel):
        model = VLMScorer(model)
    if not isinstance(model, ImageTextScorer):
        option = "--faith-model" if p.via == "faith_model" else "--faith-vlm"
        raise TypeError(f"{option} {p.spec!r} loaded a {type(model).__name__}, not an image-text scorer")
    role = "scorer" if p.via == "faith_model" else "vlm"
    _register(request.config, p.label, {**model.fingerprint(), "label": p.label, "role": role})
    return model


@pytest.fixture(scope="session")
def faith_vlm(request: pytest.FixtureRequest) -> VisionLanguageModel:
    """The vision-language model under test (one per ``--faith-vlm``)."""
    from faithtests.models.protocols import VisionLanguageModel

    p = _param(request, "faith_vlm")
    model = load_cached(request.config, p.spec)
    if not isinstance(model, VisionLanguageModel):
        raise TypeError(
            f"--faith-vlm {p.spec!r} loaded a {type(model).__name__}, not a generative VLM "
            "(dual encoders go to --faith-model)"
        )
    _register(request.config, p.label, {**model.fingerprint(), "label": p.label, "role": "vlm"})
    return model
