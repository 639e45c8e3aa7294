"""Every option of the plugin, declared once as an :class:`~faithtests.config.Option`, and the one
function that registers them with the protocols' options (:func:`register`).

Each option is read with :func:`faithtests.config.setting` (command line > ini > default, then the
option's parser); a parser's message names the option as it did when each module parsed its own. The
options reference of the docs is generated from these declarations (:mod:`.option_docs`).

``--faith-threads`` has one default, "automatic" (no value): model fixtures then let the thread policy
choose (1 for small models, else cores / xdist workers, OMP_NUM_THREADS respected), and a Ray actor,
which has no policy of its own, uses 1 (:func:`ray_threads`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import pytest

from faithtests.config import ANSWER_MODES, Option, Source
from faithtests.data.names import SHARED, DataName, DataNameError, check_data, resolve_path
from faithtests.manifest import data_table, unique_options
from faithtests.plugin.model_spec import DEFAULT_SCORER, DEFAULT_VLM, OPTION_OF, ModelSpec, Role
from faithtests.protocols import manifests
from faithtests.scorecard.baseline import Tolerance
from faithtests.scorecard.fingerprint import COMPARABLE

GROUP = "faithtests"
GROUP_HELP = "faithtests: behavioural suites for vision-language models"
DEFAULT_THRESHOLDS = "suites/thresholds.toml"
MISMATCH_FIELDS = COMPARABLE  # the fingerprint fields --faith-allow-mismatch may name
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
RAY_EXTRA = 'pip install -e ".[ray]"'
_DEFAULTS_RULE = (f"default: the bundled {DEFAULT_SCORER} and {DEFAULT_VLM}, only when no --faith-model "
                  "and no --faith-vlm is named: naming any model drops all bundled defaults")
_INI_TYPE: dict[str, Literal["string", "bool", "linelist"]] = {"value": "string", "flag": "bool",
                                                                 "list": "linelist"}


@cache
def data_names() -> dict[str, DataName]:
    """Every accepted ``--faith-data`` name (shared, then each manifest's), with the suites reading it."""
    return data_table(manifests(), SHARED)


# -- parsers ------------------------------------------------------------------------------------------
def to_int(text: str, name: str, minimum: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise pytest.UsageError(f"{name}: {text!r} is not an integer") from None
    if value < minimum:
        raise pytest.UsageError(f"{name}: {value} must be >= {minimum}")
    return value


def _resolved(base: Path, text: str, label: str) -> Path:
    try:
        return resolve_path(base, text, label)
    except DataNameError as exc:
        raise pytest.UsageError(str(exc)) from None


def _path(flag: str) -> Callable[[Any, Source], Path | None]:
    """A path option: resolved against its source's folder (messages name the flag), None when empty."""
    return lambda raw, source: _resolved(source.base, str(raw), flag) if raw else None


def _answer_mode(raw: Any, source: Source) -> str:
    mode = str(raw).strip() or "auto"  # the ini key is not argparse-checked: its value is, here
    if mode not in ANSWER_MODES:
        raise pytest.UsageError(f"{source.label}: {mode!r} is not one of {', '.join(ANSWER_MODES)}")
    return mode


def _text(raw: Any, source: Source) -> str:
    return str(raw or "").strip()


def _one_of(name: str, choices: tuple[str, ...], message: str) -> Callable[[Any, Source], str]:
    def parse(raw: Any, source: Source) -> str:
        if str(raw) not in choices:
            raise pytest.UsageError(f"{name}: {str(raw)!r} is not {message}")
        return str(raw)

    return parse


def _tolerance(raw: Any, source: Source) -> Tolerance:
    try:
        return Tolerance.parse(raw)
    except ValueError as exc:
        raise pytest.UsageError(f"--faith-tolerance: {exc}") from None


def _specs(role: Role) -> Callable[[Any, Source], tuple[ModelSpec, ...]]:
    def parse(raw: Any, source: Source) -> tuple[ModelSpec, ...]:
        out: list[ModelSpec] = []
        for text in raw or []:
            try:
                out.append(ModelSpec.parse(str(text), role))
            except ValueError as exc:
                raise pytest.UsageError(f"{OPTION_OF[role]}: {exc}") from None
        return tuple(out)

    return parse


def _data(raw: Any, source: Source) -> dict[str, Path]:
    """``NAME=PATH`` entries, each path resolved; every name one a suite reads, every path of the kind
    it reads (checked before any model loads)."""
    data: dict[str, Path] = {}
    for item in raw or []:
        name, sep, p = str(item).partition("=")
        if not sep or not name.strip() or not p.strip():
            raise pytest.UsageError(f"--faith-data: {item!r} is not NAME=PATH")
        if name.strip() in data:
            raise pytest.UsageError(f"--faith-data: dataset {name.strip()!r} given twice")
        data[name.strip()] = _resolved(source.base, p.strip(), f"--faith-data {name.strip()}")
    try:
        check_data(data, data_names())
    except DataNameError as exc:
        raise pytest.UsageError(str(exc)) from None
    return data


def _limit(raw: Any, source: Source) -> int | None:
    text = str(raw or "").strip()
    return to_int(text, "--faith-limit", 1) if text else None


def _fields(raw: Any, source: Source) -> frozenset[str]:
    """``--faith-allow-mismatch``: comma-separated fields, or ``all``."""
    names = {f.strip() for f in str(raw or "").split(",") if f.strip()}
    if "all" in names:
        return frozenset(MISMATCH_FIELDS)
    unknown = sorted(names - set(MISMATCH_FIELDS))
    if unknown:
        raise pytest.UsageError(f"--faith-allow-mismatch: unknown field(s) {', '.join(unknown)} "
                                f"(fields: {', '.join(MISMATCH_FIELDS)}, or all)")
    return frozenset(names)


def _default_thresholds(raw: Any, source: Source) -> tuple[Path | None, bool]:
    """(the file, whether the ini file set it: then it must exist). Relative to the ini file's folder,
    never the rootdir: a --faith-baseline outside the tree moves the rootdir up, which silently dropped
    suites/thresholds.toml."""
    text = DEFAULT_THRESHOLDS if raw is None else str(raw).strip()
    return ((source.base / text).resolve() if text else None), raw is not None


def _threads(raw: Any, source: Source) -> int | None:
    """A whole number >= 1, or None (automatic) when not set."""
    if isinstance(raw, int):  # the command line (argparse's int)
        value = raw
    else:
        text = str(raw or "").strip()
        if not text:
            return None
        if not text.isdigit():
            raise pytest.UsageError(f"{source.label}: {text!r} is not a whole number")
        value = int(text)
    if value < 1:
        raise pytest.UsageError(f"--faith-threads must be >= 1, got {value}")
    return value


def _run_name(raw: Any, source: Source) -> str:
    """A run name as given (stripped); empty means the default (the model labels)."""
    text = str(raw or "").strip()
    if not text.isprintable():
        raise pytest.UsageError(f"{source.label}: {text!r} holds a control character")
    return text


def _step(raw: Any, source: Source) -> int | None:
    """A whole number >= 0, or None when not set."""
    text = str(raw or "").strip()
    return to_int(text, source.label, 0) if text else None


def _cache(raw: Any, source: Source) -> Path | None:
    """The cache folder as given (not resolved: the store keeps the path), a symlink loop refused."""
    text = str(raw or "").strip() if not source.cli else str(raw or "")
    if not text:
        return None
    where = source.base / text
    _resolved(where, ".", source.label)
    return where


# -- the declarations ---------------------------------------------------------------------------------
REPORT = Option("faith_report", "scorecard directory, used as given (default: faith-report/, or "
                "faith-report/RUN-NAME[-step-N]/ when faith-report/ holds another run's report)", "",
                parse=_path("--faith-report"), metavar="DIR", section="report and baseline",
                doc_default="`faith-report/` (another run's: `faith-report/RUN-NAME[-step-N]/`)")
RUN_NAME = Option("faith_run_name", "name of this run in its scorecard and in `faithtests history` (default: "
                  "the model labels joined by +, with -seedN for a seed other than 0)", "", parse=_run_name,
                  metavar="NAME", section="report and baseline", doc_default="the model labels")
STEP = Option("faith_step", "training step (or any whole-number position) of the checkpoint this run tests; "
              "`faithtests history` orders runs by it", "", parse=_step, metavar="N",
              section="report and baseline")
BASELINE = Option("faith_baseline", "baseline scorecard.json (or its directory) to gate against", "",
                  parse=_path("--faith-baseline"), metavar="FILE", section="report and baseline")
UPDATE_BASELINE = Option(
    "faith_update_baseline", "write this run's scorecard to --faith-baseline (never done without this flag)",
    False, kind="flag", parse=lambda raw, _: bool(raw), ini_help="write the scorecard to faith_baseline",
    section="report and baseline")
TOLERANCE = Option("faith_tolerance",
                   "allowed regression vs the baseline: absolute (0.01) or relative (5%%); default 0", "0",
                   parse=_tolerance, metavar="TOL", section="report and baseline")
GATE = Option("faith_gate", "point: compare point estimates to thresholds and to the baseline; ci: the "
              "conservative CI bound to thresholds, and a baseline regression only when the delta's CI lies "
              "beyond the tolerance", "point", choices=("point", "ci"),
              parse=_one_of("faith_gate", ("point", "ci"), "'point' or 'ci'"), section="gates")
THRESHOLDS = Option("faith_thresholds", "user thresholds TOML merged over the defaults", "",
                    parse=_path("--faith-thresholds"), metavar="FILE", section="gates")
MODEL = Option("faith_model", f"image-text scorer to test, [LABEL=]SPEC; repeatable ({_DEFAULTS_RULE})", [],
               kind="list", parse=_specs("scorer"), metavar="SPEC", section="models")
VLM = Option("faith_vlm", f"vision-language model to test, [LABEL=]SPEC; repeatable ({_DEFAULTS_RULE})", [],
             kind="list", parse=_specs("vlm"), metavar="SPEC", section="models")
DATA = Option("faith_data", "dataset location NAME=PATH; repeatable; NAME is one of "
              f"{', '.join(data_names())} (checked before any model loads)", [], kind="list", parse=_data,
              metavar="NAME=PATH", section="data")
LIMIT = Option("faith_limit", "use at most N items per dataset (quick runs)", "", parse=_limit, metavar="N",
               section="data")
@dataclass(frozen=True)
class Profile:
    """Named run sizes (``--faith-profile``): a ``--faith-limit`` and a factor on the suites' own sizes;
    a protocol may keep another limit under a profile (its manifest's ``profile_limits``)."""

    limit: int | None = None
    scale: int = 1
    diagnostics: bool = True  # False: the tests marked faith_diagnostic (they gate nothing) are not run


#: quick: the smallest limit at which every check of the good references gets a verdict (issue 49: at 16
#: S3E's Delta_lex had 16 of its 20 strict-correct items; SPD-Faith's DRF[multi] needs ~21 pairs a
#: stratum on seed 1), with the exceptions the protocols declare (LGIP whole, AC-Bench 12 images); and only
#: the tests that gate something (quick is a gate: the diagnostics were 87 of its 134 s, issue 49).
PROFILES: dict[str, Profile] = {"quick": Profile(24, diagnostics=False), "default": Profile(),
                                "full": Profile(scale=2)}


def profile_limits(profile: str) -> dict[str, int | None]:
    """Key -> its own limit under ``profile`` (the manifests' ``profile_limits``; ``RunConfig.capped``)."""
    return {k: v for m in manifests() for k, v in m.profile_limits.get(profile, {}).items()}


PROFILE = Option(
    "faith_profile", "named run sizes: quick (--faith-limit 24, LGIP whole: the smallest sizes that give "
    "every check of the good references a verdict; the tests marked faith_diagnostic, which gate nothing, "
    "not run), default (the suites' sizes), full (twice the suites' "
    "own sizes: tighter CIs, about twice the time)", "default",
    choices=tuple(PROFILES), parse=_one_of("faith_profile", tuple(PROFILES), "quick, default or full"),
    section="data")
SEED = Option("faith_seed", "seed for sampling and bootstrap (default 0)", "0",
              parse=lambda raw, _: to_int(str(raw), "--faith-seed", 0), metavar="SEED", section="data")
ALLOW_MISSING = Option(
    "faith_allow_missing", "baseline results this run does not produce (deselected tests, renamed labels) do "
    "not fail the gate", False, kind="flag", parse=lambda raw, _: bool(raw),
    ini_help="baseline results missing from the run do not fail the gate", section="report and baseline")
ALLOW_MISMATCH = Option(
    "faith_allow_mismatch", "compare against a baseline whose fingerprint differs in these fields: "
    "FIELD[,FIELD] of seed, limit, profile, gate, data, thresholds, answer_mode, or all", "", parse=_fields,
    metavar="FIELDS",
    section="report and baseline")
REGRESSION = Option(
    "faith_regression", "the baseline gate's test: paired (default: the delta's 95%% CI on shared items, "
    "McNemar for 0/1 outcomes, else the two runs' CIs, must lie beyond the tolerance) or point (the point "
    "estimate moved beyond the tolerance)", "paired", choices=("paired", "point"),
    parse=_one_of("faith_regression", ("paired", "point"), "'paired' or 'point'"), section="gates")
REGRESSION_CONTROL = Option(
    "faith_regression_control", "false-alarm control over the gated metrics' regression p-values: holm "
    "(default: an unchanged checkpoint fails the gate with probability <= 5%%), bh (Benjamini-Hochberg: "
    "false discovery rate) or none (each metric at 5%%)", "holm", choices=("holm", "bh", "none"),
    parse=_one_of("faith_regression_control", ("holm", "bh", "none"), "'holm', 'bh' or 'none'"),
    section="gates")
REGRESSION_ALL = Option(
    "faith_regression_all", "gate every recorded metric against the baseline, not only those with a "
    "threshold check", False, kind="flag", parse=lambda raw, _: bool(raw),
    ini_help="gate every metric against the baseline", section="gates")
ALLOW_INSUFFICIENT = Option(
    "faith_allow_insufficient", "checks with too little data for a verdict (INSUFFICIENT) do not make the "
    "exit status non-zero, e.g. for --faith-limit smoke runs", False, kind="flag",
    parse=lambda raw, _: bool(raw), ini_help="INSUFFICIENT checks do not fail the run", section="gates")
FORCE_UPDATE_BASELINE = Option(
    "faith_force_update_baseline", "with --faith-update-baseline: write the baseline even from a run with "
    "failed, errored, skipped or INSUFFICIENT tests or fewer results than the baseline", False, kind="flag",
    ini=False, parse=lambda raw, _: bool(raw), section="report and baseline")
MAX_EXEMPLARS = Option("faith_max_exemplars", "failure exemplars kept per test (default 8)", "8", cli=False,
                       parse=lambda raw, _: to_int(str(raw), "faith_max_exemplars", 0),
                       section="report and baseline")
# default None (not the path) so that an explicitly configured file can be required to exist
DEFAULT_THRESHOLDS_FILE = Option(
    "faith_default_thresholds",
    f"default thresholds TOML, relative to the ini file's folder (default {DEFAULT_THRESHOLDS})", None,
    cli=False, parse=_default_thresholds, section="gates", doc_default=f"`{DEFAULT_THRESHOLDS}`")

DEVICE = Option("faith_device",
                "device for the models: auto (cuda if available, else cpu), cpu, cuda, cuda:N", "auto",
                ini=False, parse=lambda raw, _: str(raw), metavar="DEVICE", section="models")
DTYPE = Option("faith_dtype", "model dtype (default float32)", "float32", ini=False,
               choices=("float32", "fp32", "bfloat16", "bf16", "float16", "fp16"),
               parse=lambda raw, _: str(raw), metavar="DTYPE", section="models")
BATCH_SIZE = Option("faith_batch_size", "batch size of encoders and forwards (default 16)", 16, ini=False,
                    cli_type=int, metavar="N", section="models")
THREADS = Option("faith_threads", "torch intra-op threads per process (default: 1 for small models, else "
                 "cores / xdist workers; OMP_NUM_THREADS is respected)", "", parse=_threads, cli_type=int,
                 metavar="N", ini_help="torch intra-op threads per process (see --faith-threads)",
                 section="models", doc_default="automatic (Ray actors: 1)")
CACHE = Option("faith_cache", "keep model outputs in DIR and reuse them on later runs (off by default; keyed "
               "by checkpoint and input content, dtype, device, hooks)", "", parse=_cache, metavar="DIR",
               ini_help="persistent model-output cache directory (see --faith-cache)", section="models")
ANSWER_MODE = Option("faith_answer_mode", "how VLMs answer multiple-choice prompts (S3E's A/B, IMAVB's "
                     "letters): auto scores the option letters' log-probabilities where the model gives "
                     "them, else parses its generated letter; generated makes every VLM generate (to "
                     "compare a checkpoint with its served form that returns no log-probabilities)",
                     "auto", choices=ANSWER_MODES, parse=_answer_mode, metavar="MODE",
                     ini_help="answer mode of multiple-choice prompts (see --faith-answer-mode)",
                     section="models")
NO_VLM_SCORER = Option("faith_no_vlm_scorer", "do not run the scorer suites (invariance, LGIP flips) on the "
                       "caption log-likelihood of each --faith-vlm", False, kind="flag", ini=False,
                       parse=lambda raw, _: bool(raw), section="models")
SHARD = Option("faith_shard", "run shard K of N (1-based, e.g. 2/3) of the collected tests, a model's tests "
               "kept together", "", parse=_text, metavar="K/N", section="scale-out")
RAY = Option("faith_ray", "serve each model from a pool of Ray actors: local (the bare flag: a Ray instance "
             "started by the run), auto (the cluster of this machine) or a cluster address "
             f"(needs {RAY_EXTRA})", "", parse=_text, const="local", metavar="ADDRESS",
             ini_help="Ray executor for the models (see --faith-ray)", section="scale-out")
RAY_ACTORS = Option("faith_ray_actors", "Ray actors per model, each holding one copy (default 2)", "",
                    parse=_text, metavar="N", ini_help="Ray actors per model (see --faith-ray-actors)",
                    section="scale-out", doc_default="`2`")
RAY_GPUS = Option("faith_ray_gpus_per_actor", "GPUs each Ray actor holds (default 0: CPU)", "", parse=_text,
                  metavar="G", ini_help="GPUs per Ray actor (see --faith-ray-gpus-per-actor)",
                  section="scale-out", doc_default="`0`")
DEVICE_MAP = Option("faith_device_map",
                    f"HF VLMs: device_map for from_pretrained ({', '.join(DEVICE_MAPS)}); spreads a model "
                    "over the visible GPUs (needs accelerate)", "", parse=_text, metavar="MAP",
                    ini_help="HF VLM device_map (see --faith-device-map)", section="scale-out")
API_CONCURRENCY = Option("faith_api_concurrency", "openai: models: requests in flight at once per endpoint",
                         "4", parse=lambda raw, _: to_int(raw, "--faith-api-concurrency", 1), metavar="N",
                         ini_help="requests in flight per endpoint (see --faith-api-concurrency)",
                         section="served models")
API_TIMEOUT = Option("faith_api_timeout", "openai: models: seconds one request may take before it is retried "
                     "(the client retries 429, 5xx and timeouts 4 times with backoff)", "120",
                     parse=lambda raw, _: to_int(raw, "--faith-api-timeout", 1), metavar="S",
                     ini_help="seconds per endpoint request (see --faith-api-timeout)",
                     section="served models")
API_MAX_REQUESTS = Option("faith_api_max_requests",
                          "openai: models: the most requests one endpoint is sent in this run (a cost "
                          "budget); past it, its remaining tests fail with that reason and the answers so "
                          "far stay in the output cache (default: no limit)", "",
                          parse=lambda raw, _: to_int(raw, "--faith-api-max-requests", 1) if str(raw).strip()
                          else None, metavar="N",
                          ini_help="request budget per endpoint (see --faith-api-max-requests)",
                          section="served models", doc_default="no limit")
API_ESTIMATE = Option("faith_api_estimate",
                      "openai: models: probe each endpoint, then send nothing: the summary prints per suite "
                      "the requests the run would send, those --faith-cache already holds and their images "
                      "(what to price before the real run); no report is written, the tests of in-process "
                      "models are deselected and the others skip with their counts", False, kind="flag",
                      ini=False, parse=lambda raw, _: bool(raw), section="served models")
NO_PROGRESS = Option("faith_no_progress",
                     "no progress lines for long model stages (also off with -qq and when the output is "
                     "not a terminal)", False,
                     kind="flag", ini=False, parse=lambda raw, _: bool(raw), section="run")

#: The plugin's own options, in --help order.
PLUGIN_OPTIONS: tuple[Option, ...] = (
    REPORT, RUN_NAME, STEP, BASELINE, UPDATE_BASELINE, TOLERANCE, GATE, THRESHOLDS, MODEL, VLM, DATA, LIMIT,
    PROFILE, SEED,
    ALLOW_MISSING, ALLOW_MISMATCH, REGRESSION, REGRESSION_CONTROL, REGRESSION_ALL, ALLOW_INSUFFICIENT,
    FORCE_UPDATE_BASELINE,
    MAX_EXEMPLARS, DEFAULT_THRESHOLDS_FILE, DEVICE, DTYPE, BATCH_SIZE, THREADS, CACHE, ANSWER_MODE,
    NO_VLM_SCORER,
    SHARD, RAY, RAY_ACTORS, RAY_GPUS, DEVICE_MAP, API_CONCURRENCY, API_TIMEOUT, API_MAX_REQUESTS,
    API_ESTIMATE, NO_PROGRESS,
)


def all_options() -> tuple[Option, ...]:
    """The plugin's options, then each protocol's (its manifest's), each declared once."""
    return unique_options((*PLUGIN_OPTIONS, *(o for m in manifests() for o in m.options)))


def _cli_kwargs(o: Option) -> dict[str, Any]:
    kw: dict[str, Any] = {"dest": o.name, "default": None if o.ini else o.default,
                          "help": o.help + (f" (ini: {o.name})" if o.ini else "")}
    if o.kind != "value":
        kw["action"] = "store_true" if o.kind == "flag" else "append"
    for key, value in (("metavar", o.metavar), ("choices", o.choices), ("type", o.cli_type)):
        if value is not None:
            kw[key] = value
    if o.const is not None:
        kw.update(nargs="?", const=o.const)
    return kw


def register(parser: pytest.Parser, options: Iterable[Option] | None = None) -> None:
    """Add every option (default: :func:`all_options`) to the ``faithtests`` group and the ini keys."""
    group = parser.getgroup(GROUP, GROUP_HELP)
    for o in all_options() if options is None else options:
        if o.cli:
            group.addoption(o.flag, **_cli_kwargs(o))
        if o.ini:
            parser.addini(o.name, o.ini_help or o.help.replace("%%", "%"), type=_INI_TYPE[o.kind],
                          default=o.default)
