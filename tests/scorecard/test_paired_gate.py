"""The paired regression gate (issue 20): ``compare(..., gate=...)``, ``faithtests compare --gate``, the
regression table's moved items, and three reproducibility cases on real suite runs (a run against
itself, two data seeds of one checkpoint, reference:clip against its colour-blind twin)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from faithtests import cli
from faithtests.reports.comparison_text import format_comparison
from faithtests.reports.html import render_html
from faithtests.scorecard.baseline import compare
from faithtests.scorecard.model import ItemValues, MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard, read_scorecard, write_scorecard
from faithtests.testing.suite_run import cache_args, env_cache

ROOT = Path(__file__).resolve().parents[2]


def _sc(value: float | None, per_item: dict[str, float] | None = None, *,
        ci: tuple[float, float] | None = None, clusters: dict[str, str] | None = None,
        lower: bool = False) -> Scorecard:
    items = ItemValues.make(per_item, clusters) if per_item is not None else None
    r = MetricResult("s", "t.py::t", "PR", value, model="m", ci=ci, higher_is_better=not lower,
                     per_item=items)
    return Scorecard(tests=[TestRecord("t.py::t", "s", results=[r])])


def _binary(n_good: int, n: int) -> dict[str, float]:
    return {f"i{k}": float(k < n_good) for k in range(n)}


def test_self_comparison_is_zero_and_unchanged() -> None:
    sc = _sc(0.6, _binary(60, 100))
    for gate in ("point", "ci"):
        (d,) = compare(sc, sc, gate=gate).deltas  # type: ignore[arg-type]
        assert d.status == d.ci_status == "unchanged" and d.delta == 0.0 and d.delta_ci == (0.0, 0.0)
        assert d.basis == "paired" and d.paired is not None
        p = d.paired
        assert (p.n, p.good_to_bad, p.bad_to_good, p.mcnemar_p) == (100, 0, 0, 1.0)


def test_small_drop_is_a_point_regression_but_within_noise_under_ci() -> None:
    base, cur = _binary(60, 100), _binary(60, 100)
    cur["i0"] = cur["i1"] = 0.0  # two items good -> bad: 0.60 -> 0.58
    b, c = _sc(0.6, base), _sc(0.58, cur)
    point, ci = compare(c, b, gate="point"), compare(c, b, gate="ci")
    assert [d.status for d in point.deltas] == ["regression"] and not ci.regressions
    (d,) = ci.deltas
    assert d.status == "within noise" and d.paired is not None and d.paired.good_to_bad == 2
    assert d.paired.mcnemar_p == pytest.approx(0.5)  # 2 * C(2,0) / 2^2
    assert [m.item for m in d.moved] == ["i0", "i1"]


def test_large_drop_is_a_regression_under_ci_with_its_items() -> None:
    base = _binary(90, 100)
    cur = {**base, **{f"i{k}": 0.0 for k in range(40)}}
    cur["i95"] = 1.0  # one bad -> good, listed after the good -> bad ones
    c = compare(_sc(0.51, cur), _sc(0.9, base), "0.02", gate="ci")
    (d,) = c.regressions
    assert d.delta_ci is not None and d.delta_ci[1] < -0.02 and d.basis == "paired"
    assert d.paired is not None and (d.paired.good_to_bad, d.paired.bad_to_good) == (40, 1)
    assert len(d.moved) == 20 and d.moved[0].baseline == 1.0 and d.moved[0].current == 0.0
    js = c.to_json()
    assert js["gate"] == "ci" and js["deltas"][0]["paired"]["good_to_bad"] == 40
    text = format_comparison(c)
    assert "g>b=40 b>g=1" in text and "41 item(s) moved in t s/PR (m), worst first (first 20 shown):" in text
    assert "1 regression(s), 0 improvement(s), 0 new, 0 missing (tolerance 0.02, gate ci)" in text


def test_lower_is_better_and_clusters() -> None:
    base = {f"p{k}": 0.1 for k in range(40)}
    cur = {k: (0.5 if int(k[1:]) < 4 else 0.1) for k in base}  # 4 pairs of image 0 got much worse
    clusters = {k: f"img{int(k[1:]) // 4}" for k in base}
    c = compare(_sc(0.14, cur, clusters=clusters, lower=True), _sc(0.1, base, clusters=clusters, lower=True),
                gate="ci")
    (d,) = c.deltas
    # one image of ten moved: resampling images, a draw without image 0 has delta 0, so the CI reaches 0
    assert d.status == "within noise" and d.delta_ci is not None and d.delta_ci[0] == 0.0
    assert [m.item for m in d.moved[:1]] == ["p0"] and not d.paired.binary  # type: ignore[union-attr]


def test_unpaired_and_point_bases() -> None:
    c = compare(_sc(0.7, ci=(0.66, 0.74)), _sc(0.8, ci=(0.77, 0.83)), gate="ci")
    (d,) = c.deltas
    assert d.basis == "unpaired" and d.delta_ci == (pytest.approx(-0.15), pytest.approx(-0.05))
    assert d.status == "regression" and d.paired is None
    (p,) = compare(_sc(0.7), _sc(0.8), gate="ci").deltas  # no CI anywhere: the point rule, said so
    assert p.basis == "point" and p.delta_ci is None and p.status == "regression"
    (u,) = compare(_sc(None), _sc(0.8), gate="ci").deltas
    assert u.status == "regression"  # became undefined
    # a small overlap (two data seeds) is not paired: the unpaired CI is used
    x, y = _sc(0.5, {"a": 1.0, "x": 0.0}, ci=(0.2, 0.8)), _sc(0.5, {"a": 1.0, "y": 0.0}, ci=(0.2, 0.8))
    (o,) = compare(y, x, gate="ci").deltas
    # no paired counts on what was not paired
    assert o.basis == "unpaired" and o.paired is None and not o.moved


def test_a_shared_subset_moving_against_the_whole_metric_is_no_verdict() -> None:
    """Partial overlap: 100 shared items all 1 plus 60 baseline-only 0s (0.625), against the 100 shared
    with 10 turned to 0 (0.9): the whole metric improved, the shared items regressed. The paired CI
    alone would call a regression; the verdict is 'within noise' instead."""
    shared = {f"s{i}": 1.0 for i in range(100)}
    base_items = {**shared, **{f"b{i}": 0.0 for i in range(60)}}
    cur_items = {**shared, **{f"s{i}": 0.0 for i in range(10)}}
    (d,) = compare(_sc(0.9, cur_items), _sc(0.625, base_items), gate="ci").deltas
    assert d.basis == "paired" and d.delta_ci is not None and d.delta_ci[1] < 0
    assert d.status == "within noise" and d.ci_status == "within noise"


def test_compare_rejects_an_unknown_gate() -> None:
    with pytest.raises(ValueError, match=r"gate 'median' is not 'point' or 'ci'"):
        compare(_sc(0.5), _sc(0.5), gate="median")  # type: ignore[arg-type]


def test_cli_gate_option_and_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cur = _binary(60, 100), {**_binary(60, 100), "i0": 0.0, "i1": 0.0}
    a = write_scorecard(_sc(0.6, base), tmp_path / "a" / "scorecard.json")
    b_sc = _sc(0.58, cur)
    b = write_scorecard(b_sc, tmp_path / "b" / "scorecard.json")
    assert cli.main(["compare", str(a), str(b), "--all"]) == 1  # B recorded no gate: point
    assert "(tolerance 0, gate point)" in capsys.readouterr().out
    assert cli.main(["compare", str(a), str(b), "--all", "--gate", "ci"]) == 0
    out = capsys.readouterr().out
    assert "within noise" in out and "n=100 g>b=2 b>g=0 p=0.5" in out
    b_sc.fingerprint["gate"] = "ci"  # B was gated with ci: compare repeats that verdict
    write_scorecard(b_sc, tmp_path / "b" / "scorecard.json")
    assert cli.main(["compare", str(a), str(b), "--all"]) == 0
    assert cli.main(["compare", str(a), str(b), "--gate", "median"]) == 2
    assert "invalid choice: 'median'" in capsys.readouterr().err


def test_html_lists_the_moved_items() -> None:
    base = _binary(90, 100)
    cur = {**base, **{f"i{k}": 0.0 for k in range(40)}}
    b, c = _sc(0.9, base), _sc(0.5, cur)
    c.regressions = [d.to_json() for d in compare(c, b, gate="ci").regressions]
    html = render_html(c, b, gate="ci")
    assert "40 item(s) moved, worst first (first 20 shown) (baseline → current)" in html
    assert "<li>i0: 1 → 0</li>" in html
    assert "good→bad 40, bad→good 0" in html


# -- real suite runs (issue 20, "reproducibility of the comparison") ---------------------------------------

LGIP = ["suites/test_invariance.py", "suites/test_flip_sensitivity.py", "-k",
        "paraphrase_invariance or flip_positive_rate", "--faith-no-vlm-scorer", "--faith-limit", "20",
        "--faith-gate", "ci", "--faith-allow-insufficient"]  # exit 0/1: a check short of data is not a pass


def _suites(report: Path, *args: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytest", *LGIP, *args, "-p", "no:cacheprovider", "-q", "--faith-report",
           str(report)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    out: dict[str, Any] = json.loads((report / "scorecard.json").read_text())
    return out


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ...]:
    """One ``--faith-cache`` for this module's runs: the two colour-blind runs (one model, items and seed)
    compute its outputs once; ``$FAITH_TEST_CACHE`` (CI: its main job's outputs) also serves
    reference:clip's. A served row is the bytes the model computes: every scorecard is unchanged."""
    return cache_args(env_cache() or tmp_path_factory.mktemp("outputs"))


@pytest.fixture(scope="module")
def clip_seed0(tmp_path_factory: pytest.TempPathFactory, outputs: tuple[str, ...]) -> Path:
    report = tmp_path_factory.mktemp("seed0")
    _suites(report, "--faith-model", "m=reference:clip", "--faith-seed", "0", *outputs)
    return report / "scorecard.json"


def test_suite_run_against_itself(clip_seed0: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = read_scorecard(clip_seed0)
    c = compare(sc, sc, gate="ci")
    assert c.deltas and not c.regressions and all(d.status == "unchanged" for d in c.deltas)
    paired = [d for d in c.deltas if d.basis == "paired"]
    assert {d.metric for d in paired} == {"PR", "E_inv"}  # the suites link their headline metrics
    assert all(d.delta == 0.0 and d.paired and d.paired.delta == 0.0 for d in paired)
    assert cli.main(["compare", str(clip_seed0), str(clip_seed0), "--all"]) == 0


def test_two_seeds_of_one_checkpoint_no_regression_under_ci(clip_seed0: Path, tmp_path: Path,
                                                            outputs: tuple[str, ...]) -> None:
    sc = _suites(tmp_path, "--faith-model", "m=reference:clip", "--faith-seed", "1",
                 "--faith-baseline", str(clip_seed0), "--faith-allow-mismatch", "seed", *outputs)
    assert sc["regressions"] == []


def test_colourblind_twin_regresses_colour_flips_under_ci(clip_seed0: Path, tmp_path: Path,
                                                          outputs: tuple[str, ...]) -> None:
    sc = _suites(tmp_path, "--faith-model", "m=reference:clip-colorblind", "--faith-seed", "0",
                 "--faith-baseline", str(clip_seed0), "--faith-regression-all",  # PR[type=color] is unchecked
                 *outputs)
    regs = {(r["test"].split("::")[1], r["metric"], r["slice"]): r for r in sc["regressions"]}
    colour = [r for k, r in regs.items() if k[1] == "PR" and k[2] in ("type=color", "color")]
    assert len(colour) == 2, sorted(regs)  # test_flip_positive_rate[all] per type and [color]
    for r in colour:
        assert r["basis"] == "paired" and r["delta_ci"][1] < 0
        assert r["paired"]["good_to_bad"] > r["paired"]["bad_to_good"] and r["paired"]["mcnemar_p"] < 0.01
        assert r["moved"] and r["moved"][0]["baseline"] == 1.0 and r["moved"][0]["current"] == 0.0
    assert not any(k[1] == "PR" and k[2] in ("type=object", "object") for k in regs)
    html = (tmp_path / "scorecard.html").read_text()
    assert "item(s) moved, worst first" in html and colour[0]["moved"][0]["item"].split("|")[0] in html


def test_default_gate_and_compare_agree_on_the_colourblind_twin(clip_seed0: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str],
                                                                outputs: tuple[str, ...]) -> None:
    """Issue 31 item 2: under the default rule (paired, checked metrics) the pytest gate and `faithtests
    compare` on the same two scorecards list the same regressions, PR[color] among them; unchecked moves
    (PR[type=color] of the all-flips test) are `moved`, not regressions."""
    sc = _suites(tmp_path, "--faith-model", "m=reference:clip-colorblind", "--faith-seed", "0",
                 "--faith-baseline", str(clip_seed0), *outputs)
    gate = {(r["test"], r["metric"], r["slice"]) for r in sc["regressions"]}
    capsys.readouterr()
    assert cli.main(["compare", str(clip_seed0), str(tmp_path), "--json"]) == 1
    deltas = json.loads(capsys.readouterr().out)["deltas"]
    assert gate == {(d["test"], d["metric"], d["slice"]) for d in deltas if d["status"] == "regression"}
    assert any(k[1:] == ("PR", "color") for k in gate)
    assert any((d["metric"], d["slice"], d["status"]) == ("PR", "type=color", "moved") for d in deltas)
