"""The ``faithtests`` command: compare | merge | render | explain | history | export | list | train-reference.

User errors (a missing file, bad JSON, a schema mismatch, a bad tolerance) print one line on stderr
naming the file and exit with status 2; they never show a traceback. ``compare`` gates like the pytest
baseline gate: exit 1 when a metric regressed by more than ``--tolerance`` (under ``--gate``), else 0.
By default it compares the checked metrics (those with a threshold check in either run); ``--all``
compares and gates every metric. ``merge`` refuses (exit 2, naming the field) shards whose fingerprints
differ in models, seed, limit, gate, data sets or thresholds.

Other modules can contribute subcommands without this module importing them at start-up (which would
pull in torch for every ``faithtests render``): see :data:`EXTERNAL_SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from faithtests.manifest import glossary_aliases, glossary_terms
from faithtests.plugin.item_report import image_of
from faithtests.plugin.lifecycle import ReportLock
from faithtests.protocols import disabled_protocols, manifests
from faithtests.reports.comparison_text import compare_report
from faithtests.reports.frames import deltas_frame
from faithtests.reports.history import (
    format_history,
    history_csv,
    load_history,
    write_history_csv,
    write_history_html,
)
from faithtests.reports.html import render_html
from faithtests.reports.viewer import VIEWER, render_viewer
from faithtests.scorecard.baseline import Comparison, Tolerance, compare
from faithtests.scorecard.family import CONTROLS, run_control
from faithtests.scorecard.fingerprint import COMPARABLE, refused_mismatches
from faithtests.scorecard.float_noise import NoiseReport, within_noise
from faithtests.scorecard.glossary import GlossaryError, explain, explain_all, term_for
from faithtests.scorecard.history_run import RunPathError
from faithtests.scorecard.item_log import item_log_path, iter_item_log, merge_item_logs
from faithtests.scorecard.model import GateMode
from faithtests.scorecard.scorecard import (
    Scorecard,
    ScorecardError,
    atomic_write_text,
    merge_scorecards,
    read_scorecard,
    write_scorecard,
)

# name -> (module, help). The module must define ``main(argv: list[str]) -> int`` with its own
# argparse (prog "faithtests NAME"); it is imported only when the subcommand runs.
EXTERNAL_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train-reference": ("faithtests.reference.train",
                        "train a bundled reference model (seeded) into fixtures/"),
    "export": ("faithtests.reports.export", "export one run to MLflow (a tracking URI or a local "
               "directory) and/or an offline W&B run"),
    "list": ("faithtests.catalog", "the suites, metrics, models and data names this installation knows"),
}


class UsageError(Exception):
    """A user error: reported as one line on stderr, exit status 2."""


def _read(path: str) -> Scorecard:
    try:
        return read_scorecard(path)
    except ScorecardError as exc:
        raise UsageError(str(exc)) from exc
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
        # a structurally odd file that slipped past the schema check still names the file
        raise UsageError(f"{path}: cannot read scorecard ({type(exc).__name__}: {exc})") from exc


def _tolerance(text: str) -> str:
    try:
        Tolerance.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return n


def _run_gate(sc: Scorecard) -> GateMode:
    """The regression rule run B was gated with (its fingerprint), so ``compare`` repeats the pytest
    gate's verdict: ``ci`` for ``regression: paired`` (the default since it was recorded), ``point`` for
    ``regression: point``; a scorecard from before that field: ``ci`` if it was run with ``--faith-gate
    ci``, else ``point`` (the rule it was gated with then)."""
    recorded = sc.fingerprint.get("regression")
    if recorded in ("paired", "point"):
        return "ci" if recorded == "paired" else "point"
    return "ci" if sc.fingerprint.get("gate") == "ci" else "point"


def _write_csv(comparison: Comparison, path: str) -> None:
    """One row per metric (pandas-ready) to ``path``; ``-`` is stdout."""
    frame = deltas_frame(comparison)
    if path == "-":
        frame.to_csv(sys.stdout, index=False)
        return
    try:
        frame.to_csv(path, index=False)
    except OSError as exc:
        raise UsageError(f"--csv {path}: {exc}") from exc


def _comparable(a: Scorecard, b: Scorecard, names: tuple[str, str], allowed: list[str]) -> None:
    """The pytest gate's comparability rule (``fingerprint.refused_mismatches``): runs of other seeds,
    limits, gates, data or thresholds are refused unless ``--allow-mismatch`` names the fields."""
    refused, what = refused_mismatches(a.fingerprint, b.fingerprint, allowed)
    if refused:
        raise UsageError(f"{names[0]} and {names[1]} are not comparable: they differ in {what}; pass "
                         f"--allow-mismatch {','.join(refused)} to compare anyway")


def _mismatch_fields(text: str) -> list[str]:
    fields = list(COMPARABLE) if text.strip() == "all" else [f for f in text.split(",") if f.strip()]
    unknown = sorted(set(fields) - set(COMPARABLE))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown field(s) {', '.join(unknown)} (fields: "
                                         f"{', '.join(COMPARABLE)}, or all)")
    return [f.strip() for f in fields]


def _cmd_compare(args: argparse.Namespace) -> int:
    baseline, current = _read(args.a), _read(args.b)
    _comparable(baseline, current, (args.a, args.b), args.allow_mismatch)
    if args.noise_rule:
        return _print_noise(within_noise(baseline, current), args.max_flips)
    gate: GateMode = "ci" if args.regression == "paired" else "point" if args.regression else (
        args.gate or _run_gate(current))
    every = args.all or current.fingerprint.get("regression_all") is True
    comparison = compare(current, baseline, args.tolerance, checked_only=not every, gate=gate,
                         control=args.control or run_control(current.fingerprint, "holm"))
    missing = comparison.missing_gated
    status = 1 if comparison.regressions or (missing and not args.allow_missing) else 0
    if args.csv is not None:
        _write_csv(comparison, args.csv)
        if args.csv == "-":
            return status
    if args.json:
        print(json.dumps(comparison.to_json(), indent=1))
    else:
        print(compare_report(comparison, (args.a, args.b), every=every, changed_only=args.changed_only,
                             max_flips=args.max_flips, allow_missing=args.allow_missing))
    if args.json and missing and not args.allow_missing:
        print(f"faithtests compare: {len(missing)} baseline result(s) missing from B: exit status 1",
              file=sys.stderr)
    return status


def _print_noise(report: NoiseReport, most: int) -> int:
    """``compare --noise-rule``: the report (:meth:`NoiseReport.lines`); exit 1 unless B is A within noise."""
    print("\n".join(report.lines(most)))
    return 0 if report.ok else 1


def _write_html(
    sc: Scorecard,
    path: Path,
    baseline: Scorecard | None = None,
    *,
    max_exemplars: int,
    baseline_label: str | None = None,
    tolerance: str = "0",
) -> None:
    # the gate the run was gated with, so delta cells agree with its stored regressions and verdicts
    html = render_html(sc, baseline, max_exemplars=max_exemplars, baseline_label=baseline_label,
                       tolerance=tolerance, gate=_run_gate(sc))
    try:
        atomic_write_text(path, html)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write ({exc.strerror or exc})") from exc


def _cmd_merge(args: argparse.Namespace) -> int:
    parts = [_read(p) for p in args.parts]
    try:
        merged = merge_scorecards(parts, list(args.parts))
    except ScorecardError as exc:
        raise UsageError(f"merging {', '.join(args.parts)}: {exc}") from exc
    out = Path(args.output)
    json_path = out if out.suffix == ".json" else out / "scorecard.json"
    # the report folder's lock, as a run takes it: never write into a folder a running pytest will
    # overwrite (issue 46: both wrote, the merge was lost, and neither said so)
    lock = ReportLock(json_path.parent, option="faithtests merge -o")
    try:
        lock.acquire([], supersede=json_path.name == "scorecard.json")
    except pytest.UsageError as exc:
        raise UsageError(str(exc)) from None
    try:
        try:
            write_scorecard(merged, json_path)
        except OSError as exc:
            raise UsageError(f"{json_path}: cannot write ({exc.strerror or exc})") from exc
        html_path = json_path.with_suffix(".html")
        _write_html(merged, html_path, max_exemplars=args.max_exemplars)
        items = _merge_items(list(args.parts), json_path.parent)
    finally:
        lock.release()
    print(
        f"merged {len(parts)} scorecards ({len(merged.tests)} tests, status {merged.status}) -> "
        f"{json_path}, {html_path}{items}"
    )
    return 0


def _merge_items(parts: list[str], out: Path) -> str:
    """The shards' item logs as one log + viewer beside the merged scorecard ("" when none has one)."""
    if not any(item_log_path(p).exists() for p in parts):
        return ""
    try:
        n = merge_item_logs(parts, out)
        rows = list(iter_item_log(item_log_path(out)))
        atomic_write_text(out / VIEWER, render_viewer(rows, image_of=image_of))
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the item log ({exc.strerror or exc})") from exc
    except ValueError as exc:  # a shard's corrupt log: named, never half merged in silence
        raise UsageError(f"merging the item logs: {exc}") from exc
    return f", {item_log_path(out)} ({n} items)"


