"""``faithtests.scorecard.load``: tidy pandas tables of a scorecard, and ``faithtests compare --csv``."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from _sample_scorecard import CLIP, sample_scorecard

from faithtests import cli
from faithtests.scorecard import load
from faithtests.scorecard.frames import ITEM_COLUMNS, RESULT_COLUMNS, split_items_key
from faithtests.scorecard.model import MetricResult, TestRecord
from faithtests.scorecard.recording import items_key
from faithtests.scorecard.scorecard import Scorecard, write_scorecard


def _card(tmp_path: Path, sc: Scorecard, name: str) -> Path:
    (tmp_path / name).mkdir()
    return write_scorecard(sc, tmp_path / name / "scorecard.json").parent


def test_results_frame_has_one_row_per_result(tmp_path: Path) -> None:
    sc = sample_scorecard()
    card = load(_card(tmp_path, sc, "ckpt-0410"))
    frame = card.results_frame()
    assert tuple(frame.columns) == RESULT_COLUMNS
    assert len(frame) == sum(len(t.results) for t in sc.tests) and set(frame["run"]) == {"ckpt-0410"}
    row = frame[(frame["model"] == CLIP) & (frame["metric"] == "E_inv")].iloc[0]
    first = next(r for t in sc.tests for r in t.results if r.model == CLIP and r.metric == "E_inv")
    assert first.ci is not None
    assert (row["value"], row["ci_lo"], row["ci_hi"], row["n"]) == (first.value, *first.ci, 200)
    assert row["suite"] == "lgip" and row["variant"] == "base" and not row["higher_is_better"]
    assert frame["value"].dtype == "float64" and str(frame["n"].dtype) == "Int64"


def test_undefined_values_are_nan_and_unchecked_results_have_no_verdict(tmp_path: Path) -> None:
    rec = TestRecord("t::a", "s", results=[MetricResult("s", "t::a", "m", None, model="x"),
                                            MetricResult("s", "t::a", "k", 0.5, model="x")])
    frame = load(_card(tmp_path, Scorecard(tests=[rec]), "r"), run="mine").results_frame()
    assert frame["value"].isna().tolist() == [True, False]
    assert frame["passed"].tolist() == [None, None] and set(frame["run"]) == {"mine"}


def test_items_frame_splits_model_and_variant(tmp_path: Path) -> None:
    rec = TestRecord("t::a", "s", items={
        items_key("flips", "clip", "colorblind"): {"i1": True, "i2": False},
        "plain": {"i3": 0.25},
    })
    frame = load(_card(tmp_path, Scorecard(tests=[rec]), "r")).items_frame()
    assert tuple(frame.columns) == ITEM_COLUMNS
    got = frame[["item_set", "model", "variant", "item", "value"]].values.tolist()
    assert got == [["flips", "clip", "colorblind", "i1", 1.0], ["flips", "clip", "colorblind", "i2", 0.0],
                   ["plain", "", "base", "i3", 0.25]]
    assert split_items_key(items_key("a", "m", "v")) == ("a", "m", "v")


def test_frames_of_two_runs_concatenate(tmp_path: Path) -> None:
    a = load(_card(tmp_path, sample_scorecard(), "a")).results_frame()
    b = load(_card(tmp_path, sample_scorecard(), "b")).results_frame()
    wide = pd.concat([a, b]).pivot_table(index=["test", "model", "metric", "slice"], columns="run",
                                         values="value", dropna=False)
    assert (wide["a"].dropna() == wide["b"].dropna()).all()


def test_compare_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cur = _card(tmp_path, sample_scorecard(), "a"), _card(tmp_path, sample_scorecard(), "b")
    out_csv = tmp_path / "deltas.csv"
    assert cli.main(["compare", str(base), str(cur), "--csv", str(out_csv), "--all"]) == 0
    assert "regression(s)" in capsys.readouterr().out  # the text report is still printed
    deltas = pd.read_csv(out_csv)
    assert len(deltas) == len(sample_scorecard().results)  # --all: every metric, checked or not
    assert cli.main(["compare", str(base), str(cur), "--csv", str(out_csv)]) == 0
    capsys.readouterr()
    checked = pd.read_csv(out_csv)  # by default, the metrics a threshold checks
    assert len(checked) == sum(r.passed is not None for r in sample_scorecard().results) < len(deltas)
    assert set(deltas["status"]) == {"unchanged"} and (deltas["delta"].fillna(0) == 0).all()
    assert cli.main(["compare", str(base), str(cur), "--csv", "-"]) == 0
    stdout = capsys.readouterr().out
    assert pd.read_csv(io.StringIO(stdout)).shape == checked.shape  # only the CSV on stdout
    assert cli.main(["compare", str(base), str(cur), "--csv", str(tmp_path / "no/such/dir/x.csv")]) == 2
    assert "--csv" in capsys.readouterr().err
