"""``faithtests export RUN --mlflow TARGET | --wandb DIR``: one finished run where teams already look.

What a tracker gets is decided here, once, for both trackers (:mod:`.export_trackers` writes it):

- a metric per recorded result with a defined value, under a key MLflow accepts (letters, digits,
  ``_ - . space``, one ``/``): ``SUITE/METRIC``, then ``.SLICE`` and ``.VARIANT`` (not ``base``), then the
  data set, the model label and the test, each only where results alike in everything before it differ
  in it, so a run keeps its keys from checkpoint to checkpoint (label the model: ``--faith-model
  clip=SPEC``). Each key has one ``/``: in MLflow's
  file store a key is a path, and ``a/b`` beside ``a/b/c`` would be a file and a folder of one name. Keys
  longer than MLflow's 250 characters end in a digest of the full key; a key two results would share
  gets ``-2``, ``-3`` (results in scorecard order, so the same run gives the same keys). The verdicts
  table maps each key back to its suite, test, metric, slice, model and variant;
- ``KEY.ci_lo`` and ``KEY.ci_hi`` where the result has a 95% CI; the step is the run's ``--faith-step``;
- params: the fingerprint flattened (``packages.torch``, ``model_specs.vlm``), each value as text;
- tags: the run's status, step, verdict counts and regression count;
- files: scorecard.json, the HTML beside it when there is one, and the verdicts table.

A missing or unreadable RUN, a missing package (``pip install "faithtests[export]"``) or a tracker that
refuses prints one line and exits 2, as the other commands' usage errors do.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from faithtests.reports.export_trackers import (
    VERDICT_COLUMNS,
    Export,
    ExportError,
    to_mlflow,
    to_wandb,
)
from faithtests.scorecard.baseline import test_label
from faithtests.scorecard.model import MetricResult, test_key
from faithtests.scorecard.scorecard import Scorecard, ScorecardError, read_scorecard, scorecard_path

#: MLflow's longest metric / param key (``MAX_ENTITY_KEY_LENGTH``).
MAX_KEY = 250
CI_SUFFIXES = (".ci_lo", ".ci_hi")
#: Verdict counts in the tags: a result without a check counts as ``unchecked``.
VERDICTS = ("pass", "fail", "insufficient", "unchecked")
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. ]+")
_DIGEST = 8


def _part(text: str) -> str:
    """One key component: every run of characters MLflow refuses (``/`` included) becomes one ``_``, none
    at the ends (``test[coco]`` -> ``test_coco``); dots and spaces at the ends go too (``..`` or a
    trailing dot would make a file-store path escape or vanish)."""
    return "_".join(p for p in _UNSAFE.split(text) if p).strip(" .") or "_"


def _fit(key: str, room: int) -> str:
    """``key`` within ``room`` characters: a long one cut, ending in a digest of the whole."""
    if len(key) <= room:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()[:_DIGEST]
    return f"{key[:room - _DIGEST - 1].rstrip(' .')}-{digest}"


def _unique(key: str, taken: Callable[[str], bool]) -> str:
    """``key``, else the first of ``key-2``, ``key-3``, ... that is not ``taken``."""
    unique, n = key, 1
    while taken(unique):
        n += 1
        unique = f"{key}-{n}"
    return unique


def _qualifiers(results: Sequence[MetricResult], dataset_of: Mapping[str, str]) -> list[list[str]]:
    """Each result's key parts after ``SUITE/METRIC``: its slice and variant (when set), then its data
    set, model and test, each only where results alike in everything before it differ in it."""
    dims: list[Callable[[MetricResult], str]] = [
        lambda r: dataset_of.get(test_key(r.test), ""), lambda r: r.model, lambda r: test_label(r.test)]
    groups: list[tuple[str, ...]] = [(r.suite, r.metric, r.slice or "", r.variant) for r in results]
    out = [[r.slice or "", "" if r.variant == "base" else r.variant] for r in results]
    for dim in dims:
        values: dict[tuple[str, ...], set[str]] = {}
        for group, r in zip(groups, results, strict=True):
            values.setdefault(group, set()).add(dim(r))
        for parts, group, r in zip(out, groups, results, strict=True):
            if len(values[group]) > 1:
                parts.append(dim(r))
        groups = [(*group, dim(r)) for group, r in zip(groups, results, strict=True)]
    return [[p for p in parts if p] for parts in out]


def metric_keys(results: Sequence[MetricResult], dataset_of: Mapping[str, str] | None = None) -> list[str]:
    """The tracker key of each result, in order (see the module doc), unique with their CI keys;
    ``dataset_of``: test key -> its data set (``TestRecord.dataset``)."""
    room = MAX_KEY - max(len(s) for s in CI_SUFFIXES)
    used: set[str] = set()
    keys: list[str] = []
    for r, qualifiers in zip(results, _qualifiers(results, dataset_of or {}), strict=True):
        parts = [f"{_part(r.suite)}/{_part(r.metric)}", *(_part(q) for q in qualifiers)]
        key = _fit(".".join(parts), room - 4)  # 4: room for a "-NNN" that makes it unique
        unique = _unique(key, lambda k: bool({k, *(k + s for s in CI_SUFFIXES)} & used))
        used.update({unique, *(unique + s for s in CI_SUFFIXES)})
        keys.append(unique)
    return keys


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def verdict_row(key: str, r: MetricResult) -> dict[str, Any]:
    """One row of the verdicts table (``export_trackers.VERDICT_COLUMNS``)."""
    lo, hi = r.ci if r.ci is not None else (None, None)
    row = {"key": key, "suite": r.suite, "test": test_key(r.test), "metric": r.metric, "slice": r.slice,
           "model": r.model, "variant": r.variant, "value": _finite(r.value), "ci_lo": _finite(lo),
           "ci_hi": _finite(hi), "n": r.n, "threshold": r.threshold, "op": r.op, "verdict": r.verdict,
           "passed": r.passed}
    return {c: row[c] for c in VERDICT_COLUMNS}


def metric_values(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Key -> value of each row with a defined value, and its CI bounds where it has them."""
    out: dict[str, float] = {}
    for row in rows:
        if row["value"] is None:
            continue
        out[row["key"]] = float(row["value"])
        if row["ci_lo"] is not None and row["ci_hi"] is not None:
            out[row["key"] + CI_SUFFIXES[0]] = float(row["ci_lo"])
            out[row["key"] + CI_SUFFIXES[1]] = float(row["ci_hi"])
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def flat_params(fingerprint: Mapping[str, Any]) -> dict[str, str]:
    """The fingerprint as flat params: nested objects as dotted names (``packages.torch``), lists and
    numbers as JSON text, names made safe as metric keys are (a name two fields share gets ``-2``)."""
    out: dict[str, str] = {}
    pending: list[tuple[str, Any]] = list(fingerprint.items())
    while pending:
        name, value = pending.pop(0)
        if isinstance(value, Mapping) and value:
            pending[:0] = [(f"{name}.{k}", v) for k, v in value.items()]  # depth first: fields stay together
            continue
        key = _fit(".".join(_part(p) for p in str(name).split(".")), MAX_KEY - 4)
        out[_unique(key, out.__contains__)] = _text(value)
    return out


