"""Input coverage: how much of each dataset a run could use, counted honestly, and the coverage rule.

Tests of one dataset report the same unusable inputs again (every test of one suite on SugarCrepe counts the
same missing COCO images), so a run's coverage is counted once per dataset, never summed over tests:
:func:`input_coverage` takes, per (dataset, kind), the largest count any test reported. A kind whose
count differs between models (an unparseable answer, a non-finite score) is a property of the model and
gets one row per model; a kind every model saw equally (a missing image) is a property of the data
(``model=""``). Pure functions over the scorecard model: no pytest, no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from faithtests.scorecard.kinds import NONFINITE, is_fatal
from faithtests.scorecard.model import InvalidCount, MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard
from faithtests.scorecard.thresholds import CoverageRule

__all__ = ["NONFINITE", "DatasetCoverage", "coverage_line", "coverage_problem", "input_coverage",
           "truncation_lines"]


@dataclass(frozen=True)
class DatasetCoverage:
    """Inputs of one dataset that could not be used, of one kind, counted once."""

    dataset: str  # "world", "coco", "world+sugarcrepe", ...; "" when the tests carry no dataset
    kind: str  # the InvalidCount kind: "missing image", "non-finite score", ...
    missing: int  # inputs of this kind, once per dataset (the largest count of any test), never summed
    total: int | None  # out of this many inputs (None when no test said)
    model: str = ""  # "" when every model saw the same count (the data's property), else the model label
    variant: str = "base"
    tests: tuple[str, ...] = ()  # the tests that reported it

    @property
    def fraction(self) -> float | None:
        return self.missing / self.total if self.total else None


def dataset_of(record: TestRecord) -> str:
    """The dataset a test ran on (its dataset parameter), "" when unknown."""
    return record.dataset


def _key(i: InvalidCount) -> tuple[int, int]:
    return (i.count, i.total or 0)


def input_coverage(sc: Scorecard) -> list[DatasetCoverage]:
    """One row per (dataset, kind) (per model where models differ), sorted by dataset, kind, model."""
    groups: dict[tuple[str, str], list[tuple[TestRecord, InvalidCount]]] = {}
    for rec in sc.tests:
        for inv in rec.invalid:
            groups.setdefault((dataset_of(rec), inv.kind), []).append((rec, inv))
    out: list[DatasetCoverage] = []
    for (dataset, kind), hits in groups.items():
        per_model: dict[tuple[str, str], list[tuple[TestRecord, InvalidCount]]] = {}
        for rec, inv in hits:
            per_model.setdefault((inv.model, inv.variant), []).append((rec, inv))
        best = {m: max(v, key=lambda h: _key(h[1])) for m, v in per_model.items()}
        if len({_key(inv) for _, inv in best.values()}) == 1:  # the same for every model: the data's
            _, inv = next(iter(best.values()))
            out.append(DatasetCoverage(dataset, kind, inv.count, inv.total,
                                       tests=tuple(sorted({r.test for r, _ in hits}))))
            continue
        for (model, variant), (_, inv) in best.items():
            out.append(DatasetCoverage(dataset, kind, inv.count, inv.total, model, variant,
                                       tests=tuple(sorted({r.test for r, _ in per_model[(model, variant)]}))))
    return sorted(out, key=lambda c: (c.dataset, c.kind, c.model, c.variant))


def truncation_lines(sc: Scorecard) -> list[str]:
    """One coverage line per model and input kind whose inputs were cut at the model's context length
    (the fingerprint's ``truncated_inputs``, :mod:`faithtests.models.truncation`): the model scored a
    shorter text than the data holds, e.g. ``coverage model clip: 12 of 500 captions truncated to its
    77-token context (2.4%; longest 131 tokens)``. None when nothing was cut."""
    out: list[str] = []
    models = sc.fingerprint.get("models")
    for label, info in sorted(models.items()) if isinstance(models, dict) else ():
        counts = info.get("truncated_inputs") if isinstance(info, dict) else None
        for kind, c in sorted(counts.items()) if isinstance(counts, dict) else ():
            n, of = (c.get("truncated"), c.get("checked")) if isinstance(c, dict) else (None, None)
            if not isinstance(n, int) or n <= 0:
                continue
            pct = f"{n / of:.1%}; " if isinstance(of, int) and of > 0 else ""
            out.append(f"coverage model {label}: {n} of {of} {kind}s truncated to its {c.get('limit')}-token "
                       f"context ({pct}longest {c.get('longest_tokens')} tokens)")
    return out


def coverage_line(c: DatasetCoverage) -> str:
    """``coverage sugarcrepe: 7300 of 7347 inputs missing image (99.4%)``."""
    where = c.dataset or "(no dataset)"
    who = f" [model={c.model}, variant={c.variant}]" if c.model else ""
    out_of = f" of {c.total} inputs" if c.total is not None else " input(s)"
    pct = f" ({c.fraction:.1%})" if c.fraction is not None else ""
    return f"coverage {where}: {c.missing}{out_of} {c.kind}{pct}{who}"


def nonfinite_problem(i: InvalidCount) -> str:
    of = f" of {i.total}" if i.total is not None else ""
    eg = f"e.g. {', '.join(i.examples[:3])}; " if i.examples else ""
    return (f"model {i.model or '-'} produced non-finite outputs (NaN or inf) for {i.count}{of} items "
            f"({eg}kind '{NONFINITE}'): its outputs are broken (an overflowing dtype such as float16, or bad "
            "weights), so no verdict can be given")


def limit_hint(n: int | None, needed: int, limit: int | None) -> str:
    """``; --faith-limit 50 gives about 10``: the limit whose share of items reaches ``needed``, as this
    run's ``n`` items came from ``limit`` (items grow in proportion to the limit); "" without a limit."""
    if not limit or not n:
        return ""
    return f"; --faith-limit {math.ceil(limit * needed / n)} gives about {needed}"


def coverage_problem(r: MetricResult, invalid: Iterable[InvalidCount], rule: CoverageRule,
                     limit: int | None = None) -> str | None:
    """Why the check ``r`` has too little usable data for a verdict, or None. ``invalid`` are its test's
    counts so far; those of another model/variant are ignored (model-less ones apply to every model).
    Under ``--faith-limit`` (``limit``) a too-small n says which limit would give the minimum."""
    mine = [i for i in invalid if i.model in ("", r.model) and i.variant == r.variant and i.count]
    problems = [nonfinite_problem(i) for i in mine if is_fatal(i.kind)]  # the kind, never a pattern
    if r.n is not None and r.n < rule.min_n:
        problems.append(f"n={r.n} < min_n {rule.min_n} (too few items for a verdict"
                        f"{limit_hint(r.n, rule.min_n, limit)})")
    # kinds out of one total add up (30% missing images and 30% unparseable answers leave 40% valid);
    # an input is rejected under one kind, so the sum does not count it twice
    by_total: dict[int, list[InvalidCount]] = {}
    for i in mine:
        if i.total and not is_fatal(i.kind):
            by_total.setdefault(i.total, []).append(i)
    for total, kinds in sorted(by_total.items()):
        bad = min(total, sum(i.count for i in kinds))
        valid = 1.0 - bad / total
        if valid < rule.min_valid_fraction:
            what = " + ".join(f"{i.count} {i.kind}" for i in kinds)
            problems.append(f"only {total - bad} of {total} inputs valid ({valid:.1%}; {what}) "
                            f"< min_valid_fraction {rule.min_valid_fraction:g}")
    if not problems:
        return None
    return "; ".join(problems) + f" [coverage rule from {rule.source}]"



def _resolving_n(n: int | None, value: float, far: float, threshold: float, limit: int) -> str:
    """``; about 240 items resolve this gap at this effect size (...)``: the n at which the CI's
    threshold-side half-width, shrinking as 1/sqrt(n), no longer reaches the threshold."""
    gap, half = abs(value - threshold), abs(far - value)
    if not n or gap <= 0 or half <= 0:
        return ""  # on the threshold: no n resolves it
    needed = math.ceil(n * (half / gap) ** 2)
    return (f"; about {needed} items would resolve a gap of {gap:.3g} (the CI half-width {half:.3g} "
            f"shrinks as 1/sqrt(n)){limit_hint(n, needed, limit)}")


def short_of_data(r: MetricResult, gate: str, ok: bool, op: str, threshold: float, limit: int | None,
                  min_n: int | None, unit: str = "items") -> list[str]:
    """Why a check has too little data beyond the coverage rule (issue 31: INSUFFICIENT, not FAIL): fewer
    than the check's own ``min_n`` (``n`` counts ``unit``), an undefined CI under gate ``ci`` (no bound
    to compare), or, under ``--faith-limit``, a point failure whose 95% CI reaches past the threshold
    (the reduced sample cannot confirm it; on the whole data the point gate's verdict stands)."""
    out: list[str] = []
    if min_n is not None and (r.n is None or r.n < min_n):
        out.append(f"needs >= {min_n} {unit}, got {r.n if r.n is not None else 'none'}"
                   + limit_hint(r.n, min_n, limit))
    if gate == "ci" and r.ci is None and r.value is not None:
        out.append(f"CI {r.ci_note or 'undefined'}: no bound to compare")
    if limit is not None and gate == "point" and not ok and r.ci is not None and r.value is not None:
        far = r.ci[1] if op in (">=", ">") else r.ci[0]  # the bound on the passing side
        if (far >= threshold if op in (">=", ">") else far <= threshold):
            out.append(f"the 95% CI reaches past the threshold at n={r.n} under --faith-limit {limit}: "
                       f"the failure could be sample size{_resolving_n(r.n, r.value, far, threshold, limit)}")
    return out
