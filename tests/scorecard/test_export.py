"""``faithtests export`` (issue 49, item 5): a run written to a real MLflow file store and read back with
MLflow's own client, and to an offline W&B run read back from the files W&B wrote; the key rule, the
flat params, and the one-line errors (a missing run, a missing package)."""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from faithtests import cli
from faithtests.reports import export
from faithtests.reports.export_trackers import VERDICTS_FILE, tracking_uri
from faithtests.scorecard.model import MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard, write_scorecard

T1, T2 = "test_inv.py::test_paraphrase[world-clip]", "test_inv.py::test_paraphrase[coco-clip]"
DATASETS = {T1: "world", T2: "coco"}
RESULTS = [
    MetricResult("invariance", T1, "E_inv", 0.031, model="clip", ci=(0.02, 0.04), n=400, threshold=0.05,
                 op="<=", passed=True, higher_is_better=False),
    MetricResult("invariance", T1, "E_inv", 0.09, model="clip", slice="color", ci=(0.07, 0.11), n=100,
                 threshold=0.05, op="<=", passed=False, higher_is_better=False),
    MetricResult("invariance", T1, "E_inv", 0.2, model="clip", variant="shuffled"),
    MetricResult("invariance", T2, "E_inv", 0.04, model="clip", ci=(0.03, 0.05)),  # another data set
    MetricResult("flips", T1, "PR", 0.81, model="reference:clip", ci=(0.7, 0.9), threshold=0.9, op=">=",
                 passed=False, insufficient=True, coverage="too few items"),
    MetricResult("flips", T1, "PR", 0.95, model="reference:clip-colorblind", threshold=0.9, op=">=",
                 passed=True),
    MetricResult("flips", T1, "AB accuracy: v/2", None, model="clip"),  # undefined: a row, no metric
]
FINGERPRINT = {"seed": 0, "limit": None, "packages": {"torch": "2.14.1", "numpy": "2.1"},
               "model_specs": {"clip": "reference:clip"}, "argv": ["pytest", "x" * 9000],
               "end": "2026-01-02T03:04:05+00:00"}


