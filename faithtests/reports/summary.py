"""The compact text summary printed at the end of a run (``pytest_terminal_summary``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from faithtests.reports.comparison_text import format_comparison
from faithtests.reports.text_table import table
from faithtests.scorecard.baseline import Comparison, MetricDelta
from faithtests.scorecard.coverage import coverage_line, input_coverage, truncation_lines
from faithtests.scorecard.glossary import base_name, term_for
from faithtests.scorecard.model import MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard

MAX_ROWS = 40
#: The results table's columns that wrap to fit the output: names and the value's CI (never n or verdict).
WRAPPED = (0, 1, 2, 3, 4, 5, 6)
MAX_MOVED_LINES = 10
MAX_MISSING_NAMED = 10  # missing baseline results named in a verdict line (a -k selection misses hundreds)


def _evidence(d: MetricDelta) -> str:
    """`` [paired 95% CI -0.12..-0.05, g>b 30, b>g 4, McNemar p 2e-06]`` (the evidence of a regression)."""
    if d.delta_ci is None:
        return f" [{d.basis}]"
    ev = f" [{d.basis} 95% CI {d.delta_ci[0]:+.3g}..{d.delta_ci[1]:+.3g}"
    p = d.paired
    if p is not None and p.binary:
        ev += f", g>b {p.good_to_bad}, b>g {p.bad_to_good}, McNemar p {p.mcnemar_p or 1.0:.2g}"
    return ev + "]"


def _num(x: float | None) -> str:
    if x is None:
        return "undefined"
    return f"{x:.3g}" if x != 0 and abs(x) < 1e-3 else f"{x:.3f}"


INCONCLUSIVE_NOTE = (
    "inconclusive: the 95% CI straddles the threshold, so the verdict could flip on another sample "
    "(under --faith-gate point it still passes or fails on the value); ±detectable: the smallest "
    "distance from the threshold this n resolves (the CI half-width on the threshold's side)"
)


def verdict(r: MetricResult) -> str:
    """``pass`` / ``FAIL`` / ``INSUFFICIENT``, with ``(ci)`` for the CI gate and ``inconclusive`` when the
    CI straddles the threshold; empty for a result recorded without a check."""
    if r.verdict is None:
        return ""
    notes = [n for n, on in (("ci", r.gate == "ci"), ("inconclusive", bool(r.inconclusive)),
                             ("coverage", r.coverage is not None and not r.insufficient)) if on]
    word = {"pass": "pass", "fail": "FAIL", "insufficient": "INSUFFICIENT"}[r.verdict]
    return word + (f" ({', '.join(notes)})" if notes else "")


def test_name(test: str) -> str:
    """The test function of a test id (``suites/x.py::test_flip_positive_rate[world-all-clip]`` ->
    ``test_flip_positive_rate``)."""
    return test.rpartition("::")[2].partition("[")[0]


def _row(r: MetricResult, dataset: str) -> list[str]:
    ci = f" [{_num(r.ci[0])}, {_num(r.ci[1])}]" if r.ci else (f" [CI {r.ci_note}]" if r.ci_note else "")
    value = _num(r.value) + ci
    threshold = f"{r.op} {_num(r.threshold)}" if r.op is not None else ""
    if threshold and r.gate_kind:  # paper gate, floor or the user's own value (suites/thresholds.toml)
        threshold += f" {r.gate_kind}"
    metric = r.metric + (f"[{r.slice}]" if r.slice else "")
    n = "" if r.n is None else str(r.n)
    detect = "" if r.detectable_diff is None else f"±{_num(r.detectable_diff)}"
    return [r.suite, dataset or "-", test_name(r.test), metric, r.model or "-", r.variant, value, n,
            threshold, verdict(r), detect]


def rank(r: MetricResult) -> int:
    """Where a result goes in the table: 0 a check that failed, had too little data or is inconclusive;
    1 a checked pass; 2 a result recorded without a check."""
    if r.verdict is None:
        return 2
    return 0 if r.verdict != "pass" or r.inconclusive else 1


def results_table(results: Sequence[MetricResult], *, max_rows: int | None = MAX_ROWS,
                  datasets: Mapping[str, str] | None = None, show: int = 2,
                  width: int | None = None) -> list[str]:
    """One row per result: failing, insufficient and inconclusive checks first, then checked passes, then
    unchecked results, each group sorted by suite/dataset/metric/slice/model/variant. ``show``: the last
    :func:`rank` shown (0 problems only, 1 every check, 2 everything); ``max_rows`` cuts what remains.
    ``datasets`` maps a test id to its dataset."""
    ds = datasets or {}
    ordered = sorted(results, key=lambda r: (rank(r), r.suite, ds.get(r.test, ""), r.metric, r.slice or "",
                                             r.model, r.variant, r.test))
    shown = [r for r in ordered if rank(r) <= show]
    if max_rows is not None:
        shown = shown[:max_rows]
    kept = {id(r) for r in shown}
    hidden = _hidden_text([r for r in ordered if id(r) not in kept])
    ordered = shown
    if not ordered:
        return [hidden] if hidden else []
    header = ["suite", "dataset", "test", "metric", "model", "variant", "value [CI]", "n", "threshold",
              "result", "±detectable"]
    out = table(header, [_row(r, ds.get(r.test, "")) for r in ordered], width, WRAPPED)
    if hidden:
        out.append(f"... {hidden}")
    return out


def _hidden_text(hidden: Sequence[MetricResult]) -> str:
    """``12 checked pass(es) and 140 unchecked result(s) not shown (-v prints all)``, or ""."""
    counts = [(sum(rank(r) == k for r in hidden), what) for k, what in
              ((0, "failing or inconclusive check(s)"), (1, "checked pass(es)"), (2, "unchecked result(s)"))]
    parts = [f"{n} {what}" for n, what in counts if n]
    return f"{' and '.join(parts)} not shown (-v prints all)" if parts else ""


def _name(suite: str, metric: str, slice: str | None, variant: str) -> str:
    sl = f"[{slice}]" if slice else ""
    return f"{suite}/{metric}{sl}" + ("" if variant == "base" else f" ({variant})")


def _stuck_tests(tests: Sequence[TestRecord]) -> dict[str, TestRecord]:
    """Tests that ran out of data at a step with no check to say so."""
    return {t.test: t for t in tests if t.outcome == "insufficient"}


def _models_of(t: TestRecord) -> set[str]:
    return {r.model for r in t.results} or {""}


def _insufficient_names(model: str, checks: list[MetricResult], stuck: Mapping[str, TestRecord]) -> list[str]:
    """The model's checks with too little data, then its tests that ran out of data without a check."""
    short = [_name(r.suite, r.metric, r.slice, r.variant) for r in checks if r.verdict == "insufficient"]
    return short + [f"test {t.test.partition('::')[2] or t.test}" for t in stuck.values()
                    if model in _models_of(t) and not any(r.insufficient for r in t.results)]


