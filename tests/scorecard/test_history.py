"""History across checkpoints (issue 33 item 2): ``faithtests history``, its rules, CSV and HTML page, on
small synthetic scorecards; the run identity (``run``), the default report folder and shard merges."""

from __future__ import annotations

import csv
import html as html_lib
import io
import json
import re
from pathlib import Path

import pytest

from faithtests import cli
from faithtests.reports.history import collect_runs, load_history, render_history_html, write_history_html
from faithtests.scorecard.history_run import (
    RunPathError,
    default_report_dir,
    default_run_name,
    expand_runs,
    folder_name,
    run_record,
)
from faithtests.scorecard.model import ItemValues, MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard, ScorecardError, merge_scorecards, write_scorecard

TEST = "test_flip.py::test_pr[world-cand]"
N = 40


def _acc(hits: list[int]) -> MetricResult:
    """A checked 0/1 metric (>= 0.8) with its per-item outcomes (paired comparisons) and a rough CI."""
    value = sum(hits) / len(hits)
    half = 1.96 * (value * (1 - value) / len(hits)) ** 0.5
    return MetricResult("flip", TEST, "acc", value, model="cand", ci=(value - half, value + half),
                        n=len(hits), threshold=0.8, op=">=", passed=value >= 0.8, gate="point",
                        per_item=ItemValues.make({f"i{k}": h for k, h in enumerate(hits)}))


def _err(value: float) -> MetricResult:
    """A checked lower-is-better metric without per-item values (unpaired comparisons)."""
    return MetricResult("flip", TEST, "err", value, model="cand", ci=(value - 0.01, value + 0.01), n=N,
                        higher_is_better=False, threshold=0.2, op="<=", passed=value <= 0.2, gate="point")


def _card(step: int | None, started: str, hits: list[int], err: float = 0.1, name: str = "cand") -> Scorecard:
    results = [_acc(hits), _err(err), MetricResult("flip", TEST, "aux", 0.5, model="cand")]  # aux: unchecked
    rec = TestRecord(TEST, "flip", results=results, outcome="passed" if sum(hits) / N >= 0.8 else "failed")
    return Scorecard(fingerprint={"start": started}, tests=[rec], run=run_record(name, step, started))


def _hits(misses: int) -> list[int]:
    return [0] * misses + [1] * (N - misses)


