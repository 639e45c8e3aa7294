"""``faithtests compare``'s plain-text report of a :class:`~faithtests.scorecard.baseline.Comparison`:
one row per metric key with its delta, the delta's CI and basis, the paired counts and the ``ci`` gate's
verdict; then the counts, the items behind each regression and the item flips."""

from __future__ import annotations

from faithtests.reports.text_table import num, signed, stdout_width, table
from faithtests.scorecard.baseline import Comparison, MetricDelta, test_label

#: The columns that wrap when the table is wider than the output: all but the numbers and the direction.
WRAPPED = (0, 1, 2, 3, 4, 8, 9, 10, 11)


def _fmt_ci(ci: tuple[float, float] | None) -> str:
    return "—" if ci is None else f"[{signed(ci[0])}, {signed(ci[1])}]"


def _fmt_paired(d: MetricDelta) -> str:
    """``n=320 g>b=12 b>g=3 p=0.035`` (binary), ``n=320`` (numeric), ``—`` (not paired)."""
    p = d.paired
    if p is None:
        return "—"
    if not p.binary:
        return f"n={p.n}"
    mp = p.mcnemar_p if p.mcnemar_p is not None else 1.0
    return f"n={p.n} g>b={p.good_to_bad} b>g={p.bad_to_good} p={mp:.3g}"


def _comparison_row(d: MetricDelta) -> list[str]:
    return [
        d.status.upper() if d.status == "regression" else d.status,
        test_label(d.test),
        d.label,
        d.model,
        d.variant,
        num(d.baseline),
        num(d.current),
        signed(d.delta),
        _fmt_ci(d.delta_ci),
        d.basis if d.delta_ci is not None else "—",
        _fmt_paired(d),
        d.ci_status or "—",
        "higher" if d.higher_is_better else "lower",
    ]


def _count_lines(c: Comparison) -> list[str]:
    out = [
        f"{len(c.regressions)} regression(s), {len(c.improvements)} improvement(s), "
        f"{len(c.new)} new, {len(c.missing)} missing (tolerance {c.tolerance}, gate {c.gate})"
    ]
    if c.moved:
        out.append(f"{len(c.moved)} metric(s) without a threshold check moved (listed, not gated; "
                   "--json lists them, --all gates them)")
    absent = [d for d in c.missing if not d.gated]
    if absent:
        out.append(f"{len(absent)} missing result(s) without a threshold check, of tests that ran (a slice "
                   "without data in this run; listed, not gated)")
    noise = [d for d in c._with("within noise") if d.gated]
    if noise:
        out.append(f"{len(noise)} move(s) beyond the tolerance within noise (the delta CI includes it)")
    held = [d for d in noise if d.delta_ci is not None and d.ci_status == "within noise"
            and (d.p_value or 1.0) < 0.05]
    if held and c.control != "none":
        name = {"holm": "Holm", "bh": "Benjamini-Hochberg"}[c.control]
        each = [f"{test_label(d.test)} {d.label} ({d.model}) p={d.p_value:.3g}, adjusted {d.p_adjusted:.3g}"
                for d in held[:5]]
        out.append(f"  of which {len(held)} beyond noise on their own but not over the {len(c.family)} gated "
                   f"metrics ({name}): " + ", ".join(each) + (" ..." if len(held) > 5 else ""))
    return out


def _moved_lines(c: Comparison) -> list[str]:
    """The items behind each regression, worst first."""
    out: list[str] = []
    for d in c.regressions:
        if d.moved:
            out.append(f"{d.n_moved} item(s) moved in {test_label(d.test)} {d.label} ({d.model}), worst "
                       f"first{f' (first {len(d.moved)} shown)' if d.n_moved > len(d.moved) else ''}:")
            out += [f"  {f.item}: {f.baseline:g} -> {f.current:g}" for f in d.moved]
    return out


def _flip_lines(c: Comparison, max_flips: int) -> list[str]:
    if not c.flips:
        return []
    out = ["", f"{len(c.flips)} item(s) flipped:"]
    out += [f"  {f.test} {f.name} {f.item}: {f.baseline} -> {f.current}" for f in c.flips[:max_flips]]
    if len(c.flips) > max_flips:
        out.append(f"  ... {len(c.flips) - max_flips} more")
    return out


def format_comparison(c: Comparison, *, show_unchanged: bool = True, max_flips: int = 50,
                      width: int | None = None) -> str:
    """A plain-text report: one row per key (status, test, metric, baseline, current, delta, the delta's
    CI and its basis, the paired counts, and the ``ci`` gate's verdict), the items behind each
    regression, then item flips. The test column tells apart one metric recorded by two tests
    (``test_x[all]`` records ``PR[type=color]`` once per data set). ``width``: fit the lines to it
    (:mod:`~faithtests.reports.text_table`; names wrap in their columns), ``None``: natural widths."""
    shown = [d for d in c.deltas if (show_unchanged or d.status != "unchanged") and d.gated]
    header = ["status", "test", "metric", "model", "variant", "baseline", "current", "delta", "delta 95% CI",
              "basis", "paired", "ci gate", "better"]
    out = table(header, [_comparison_row(d) for d in shown], width, WRAPPED, rule=True)
    return "\n".join(out + _count_lines(c) + _moved_lines(c) + _flip_lines(c, max_flips))


def compare_report(c: Comparison, names: tuple[str, str], *, every: bool, changed_only: bool, max_flips: int,
                   allow_missing: bool) -> str:
    """``faithtests compare``'s text report: the runs, :func:`format_comparison` fitted to standard
    output, what was compared, the regressions' and missing results' verdicts."""
    missing = c.missing_gated
    out = [f"baseline: {names[0]}\ncurrent:  {names[1]}",
           format_comparison(c, show_unchanged=not changed_only, max_flips=max_flips, width=stdout_width())]
    if not every:
        out.append("compared the checked metrics only (--all: every metric)")
    if c.regressions:
        out.append(f"FAIL: {len(c.regressions)} regression(s) beyond tolerance {c.tolerance}: exit status 1")
    if missing:
        tests = sorted({d.test for d in missing})
        verdict = ("allowed by --allow-missing" if allow_missing
                   else "exit status 1 (--allow-missing if B is a partial selection)")
        out.append(f"{'note' if allow_missing else 'FAIL'}: {len(missing)} baseline result(s) of "
                   f"{len(tests)} test(s) are missing from B: {', '.join(tests[:5])}"
                   f"{' ...' if len(tests) > 5 else ''}; {verdict}")
    return "\n".join(out)