def _named(names: Sequence[str], limit: int | None = None) -> str:
    """``N: a, b``: how many, then the names (past ``limit``: the first ``limit`` and how many more)."""
    more = limit is not None and len(names) > limit
    shown = [*names[:limit], f"... {len(names) - (limit or 0)} more"] if more else list(names)
    return f"{len(names)}: {', '.join(shown)}"


def _model_line(model: str, results: Sequence[MetricResult], regressions: Sequence[MetricDelta],
                stuck: Mapping[str, TestRecord], missing: Sequence[MetricDelta] = ()) -> str:
    checks = [r for r in results if r.passed is not None and r.model == model]
    failed = [_name(r.suite, r.metric, r.slice, r.variant) + (f" ({r.gate_kind})" if r.gate_kind else "")
              for r in checks if r.verdict == "fail"]
    short = _insufficient_names(model, checks, stuck)
    regs = [_name(d.suite, d.metric, d.slice, d.variant) for d in regressions if d.model == model]
    lost = [_name(d.suite, d.metric, d.slice, d.variant) for d in missing if d.model == model]
    parts = [f"{what} {_named(names, limit)}" for what, names, limit in
             (("failed", failed, None), ("regressed", regs, None),
              ("missing baseline result(s)", lost, MAX_MISSING_NAMED), ("insufficient data", short, None))
             if names]
    word = "FAIL" if failed or regs or lost else ("INSUFFICIENT" if short else "PASS")
    return f"{word} model {model or '-'}: {len(checks)} check(s), {'; '.join(parts) or 'all passed'}"


