"""The first screen of the scorecard: the ship banner, one verdict per model/variant, and the regression
list.

The banner (:func:`ship_banner`) is the page's headline: DO NOT SHIP when any verdict row fails (a
failed check, a regression, a broken test), INSUFFICIENT DATA when none fails but one has too little data,
the run did not finish or nothing was checked, SHIP otherwise; it counts the failing checks and
regressions. The run's status is shown beside it, never as the headline.

A verdict row answers "ship or not" for one column of the tables: FAIL when any of its checks failed,
it regressed against the baseline, or one of its tests failed or errored without a failed check to
show for it; INSUFFICIENT (never a pass) when none of that happened but a check or test had too little
data for a verdict; PASS when it has checks and none of that happened; NO CHECKS otherwise. Every failing
check and regression is named and links to its row in the suite's main metric table.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from faithtests.reports.render_views import Column, Key, fmt, metric_label, slug, strip_file, test_params
from faithtests.scorecard.gate_kinds import kind_word
from faithtests.scorecard.model import TestRecord, test_key
from faithtests.scorecard.scorecard import Scorecard


@dataclass
class Link:
    text: str
    href: str  # an element id on the page, without "#"
    title: str = ""


@dataclass
class Verdict:
    column: str
    anchor: str
    passed: int = 0
    failed: list[Link] = field(default_factory=list)
    inconclusive: list[Link] = field(default_factory=list)  # the CI straddles the threshold
    regressions: list[Link] = field(default_factory=list)
    broken_tests: list[Link] = field(default_factory=list)  # failed/errored tests without a failed check
    insufficient: list[Link] = field(default_factory=list)  # checks and tests with too little data
    model: str = ""
    variant: str = "base"
    unchecked: list[str] = field(default_factory=list)  # the model's variants without checks, folded in

    @property
    def status(self) -> str:
        if self.failed or self.regressions or self.broken_tests:
            return "fail"
        if self.insufficient:
            return "insufficient"
        return "pass" if self.passed else "none"

    @property
    def label(self) -> str:
        labels = {"fail": "FAIL", "insufficient": "INSUFFICIENT", "pass": "PASS", "none": "NO CHECKS"}
        return labels[self.status]


def _dataset(t: TestRecord) -> str:
    return str(getattr(t, "dataset", "") or "")


def _context(t: TestRecord, model: str) -> str:
    """What tells two runs of one metric apart: the dataset, else the params without the model label."""
    ds = _dataset(t)
    if ds:
        return ds
    params = test_params(t.test).replace(model, "").replace("--", "-").strip("-") if model else ""
    return params or test_params(t.test)


_Failing = dict[Column, list[tuple[str, str, str, TestRecord]]]  # (label, href, suite, test) per column


class _Columns(dict[Column, Verdict]):
    """The verdict rows by column, each made on first use."""

    def get_or_add(self, col: Column) -> Verdict:
        if col not in self:
            self[col] = Verdict(col.label, slug("v-", col.model, col.variant), model=col.model,
                                variant=col.variant)
        return self[col]


def _add_results(by_col: _Columns, t: TestRecord, anchors: dict[Key, str], failing: _Failing) -> None:
    """A test's checks: passes, inconclusive counts and insufficient checks now; failures in ``failing``
    (they are named once every test is seen, to tell apart two failures of one metric)."""
    for r in t.results:
        v = by_col.get_or_add(Column(r.model, r.variant))
        v.passed += r.passed is True
        if r.inconclusive:
            v.inconclusive.append(Link(metric_label(r.metric, r.slice), anchors.get(r.key, ""),
                                       f"{r.suite}: the 95% CI straddles the threshold"))
        if r.insufficient and r.passed is False:
            v.insufficient.append(Link(metric_label(r.metric, r.slice), anchors.get(r.key, ""),
                                       f"{r.suite}: {r.coverage or ''}"[:300]))
        elif r.passed is False:
            kind = f" ({kind_word(r.gate_kind)})" if r.gate_kind else ""
            failing[Column(r.model, r.variant)].append(
                (metric_label(r.metric, r.slice) + kind, anchors.get(r.key, ""), r.suite, t))


def _add_outcome(by_col: _Columns, t: TestRecord, suite_anchor: dict[str, str]) -> None:
    """A test that ran out of data, or failed/errored, without a check saying so: every column it
    recorded (the "(no model)" row when it recorded nothing)."""
    cols = {Column(r.model, r.variant) for r in t.results} or {Column("", "base")}
    if t.outcome == "insufficient" and not any(r.insufficient for r in t.results):
        for col in cols:
            by_col.get_or_add(col).insufficient.append(
                Link(f"test {strip_file(t.test)}", suite_anchor.get(t.suite, ""), t.message[:300]))
    if t.outcome in ("failed", "error") and not any(r.passed is False for r in t.results):
        link = Link(strip_file(t.test), suite_anchor.get(t.suite, ""), t.message[:300])
        for col in cols:
            by_col.get_or_add(col).broken_tests.append(link)


def _add_failed(by_col: _Columns, failing: _Failing) -> None:
    """Failed checks, a label shared by two failures of one column told apart by its context."""
    for col, items in failing.items():
        seen = Counter(text for text, *_ in items)
        for text, href, suite, t in items:
            shown = text if seen[text] == 1 else f"{text} · {_context(t, col.model)}"
            by_col.get_or_add(col).failed.append(Link(shown, href, f"{suite}: {strip_file(t.test)}"))


def verdicts(
    sc: Scorecard, anchors: dict[Key, str], suite_anchor: dict[str, str], regressed: list[Key]
) -> list[Verdict]:
    """One :class:`Verdict` per model/variant, plus a trailing "(no model)" row for broken tests that
    recorded nothing (their failure is attributed to no column, so it must be visible on its own)."""
    by_col = _Columns()
    failing: _Failing = defaultdict(list)
    for t in sc.tests:
        _add_results(by_col, t, anchors, failing)
        _add_outcome(by_col, t, suite_anchor)
    _add_failed(by_col, failing)
    for key in regressed:
        by_col.get_or_add(Column(key[1], key[2])).regressions.append(
            Link(metric_label(key[3], key[4] or None), anchors.get(key, ""), strip_file(key[0])))
    return [by_col[c] for c in sorted(by_col, key=lambda c: (c.model == "", c.model, c.variant != "base",
                                                             c.variant))]


def fold_unchecked(rows: list[Verdict]) -> list[Verdict]:
    """The verdict rows with each variant that has no checks (NO CHECKS: a CECS or SAGE run recorded for
    a diagnostic) folded into its model's first row with a verdict ("+3 variants recorded without
    checks"); a model whose every row has none keeps its first. Order kept; the banner is unchanged (a
    row without checks counts nothing)."""
    by_model: dict[str, list[Verdict]] = defaultdict(list)
    for v in rows:
        by_model[v.model].append(v)
    out = []
    for v in rows:
        group = by_model[v.model]
        host = next((x for x in group if x.status != "none"), group[0])
        if v is host:
            v.unchecked = [x.variant for x in group if x.status == "none" and x is not host]
        if v is host or v.status != "none":
            out.append(v)
    return out


def _float(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def regression_key(reg: dict[str, Any]) -> Key:
    return (
        test_key(str(reg.get("test", ""))),
        str(reg.get("model", "")),
        str(reg.get("variant", "base")),
        str(reg.get("metric", "")),
        str(reg.get("slice") or ""),
    )


def _evidence(reg: dict[str, Any]) -> str:
    """``95% CI [-0.12, -0.05] (paired, n=320, good→bad 30, bad→good 4, McNemar p 2e-06)``, or ""."""
    ci, paired = reg.get("delta_ci"), reg.get("paired")
    if not ci:
        return ""
    parts = [str(reg.get("basis", ""))]
    if isinstance(paired, dict) and reg.get("basis") == "paired":
        parts.append(f"n={paired.get('n')}")
        if paired.get("mcnemar_p") is not None:
            parts += [f"good→bad {paired.get('good_to_bad')}", f"bad→good {paired.get('bad_to_good')}",
                      f"McNemar p {float(paired['mcnemar_p']):.2g}"]
    return f"95% CI [{float(ci[0]):+.3g}, {float(ci[1]):+.3g}] ({', '.join(parts)})"


def _moved(reg: dict[str, Any]) -> list[dict[str, str]]:
    """The items behind a paired regression, good→bad first, with both runs' values."""
    return [{"item": str(m.get("item", "")), "baseline": fmt(_float(m.get("baseline"))),
             "current": fmt(_float(m.get("current")))} for m in reg.get("moved") or []]


