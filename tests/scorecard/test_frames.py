"""``faithtests.reports.load``: tidy pandas tables of a scorecard, and ``faithtests compare --csv``."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd
import pytest
from _sample_scorecard import CLIP, sample_scorecard

from faithtests import cli
from faithtests.reports import load, load_many
from faithtests.reports.frames import ITEM_COLUMNS, MANY_COLUMNS, RESULT_COLUMNS, split_items_key
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


def _recipe() -> str:
    """The pandas recipe of docs/reports.md ("Scorecards in pandas"), as written there."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "reports.md").read_text(encoding="utf-8")
    section = page.split("### Scorecards in pandas", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "docs/reports.md lost the pandas recipe"
    return code.group(1)


def test_the_docs_pandas_recipe_keeps_overall_rows_and_models_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two models and an overall row beside its slices: the recipe's wide table holds each value as
    recorded (no average across models, the slice-less overall rows kept), one column per run in order."""
    def card(step: int, scale: float) -> Scorecard:
        test = "test_flip.py::test_pr[world-all]"
        rows = [MetricResult("flip", test, "PR", v * scale, model=m, slice=s, threshold=0.5, op=">=",
                             passed=True) for m, v, s in (("clip", 0.9, None), ("clip", 0.8, "color"),
                                                          ("siglip", 0.6, None), ("siglip", 0.4, "color"))]
        return Scorecard(tests=[TestRecord(test, "flip", results=rows, items={"flips": {"i1": True}})],
                         run={"name": f"ckpt-{step}", "step": step, "started": "2026-01-01T00:00:00+00:00"})

    monkeypatch.chdir(tmp_path)
    for name, step, scale in (("ckpt-0410", 410, 1.0), ("ckpt-0420", 420, 0.5)):
        write_scorecard(card(step, scale), Path("out") / name / "scorecard.json")
    scope: dict[str, object] = {}
    exec(compile(_recipe(), "docs/reports.md", "exec"), scope)  # the recipe, exactly as documented
    wide = scope["wide"]
    assert isinstance(wide, pd.DataFrame) and list(wide.columns) == ["ckpt-410", "ckpt-420"]
    got = {(i[2], i[5] if isinstance(i[5], str) else None): tuple(row) for i, row in zip(
        wide.index, wide.itertuples(index=False), strict=True)}
    assert got == {("clip", None): (0.9, 0.45), ("clip", "color"): (0.8, 0.4),
                   ("siglip", None): (0.6, 0.3), ("siglip", "color"): (0.4, 0.2)}
    checked, items = scope["checked"], scope["items"]
    assert isinstance(checked, pd.DataFrame) and len(checked) == 8
    assert isinstance(items, pd.DataFrame) and items["value"].tolist() == [1.0]


def test_load_many_orders_runs_and_adds_step_started_source(tmp_path: Path) -> None:
    for name, step in (("a", 20), ("b", 10)):
        sc = sample_scorecard()
        sc.run = {"name": f"run-{step}", "step": step, "started": f"2026-01-0{step // 10}T00:00:00+00:00"}
        _card(tmp_path, sc, name)
    frame = load_many([str(tmp_path / "*")])
    assert tuple(frame.columns) == (RESULT_COLUMNS[0], *MANY_COLUMNS, *RESULT_COLUMNS[1:])
    assert frame["run"].unique().tolist() == ["run-10", "run-20"] and str(frame["step"].dtype) == "Int64"
    assert frame["source"].unique().tolist() == [str(tmp_path / "b" / "scorecard.json"),
                                                  str(tmp_path / "a" / "scorecard.json")]
    assert len(frame) == 2 * len(sample_scorecard().results) and frame["slice"].isna().any()