def model_verdicts(results: Sequence[MetricResult], regressions: Sequence[MetricDelta] = (),
                   tests: Sequence[TestRecord] = (), missing: Sequence[MetricDelta] = ()) -> list[str]:
    """One line per model: ``FAIL model reference:vlm: 12 check(s), failed 2: suite_a/metric_x,
    ...``; FAIL also on a regression against the baseline or on ``missing`` (the baseline results the
    gate failed for not being produced: a model of the baseline this run lacks gets its line too),
    INSUFFICIENT (never PASS) when a check or a test of the model had too little data and nothing failed."""
    stuck = _stuck_tests(tests)
    models = {r.model for r in results if r.passed is not None} | {d.model for d in [*regressions, *missing]}
    for t in stuck.values():
        models |= _models_of(t)
    return [_model_line(model, results, regressions, stuck, missing) for model in sorted(models)]


def _counts_line(sc: Scorecard, checked: list[MetricResult], missing: int = 0) -> str:
    failed = sum(r.verdict == "fail" for r in checked)
    short = sum(r.verdict == "insufficient" for r in checked)
    inconclusive = sum(bool(r.inconclusive) for r in checked)
    return (f"{len(sc.tests)} test(s), {len(sc.results)} result(s), {len(checked)} check(s), "
            f"{failed} failed" + (f", {short} insufficient" if short else "")
            + (f", {missing} baseline result(s) missing" if missing else "")
            + (f", {inconclusive} inconclusive" if inconclusive else ""))


def _insufficient_lines(sc: Scorecard, checked: list[MetricResult]) -> list[str]:
    """Checks that failed their coverage rule, and tests that ran out of data without a check."""
    lines = []
    for r in checked:
        if r.coverage is not None:
            word = "INSUFFICIENT" if r.insufficient else "FAIL coverage"
            lines.append(f"{word} {r.suite}/{r.metric}" + (f"[{r.slice}]" if r.slice else "")
                         + f" [model={r.model or '-'}, variant={r.variant}]: {r.coverage}")
    for t in sc.tests:
        if t.outcome == "insufficient" and not any(r.insufficient for r in t.results):
            lines.append(f"INSUFFICIENT test {t.test}: {t.message}")
    return lines


def _comparison_lines(sc: Scorecard, comparison: Comparison, full: bool, width: int | None) -> list[str]:
    """The baseline comparison: counts, each regression with its evidence, metrics that moved."""
    lines = ["", f"baseline: {sc.baseline} (tolerance {comparison.tolerance}): "
                 f"{len(comparison.regressions)} regression(s), {len(comparison.improvements)} "
                 f"improvement(s), {len(comparison.new)} new, {len(comparison.missing)} missing, "
                 f"{len(comparison.flips)} item flip(s)"]
    for d in comparison.regressions:
        lines.append(f"REGRESSION {d.label} [model={d.model or '-'}, variant={d.variant}]: "
                     f"{_num(d.baseline)} -> {_num(d.current)} ({d.test}){_evidence(d)}")
    moved = comparison.moved
    for d in moved[:MAX_MOVED_LINES]:
        lines.append(f"moved (not gated: no threshold check) {d.label} [model={d.model or '-'}, "
                     f"variant={d.variant}]: {_num(d.baseline)} -> {_num(d.current)} ({d.test})")
    if len(moved) > MAX_MOVED_LINES:
        lines.append(f"... {len(moved) - MAX_MOVED_LINES} more moved metric(s) (-v lists all)")
    if full:
        lines += format_comparison(comparison, show_unchanged=False, width=width).splitlines()
    return lines


