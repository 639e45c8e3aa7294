"""The ``faithtests`` command: render, merge, compare, the pluggable train-reference, and error exits."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest
from _sample_scorecard import CLIP, sample_scorecard

from faithtests import cli
from faithtests.scorecard.item_log import ITEM_LOG, iter_item_log, log_rows, write_item_log
from faithtests.scorecard.scorecard import Scorecard, read_scorecard, write_scorecard


def _write(sc: Scorecard, d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    return write_scorecard(sc, d / "scorecard.json")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_render_writes_html_next_to_the_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(sample_scorecard(), tmp_path / "run")
    rc, out, _ = _run(capsys, "render", str(tmp_path / "run"))
    html = (tmp_path / "run" / "scorecard.html").read_text()
    assert rc == 0 and "scorecard.html" in out
    # lgip splits into failing checks (open) and other rows (folded); premise; lgip slices
    assert html.startswith("<!DOCTYPE html>") and html.count('<table class="metrics ') == 4
    rc, _, _ = _run(
        capsys,
        "render",
        str(tmp_path / "run" / "scorecard.json"),
        "-o",
        str(tmp_path / "x.html"),
        "--max-exemplars",
        "1",
    )
    assert rc == 0 and "Showing 1 of 10 exemplars" in (tmp_path / "x.html").read_text()


def test_render_with_baseline_shows_deltas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = sample_scorecard()
    t0 = base.tests[0]
    base.tests[0] = replace(t0, results=[replace(t0.results[0], value=0.01), *t0.results[1:]])
    _write(base, tmp_path / "old")
    _write(sample_scorecard(), tmp_path / "new")
    rc, _, _ = _run(capsys, "render", str(tmp_path / "new"), "--baseline", str(tmp_path / "old"))
    html = (tmp_path / "new" / "scorecard.html").read_text()
    assert rc == 0 and 'class="delta worse">Δ +0.04 (baseline 0.010)' in html
    assert str(tmp_path / "old") in html  # the baseline is named in the header


def _shards() -> tuple[Scorecard, Scorecard]:
    sc = sample_scorecard()
    a = Scorecard(
        fingerprint={**sc.fingerprint, "start": "2025-01-01T00:00:00", "end": "2025-01-01T00:03:00"},
        tests=[t for t in sc.tests if t.suite == "lgip"],
    )
    b = Scorecard(
        fingerprint={**sc.fingerprint, "start": "2025-01-01T00:00:05", "end": "2025-01-01T00:05:00"},
        tests=[t for t in sc.tests if t.suite == "premise"],
    )
    return a, b


def test_merge_two_shards_is_the_union(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _shards()
    _write(a, tmp_path / "gw0")
    _write(b, tmp_path / "gw1")
    rc, out, err = _run(
        capsys,
        "merge",
        str(tmp_path / "gw0"),
        str(tmp_path / "gw1" / "scorecard.json"),
        "-o",
        str(tmp_path / "merged"),
    )
    assert rc == 0, err
    merged = read_scorecard(tmp_path / "merged")
    whole = sample_scorecard()
    assert [t.to_json() for t in merged.tests] == [t.to_json() for t in whole.sorted().tests]
    assert merged.fingerprint["shards"] == 2 and merged.status == "complete"
    assert (merged.fingerprint["start"], merged.fingerprint["end"]) == (
        "2025-01-01T00:00:00",
        "2025-01-01T00:05:00",
    )
    html = (tmp_path / "merged" / "scorecard.html").read_text()
    assert "Suite: lgip" in html and "Suite: premise" in html and "merged 2 scorecards (5 tests" in out


def test_merge_joins_the_shards_item_logs_and_writes_the_viewer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _shards()
    row = {"model": "m", "variant": "base", "metric": "acc", "slice": None, "inputs": {}, "output": {"a": 1},
           "outcome": True, "invalid": None}
    for name, sc, items in (("gw0", a, ["i1", "i2"]), ("gw1", b, ["i3"])):
        _write(sc, tmp_path / name)
        write_item_log(log_rows([("s", "t.py::a", [{**row, "item": i} for i in items])]),
                       tmp_path / name / ITEM_LOG)
    shards = (str(tmp_path / "gw0"), str(tmp_path / "gw1"))
    rc, out, err = _run(capsys, "merge", *shards, "-o", str(tmp_path / "m"))
    assert rc == 0, err
    assert [r["item"] for r in iter_item_log(tmp_path / "m")] == ["i1", "i2", "i3"] and "(3 items)" in out
    assert 'id="viewer-items"' in (tmp_path / "m" / "items.html").read_text()
    with gzip.open(tmp_path / "gw1" / ITEM_LOG, "wt") as fh:  # a corrupt shard log: an error naming it
        fh.write("{not json\n")
    rc, _, err = _run(capsys, "merge", *shards, "-o", str(tmp_path / "m2"))
    assert rc == 2 and "item logs" in err and "not JSON" in err


def test_merge_duplicate_test_and_interrupted_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _shards()
    _write(a, tmp_path / "a")
    _write(Scorecard(tests=[*b.tests, a.tests[0]]), tmp_path / "dup")
    rc, _, err = _run(capsys, "merge", str(tmp_path / "a"), str(tmp_path / "dup"), "-o", str(tmp_path / "m"))
    assert rc == 2 and a.tests[0].test in err and "more than one shard" in err
    assert not (tmp_path / "m").exists()
    _write(Scorecard(tests=b.tests, status="interrupted"), tmp_path / "int")
    rc, _, _ = _run(
        capsys, "merge", str(tmp_path / "a"), str(tmp_path / "int"), "-o", str(tmp_path / "m.json")
    )
    assert rc == 0 and read_scorecard(tmp_path / "m.json").status == "interrupted"
    assert "Run interrupted" in (tmp_path / "m.html").read_text()


def _regressed() -> Scorecard:
    """The sample with reference:clip's E_inv up from 0.05 to 0.09 (lower is better) and one item flipped."""
    sc = sample_scorecard()
    t0 = sc.tests[0]
    sc.tests[0] = replace(
        t0,
        results=[replace(t0.results[0], value=0.09), *t0.results[1:]],
        items={"invariant": {"img1": False, "img2": True, "img3": False}},
    )
    return sc


