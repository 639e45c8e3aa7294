"""The scorecard's "Invalid inputs" line: unusable inputs that can touch a verdict, apart from notes.

An invalid count can touch a verdict only through a check of its own test and model/variant: the coverage
rule (:func:`faithtests.scorecard.coverage.coverage_problem`) reads exactly those counts, and a fatal kind
(:func:`faithtests.scorecard.kinds.is_fatal`) fails whatever it touches. A count recorded by a test that
checks nothing for its model/variant (a diagnostic: A6/A7 *not applicable* to image stimuli, A5 verdicts
a model never taught that format cannot give, claims a judge could not parse in an ungated variant) is
expected by design and changes no verdict: it is a *coverage note*, listed apart and folded, while a count
a check reads stays prominent under the banner. The marker is structural (which results the count
shares a test, model and variant with), never a pattern in the kind's wording.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from faithtests.scorecard.coverage import coverage_line, input_coverage, truncation_lines
from faithtests.scorecard.kinds import is_fatal
from faithtests.scorecard.model import InvalidCount, TestRecord
from faithtests.scorecard.scorecard import Scorecard

__all__ = ["CoverageSplit", "split_coverage", "touches_check"]


def touches_check(record: TestRecord, inv: InvalidCount) -> bool:
    """Whether ``inv`` can change a verdict: a fatal kind, or a checked result (one with a threshold) of
    its test for its model/variant (a model-less count applies to every model, as the coverage rule
    reads it)."""
    return is_fatal(inv.kind) or any(
        r.threshold is not None and r.op is not None and inv.model in ("", r.model)
        and inv.variant == r.variant for r in record.results)


@dataclass
class CoverageSplit:
    """The run's coverage lines: ``lines`` (counts a check reads, once per dataset) and ``notes``
    (counts no check reads, and inputs cut at a model's context), each with its total of inputs."""

    total: int = 0
    lines: list[str] = field(default_factory=list)
    notes_total: int = 0
    notes: list[str] = field(default_factory=list)


def _only(sc: Scorecard, keep: bool) -> Scorecard:
    """``sc`` with each test's invalid counts cut to those that touch a check (``keep``) or none."""
    tests = [replace(t, invalid=[i for i in t.invalid if touches_check(t, i) is keep]) for t in sc.tests]
    return Scorecard(fingerprint=sc.fingerprint, tests=tests)


def split_coverage(sc: Scorecard) -> CoverageSplit:
    """Input coverage counted once per dataset (:func:`input_coverage`), split by whether a check reads
    it; a (dataset, kind) a check reads anywhere is counted with the checks, never twice."""
    gating = [c for c in input_coverage(_only(sc, True)) if c.missing]
    read = {(c.dataset, c.kind) for c in gating}
    notes = [c for c in input_coverage(_only(sc, False)) if c.missing and (c.dataset, c.kind) not in read]
    return CoverageSplit(sum(c.missing for c in gating), [coverage_line(c) for c in gating],
                         sum(c.missing for c in notes),
                         [coverage_line(c) for c in notes] + truncation_lines(sc))