def legend_lines(sc: Scorecard, results: Sequence[MetricResult]) -> list[str]:
    """One line per metric with a failing or insufficient check: what it means, its direction and its
    paper (the scorecard's glossary; a metric without a definition is named by the run's note); then one
    line per failed floor: what that failure means (suites/thresholds.toml ``means``)."""
    names = sorted({base_name(r.metric) for r in results if r.verdict in ("fail", "insufficient")})
    terms = [t for t in (term_for(n, sc.glossary) for n in names) if t is not None]
    floors = sorted({(_name(r.suite, r.metric, r.slice, "base"), r.gate_note or "") for r in results
                     if r.verdict == "fail" and r.gate_kind == "floor"})
    if not terms and not floors:
        return []
    return (["what the failing metrics mean (faithtests explain METRIC):"]
            + [f"  {t.legend()}" for t in terms]
            + [f"  floor {name} (no paper row measures it) failed: {note}" for name, note in floors])


def endpoint_lines(sc: Scorecard) -> list[str]:
    """What each served model (``openai:``) was asked this run: its cost, in requests."""
    out = []
    models = sc.fingerprint.get("models") or {}
    for label, info in models.items():
        ep = info.get("endpoint") if isinstance(info, dict) else None
        if isinstance(ep, dict):
            bounded = ep.get("bounded_letters", 0)
            tail = f"; {bounded} option letter(s) outside its top log-probs, bounded" if bounded else ""
            suites = ep.get("suites") or {}
            per = ("; per suite: " + ", ".join(f"{s} {n}" for s, n in sorted(suites.items()))
                   + f", the probe at load {ep.get('probe', 0)}") if suites else ""
            out.append(f"endpoint {label}: {ep.get('requests', 0)} request(s) sent{per}{tail}")
    return out


def summary_lines(sc: Scorecard, written: Sequence[Path], comparison: Comparison | None,
                  notes: Sequence[str], *, full: bool = False, quiet: bool = False,
                  width: int | None = None, missing: Sequence[MetricDelta] = ()) -> list[str]:
    """The terminal summary: counts, the results table (failing, insufficient and inconclusive checks
    first, then checked passes, unchecked results only with ``full`` (-v); ``quiet`` (-q) keeps the
    problems only), what the failing metrics mean, input coverage per dataset (non-zero counts),
    coverage failures, the baseline comparison, the notes, a verdict per model, and the report path
    last. ``width``: the tables fitted to it (:mod:`~faithtests.reports.text_table`; ``None``: natural
    widths); a note or verdict line stays one whole line (what ``grep ERROR`` finds in a log).
    ``missing``: the baseline results the gate failed on for not being produced, counted on the first line
    and in the verdicts."""
    lines: list[str] = []
    if sc.status != "complete":
        lines.append(f"status: {sc.status} (partial results)")
    results = sc.results
    checked = [r for r in results if r.passed is not None]
    lines.append(_counts_line(sc, checked, len(missing)))
    if results:
        datasets = {t.test: t.dataset for t in sc.tests}
        lines += results_table(results, max_rows=None if full else MAX_ROWS, datasets=datasets,
                               show=2 if full else (0 if quiet else 1), width=width)
    if any(r.inconclusive for r in checked):
        lines.append(INCONCLUSIVE_NOTE)
    lines += legend_lines(sc, checked)
    lines += [coverage_line(c) for c in input_coverage(sc) if c.missing] + truncation_lines(sc)
    lines += _insufficient_lines(sc, checked)
    if comparison is not None:
        lines += _comparison_lines(sc, comparison, full, width)
    lines += list(notes)
    lines += endpoint_lines(sc)
    regressions = comparison.regressions if comparison is not None else []
    lines += model_verdicts(results, regressions, sc.tests, missing)
    lines.append(f"report: {', '.join(str(p) for p in written) or '(not written)'}")
    return lines