def test_compare_prints_deltas_and_flips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(sample_scorecard(), tmp_path / "ckpt-0410")
    _write(_regressed(), tmp_path / "ckpt-0420")
    rc, out, _ = _run(capsys, "compare", str(tmp_path / "ckpt-0410"), str(tmp_path / "ckpt-0420"))
    assert rc == 1  # a regression beyond the tolerance fails, as the pytest gate does
    assert "FAIL: 1 regression(s) beyond tolerance 0: exit status 1" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("REGRESSION"))
    assert "lgip/E_inv" in line and CLIP in line and "0.050" in line and "0.090" in line and "+0.040" in line
    assert "1 regression(s)" in out and "1 item(s) flipped" in out
    assert "test_invariance[reference:clip] invariant img1: True -> False" in out
    rc, out, _ = _run(
        capsys,
        "compare",
        str(tmp_path / "ckpt-0410"),
        str(tmp_path / "ckpt-0420"),
        "--json",
        "--tolerance",
        "100%",
    )
    data = json.loads(out)
    assert rc == 0 and data["tolerance"] == "100%"
    assert not [d for d in data["deltas"] if d["status"] == "regression"]  # within 100% of 0.05
    assert [f["item"] for f in data["flips"]] == ["img1"]  # booleans flip regardless of tolerance
    assert any(
        ln.startswith("unchanged")
        for ln in _run(capsys, "compare", str(tmp_path / "ckpt-0410"), str(tmp_path / "ckpt-0420"))[
            1
        ].splitlines()
    )
    rc, out, _ = _run(
        capsys, "compare", str(tmp_path / "ckpt-0410"), str(tmp_path / "ckpt-0420"), "--changed-only"
    )
    assert rc == 1 and not any(ln.startswith("unchanged") for ln in out.splitlines())
    assert any(ln.startswith("REGRESSION") for ln in out.splitlines())


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no such scorecard"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "top level is not an object"),
        ('{"schema_version": 99, "tests": []}', "schema_version 99"),
        ('{"schema_version": 1, "tests": [{"suite": "x"}]}', "malformed test record"),
        ('{"schema_version": 1, "tests": [], "fingerprint": 3}', "malformed scorecard"),
    ],
)
def test_user_errors_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, needle: str
) -> None:
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    good = _write(sample_scorecard(), tmp_path / "good")
    for argv in (
        ["render", str(bad)],
        ["compare", str(good), str(bad)],
        ["merge", str(good), str(bad), "-o", str(tmp_path / "o")],
    ):
        rc, _, err = _run(capsys, *argv)
        assert rc == 2, argv
        assert str(bad) in err and needle in err and "Traceback" not in err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(sample_scorecard(), tmp_path / "good")
    rc, _, err = _run(capsys, "compare", str(good), str(good), "--tolerance", "five")
    assert rc == 2 and "tolerance 'five' is not a number" in err
    rc, _, err = _run(capsys)
    assert rc == 2 and "required" in err
    rc, _, err = _run(capsys, "render", str(good), "--max-exemplars", "-1")
    assert rc == 2 and "'-1' must be >= 0" in err
    rc, out, _ = _run(capsys, "--help")
    assert rc == 0 and "compare" in out and "train-reference" in out
    rc, _, err = _run(capsys, "render", str(good), "-o", str(good / "scorecard.json" / "x.html"))
    assert rc == 2 and "cannot write" in err


def test_train_reference_is_a_pass_through(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[list[str]] = []
    fake = types.ModuleType("faith_fake_train")
    fake.main = lambda argv: seen.append(argv) or 7  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "faith_fake_train", fake)
    monkeypatch.setitem(cli.EXTERNAL_SUBCOMMANDS, "train-reference", ("faith_fake_train", "train"))
    rc, _, _ = _run(capsys, "train-reference", "clip", "--seed", "3", "-h")
    assert rc == 7 and seen == [["clip", "--seed", "3", "-h"]]
    monkeypatch.setitem(
        cli.EXTERNAL_SUBCOMMANDS, "train-reference", ("faithtests.world._absent_train", "train")
    )
    rc, _, err = _run(capsys, "train-reference", "clip")
    assert rc == 2 and "train-reference is not available" in err and "Traceback" not in err