def _report(tmp_path: Path, step: int | None = 7) -> Path:
    tests = [TestRecord(t, "s", results=[r for r in RESULTS if r.test == t], dataset=DATASETS[t])
             for t in (T1, T2)]
    sc = Scorecard(fingerprint=FINGERPRINT, tests=tests, status="complete",
                   run={"name": "ckpt-0420", "step": step, "started": "2026-01-02T03:00:00+00:00"})
    report = tmp_path / "out" / "run1"
    write_scorecard(sc, report / "scorecard.json")
    (report / "scorecard.html").write_text("<!DOCTYPE html><title>run1</title>", encoding="utf-8")
    return report


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(["export", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_keys_are_safe_unique_and_only_as_long_as_needed() -> None:
    results = sorted(RESULTS, key=lambda r: r.key)
    by = dict(zip([(r.test, r.metric, r.slice, r.model, r.variant) for r in results],
                  export.metric_keys(results, DATASETS), strict=True))
    assert by[(T1, "E_inv", "color", "clip", "base")] == "invariance/E_inv.color"
    assert by[(T1, "E_inv", None, "clip", "shuffled")] == "invariance/E_inv.shuffled"
    # two data sets record the plain E_inv: the data set tells them apart; the model never varies there
    assert by[(T1, "E_inv", None, "clip", "base")] == "invariance/E_inv.world"
    assert by[(T2, "E_inv", None, "clip", "base")] == "invariance/E_inv.coco"
    # two models record PR: the model (its ':' made safe) tells them apart
    assert by[(T1, "PR", None, "reference:clip", "base")] == "flips/PR.reference_clip"
    assert by[(T1, "AB accuracy: v/2", None, "clip", "base")] == "flips/AB accuracy_ v_2"
    assert len(set(by.values())) == len(by) and all(k.count("/") == 1 for k in by.values())
    # without data sets, the test tells the two E_inv apart (its file dropped, brackets made safe)
    assert "invariance/E_inv.test_paraphrase_coco-clip" in export.metric_keys(results)
    long = MetricResult("s" * 300, T1, "m", 1.0)
    twin = MetricResult("s" * 300, T1, "m", 2.0)
    a, b = export.metric_keys([long, twin])
    assert len(a) <= 244 and b == f"{a}-2"  # 244: room for ".ci_lo"; the same result twice gets "-2"
    assert export.metric_keys([long]) == [a]  # deterministic


def test_params_are_the_flat_fingerprint() -> None:
    params = export.flat_params(FINGERPRINT)
    assert params["packages.torch"] == "2.14.1" and params["model_specs.clip"] == "reference:clip"
    assert params["seed"] == "0" and params["limit"] == "null"
    assert json.loads(params["argv"])[1] == "x" * 9000  # truncated only where MLflow needs it
    assert export.flat_params({"a.b": 1, "a": {"b": 2}}) == {"a.b": "1", "a.b-2": "2"}


def test_tracking_uri() -> None:
    assert tracking_uri("http://mlflow:5000") == "http://mlflow:5000"
    assert tracking_uri("sqlite:///m.db") == "sqlite:///m.db" and tracking_uri("databricks") == "databricks"
    assert tracking_uri("./mlruns").startswith("file:///") and tracking_uri("./mlruns").endswith("/mlruns")


def test_mlflow_export_reads_back(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    mlflow_client = pytest.importorskip("mlflow.tracking").MlflowClient
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    report, store = _report(tmp_path), tmp_path / "mlruns"
    rc, out, err = _run(capsys, str(report), "--mlflow", str(store), "--experiment", "faith")
    assert rc == 0, err
    assert "ckpt-0420" in out and "MLFLOW_ALLOW_FILE_STORE" not in os.environ
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # reading a file store with MLflow 3 needs it
    client = mlflow_client(store.resolve().as_uri())
    experiment = client.get_experiment_by_name("faith")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "ckpt-0420" and run.info.status == "FINISHED"
    metrics, params, tags = run.data.metrics, run.data.params, run.data.tags
    plain = "invariance/E_inv.world"
    assert metrics[plain] == pytest.approx(0.031)
    assert (metrics[f"{plain}.ci_lo"], metrics[f"{plain}.ci_hi"]) == pytest.approx((0.02, 0.04))
    assert metrics["invariance/E_inv.color"] == pytest.approx(0.09)
    assert "flips/PR.reference_clip-colorblind.ci_lo" not in metrics  # no CI recorded
    assert not any(k.startswith("flips/AB") for k in metrics)  # undefined: in the table only
    defined = [r for r in RESULTS if r.value is not None]
    assert len(metrics) == len(defined) + 2 * sum(r.ci is not None for r in defined)
    history = client.get_metric_history(run.info.run_id, plain)
    assert [m.step for m in history] == [7]
    assert params["packages.torch"] == "2.14.1" and params["seed"] == "0"
    assert 0 < len(params["argv"]) <= 6000  # MLflow's limit
    assert tags["faithtests.status"] == "complete" and tags["faithtests.step"] == "7"
    counts = [tags[f"faithtests.verdicts.{v}"] for v in ("pass", "fail", "insufficient", "unchecked")]
    assert counts == ["2", "1", "1", "3"]
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {
        "scorecard.json", "scorecard.html", VERDICTS_FILE}
    rows = json.loads(Path(client.download_artifacts(run.info.run_id, VERDICTS_FILE, str(tmp_path)))
                      .read_text())
    (color,) = [r for r in rows if r["key"] == "invariance/E_inv.color"]
    assert color == {"key": "invariance/E_inv.color", "suite": "invariance", "test": T1, "metric": "E_inv",
                     "slice": "color", "model": "clip", "variant": "base", "value": 0.09, "ci_lo": 0.07,
                     "ci_hi": 0.11, "n": 100, "threshold": 0.05, "op": "<=", "verdict": "fail",
                     "passed": False}
    # a second export of the same run is a second MLflow run in the same experiment
    again = _run(capsys, str(report / "scorecard.json"), "--mlflow", str(store), "--experiment", "faith")
    assert again[0] == 0
    assert len(client.search_runs([experiment.experiment_id])) == 2


def _wandb_records(path: Path) -> list[Any]:
    """The records of W&B's run log (``run-ID.wandb``: a ``:W&B`` header, then LevelDB-log blocks of
    32 KiB whose records are protobuf ``Record``s, one record possibly split FIRST..LAST over blocks)."""
    from wandb.proto import wandb_internal_pb2  # importorskip'd by the caller

    data, pos, out, pending = path.read_bytes(), 7, [], b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        length, kind = struct.unpack("<HB", data[pos + 4:pos + 7])
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
    return out


def test_wandb_offline_export(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    for var in ("WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):  # nothing written to $HOME
        monkeypatch.setenv(var, str(tmp_path / "home" / var))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)  # no login is needed or used
    report = _report(tmp_path)
    rc, out, err = _run(capsys, str(report), "--wandb", str(tmp_path / "wb"), "--project", "faith")
    assert rc == 0, err
    (run_dir,) = (tmp_path / "wb" / "wandb").glob("offline-run-*")
    assert "wandb sync" in out and str(run_dir) in out
    files = run_dir / "files"
    assert (files / "scorecard.html").read_text().startswith("<!DOCTYPE html>")
    assert json.loads((files / "scorecard.json").read_text())["run"]["name"] == "ckpt-0420"
    (table,) = (files / "media" / "table").glob("verdicts_*.table.json")
    t = json.loads(table.read_text())
    rows = [dict(zip(t["columns"], r, strict=True)) for r in t["data"]]
    assert {r["key"]: r["value"] for r in rows}["invariance/E_inv.color"] == pytest.approx(0.09)
    assert len(rows) == len(RESULTS)
    records = _wandb_records(next(run_dir.glob("run-*.wandb")))
    (run,) = [r.run for r in records if r.HasField("run")]
    assert run.display_name == "ckpt-0420" and run.project == "faith"
    config = {u.key: json.loads(u.value_json) for u in run.config.update}
    assert config["packages"] == {"torch": "2.14.1", "numpy": "2.1"} and config["seed"] == 0
    (history,) = [r.history for r in records if r.HasField("history")]
    logged = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in history.item}
    assert logged["invariance/E_inv.world"] == pytest.approx(0.031) and logged["_step"] == 7
    assert logged["invariance/E_inv.world.ci_hi"] == pytest.approx(0.04)
    summary = {u.key: json.loads(u.value_json) for r in records if r.HasField("summary")
               for u in r.summary.update if u.key}
    assert summary["faithtests.status"] == "complete" and summary["faithtests.verdicts.fail"] == "1"


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    rc, _, err = _run(capsys, str(tmp_path / "nope"), "--mlflow", str(tmp_path / "mlruns"))
    assert rc == 2 and "nope" in err and "no such scorecard" in err and "Traceback" not in err
    assert not (tmp_path / "mlruns").exists()
    rc, _, err = _run(capsys, str(tmp_path / "nope"))
    assert rc == 2 and "--mlflow TARGET and/or --wandb DIR" in err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "scorecard.json").write_text("{not json")
    rc, _, err = _run(capsys, str(tmp_path / "bad"), "--wandb", str(tmp_path / "wb"))
    assert rc == 2 and "not valid JSON" in err
    report = _report(tmp_path)
    for module, flag, package in (("mlflow", "--mlflow", "mlflow-skinny"), ("wandb", "--wandb", "wandb")):
        for name in [m for m in sys.modules if m == module or m.startswith(f"{module}.")] or [module]:
            monkeypatch.setitem(sys.modules, name, None)  # as if not installed: every import of it fails
        rc, _, err = _run(capsys, str(report), flag, str(tmp_path / "target"))
        assert rc == 2 and package in err and 'pip install "faithtests[export]"' in err
        assert len(err.strip().splitlines()) == 1


def test_a_run_without_a_step_logs_at_step_zero(tmp_path: Path) -> None:
    built = export.build_export(export._read(str(_report(tmp_path, step=None))), str(tmp_path / "out/run1"))
    assert built.step is None and "faithtests.step" not in built.tags and built.name == "ckpt-0420"
    assert built.started_ms == 1767322800000 and built.ended_ms == 1767323045000
    assert [p.name for p in built.files] == ["scorecard.json", "scorecard.html"]
