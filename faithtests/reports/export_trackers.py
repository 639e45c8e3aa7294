"""Writers of one run's :class:`Export` to an experiment tracker: MLflow (any tracking URI, or a local
file store) and Weights & Biases in offline mode (no network, no login; ``wandb sync`` uploads later).

Both packages are optional (``pip install "faithtests[export]"``) and imported inside the writer that
needs it, so reading, rendering or comparing scorecards never imports them. What is exported is decided
once, in :mod:`faithtests.reports.export`; these writers only put it where each tracker keeps it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

#: The verdicts table's columns, one row per recorded result (``export.verdict_rows``).
VERDICT_COLUMNS = ("key", "suite", "test", "metric", "slice", "model", "variant", "value", "ci_lo", "ci_hi",
                   "n", "threshold", "op", "verdict", "passed")
#: The verdicts table's file name among a run's artifacts.
VERDICTS_FILE = "faithtests_verdicts.json"
INSTALL_HINT = 'pip install "faithtests[export]"'
#: MLflow 3 refuses a file store unless this is set ("maintenance mode", a database is preferred); a
#: local directory named on the command line is that choice, made by the user, so it is set for them.
_FILE_STORE_VARIABLE = "MLFLOW_ALLOW_FILE_STORE"
#: MLflow's limits per ``log_batch`` call (``mlflow.utils.validation``): metrics, and params.
_METRICS_PER_BATCH, _PARAMS_PER_BATCH = 1000, 100
#: MLflow's longest param value when its own constant cannot be read (the limit of MLflow < 2).
_FALLBACK_PARAM_LENGTH = 500

T = TypeVar("T")


class ExportError(Exception):
    """An export that cannot be done (a missing package, a tracker that refused): one line for the user."""


@dataclass(frozen=True)
class Export:
    """One faithtests run as a tracker run: ``metrics`` by sanitised key (with ``KEY.ci_lo`` /
    ``KEY.ci_hi``), ``params`` (the flat fingerprint, values as text), ``tags`` (status, step, verdict
    counts), ``config`` (the fingerprint as recorded), ``rows`` (the verdicts table, VERDICT_COLUMNS) and
    ``files`` (scorecard.json, and the HTML when the report has one)."""

    name: str
    step: int | None
    started_ms: int | None
    ended_ms: int | None
    metrics: dict[str, float]
    params: dict[str, str]
    tags: dict[str, str]
    config: dict[str, Any]
    rows: list[dict[str, Any]]
    files: list[Path] = field(default_factory=list)


def missing_package(package: str, exc: ImportError) -> ExportError:
    return ExportError(f"{package} is not installed ({exc}); install the export extra: {INSTALL_HINT}")


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


@contextmanager
def _file_store_allowed(uri: str) -> Iterator[None]:
    """Let MLflow open a local file store for the duration (see ``_FILE_STORE_VARIABLE``); a value the
    user set is left alone, and the process environment is as it was afterwards."""
    if not uri.startswith("file:") or _FILE_STORE_VARIABLE in os.environ:
        yield
        return
    os.environ[_FILE_STORE_VARIABLE] = "true"
    try:
        yield
    finally:
        os.environ.pop(_FILE_STORE_VARIABLE, None)


def tracking_uri(target: str) -> str:
    """``target`` as an MLflow tracking URI: a URI (``http://...``, ``sqlite:///...``, ``file:...``,
    ``databricks``) as given; anything else is a local directory, as a ``file:`` URI."""
    head, sep, _ = target.partition(":")
    # one letter before the colon is a Windows drive ("C:\\runs"), not a scheme
    if target == "databricks" or (sep and len(head) > 1 and head.replace("+", "").isalnum()):
        return target
    return Path(target).expanduser().resolve().as_uri()


def _param_length() -> int:
    try:
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH  # lazy: optional extra; internal module
    except ImportError:  # moved in some MLflow release: the oldest limit is safe everywhere
        return _FALLBACK_PARAM_LENGTH
    return int(MAX_PARAM_VAL_LENGTH)


def to_mlflow(export: Export, target: str, experiment: str) -> str:
    """One MLflow run of ``export`` in ``experiment`` (created when missing) at ``target``; its run id."""
    try:
        from mlflow.exceptions import MlflowException  # lazy: optional extra (faithtests[export])
    except ImportError as exc:
        raise missing_package("mlflow-skinny", exc) from exc
    uri = tracking_uri(target)
    try:
        with _file_store_allowed(uri):
            return _mlflow_run(export, uri, experiment)
    except MlflowException as exc:
        raise ExportError(f"MLflow at {uri}: {exc.message}") from exc
    except OSError as exc:
        raise ExportError(f"MLflow at {uri}: {exc.strerror or exc}") from exc


def _mlflow_run(export: Export, uri: str, experiment: str) -> str:
    from mlflow.entities import Metric, Param  # lazy: optional extra (faithtests[export])
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    run = client.create_run(experiment_id, start_time=export.started_ms, run_name=export.name,
                            tags=export.tags)
    run_id: str = run.info.run_id
    stamp = export.ended_ms or int(time.time() * 1000)
    step = export.step or 0
    try:
        metrics = [Metric(k, v, stamp, step) for k, v in export.metrics.items()]
        for part in _chunks(metrics, _METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=part)
        most = _param_length()
        params = [Param(k, v[:most]) for k, v in export.params.items()]
        for chunk in _chunks(params, _PARAMS_PER_BATCH):
            client.log_batch(run_id, params=chunk)
        with tempfile.TemporaryDirectory() as tmp:
            table = Path(tmp) / VERDICTS_FILE
            table.write_text(json.dumps(export.rows, indent=1), encoding="utf-8")
            for path in [*export.files, table]:
                client.log_artifact(run_id, str(path))
    except BaseException:
        client.set_terminated(run_id, "FAILED")  # a half export is marked as such, never left RUNNING
        raise
    client.set_terminated(run_id, "FINISHED", end_time=export.ended_ms)
    return run_id


def to_wandb(export: Export, directory: str, project: str) -> Path:
    """An offline W&B run of ``export`` under ``directory/wandb/``; the run's folder."""
    try:
        import wandb  # lazy: optional extra (faithtests[export])
    except ImportError as exc:
        raise missing_package("wandb", exc) from exc
    root = Path(directory).expanduser()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"--wandb {directory}: cannot create ({exc.strerror or exc})") from exc
    # console off: wandb would otherwise wrap this process's stdout; no git or code capture: the
    # fingerprint already names the commit, and an export must not read the working tree
    settings = wandb.Settings(console="off", save_code=False, disable_git=True, silent=True)
    try:
        run = wandb.init(mode="offline", dir=str(root), project=project, name=export.name,
                         config=export.config, settings=settings, job_type="faithtests-export")
        try:
            _fill_wandb(run, export, wandb.Table)
        finally:
            run.finish()
            # finish() may return before W&B's service has written the run's log; ending the service
            # waits for it, so the offline run is whole when this returns (a later wandb.init starts
            # a new service)
            wandb.teardown()
    except wandb.Error as exc:
        raise ExportError(f"W&B offline run in {root}: {exc}") from exc
    return Path(run.dir).parent


def _fill_wandb(run: Any, export: Export, table_type: Any) -> None:
    """Metrics as one history step (so the summary holds them too), the verdicts table, the run's
    status and counts in the summary, and the report files copied into the run's files."""
    table = table_type(columns=list(VERDICT_COLUMNS),
                       data=[[row[c] for c in VERDICT_COLUMNS] for row in export.rows],
                       allow_mixed_types=True)  # a column may hold None beside numbers or text
    logged: dict[str, Any] = {**export.metrics, "verdicts": table}
    if export.step is None:
        run.log(logged)
    else:
        run.log(logged, step=export.step)
    run.summary.update(export.tags)
    files = Path(run.dir)
    for path in export.files:
        # a copy, not wandb.save's symlink: the offline run stays whole if the report folder moves
        copied = files / path.name
        shutil.copyfile(path, copied)
        run.save(str(copied), base_path=str(files), policy="now")
