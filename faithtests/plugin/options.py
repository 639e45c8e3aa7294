"""The plugin's command-line/ini options, parsed once into a typed :class:`FaithOptions`.

The plugin stores the parsed value in ``config.stash[FAITH_OPTIONS]``; fixtures elsewhere (model
fixtures, data loaders) read it with :func:`get_options`. Precedence: command line > ini > default.
Paths given on the command line are relative to the invocation directory; paths in the ini file are
relative to the ini file's directory (pytest's convention for ``paths`` ini values).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast

import pytest

from faithtests.data.names import DATASETS, DataNameError, check_data, resolve_path
from faithtests.scorecard.baseline import Tolerance
from faithtests.scorecard.model import GateMode
from faithtests.scorecard.thresholds import Thresholds

GROUP = "faithtests"
DEFAULT_THRESHOLDS = "suites/thresholds.toml"
_LABEL = re.compile(r"^[A-Za-z0-9_.\-]+$")
#: The bundled reference models: they join a run only when it names no --faith-model and no --faith-vlm.
DEFAULT_SCORER = "reference:clip"
DEFAULT_VLM = "reference:vlm"
_DEFAULTS_RULE = (f"default: the bundled {DEFAULT_SCORER} and {DEFAULT_VLM}, only when no --faith-model "
                  "and no --faith-vlm is named: naming any model drops all bundled defaults")


Role = Literal["scorer", "vlm"]
RegressionTest = Literal["paired", "point"]
_OPTION: dict[Role, str] = {"scorer": "--faith-model", "vlm": "--faith-vlm"}


@dataclass(frozen=True)
class ModelSpec:
    """One model of the run, parsed once from ``--faith-model`` / ``--faith-vlm`` ``[LABEL=]SPEC``.

    ``source`` is the option that named it (``scorer``: --faith-model, ``vlm``: --faith-vlm); ``role`` is
    how a test uses it: a --faith-vlm also serves the scorer suites through its caption log-likelihood
    (role ``scorer``). The label names the model in node ids, results and the scorecard. The threshold
    family is not part of the spec: the loaded adapter declares it (``fingerprint()["family"]`` and, for
    a non-cosine scorer, ``["score"]``).
    """

    label: str
    spec: str
    source: Role = "scorer"
    role: Role = "scorer"

    @classmethod
    def parse(cls, text: str, source: Role = "scorer") -> ModelSpec:
        """``[LABEL=]SPEC``: "ckpt=open_clip:..." has a label; a bare spec never has "=" before its
        first ":" and is its own label."""
        raw = text.strip()
        head, sep, tail = raw.partition("=")
        if sep and _LABEL.match(head.strip()) and ":" not in head:
            label, spec = head.strip(), tail.strip()
        else:
            label, spec = raw, raw
        if not spec or not label:
            raise ValueError(f"model spec {text!r} is empty (syntax: [LABEL=]SPEC)")
        return cls(label, spec, source, source)

    @property
    def option(self) -> str:
        """The command-line option that named this model."""
        return _OPTION[self.source]

    def as_scorer(self) -> ModelSpec:
        """This model in the scorer role (a --faith-vlm scored by its caption log-likelihood)."""
        return replace(self, role="scorer")


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
    seed: int = 0
    max_exemplars: int = 8
    allow_missing: bool = False  # --faith-allow-missing: baseline keys absent from the run do not fail
    allow_mismatch: frozenset[str] = frozenset()  # --faith-allow-mismatch: fingerprint fields let differ
    regression: RegressionTest = "paired"  # --faith-regression: the baseline gate's test
    regression_all: bool = False  # --faith-regression-all: gate every metric, not only the checked ones
    allow_insufficient: bool = False  # --faith-allow-insufficient: INSUFFICIENT checks do not fail the run
    force_update_baseline: bool = False  # --faith-force-update-baseline: write it despite the refusals

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


def get_options(config: pytest.Config) -> FaithOptions:
    return config.stash[FAITH_OPTIONS]


def register_model_info(config: pytest.Config, label: str, info: dict[str, Any],
                        role: Role | None = None) -> None:
    """For model fixtures: record fingerprint info (spec, checkpoint hash, family, ...) of a loaded
    model. It travels to the controller on the next test report and lands in ``fingerprint.models``
    (merged per label: a VLM and that VLM as a scorer share one). With ``role``, the info is also what
    the model declares in that role: its ``family`` and, for a non-cosine scorer, its ``score`` kind
    select the family thresholds of checks on tests parametrised with that model and role."""
    from faithtests.scorecard.recording import json_safe

    safe = json_safe(info, f"model info {label!r}")
    config.stash.setdefault(FAITH_MODEL_INFO, {}).setdefault(label, {}).update(safe)
    if role is not None:
        config.stash.setdefault(FAITH_DECLARED, {})[(label, role)] = safe


def add_options(parser: pytest.Parser) -> None:
    g = parser.getgroup(GROUP, "faithtests: behavioural suites for vision-language models")

    def opt(flag: str, ini: str, help: str, ini_type: Any = "string", ini_default: Any = None,
            **kw: Any) -> None:
        g.addoption(flag, dest=ini, default=None, help=help + f" (ini: {ini})", **kw)
        parser.addini(ini, help.replace("%%", "%"), type=ini_type, default=ini_default)

    opt("--faith-report", "faith_report", "scorecard directory (default: faith-report/)",
        metavar="DIR", ini_default="faith-report")
    opt("--faith-baseline", "faith_baseline", "baseline scorecard.json (or its directory) to gate against",
        metavar="FILE", ini_default="")
    g.addoption("--faith-update-baseline", dest="faith_update_baseline", action="store_true", default=None,
                help="write this run's scorecard to --faith-baseline (never done without this flag; "
                     "ini: faith_update_baseline)")
    parser.addini("faith_update_baseline", "write the scorecard to faith_baseline", type="bool",
                  default=False)
    opt("--faith-tolerance", "faith_tolerance",
        "allowed regression vs the baseline: absolute (0.01) or relative (5%%); default 0",
        metavar="TOL", ini_default="0")
    opt("--faith-gate", "faith_gate", "point: compare point estimates to thresholds and to the baseline; ci: "
        "the conservative CI bound to thresholds, and a baseline regression only when the delta's CI lies "
        "beyond the tolerance",
        choices=("point", "ci"), ini_default="point")
    opt("--faith-thresholds", "faith_thresholds", "user thresholds TOML merged over the defaults",
        metavar="FILE", ini_default="")
    opt("--faith-model", "faith_model",
        f"image-text scorer to test, [LABEL=]SPEC; repeatable ({_DEFAULTS_RULE})",
        ini_type="linelist", ini_default=[], action="append", metavar="SPEC")
    opt("--faith-vlm", "faith_vlm",
        f"vision-language model to test, [LABEL=]SPEC; repeatable ({_DEFAULTS_RULE})",
        ini_type="linelist", ini_default=[], action="append", metavar="SPEC")
    opt("--faith-data", "faith_data", "dataset location NAME=PATH; repeatable; NAME is one of "
        f"{', '.join(DATASETS)} (checked before any model loads)",
        ini_type="linelist", ini_default=[], action="append", metavar="NAME=PATH")
    opt("--faith-limit", "faith_limit", "use at most N items per dataset (quick runs)", metavar="N",
        ini_default="")
    opt("--faith-seed", "faith_seed", "seed for sampling and bootstrap (default 0)", metavar="SEED",
        ini_default="0")
    g.addoption("--faith-allow-missing", dest="faith_allow_missing", action="store_true", default=None,
                help="baseline results this run does not produce (deselected tests, renamed labels) do "
                     "not fail the gate (ini: faith_allow_missing)")
    parser.addini("faith_allow_missing", "baseline results missing from the run do not fail the gate",
                  type="bool", default=False)
    opt("--faith-allow-mismatch", "faith_allow_mismatch",
        "compare against a baseline whose fingerprint differs in these fields: FIELD[,FIELD] of seed, "
        "limit, gate, data, thresholds, or all", metavar="FIELDS", ini_default="")
    opt("--faith-regression", "faith_regression",
        "the baseline gate's test: paired (default: the delta's 95%% CI on shared items, McNemar for 0/1 "
        "outcomes, else the two runs' CIs, must lie beyond the tolerance) or point (the point estimate "
        "moved beyond the tolerance)", choices=("paired", "point"), ini_default="paired")
    g.addoption("--faith-regression-all", dest="faith_regression_all", action="store_true", default=None,
                help="gate every recorded metric against the baseline, not only those with a threshold "
                     "check (ini: faith_regression_all)")
    parser.addini("faith_regression_all", "gate every metric against the baseline", type="bool",
                  default=False)
    g.addoption("--faith-allow-insufficient", dest="faith_allow_insufficient", action="store_true",
                default=None, help="checks with too little data for a verdict (INSUFFICIENT) do not make "
                "the exit status non-zero, e.g. for --faith-limit smoke runs (ini: faith_allow_insufficient)")
    parser.addini("faith_allow_insufficient", "INSUFFICIENT checks do not fail the run", type="bool",
                  default=False)
    g.addoption("--faith-force-update-baseline", dest="faith_force_update_baseline", action="store_true",
                default=False, help="with --faith-update-baseline: write the baseline even from a run with "
                "failed, errored, skipped or INSUFFICIENT tests or fewer results than the baseline")
    parser.addini("faith_max_exemplars", "failure exemplars kept per test (default 8)", default="8")
    # default None (not the path) so that an explicitly configured file can be required to exist
    parser.addini(
        "faith_default_thresholds",
        f"default thresholds TOML, relative to the ini file's folder (default {DEFAULT_THRESHOLDS})",
        default=None,
    )


def _int(text: str, name: str, minimum: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise pytest.UsageError(f"{name}: {text!r} is not an integer") from None
    if value < minimum:
        raise pytest.UsageError(f"{name}: {value} must be >= {minimum}")
    return value


MISMATCH_FIELDS = ("seed", "limit", "gate", "data", "thresholds")  # fingerprint.COMPARABLE


def _fields(text: str) -> frozenset[str]:
    """``--faith-allow-mismatch``: comma-separated fields, or ``all``."""
    names = {f.strip() for f in text.split(",") if f.strip()}
    if "all" in names:
        return frozenset(MISMATCH_FIELDS)
    unknown = sorted(names - set(MISMATCH_FIELDS))
    if unknown:
        raise pytest.UsageError(f"--faith-allow-mismatch: unknown field(s) {', '.join(unknown)} "
                                f"(fields: {', '.join(MISMATCH_FIELDS)}, or all)")
    return frozenset(names)


def parse_options(config: pytest.Config) -> FaithOptions:
    """Read every faithtests option; malformed values raise :class:`pytest.UsageError`."""
    cwd = config.invocation_params.dir
    # without an ini file, ini defaults are relative to where pytest was started: the rootdir moves with
    # the arguments (a path-like option value can move it up a folder)
    ini_dir = config.inipath.parent if config.inipath else cwd

    def value(name: str) -> tuple[Any, Path]:
        cli = config.getoption(name)
        if cli is not None:
            return cli, cwd
        return config.getini(name), ini_dir

    def resolved(base: Path, text: str, label: str) -> Path:
        try:
            return resolve_path(base, text, label)
        except DataNameError as exc:
            raise pytest.UsageError(str(exc)) from None

    def path(name: str) -> Path | None:
        v, base = value(name)
        return resolved(base, str(v), "--" + name.replace("_", "-")) if v else None

    def specs(name: str, source: Role) -> tuple[ModelSpec, ...]:
        raw, _ = value(name)
        out: list[ModelSpec] = []
        for text in raw or []:
            try:
                out.append(ModelSpec.parse(str(text), source))
            except ValueError as exc:
                raise pytest.UsageError(f"{_OPTION[source]}: {exc}") from None
        return tuple(out)

    report = path("faith_report") or (cwd / "faith-report").resolve()
    try:
        tolerance = Tolerance.parse(value("faith_tolerance")[0])
    except ValueError as exc:
        raise pytest.UsageError(f"--faith-tolerance: {exc}") from None
    gate = str(value("faith_gate")[0])
    if gate not in ("point", "ci"):
        raise pytest.UsageError(f"faith_gate: {gate!r} is not 'point' or 'ci'")

    models, vlms = specs("faith_model", "scorer"), specs("faith_vlm", "vlm")
    labels = [m.label for m in (*models, *vlms)]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise pytest.UsageError(f"--faith-model/--faith-vlm: label(s) used twice: {', '.join(dupes)}")

    raw_data, data_base = value("faith_data")
    data: dict[str, Path] = {}
    for item in raw_data or []:
        name, sep, p = str(item).partition("=")
        if not sep or not name.strip() or not p.strip():
            raise pytest.UsageError(f"--faith-data: {item!r} is not NAME=PATH")
        if name.strip() in data:
            raise pytest.UsageError(f"--faith-data: dataset {name.strip()!r} given twice")
        data[name.strip()] = resolved(data_base, p.strip(), f"--faith-data {name.strip()}")
    try:  # every name is one a suite reads, every path of the kind it reads: before any model loads
        check_data(data)
    except DataNameError as exc:
        raise pytest.UsageError(str(exc)) from None

    regression = str(value("faith_regression")[0])
    if regression not in ("paired", "point"):
        raise pytest.UsageError(f"faith_regression: {regression!r} is not 'paired' or 'point'")

    def flag(name: str) -> bool:
        cli = config.getoption(name)
        return bool(config.getini(name) if cli is None else cli)

    limit_text = str(value("faith_limit")[0] or "").strip()
    update = config.getoption("faith_update_baseline")
    allow_missing = config.getoption("faith_allow_missing")
    default_ini = config.getini("faith_default_thresholds")
    default_th = DEFAULT_THRESHOLDS if default_ini is None else str(default_ini).strip()
    return FaithOptions(
        report_dir=report,
        baseline=path("faith_baseline"),
        update_baseline=bool(update if update is not None else config.getini("faith_update_baseline")),
        tolerance=tolerance,
        gate=cast(GateMode, gate),
        thresholds_file=path("faith_thresholds"),
        # ini_dir, never the rootdir: a --faith-baseline outside the tree moves the rootdir up, which
        # silently dropped suites/thresholds.toml
        default_thresholds=(ini_dir / default_th).resolve() if default_th else None,
        default_thresholds_explicit=default_ini is not None,
        models=models,
        vlms=vlms,
        data=data,
        limit=_int(limit_text, "--faith-limit", 1) if limit_text else None,
        seed=_int(str(value("faith_seed")[0]), "--faith-seed", 0),
        max_exemplars=_int(str(config.getini("faith_max_exemplars")), "faith_max_exemplars", 0),
        allow_missing=bool(config.getini("faith_allow_missing") if allow_missing is None else allow_missing),
        allow_mismatch=_fields(str(value("faith_allow_mismatch")[0] or "")),
        regression=cast(RegressionTest, regression),
        regression_all=flag("faith_regression_all"),
        allow_insufficient=flag("faith_allow_insufficient"),
        force_update_baseline=bool(config.getoption("faith_force_update_baseline")),
    )