def test_console_script_runs_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "faithtests.cli", "render", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and "nope" in proc.stderr and "Traceback" not in proc.stderr


def test_merge_never_writes_into_a_report_folder_a_run_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46: ``merge -o DIR`` wrote into the folder of a running pytest, which then overwrote the
    merge, and neither said so. The merge takes the folder's lock as a run does: a live holder refuses."""
    import json
    import os
    import socket

    from faithtests.plugin.lifecycle import LOCK_NAME

    a, b = _shards()
    _write(a, tmp_path / "gw0")
    _write(b, tmp_path / "gw1")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / LOCK_NAME).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                              "start": "2026-11-29T00:00:00"}))
    rc, _, err = _run(capsys, "merge", str(tmp_path / "gw0"), str(tmp_path / "gw1"), "-o", str(busy))
    assert rc == 2 and not (busy / "scorecard.json").exists()
    assert f"faithtests merge -o: {busy} is in use by another faithtests run (pid {os.getpid()}" in err
    (busy / LOCK_NAME).unlink()
    rc, _, err = _run(capsys, "merge", str(tmp_path / "gw0"), str(tmp_path / "gw1"), "-o", str(busy))
    assert rc == 0 and (busy / "scorecard.json").is_file() and not (busy / LOCK_NAME).exists(), err


@pytest.mark.parametrize("damage", ["truncated", "not gzip"])
def test_merge_names_a_damaged_shard_log_never_the_output_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """Issue 46: a truncated ``items.jsonl.gz`` was a raw EOFError; a file that is not gzip at all was
    "cannot write the item log", blaming the output folder (gzip's error is an OSError)."""
    a, b = _shards()
    row = {"model": "m", "variant": "base", "metric": "acc", "slice": None, "inputs": {}, "output": {"a": 1},
           "outcome": True, "invalid": None}
    for name, sc in (("gw0", a), ("gw1", b)):
        _write(sc, tmp_path / name)
        write_item_log(log_rows([("s", "t.py::a", [{**row, "item": f"{name}-{i}", "inputs": {"x": "y" * 400}}
                                                   for i in range(200)])]), tmp_path / name / ITEM_LOG)
    log = tmp_path / "gw1" / ITEM_LOG
    data = log.read_bytes()
    log.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"plain text, no gzip header")
    shards = (str(tmp_path / "gw0"), str(tmp_path / "gw1"))
    rc, _, err = _run(capsys, "merge", *shards, "-o", str(tmp_path / "m"))
    assert rc == 2 and "Traceback" not in err and "cannot write" not in err, err
    assert f"merging the item logs: {log}: not a readable item log after line" in err
    assert "truncated or damaged" in err


def test_compare_and_history_refuse_runs_the_pytest_gate_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46: ``compare`` and ``history`` compared runs of other seeds, limits or thresholds (a
    "REGRESSION", exit 1) where the pytest gate refuses the pair (exit 4). One rule now
    (``fingerprint.refused_mismatches``): refused, exit 2, naming the fields, unless allowed."""
    from dataclasses import replace

    from faithtests.scorecard.history_run import run_record

    base = sample_scorecard()
    base = replace(base, fingerprint={**base.fingerprint, "seed": 0, "limit": None},
                   run=run_record("ck", 10, "2026-01-01T00:00:00+00:00"))
    other = replace(base, fingerprint={**base.fingerprint, "seed": 1, "limit": 40},
                    run=run_record("ck", 20, "2026-01-02T00:00:00+00:00"))
    a, b = _write(base, tmp_path / "a"), _write(other, tmp_path / "b")
    for argv in (("compare", str(a), str(b)), ("history", str(a), str(b), "--html", "")):
        rc, _, err = _run(capsys, *argv)
        assert rc == 2, err
        assert "are not comparable: they differ in seed (0 vs 1); limit (None vs 40); pass " \
               "--allow-mismatch seed,limit to compare anyway" in err
        rc, _, err = _run(capsys, *argv, "--allow-mismatch", "seed,limit")
        assert rc == 0, err
    rc, _, err = _run(capsys, "compare", str(a), str(b), "--allow-mismatch", "sed")
    assert rc == 2 and "unknown field(s) sed" in err


def test_a_nan_per_item_value_in_a_baseline_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46: a NaN among a baseline's per-item values crashed the end of the run and ``compare``."""
    import json

    sc = sample_scorecard()
    a = _write(sc, tmp_path / "a")
    doc = json.loads(a.read_text())
    doc["tests"][0]["results"][0]["per_item"] = {"ids": ["i1", "i2"], "values": [float("nan"), 1.0]}
    a.write_text(json.dumps(doc))
    rc, _, err = _run(capsys, "compare", str(a), str(_write(sc, tmp_path / "b")))
    assert rc == 2 and str(a) in err and "not a finite number" in err and "Traceback" not in err
