"""Issue 48, "adding a metric touches its protocol folder and thresholds.toml only", checked by doing it
(docs/writing-suites.md, "Adding a metric"): in a copy of the repository, SPD-Faith gets a new gated
metric, ``count_within_one`` (the share of edited pairs whose counted differences are within one of the
true number), by three edits: its term in ``protocols/spdfaith/terms.py``, one more ``MetricRow`` marked
``gated`` in ``protocols/spdfaith/results.py``'s ``counts``, and its floor in ``suites/thresholds.toml``.
No suite file is touched. Then the suite's count test runs in the copy on the reference VLM: the metric
is recorded with its term's direction and PASSes its floor; a user thresholds file above its value FAILS
it (the gate is real); ``faithtests explain`` knows it; ``git status`` shows only the three files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _repo_copy import changed_paths, imported_from, run_in_copy, run_suite, tail

TERMS = "faithtests/protocols/spdfaith/terms.py"
RESULTS = "faithtests/protocols/spdfaith/results.py"
THRESHOLDS = "suites/thresholds.toml"
SUITE = "difference_consistency"
METRIC = "count_within_one"

#: The term, inserted before DQR's (the glossary is a tuple of MetricTerm)
TERM = ('''    MetricTerm("count_within_one", "Share of edited pairs where the model's count of '''
        '''differences is within one of the true number of edits.", "higher", "share of edited pairs", '''
        '''PAPER, "walkthrough"),
''')
TERM_BEFORE = '    MetricTerm("DQR", '
#: The row, computed in ``counts`` beside DQR and DS_count, over all edited pairs with a count
ROW = '''    near = (np.abs(n - m) <= 1).astype(np.float64)
    out.append(Row("count_within_one", float(near.mean()), len(rows), boot.ci(near, stim), gated=True))
'''
ROW_BEFORE = "    same = [i for i in range(len(recs)) if ans.count[i] >= 0 and recs[i].m == 0]\n"
TABLE = f'''
[{SUITE}.{METRIC}]
# A walkthrough floor: a model that cannot count the differences of an image pair to within one fails.
value = 0.5
kind = "floor"
means = "the model's count of differences is off by more than one on most edited pairs"
'''


def _insert(path: Path, before: str, text: str) -> None:
    source = path.read_text(encoding="utf-8")
    assert source.count(before) == 1, f"{path}: the anchor {before!r} moved; update the walkthrough"
    path.write_text(source.replace(before, text + before), encoding="utf-8")


def add_metric(copy: Path) -> None:
    """Exactly the steps of docs/writing-suites.md, "Adding a metric"."""
    _insert(copy / TERMS, TERM_BEFORE, TERM)
    _insert(copy / RESULTS, ROW_BEFORE, ROW)
    with (copy / THRESHOLDS).open("a", encoding="utf-8") as f:
        f.write(TABLE)


def run_count_test(copy: Path, report: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    """The suite's count test (gated variant) on the reference VLM in the copy: exit status, the new
    metric's result, the terminal output."""
    return run_suite(copy, report, f"suites/test_{SUITE}.py", "-n", "0", "-k",
                     "test_difference_count and base", *extra, suite=SUITE, metric=METRIC)


def test_a_gated_metric_is_its_protocol_folder_and_a_thresholds_entry(repo_copy: Path,
                                                                       tmp_path: Path) -> None:
    copy = repo_copy
    assert imported_from(copy).is_relative_to(copy), "the copy must import its own faithtests"
    add_metric(copy)

    status, row, _ = run_count_test(copy, tmp_path / "default")
    assert status == 0 and row["verdict"] == "pass", row
    assert row["higher_is_better"] is True and row["slice"] is None, row  # the term's direction
    assert (row["op"], row["threshold"], row["gate_kind"]) == (">=", 0.5, "floor"), row
    assert row["value"] >= 0.5 and row["n"] >= 10 and row["ci"] is not None, row

    # the gate is real: a user file above the value fails the same check, with the usual message
    above = round(row["value"] + 0.01, 6)
    mine = tmp_path / "mine.toml"
    mine.write_text(f"[{SUITE}]\n{METRIC} = {above}\n", encoding="utf-8")
    status, raised, out = run_count_test(copy, tmp_path / "raised", "--faith-thresholds", str(mine))
    assert status == 1 and raised["verdict"] == "fail", raised
    assert (raised["value"], raised["threshold"]) == (row["value"], above), raised
    assert f"{SUITE}/{METRIC} = {row['value']:.3f}" in out and f"fails >= {above:.3f}" in out, out[-3000:]

    explained = run_in_copy(copy, "faithtests.cli", "explain", METRIC, timeout=60)
    assert explained.returncode == 0 and "higher is better" in explained.stdout, tail(explained)

    changed = changed_paths(copy)
    assert changed == {TERMS, RESULTS, THRESHOLDS}, f"a new metric touched more than its protocol: {changed}"