def regression_rows(
    sc: Scorecard, anchors: dict[Key, str], suite_anchor: dict[str, str]
) -> list[dict[str, Any]]:
    """The gate's regression dicts (``MetricDelta.to_json()``), each naming its parametrised test
    (``test_x[world-reference:clip-all]``) and linked to its row (or, failing that, its suite), with the
    delta's CI and paired counts (``evidence``) and the items that moved (``moved``)."""
    suite_of = {test_key(t.test): t.suite for t in sc.tests}
    out = []
    for reg in sc.regressions:
        key = regression_key(reg)
        link = anchors.get(key) or suite_anchor.get(suite_of.get(key[0], ""), "")
        hib = reg.get("higher_is_better")
        delta = _float(reg.get("delta"))
        out.append(
            {
                "link": link,
                "test": strip_file(key[0]) if key[0] else "?",
                "metric": key[3],
                "column": Column(key[1], key[2]).label,
                "slice": key[4],
                "baseline": fmt(_float(reg.get("baseline"))),
                "current": fmt(_float(reg.get("current"))),
                "delta": "n/a" if delta is None else f"{delta:+.3g}",
                "better": "" if hib is None else ("higher" if hib else "lower"),
                "evidence": _evidence(reg),
                "moved": _moved(reg),
                "n_moved": int(reg.get("n_moved") or len(reg.get("moved") or [])),
            }
        )
    return out


