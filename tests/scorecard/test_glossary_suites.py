"""Every metric the suites record has a definition (issue 33): statically, each metric name the suites
and protocols spell out (a literal, or an f-string's pattern) is in a protocol's glossary; end to end, a
default run of every suite writes a glossary with no ``undefined`` entry, and its declared directions
agree with the checked results. A planted metric shows that both checks fail."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from faithtests.manifest import glossary_terms
from faithtests.protocols import manifests
from faithtests.scorecard.glossary import base_name, for_recorded, term_for
from faithtests.scorecard.model import MetricResult
from faithtests.scorecard.scorecard import Scorecard, read_scorecard

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*(ROOT / "suites").glob("*.py"), *(ROOT / "faithtests" / "protocols").rglob("*.py")]
#: calls whose first string argument (second for ``fail_unscored(faith, NAME)``) is a metric name
RECORDERS = {"metric": 0, "Row": 0, "fail_unscored": 1}


def _callee(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")


def _pattern(arg: ast.expr) -> str | None:
    """A literal name as itself, an f-string as a regex (each placeholder matches anything)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return re.escape(arg.value)
    if isinstance(arg, ast.JoinedStr):
        return "".join(re.escape(str(v.value)) if isinstance(v, ast.Constant) else ".+" for v in arg.values)
    return None  # a variable: the end-to-end run below covers it


def metric_patterns(paths: list[Path]) -> dict[str, str]:
    """regex -> where it is recorded, for every metric name spelled out in ``paths``."""
    found: dict[str, str] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _callee(node) in RECORDERS:
                at = RECORDERS[_callee(node)]
                pattern = _pattern(node.args[at]) if len(node.args) > at else None
                if pattern is not None:
                    found.setdefault(pattern, f"{path.relative_to(path.parents[1])}:{node.lineno}")
    return found


def undefined_patterns(patterns: dict[str, str], names: set[str]) -> list[str]:
    return sorted(f"{p} ({where})" for p, where in patterns.items()
                  if not any(re.fullmatch(p, n) for n in names))


def test_every_metric_name_spelled_out_is_defined() -> None:
    patterns = metric_patterns(SOURCES)
    assert len(patterns) >= 60, sorted(patterns)  # the scan found the suites' names: it cannot pass empty
    assert not undefined_patterns(patterns, set(glossary_terms(manifests())))


def test_the_scan_finds_a_planted_metric(tmp_path: Path) -> None:
    planted = tmp_path / "suites" / "test_planted.py"
    planted.parent.mkdir()
    planted.write_text('def test_x(faith):\n    faith.metric("planted_metric", 1.0)\n'
                       '    faith.metric(f"planted_{faith}", 1.0)\n')
    missing = undefined_patterns(metric_patterns([planted]), set(glossary_terms(manifests())))
    assert missing == ["planted_.+ (suites/test_planted.py:3)", "planted_metric (suites/test_planted.py:2)"]


@pytest.fixture(scope="module")
def default_run(small_default_run: Path) -> Scorecard:
    """Every suite, model, variant and stage of ``pytest suites/`` on the bundled reference models, on 6
    items each (the session's shared run): the metric names a run records do not depend on the item
    count, since a check with too few items is recorded as insufficient, not left out."""
    return read_scorecard(small_default_run)


def test_every_metric_a_default_run_records_is_defined(default_run: Scorecard) -> None:
    recorded = {base_name(r.metric) for r in default_run.results}
    assert len(recorded) >= 60, sorted(recorded)
    assert set(default_run.glossary) == recorded
    undefined = sorted(n for n in default_run.glossary if term_for(n, default_run.glossary) is None)
    assert not undefined, f"recorded metrics without a definition: {undefined}"


def test_declared_directions_agree_with_the_results(default_run: Scorecard) -> None:
    """A declared direction is the one every result of the metric is recorded (and checked) with; a
    term saying the opposite would tell a reader the wrong way round."""
    wrong = set()
    for r in default_run.results:
        term = term_for(r.metric, default_run.glossary)
        if term is None or term.direction == "none":
            continue
        if (term.direction == "higher") != r.higher_is_better:
            wrong.add(f"{r.metric}: declared {term.direction}, higher_is_better={r.higher_is_better}")
    assert not wrong, sorted(wrong)


def test_a_planted_metric_in_a_real_run_is_reported(default_run: Scorecard) -> None:
    planted = MetricResult("invariance", "x.py::t", "planted_metric", 0.5)
    names = [r.metric for r in default_run.results] + [planted.metric]
    glossary, missing = for_recorded(names, glossary_terms(manifests()))
    assert missing == ["planted_metric"]
    assert glossary["planted_metric"]["sentence"] == "undefined"