def _cmd_render(args: argparse.Namespace) -> int:
    sc = _read(args.json_path)
    src = Path(args.json_path)
    default = (src / "scorecard.html") if src.is_dir() else src.with_suffix(".html")
    out = Path(args.output) if args.output else default
    baseline = _read(args.baseline) if args.baseline else None
    _write_html(
        sc,
        out,
        baseline,
        max_exemplars=args.max_exemplars,
        baseline_label=args.baseline,
        tolerance=args.tolerance,
    )
    print(f"wrote {out}")
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    """The definition of a metric (every protocol's glossary, plus the scorecard's with --scorecard)."""
    terms = glossary_terms(manifests())
    if args.scorecard:
        card = _read(args.scorecard).glossary
        terms = {n: t for n in card if (t := term_for(n, card)) is not None} | terms
    if args.all:
        print(explain_all(terms))
        return 0
    if not args.metric:
        raise UsageError("name a METRIC (e.g. PR, or PR[color]) or pass --all")
    try:
        print(explain(args.metric, terms, glossary_aliases(manifests())))
    except GlossaryError as exc:
        raise UsageError(str(exc)) from None
    return 0


def _cmd_history(args: argparse.Namespace) -> int:
    """Each checked metric across runs (docs/reports.md, "History across checkpoints"); exit 1 when the
    last run regressed against the best earlier run on a checked metric."""
    try:
        history = load_history(args.runs, args.tolerance)
    except (ScorecardError, RunPathError) as exc:
        raise UsageError(str(exc)) from exc
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as exc:  # an odd file: name it
        raise UsageError(f"cannot read the runs ({type(exc).__name__}: {exc})") from exc
    first = history.runs[0]
    for run in history.runs[1:]:  # every run against the first: one rule, as the pytest gate's
        _comparable(first.scorecard, run.scorecard, (first.run, run.run), args.allow_mismatch)
    if args.csv == "-":
        print(history_csv(history), end="")
    else:
        print(format_history(history))
    outputs = (("--csv", args.csv, write_history_csv), ("--html", args.html, write_history_html))
    for what, path, write in outputs:
        if path in (None, "", "-"):
            continue
        try:
            write(history, path)
        except OSError as exc:
            raise UsageError(f"{what} {path}: cannot write ({exc.strerror or exc})") from exc
        print(f"wrote {path}", file=sys.stderr if args.csv == "-" else sys.stdout)
    return history.exit_status


