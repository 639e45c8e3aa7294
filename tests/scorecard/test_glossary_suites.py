"""Every metric the suites record has a definition (issue 33): a default run of every suite writes a
glossary with no ``undefined`` entry, and its declared directions are the ones its results carry. A
planted metric shows that the check fails. Read from a run, not from the suites' source (issue 48):
the recorder takes each metric's direction from this glossary and refuses a contradicting one
(tests/scorecard/test_declared_direction.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithtests.manifest import glossary_terms
from faithtests.protocols import manifests
from faithtests.scorecard.glossary import base_name, for_recorded, term_for
from faithtests.scorecard.model import MetricResult
from faithtests.scorecard.scorecard import Scorecard, read_scorecard


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