@dataclass
class Banner:
    """The page's headline: ``status`` is ship, do-not-ship or insufficient (the CSS class too)."""

    status: str
    label: str
    failed_checks: int
    regressions: int
    reasons: list[str]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def ship_banner(rows: list[Verdict], run_status: str, n_regressions: int) -> Banner:
    """Ship or not, from the verdict rows, the run's status and the gate's regression count."""
    failed = sum(len(v.failed) for v in rows)
    broken = sum(len(v.broken_tests) for v in rows)
    insufficient = sum(len(v.insufficient) for v in rows)
    inconclusive = sum(len(v.inconclusive) for v in rows)
    reasons = [_plural(failed, "failing check"), _plural(n_regressions, "regression")]
    if broken:
        reasons.append(_plural(broken, "broken test"))
    if insufficient:
        reasons.append(f"{insufficient} with too little data")
    if inconclusive:
        reasons.append(f"{inconclusive} inconclusive")
    failing = [v.column for v in rows if v.status == "fail"]
    if failing:
        reasons.append(f"failing: {', '.join(failing)}")
        return Banner("do-not-ship", "DO NOT SHIP", failed, n_regressions, reasons)
    if run_status != "complete":
        reasons.append(f"the run is {run_status}: its results are partial")
    elif not any(v.status == "pass" for v in rows):
        reasons.append("no check recorded a verdict")
    if insufficient or run_status != "complete" or not any(v.status == "pass" for v in rows):
        return Banner("insufficient", "INSUFFICIENT DATA", failed, n_regressions, reasons)
    return Banner("ship", "SHIP", failed, n_regressions, reasons)