def _add_external(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str, module: str, help_text: str
) -> None:
    """Register ``name`` as a pass-through: the rest of the command line goes to ``module.main``."""
    p = subparsers.add_parser(name, help=help_text, add_help=False, prefix_chars="\0")
    p.add_argument("rest", nargs=argparse.REMAINDER)

    def run(args: argparse.Namespace) -> int:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module.startswith(exc.name):
                raise UsageError(
                    f"{name} is not available in this installation ({module} is missing)"
                ) from exc
            raise  # a dependency of the module is missing: a real bug, show it
        entry: Callable[[list[str]], int] | None = getattr(mod, "main", None)
        if entry is None:
            raise UsageError(f"{name} is not available: {module} has no main(argv)")
        return int(entry(list(args.rest)))

    p.set_defaults(func=run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="faithtests", description="Compare, merge and render faithtests scorecards."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("compare", help="metric deltas (and item flips) from run A (baseline) to run B; "
                       "exit 1 on a regression")
    p.add_argument("a", metavar="A", help="baseline: report dir or scorecard.json")
    p.add_argument("b", metavar="B", help="current: report dir or scorecard.json")
    p.add_argument(
        "--tolerance",
        type=_tolerance,
        default="0",
        help="absolute (0.01) or relative (5%%) slack before a move counts as a regression",
    )
    p.add_argument("--regression", choices=("paired", "point"), default=None,
                   help="paired: a regression needs the delta's 95%% CI (paired on shared items, McNemar "
                        "for 0/1 outcomes, else unpaired) beyond the tolerance; point: the point estimate "
                        "moved beyond it (default: the rule run B was gated with)")
    p.add_argument("--gate", choices=("point", "ci"), default=None,
                   help="older spelling of --regression: ci = paired, point = point")
    p.add_argument("--control", choices=CONTROLS, default=None, help="false-alarm control over the gated "
                   "metrics: holm, bh or none (default: run B's; holm for a run from before it)")
    p.add_argument("--allow-mismatch", type=_mismatch_fields, default=[], metavar="FIELDS",
                   help="compare runs whose fingerprints differ in these fields: FIELD[,FIELD] of "
                        f"{', '.join(COMPARABLE)}, or all (default: refused, as the pytest gate does)")
    p.add_argument("--allow-missing", action="store_true",
                   help="baseline results missing from B (a partial selection) do not make the exit "
                        "status 1")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--csv", metavar="PATH", default=None,
                   help="also write one row per metric (pandas-ready) to PATH; '-': only the CSV, on stdout")
    p.add_argument("--changed-only", action="store_true", help="hide unchanged metrics")
    p.add_argument("--noise-rule", action="store_true",
                   help="is B run A within float noise? Same verdicts, same results, each value within "
                        "1e-4 relative (one item for ratios of counts); exit 1 if not "
                        "(faithtests.scorecard.float_noise)")
    p.add_argument("--all", action="store_true",
                   help="compare and gate every metric (default: only metrics with a threshold check)")
    p.add_argument(
        "--max-flips", type=_count, default=50, help="item flips listed in text output (default 50)"
    )
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser("merge", help="merge shards of one run into one scorecard.json + scorecard.html")
    p.add_argument("parts", nargs="+", metavar="SHARD", help="report dirs or scorecard.json files")
    p.add_argument("-o", "--output", required=True, help="output report dir (or a .json path)")
    p.add_argument("--max-exemplars", type=_count, default=8, help="exemplars shown per test in the HTML")
    p.set_defaults(func=_cmd_merge)

    p = sub.add_parser("render", help="render scorecard.html from a scorecard.json")
    p.add_argument("json_path", metavar="JSON", help="report dir or scorecard.json")
    p.add_argument("-o", "--output", help="HTML path (default: next to the JSON, .html)")
    p.add_argument("--baseline", help="scorecard to show deltas against")
    p.add_argument("--tolerance", type=_tolerance, default="0", help="as for compare (colours deltas)")
    p.add_argument("--max-exemplars", type=_count, default=8, help="exemplars shown per test (default 8)")
    p.set_defaults(func=_cmd_render)

    p = sub.add_parser("explain", help="what a metric means: its definition, direction, unit and paper")
    p.add_argument("metric", metavar="METRIC", nargs="?",
                   help="a metric name in any case ([slice] ignored), or a name the docs use: DS, LSS, CECS")
    p.add_argument("--all", action="store_true", help="list every defined metric")
    p.add_argument("--scorecard", metavar="REPORT", default=None,
                   help="also use the definitions stored in this report dir or scorecard.json")
    p.set_defaults(func=_cmd_explain)

    p = sub.add_parser("history", help="each checked metric across runs (by step, then start time): a table, "
                       "an HTML page of trend plots; exit 1 when the last run regressed against the best "
                       "earlier run")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="report dir (its scorecard and its subfolders'), scorecard.json, or a glob of either")
    p.add_argument("--tolerance", type=_tolerance, default="0",
                   help="absolute (0.01) or relative (5%%) slack before a move counts as a regression")
    p.add_argument("--csv", metavar="PATH", default=None,
                   help="also write one row per run and checked metric to PATH; '-': only the CSV, on stdout")
    p.add_argument("--html", metavar="PATH", default="faith-history.html",
                   help="the self-contained HTML page (default faith-history.html; '' for none)")
    p.add_argument("--allow-mismatch", type=_mismatch_fields, default=[], metavar="FIELDS",
                   help="follow runs whose fingerprints differ in these fields: FIELD[,FIELD] of "
                        f"{', '.join(COMPARABLE)}, or all (default: refused, as the pytest gate does)")
    p.set_defaults(func=_cmd_history)

    for name, (module, help_text) in EXTERNAL_SUBCOMMANDS.items():
        _add_external(sub, name, module, help_text)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else 2
    func: Callable[[argparse.Namespace], int] = args.func
    for broken in disabled_protocols():  # a third-party protocol that disabled itself, with its reason
        print(f"warning: {broken}", file=sys.stderr)
    try:
        return func(args)
    except UsageError as exc:
        print(f"faithtests {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
