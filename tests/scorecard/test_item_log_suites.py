"""The item log of a small run of every suite (the session's ``pytest suites/ --faith-limit 6``, as a user
runs it, shared with other tests through the ``small_default_run`` fixture): each
logged (test, model, variant, metric, slice) holds exactly the scorecard's n rows, every test that scored
items (item outcomes or per-item values) logged them, and every row carries the model's output."""

from __future__ import annotations

import json
from pathlib import Path

from faithtests.scorecard.item_log import count_mismatches, iter_item_log
from faithtests.scorecard.scorecard import read_scorecard


def test_small_run_logs_every_scored_item(small_default_run: Path) -> None:
    report = small_default_run  # read-only
    sc = read_scorecard(report)
    rows = list(iter_item_log(report))
    assert count_mismatches(sc.results, rows) == []
    logged = {r["test"] for r in rows}
    scored = {t.test for t in sc.tests if t.items or any(r.per_item for r in t.results)}
    assert scored and scored <= logged, sorted(scored - logged)
    assert {r["suite"] for r in rows} == {t.suite for t in sc.tests if t.test in scored}
    assert all(r["output"] for r in rows), [r for r in rows if not r["output"]][:3]
    card = json.loads((report / "scorecard.json").read_text())
    assert all("outputs" not in t for t in card["tests"])  # the outputs are in the log only
    assert 'id="viewer-items"' in (report / "items.html").read_text()
