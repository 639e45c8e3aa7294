"""Every threshold in ``suites/thresholds.toml`` is checked by a suite (issue 15): a key that no
``faith.check`` reads is a gate that never fires, yet reads as one.

Read from what runs check, not from the suites' source (issue 48: no test parses a suite): the
session's small default run checks every key but the strength-bin slices of the two other binnings,
which the flip test checks under ``--faith-lgip-bins paper`` (on the world and on COCO-MINI: on the
world no flip falls in the paper's weak bin, on COCO-MINI none in its strong bin) and ``pooled``."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from faithtests.protocols import load_suite_thresholds
from faithtests.scorecard.thresholds import Thresholds, split_key
from faithtests.testing.suite_run import env_cache_args, run_small_default

ROOT = Path(__file__).resolve().parents[2]
Checked = set[tuple[str, str, str | None]]  # (suite, metric, slice) of each result a check judged


def checked_in(reports: Iterable[Path]) -> Checked:
    out: Checked = set()
    for report in reports:
        card = json.loads((report / "scorecard.json").read_text(encoding="utf-8"))
        out |= {(r["suite"], r["metric"], r["slice"]) for r in card["results"] if r.get("op") is not None}
    return out


def unchecked(th: Thresholds, checked: Checked) -> list[str]:
    """``[suite] key`` of each threshold no result was judged against: a metric key counts when any
    slice of its metric was checked (its value applies to the declared slices), a slice key only when
    that slice was."""
    out = []
    for suite in th.suites():
        for key in th.entries(suite):
            metric, sl = split_key(key)
            if not any(s == suite and m == metric and (sl is None or got == sl) for s, m, got in checked):
                out.append(f"[{suite}] {key}")
    return out


def test_unchecked_names_each_key_no_run_judged() -> None:
    th = load_suite_thresholds(ROOT / "suites" / "thresholds.toml", default_required=True)
    assert len(unchecked(th, set())) == sum(len(th.entries(s)) for s in th.suites())
    some = {("flip_sensitivity", "PR", "color"), ("invariance", "E_inv", None)}
    missing = unchecked(th, some)
    assert "[flip_sensitivity] PR" not in missing and "[invariance] E_inv" not in missing
    assert "[flip_sensitivity] PR[color]" not in missing and "[flip_sensitivity] PR[number]" in missing
    assert "[invariance] E_inv_rel" in missing


def test_every_threshold_key_is_checked_by_a_run(small_default_run: Path, tmp_path: Path,
                                                 shared_data: Path) -> None:
    flips = ("-k", "test_flip_strength_bins", *env_cache_args())
    paper = run_small_default(ROOT, tmp_path / "paper", *flips, "--faith-lgip-bins", "paper",
                              "--faith-data", f"coco={shared_data / 'coco-mini'}")
    pooled = run_small_default(ROOT, tmp_path / "pooled", *flips, "--faith-lgip-bins", "pooled")
    th = load_suite_thresholds(ROOT / "suites" / "thresholds.toml", default_required=True)
    missing = unchecked(th, checked_in([small_default_run, paper, pooled]))
    assert not missing, f"thresholds no suite checks (check them or remove them): {missing}"