def run_tags(sc: Scorecard, rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    counts = Counter(row["verdict"] or "unchecked" for row in rows)
    tags = {"faithtests.status": sc.status, "faithtests.regressions": str(len(sc.regressions))}
    tags |= {f"faithtests.verdicts.{v}": str(counts.get(v, 0)) for v in VERDICTS}
    step = sc.run.get("step")
    if isinstance(step, int):
        tags["faithtests.step"] = str(step)
    return tags


def _millis(text: Any) -> int | None:
    """An ISO time (the run's start, the fingerprint's end) in ms since the epoch; None if not one."""
    try:
        return int(datetime.fromisoformat(str(text)).timestamp() * 1000) if text else None
    except ValueError:
        return None


def build_export(sc: Scorecard, run: str) -> Export:
    """What one run exports (module doc); ``run`` is the report dir or scorecard.json it was read from."""
    source = scorecard_path(run)
    results = sc.results
    datasets = {test_key(t.test): t.dataset for t in sc.tests}
    rows = [verdict_row(k, r) for k, r in zip(metric_keys(results, datasets), results, strict=True)]
    html = source.with_suffix(".html")
    step = sc.run.get("step")
    return Export(
        name=str(sc.run.get("name") or source.parent.name),
        step=step if isinstance(step, int) else None,
        started_ms=_millis(sc.run.get("started") or sc.fingerprint.get("start")),
        ended_ms=_millis(sc.fingerprint.get("end")),
        metrics=metric_values(rows),
        params=flat_params(sc.fingerprint),
        tags=run_tags(sc, rows),
        config=dict(sc.fingerprint),
        rows=rows,
        files=[source, *([html] if html.is_file() else [])],
    )


def _read(path: str) -> Scorecard:
    try:
        return read_scorecard(path)
    except ScorecardError as exc:
        raise ExportError(str(exc)) from exc
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as exc:  # an odd file: name it
        raise ExportError(f"{path}: cannot read scorecard ({type(exc).__name__}: {exc})") from exc


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="faithtests export", description="Export one finished run (its "
                                "metrics, CIs, verdicts, fingerprint and report) to MLflow and/or an "
                                "offline W&B run.")
    p.add_argument("run", metavar="RUN", help="report dir or scorecard.json")
    p.add_argument("--mlflow", metavar="TARGET", help="MLflow tracking URI (http://..., sqlite:///..., "
                   "databricks) or a local directory (a file store: `mlflow ui --backend-store-uri DIR`)")
    p.add_argument("--experiment", metavar="NAME", default="faithtests",
                   help="MLflow experiment (default faithtests; created when missing)")
    p.add_argument("--wandb", metavar="DIR", help="write an offline W&B run under DIR/wandb/ (no network; "
                   "`wandb sync` uploads it)")
    p.add_argument("--project", metavar="NAME", default="faithtests", help="W&B project (default faithtests)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not (args.mlflow or args.wandb):
            parser.error("name a target: --mlflow TARGET and/or --wandb DIR")
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else 2
    try:
        export = build_export(_read(args.run), args.run)
        if args.mlflow:
            run_id = to_mlflow(export, args.mlflow, args.experiment)
            print(f"MLflow: run {export.name!r} ({run_id}) in experiment {args.experiment!r} at "
                  f"{args.mlflow}: {len(export.metrics)} metrics, {len(export.rows)} verdict rows")
        if args.wandb:
            where = to_wandb(export, args.wandb, args.project)
            print(f"W&B (offline): run {export.name!r} in {where}: {len(export.metrics)} metrics; "
                  f"upload with `wandb sync {where}`")
    except ExportError as exc:
        print(f"faithtests export: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