def _write(sc: Scorecard, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_scorecard(sc, folder / "scorecard.json")


GOOD, BAD = _hits(2), _hits(16)  # 0.95 and 0.60 (fails >= 0.8; 14 items good -> bad)


def _four(tmp_path: Path) -> list[Path]:
    """Four runs whose folder names sort against their steps: steps 10, 20, 30 (the regression), 40."""
    cards = {"d": _card(10, "2026-01-04T00:00:00+00:00", GOOD, name="ck-10"),
             "c": _card(20, "2026-01-03T00:00:00+00:00", GOOD, name="ck-20"),
             "b": _card(30, "2026-01-02T00:00:00+00:00", BAD, err=0.3, name="ck-30"),
             "a": _card(40, "2026-01-01T00:00:00+00:00", _hits(3), name="ck-40")}
    return [_write(sc, tmp_path / "runs" / folder).parent for folder, sc in cards.items()]


def test_runs_are_ordered_by_step_then_start_time(tmp_path: Path) -> None:
    paths = _four(tmp_path)
    no_step = [_write(_card(None, t, GOOD, name=f"x{t[9]}"), tmp_path / f"x{t[9]}") for t in
               ("2026-02-02T00:00:00+00:00", "2026-02-01T00:00:00+00:00")]
    runs = collect_runs([*paths, *no_step])
    assert [r.run for r in runs] == ["ck-10", "ck-20", "ck-30", "ck-40", "x1", "x2"]
    assert [r.step for r in runs] == [10, 20, 30, 40, None, None]


def test_a_step_that_is_no_whole_number_is_an_error_naming_the_file(tmp_path: Path) -> None:
    """Issue 46: a step written as text ("25") was read as no step, silently moving the run last."""
    import json

    from faithtests.scorecard.scorecard import ScorecardError

    paths = _four(tmp_path)
    card = paths[0] / "scorecard.json"
    data = json.loads(card.read_text())
    for bad in ("25", 2.5, True):
        data["run"]["step"] = bad
        card.write_text(json.dumps(data))
        with pytest.raises(ScorecardError, match=rf"scorecard.json: run.step {bad!r} is not a whole number"):
            collect_runs(paths)


def test_first_failing_run_first_regression_and_trend_values(tmp_path: Path) -> None:
    history = load_history(_four(tmp_path))
    assert [t.result.metric for t in history.trends] == ["acc", "err"]  # aux has no check: not followed
    acc, err = history.trends
    assert [p.value if p else None for p in acc.points] == [0.95, 0.95, 0.6, 0.925]
    assert acc.first_failed == 2 and acc.first_regression == 2 and acc.against[2] == 1
    d = acc.deltas[2]
    assert d is not None and d.basis == "paired" and d.status == "regression"
    assert d.paired is not None and (d.paired.good_to_bad, d.paired.bad_to_good) == (14, 0)
    assert err.first_failed == 2 and err.first_regression == 2 and err.deltas[2] is not None
    assert err.deltas[2].basis == "unpaired"
    # the last run (0.925, 1 item worse than run 2) against the best earlier run (0.95: runs 1 and 2, the
    # later one on a tie): within noise, not a regression
    assert acc.best == 1 and acc.last_delta is not None and acc.last_delta.status != "regression"
    assert err.best == 1 and not err.regressed and history.exit_status == 0


def test_exit_status_is_1_when_the_last_run_regressed_against_the_best_earlier(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _four(tmp_path)
    rc = cli.main(["history", *map(str, paths[:3]), "--html", ""])  # the last run is the bad one
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL: the last run #3 ck-30 regressed against the best earlier run on 2 checked metric(s)" in out
    assert "first failing run: #3 ck-30; first regression: #3 ck-30 (vs #2 ck-20)" in out
    assert re.search(r"#3 ck-30\s+0\.600 \[0\.\d+, 0\.\d+\] n=40\s+FAIL\s+vs #2: -0\.350 .* REGRESSION "
                     r"\(paired, g>b=14 b>g=0\)", out)
    rc = cli.main(["history", *map(str, paths), "--html", ""])
    out = capsys.readouterr().out
    assert rc == 0 and "did not regress against the best earlier run on any of 2 checked metric(s)" in out
    # one run: nothing to compare, exit 0
    assert cli.main(["history", str(paths[2]), "--html", ""]) == 0
    assert "nothing earlier to compare with" in capsys.readouterr().out


def test_a_tolerance_absorbs_a_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _four(tmp_path)
    assert cli.main(["history", *map(str, paths[:3]), "--html", "", "--tolerance", "0.5"]) == 0
    capsys.readouterr()


def test_csv_has_one_row_per_run_and_checked_metric(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _four(tmp_path)
    out_csv = tmp_path / "h.csv"
    assert cli.main(["history", *map(str, paths), "--csv", str(out_csv), "--html", ""]) == 0
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 8 and {r["metric"] for r in rows} == {"acc", "err"}
    acc = [r for r in rows if r["metric"] == "acc"]
    assert [r["run"] for r in acc] == ["ck-10", "ck-20", "ck-30", "ck-40"]
    assert [r["first_failed"] for r in acc] == ["False", "False", "True", "False"]
    assert [r["first_regression"] for r in acc] == ["False", "False", "True", "False"]
    assert acc[2]["status"] == "regression" and acc[2]["vs_run"] == "2" and acc[2]["basis"] == "paired"
    assert float(acc[2]["value"]) == 0.6 and acc[0]["vs_run"] == "" and acc[2]["verdict"] == "fail"
    capsys.readouterr()
    assert cli.main(["history", *map(str, paths), "--csv", "-", "--html", ""]) == 0
    only = capsys.readouterr().out
    assert list(csv.DictReader(io.StringIO(only))) == rows  # '-': only the CSV, on stdout


def test_globs_and_report_folders_with_subfolders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _four(tmp_path)
    globbed = expand_runs([str(tmp_path / "runs" / "*")])
    assert [p.parent.name for p in globbed] == ["a", "b", "c", "d"]
    assert expand_runs([tmp_path / "runs"]) == globbed  # a folder: its own scorecard and its subfolders'
    assert expand_runs([tmp_path / "runs" / "a" / "scorecard.json", tmp_path / "runs" / "a"]) == globbed[:1]
    assert cli.main(["history", str(tmp_path / "runs" / "*"), "--html", ""]) == 0
    assert "4 run(s)" in capsys.readouterr().out


def test_errors_name_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _four(tmp_path)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "scorecard.json").write_text("{not json")
    assert cli.main(["history", str(paths[0]), str(bad), "--html", ""]) == 2
    err = capsys.readouterr().err
    assert f"faithtests history: error: {bad / 'scorecard.json'}: not valid JSON" in err
    assert cli.main(["history", str(tmp_path / "nothing-*"), "--html", ""]) == 2
    assert f"{tmp_path / 'nothing-*'}: matches no file" in capsys.readouterr().err
    assert cli.main(["history", str(tmp_path / "missing"), "--html", ""]) == 2
    assert "missing: does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["history", str(tmp_path / "empty"), "--html", ""]) == 2
    assert "empty: holds no scorecard.json" in capsys.readouterr().err
    assert cli.main(["history"]) == 2  # no RUN at all: argparse's usage error
    assert "RUN" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no runs given"):
        load_history([])
    with pytest.raises(RunPathError):
        expand_runs([tmp_path / "missing"])
    (tmp_path / "a-file").write_text("")
    assert cli.main(["history", str(paths[0]), "--html", str(tmp_path / "a-file" / "h.html")]) == 2
    assert f"--html {tmp_path / 'a-file' / 'h.html'}: cannot write" in capsys.readouterr().err


def test_html_page_is_offline_with_one_trend_plot_per_checked_metric(tmp_path: Path) -> None:
    out = write_history_html(_four(tmp_path)[:3], tmp_path / "history.html")
    html = out.read_text()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    policy = html_lib.unescape(csp.group(1)) if csp is not None else ""
    assert "default-src 'none'" in policy and "script-src 'none'" in policy
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    plots = re.search(r'<div id="trend-plots">(.*?)</div>\s*</body>', html, re.S)
    assert plots is not None and plots.group(1).count('<svg class="trend-plot"') == 2
    assert 'data-metric="flip/acc"' in html and html.count('class="first-regression"') == 2
    assert html.count('class="ci-band"') >= 2 and html.count('class="threshold"') == 2
    assert "Regressed: the last run #3 ck-30" in html and 'id="trend-table"' in html
    # scorecard objects work too, in history order
    cards = [_card(2, "2026-01-02T00:00:00+00:00", BAD, name="late"), _card(1, "2026-01-01T00:00:00+00:00",
                                                                          GOOD, name="early")]
    page = render_history_html(load_history(cards))
    assert '<th class="mono">#1 early</th><th class="mono">#2 late</th>' in page and "Regressed" in page


def test_trend_plots_label_runs_by_their_step_and_say_so(tmp_path: Path) -> None:
    """Issue 49, item 6: the x axis named runs by their number in the history (#1, #2, ...), not by the
    ``--faith-step`` they record. Steps where the runs have them, run numbers otherwise; the title says."""
    from faithtests.reports.history_plot import x_axis

    page = render_history_html(load_history(_four(tmp_path)[:3]))
    plots = page.partition('<div id="trend-plots">')[2]
    assert ">step 10 · ck-10<" in plots and ">step 30 · ck-30<" in plots and ">#1 ck-10<" not in plots
    assert ">--faith-step of each run<" in plots and "run (by step" not in plots
    cards = [_card(None, "2026-01-01T00:00:00+00:00", GOOD, name="a"),
             _card(None, "2026-01-02T00:00:00+00:00", BAD, name="b")]
    plots = render_history_html(load_history(cards)).partition('<div id="trend-plots">')[2]
    assert ">#1 a<" in plots and ">#2 b<" in plots and ">run number (no run records a --faith-step" in plots
    assert x_axis(["a", "b"], [5, None]) == (["step 5 · a", "#2 b"],
                                             "--faith-step (#N: the run number of a run without a step)")


def test_default_run_name_and_report_folder(tmp_path: Path) -> None:
    assert default_run_name(["reference:clip", "reference:vlm"]) == "reference:clip+reference:vlm"
    assert default_run_name(["clip"], seed=3) == "clip-seed3"
    assert folder_name("reference:clip/x y", 7) == "reference-clip-x-y-step-7"
    root = tmp_path / "faith-report"
    assert default_report_dir(root, "a", None) == root  # free
    _write(_card(None, "t", GOOD, name="a"), root)
    assert default_report_dir(root, "a", None) == root  # a rerun of the same run replaces its report
    assert default_report_dir(root, "a", 5) == root / "a-step-5"  # another step: another folder
    assert default_report_dir(root, "b", None) == root / "b"
    _write(_card(None, "t", GOOD, name="other"), root / "b")  # b's folder taken by another run
    assert default_report_dir(root, "b", None) == root / "b-2"
    (root / "scorecard.json").write_text(json.dumps({"schema_version": 1, "tests": []}))
    assert default_report_dir(root, "b", None) == root  # a report from before run names: replaced


def test_shards_keep_their_run_and_must_agree_on_it() -> None:
    a = _card(3, "2026-01-02T00:00:00+00:00", GOOD)
    b = Scorecard(fingerprint={}, tests=[TestRecord("test_other.py::test_x", "flip")],
                  run=run_record("cand", 3, "2026-01-01T00:00:00+00:00"))
    merged = merge_scorecards([a, b], ["s1", "s2"])
    assert merged.run == {"name": "cand", "step": 3, "started": "2026-01-01T00:00:00+00:00"}
    assert merged.to_json()["run"] == merged.run
    b.run = run_record("cand", 4, "2026-01-01T00:00:00+00:00")
    with pytest.raises(ScorecardError, match="s1 and s2 are not shards of one run: run 'cand' step 3 vs "
                                             "run 'cand' step 4"):
        merge_scorecards([a, b], ["s1", "s2"])
