"""The compact text summary printed at the end of a run (``pytest_terminal_summary``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from faithtests.scorecard.baseline import Comparison, format_comparison
from faithtests.scorecard.coverage import coverage_line, input_coverage
from faithtests.scorecard.model import MetricResult
from faithtests.scorecard.scorecard import Scorecard

MAX_ROWS = 40


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
    """``pass`` / ``FAIL``, with ``(ci)`` for the CI gate and ``inconclusive`` when the CI straddles the
    threshold; empty for a result recorded without a check."""
    if r.passed is None:
        return ""
    notes = [n for n, on in (("ci", r.gate == "ci"), ("inconclusive", bool(r.inconclusive)),
                             ("coverage", r.coverage is not None)) if on]
    return ("pass" if r.passed else "FAIL") + (f" ({', '.join(notes)})" if notes else "")


def test_name(test: str) -> str:
    """The test function of a test id (``suites/x.py::test_flip_positive_rate[world-all-clip]`` ->
    ``test_flip_positive_rate``)."""
    return test.rpartition("::")[2].partition("[")[0]


def _row(r: MetricResult, dataset: str) -> list[str]:
    ci = f" [{_num(r.ci[0])}, {_num(r.ci[1])}]" if r.ci else (f" [CI {r.ci_note}]" if r.ci_note else "")
    value = _num(r.value) + ci
    threshold = f"{r.op} {_num(r.threshold)}" if r.op is not None else ""
    metric = r.metric + (f"[{r.slice}]" if r.slice else "")
    n = "" if r.n is None else str(r.n)
    detect = "" if r.detectable_diff is None else f"±{_num(r.detectable_diff)}"
    return [r.suite, dataset or "-", test_name(r.test), metric, r.model or "-", r.variant, value, n,
            threshold, verdict(r), detect]


def results_table(results: Sequence[MetricResult], *, max_rows: int | None = MAX_ROWS,
                  datasets: Mapping[str, str] | None = None) -> list[str]:
    """One row per result, sorted by suite/dataset/metric/slice/model/variant; checked results first when
    the table is cut (they are the ones a reader needs). ``datasets`` maps a test id to its dataset."""
    ds = datasets or {}
    ordered = sorted(results, key=lambda r: (r.suite, ds.get(r.test, ""), r.metric, r.slice or "", r.model,
                                             r.variant, r.test))
    hidden = 0
    if max_rows is not None and len(ordered) > max_rows:
        keep = sorted(ordered, key=lambda r: r.passed is None)[:max_rows]
        hidden = len(ordered) - len(keep)
        kept = {id(r) for r in keep}
        ordered = [r for r in ordered if id(r) in kept]
    header = ["suite", "dataset", "test", "metric", "model", "variant", "value [CI]", "n", "threshold",
              "result", "±detectable"]
    rows = [_row(r, ds.get(r.test, "")) for r in ordered]
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    if hidden:
        out.append(f"... {hidden} more result(s) in the report (-v prints all)")
    return out


def model_verdicts(results: Sequence[MetricResult]) -> list[str]:
    """One line per model: ``model reference:vlm: 12 checks, failed 2: premise_rejection/mis_v, ...``."""
    out = []
    for model in sorted({r.model for r in results if r.passed is not None}):
        checks = [r for r in results if r.passed is not None and r.model == model]
        failed = [f"{r.suite}/{r.metric}" + (f"[{r.slice}]" if r.slice else "")
                  + ("" if r.variant == "base" else f" ({r.variant})") for r in checks if not r.passed]
        tail = f"failed {len(failed)}: {', '.join(failed)}" if failed else "all passed"
        out.append(f"{'FAIL' if failed else 'PASS'} model {model or '-'}: {len(checks)} check(s), {tail}")
    return out


def summary_lines(sc: Scorecard, written: Sequence[Path], comparison: Comparison | None,
                  notes: Sequence[str], *, full: bool = False) -> list[str]:
    """The terminal summary: counts, the results table (with dataset and test), input coverage per
    dataset, coverage failures, the baseline comparison, the notes, a verdict per model, and the report
    path last."""
    lines: list[str] = []
    if sc.status != "complete":
        lines.append(f"status: {sc.status} (partial results)")
    results = sc.results
    datasets = {t.test: t.dataset for t in sc.tests}
    checked = [r for r in results if r.passed is not None]
    failed = [r for r in checked if not r.passed]
    inconclusive = sum(bool(r.inconclusive) for r in checked)
    lines.append(f"{len(sc.tests)} test(s), {len(results)} result(s), {len(checked)} check(s), "
                 f"{len(failed)} failed" + (f", {inconclusive} inconclusive" if inconclusive else ""))
    if results:
        lines += results_table(results, max_rows=None if full else MAX_ROWS, datasets=datasets)
    if inconclusive:
        lines.append(INCONCLUSIVE_NOTE)
    lines += [coverage_line(c) for c in input_coverage(sc)]
    for r in checked:
        if r.coverage is not None:
            lines.append(f"FAIL coverage {r.suite}/{r.metric}" + (f"[{r.slice}]" if r.slice else "")
                         + f" [model={r.model or '-'}, variant={r.variant}]: {r.coverage}")
    if comparison is not None:
        lines.append("")
        lines.append(f"baseline: {sc.baseline} (tolerance {comparison.tolerance}): "
                     f"{len(comparison.regressions)} regression(s), {len(comparison.improvements)} "
                     f"improvement(s), {len(comparison.new)} new, {len(comparison.missing)} missing, "
                     f"{len(comparison.flips)} item flip(s)")
        for d in comparison.regressions:
            lines.append(f"REGRESSION {d.label} [model={d.model or '-'}, variant={d.variant}]: "
                         f"{_num(d.baseline)} -> {_num(d.current)} ({d.test})")
        if full:
            lines += format_comparison(comparison, show_unchanged=False).splitlines()
    lines += list(notes)
    lines += model_verdicts(results)
    lines.append(f"report: {', '.join(str(p) for p in written) or '(not written)'}")
    return lines
