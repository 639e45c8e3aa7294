"""The controller's side of the plugin: collect the records riding on reports, gate against the
baseline, write the scorecard, summarise (registered by
:func:`faithtests.plugin.pytest_hooks.pytest_configure` on the controller only; never on an xdist worker).

Result keys are :func:`~faithtests.scorecard.model.test_key` values, so they do not depend on pytest's
rootdir. A test whose xdist worker died arrives as a failed report with ``when == "???"`` and no record:
it is recorded as ``crashed``. A run with an errored or crashed test is ``incomplete`` (never written as
a baseline).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faithtests.config import foreign_option
from faithtests.config import settings as protocol_settings
from faithtests.plugin import lifecycle, shard
from faithtests.plugin.item_keys import wants_record
from faithtests.plugin.lifecycle import EXIT_STATUS, ReportLock, final_notes, missing_message, none_selected
from faithtests.plugin.options import FAITH_TERMS, FAITH_THRESHOLDS, FaithOptions, get_options
from faithtests.reports.summary import summary_lines
from faithtests.reports.text_table import output_width
from faithtests.scorecard.baseline import Comparison, MetricDelta, compare
from faithtests.scorecard.fingerprint import (
    build_fingerprint,
    dataset_digest,
    merge_worker_models,
    now_iso,
    thresholds_digest,
)
from faithtests.scorecard.glossary import for_recorded, undefined_note
from faithtests.scorecard.history_run import run_record
from faithtests.scorecard.model import TestRecord, test_key
from faithtests.scorecard.scorecard import Scorecard, atomic_write_text, write_scorecard

PROPERTY = "faithtests"  # user_properties name carrying a TestRecord (JSON)
TEARDOWN_PROPERTY = "faithtests-teardown"  # a teardown error of a recorded test (JSON message)
MODELS_PROPERTY = "faithtests-models"  # model info registered by session fixtures (JSON)
INSUFFICIENT_PROPERTY = "faithtests-insufficient"  # the test stopped for too little data (its reason)
MESSAGE_CHARS = 1000
#: Exit status of a run whose only problem is INSUFFICIENT checks (no FAIL, regression or error), unless
#: --faith-allow-insufficient; pytest's own codes are 0-5.
EXIT_INSUFFICIENT = 6



def baseline_file(path: Path) -> Path:
    """A baseline given as a directory (existing, or without a ``.json`` suffix) means its scorecard."""
    return path / "scorecard.json" if path.is_dir() or path.suffix != ".json" else path


def strip_group(nodeid: str) -> str:
    """The node id without xdist's ``@group`` suffix (``--dist loadgroup``); an ``@`` inside the
    parameters' brackets is part of an id (as in ``distribution.group_of``)."""
    return nodeid[: nodeid.rfind("@")] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid


def key_of_nodeid(nodeid: str) -> str:
    """The result key of a bare node id (a crashed test's report has no item)."""
    return test_key(strip_group(nodeid))


# -- the controller: collect, gate, write, summarise ------------------------------------------------
class Controller:
    """Lives on the controller process only (registered in ``pytest_configure``)."""

    def __init__(self, config: pytest.Config, opts: FaithOptions, baseline: Scorecard | None) -> None:
        self.config = config
        self.opts = opts
        self.baseline = baseline
        self.start = now_iso()
        self.records: dict[str, TestRecord] = {}
        self.outputs: dict[str, list[dict[str, Any]]] = {}  # test key -> item-log rows (item_report)
        self.models: dict[str, dict[str, dict[str, Any]]] = {}  # worker -> label -> info
        self.scorecard: Scorecard | None = None
        self.comparison: Comparison | None = None
        self.missing: list[MetricDelta] = []  # the baseline results the gate failed on for not being produced
        self.written: list[Path] = []
        self.notes: list[str] = []
        self.nodeids: dict[str, str] = {}  # key -> node id: two node ids on one key is a usage error
        self.collisions: list[str] = []
        self.lock = ReportLock(opts.report_dir)
        self._started = False
        self.lock_error: str | None = None  # the report directory could not be taken: nothing is written
        self._run_fields: dict[str, Any] | None = None
        self.deselected = 0  # tests -k / -m / --faith-shard deselected (named when nothing was selected)
        self.diagnostics_left = 0  # faith_diagnostic tests a profile left out (xdist: a worker's count)
        self.session: pytest.Session | None = None  # at sessionfinish: its exit status is the final one

    def run_fields(self) -> dict[str, Any]:
        """This run's comparable fingerprint fields (known before any test runs), computed once."""
        if self._run_fields is None:
            files = self.config.stash[FAITH_THRESHOLDS].files
            self._run_fields = {
                "seed": self.opts.seed, "limit": self.opts.limit, "profile": self.opts.profile,
                "gate": self.opts.gate,
                "data": {k: {"path": str(v), **dataset_digest(v)} for k, v in sorted(self.opts.data.items())},
                "thresholds_sha256": thresholds_digest(files), "answer_mode": self.opts.answer_mode,
            }
        return self._run_fields

    def start_report(self) -> None:
        """Writable check + lock + mark the previous report superseded (see ``lifecycle``), once; never
        for ``--faith-api-estimate`` (it writes no report: :mod:`.api_cost`)."""
        if not self._started and not self.opts.api.estimate:
            self._started = True
            self.lock.acquire(self.notes)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.config.option.collectonly:  # runs nothing: the previous report stays current
            return
        if any(wants_record(item) for item in session.items):  # serial: the controller collected
            self.start_report()

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # under xdist the controller collects nothing: start when the run names faithtests inputs,
        # else at the first record (a plain unit-test run must not touch the report directory)
        if foreign_option(self.config, "numprocesses") and (
                self.opts.models or self.opts.vlms or self.opts.data or self.opts.baseline
                or self.opts.report_named):
            self.start_report()

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.lock.release()

    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        """A test stopped for too little data shows as ``I`` / ``INSUFFICIENT``, counted apart."""
        if report.when == "call" and any(n == INSUFFICIENT_PROPERTY for n, _ in report.user_properties):
            return "insufficient", "I", ("INSUFFICIENT", {"yellow": True})
        return None

    def _add(self, rec: TestRecord, nodeid: str) -> None:
        key = test_key(rec.test)
        if self.nodeids.setdefault(key, nodeid) != nodeid:
            clash = f"{self.nodeids[key]} and {nodeid} have the same result key {key!r}"
            self.collisions += [clash] if clash not in self.collisions else []
        if not self._started:  # xdist without faithtests options: start at the first record
            try:
                self.start_report()
            except pytest.UsageError as exc:  # nothing could be written: do not run on for hours
                self.lock_error = str(exc)
                dsession = self.config.pluginmanager.getplugin("dsession")  # xdist's loop stops on it
                if dsession is not None and not getattr(dsession, "shouldstop", False):
                    dsession.shouldstop = f"faithtests: {exc}"
        self.outputs[key], rec.outputs = rec.outputs, []  # to the item log, never the scorecard
        self.records[key] = rec

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == PROPERTY:
                self._add(TestRecord.from_json(json.loads(str(value))), strip_group(report.nodeid))
            elif name == TEARDOWN_PROPERTY:
                test, message = json.loads(str(value))
                if test in self.records:
                    rec = self.records[test]
                    rec.outcome = "error"
                    rec.message = "; ".join(m for m in (rec.message, f"teardown: {message}") if m)
            elif name == MODELS_PROPERTY:  # each process sends its own whole info of a label
                worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")
                self.models.setdefault(str(worker), {}).update(json.loads(str(value)))
        if str(report.when) == "???" and report.failed:  # xdist: the worker died running this test
            key = key_of_nodeid(report.nodeid)
            suite = key.partition("::")[0].removesuffix(".py").removeprefix("test_")
            message = f"crashed: {str(report.longrepr)[:MESSAGE_CHARS]}"
            if key in self.records:  # it had recorded (the worker died in teardown): keep its results
                rec = self.records[key]
                rec.outcome = "crashed"
                rec.message = "; ".join(m for m in (rec.message, message) if m)
            else:
                self._add(TestRecord(key, suite, outcome="crashed", message=message),
                          strip_group(report.nodeid))

    def _fingerprint(self) -> dict[str, Any]:
        models = merge_worker_models(self.models)
        for rec in sorted(self.records.values(), key=lambda r: r.test):
            models.update(rec.models)
        thresholds = self.config.stash[FAITH_THRESHOLDS]
        workers = foreign_option(self.config, "numprocesses")
        regression = {"regression": self.opts.regression, "regression_all": self.opts.regression_all,
                      "regression_control": self.opts.regression_control}
        return regression | build_fingerprint(
            root=self.config.rootpath,
            start=self.start,
            end=now_iso(),
            argv=list(self.config.invocation_params.args),
            seed=self.opts.seed,
            device=get_options(self.config).device,
            dtype=get_options(self.config).dtype,
            model_specs=self.opts.model_specs(),
            models=models,
            gate=self.opts.gate,
            tolerance=str(self.opts.tolerance),
            thresholds_files=thresholds.files,
            workers=workers if isinstance(workers, int) else None,
            limit=self.opts.limit,
            data=self.run_fields()["data"],
            answer_mode=self.run_fields()["answer_mode"],
        ) | shard.fingerprint(self.config) | {"settings": protocol_settings(self.config),
                                               "profile": self.run_fields()["profile"]}

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.session = session
        if self.opts.api.estimate:  # placeholder answers: no verdicts, no report (plugin.api_cost)
            return
        if not self.records:
            self._nothing_recorded(session)
            return
        status = self._status(session, exitstatus)
        sc = Scorecard(
            fingerprint=self._fingerprint(),
            tests=list(self.records.values()),
            status=status,
            run=run_record(self.opts.run_name, self.opts.step, self.start),
        ).sorted()
        path = baseline_file(self.opts.baseline) if self.opts.baseline is not None else None
        if self.baseline is not None and path is not None:
            self._gate(sc, self.baseline, path, session)
        self._insufficient(sc, session)
        self._glossary(sc)
        self.notes += lifecycle.diagnostics_note(self.opts.profile, self.diagnostics_left)
        self.scorecard = sc
        self._write(sc, session)
        self.lock.release()
        if self.opts.update_baseline and path is not None:
            self._update_baseline(sc, path, session, complete=status == "complete")

    def _glossary(self, sc: Scorecard) -> None:
        """The definitions of the recorded metrics (each protocol's glossary, loaded once at configure,
        where a broken one is a usage error); a metric none defines is "undefined" in the JSON and named
        in a note, never left out silently."""
        terms = self.config.stash[FAITH_TERMS]
        sc.glossary, missing = for_recorded((r.metric for r in sc.results), terms)
        if missing:
            self.notes.append(undefined_note(missing))

    @staticmethod
    def _failed(session: pytest.Session) -> None:
        """Exit status 1, unless something already made it non-zero."""
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _nothing_recorded(self, session: pytest.Session) -> None:
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:  # pytest's 5: say what to check
            self.notes.append(none_selected(self.deselected, self.baseline))
        elif self.baseline is not None and not (self.opts.allow_missing or self.opts.update_baseline):
            # a gate that compared nothing fails (no scorecard: nothing was recorded)
            n = len(self.baseline.results)
            self.notes.append(f"FAIL: no test of this run recorded results, so none of the baseline's "
                              f"{n} result(s) was compared; pass --faith-allow-missing if this selection "
                              f"is intended; {EXIT_STATUS}")
            self._failed(session)

    def _status(self, session: pytest.Session, exitstatus: int) -> str:
        """complete, incomplete (a test errored or crashed, or two shared a key) or interrupted."""
        complete = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and not (
            session.shouldstop or session.shouldfail
        )
        # a test that errored before recording (setup) or crashed its worker has no results to gate
        broken = sorted(r.test for r in self.records.values() if r.outcome in ("error", "crashed"))
        status = "complete" if not (broken or self.collisions) else "incomplete"
        if broken:
            self.notes.append(f"ERROR: {len(broken)} test(s) errored or crashed: {', '.join(broken[:10])}"
                              + (" ..." if len(broken) > 10 else ""))
        for collision in self.collisions:
            self.notes.append(f"ERROR: {collision}: rename one test file or test")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        return status if complete else "interrupted"

    def _gate(self, sc: Scorecard, baseline: Scorecard, path: Path, session: pytest.Session) -> None:
        """Regressions against the baseline and its results this run did not produce."""
        self.comparison = compare(sc, baseline, self.opts.tolerance, gate=self.opts.regression_gate,
                                  checked_only=not self.opts.regression_all,
                                  control=self.opts.regression_control)
        sc.baseline = str(path)
        sc.regressions = [d.to_json() for d in self.comparison.regressions]
        if sc.regressions and not self.opts.update_baseline:
            self._failed(session)
            n = len(sc.regressions)
            self.notes.append(f"FAIL: {n} regression(s) against the baseline: {EXIT_STATUS}")
        missing = shard.split_missing(self.config, self.comparison.missing_gated, self.notes)  # --faith-shard
        if missing and not (self.opts.allow_missing or self.opts.update_baseline):
            self._failed(session)
            self.notes.extend(missing_message(missing))
            self.missing = missing

    def _update_baseline(self, sc: Scorecard, path: Path, session: pytest.Session, *, complete: bool) -> None:
        refused = self._refusals(sc)
        if not complete:
            self.notes.append(f"baseline NOT updated (run {sc.status}): {path}")
        elif refused and not self.opts.force_update_baseline:
            kept = "the old one is intact" if path.is_file() else "none was written"
            self.notes.append(f"ERROR: baseline NOT updated, {kept} ({path}): "
                              f"{'; '.join(refused)}; pass --faith-force-update-baseline to write it "
                              f"anyway; {EXIT_STATUS}")
            if session.exitstatus in (pytest.ExitCode.OK, EXIT_INSUFFICIENT):
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        else:
            from faithtests.plugin.item_report import keep_baseline_log  # lazy: as in _write_items

            try:  # its item log first (the next run's flips): when that fails, nothing is replaced
                self.written += [*keep_baseline_log(self.written, path), write_scorecard(sc, path)]
            except OSError as exc:  # a full disk or read-only place: say so, still print the summary
                self._write_failed("the baseline", path, exc, session, " (the old one, if any, is intact)")
                return
            forced = f" (forced despite: {'; '.join(refused)})" if refused else ""
            self.notes.append(f"baseline updated: {path}{forced}")

    def _write_failed(self, what: str, path: Path, exc: OSError, session: pytest.Session,
                      extra: str = "") -> None:
        """One ERROR line naming the file and the system's reason; exit status 1 unless already worse."""
        reason = exc.strerror or str(exc)
        self.notes.append(f"ERROR: could not write {what} {path}: {reason}{extra}; {EXIT_STATUS}")
        if session.exitstatus in (pytest.ExitCode.OK, EXIT_INSUFFICIENT):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _insufficient(self, sc: Scorecard, session: pytest.Session) -> None:
        """INSUFFICIENT checks and tests: a note, and exit status 6 when nothing else failed (unless
        --faith-allow-insufficient); they never count as a pass."""
        short = [f"{r.suite}/{r.metric}" + (f"[{r.slice}]" if r.slice else "") + f" ({r.model or '-'})"
                 for r in sc.results if r.verdict == "insufficient"]
        short += [f"test {t.test}" for t in sc.tests
                  if t.outcome == "insufficient" and not any(r.insufficient for r in t.results)]
        if not short:
            return
        listed = ", ".join(short[:10]) + (" ..." if len(short) > 10 else "")
        if self.opts.allow_insufficient:
            self.notes.append(f"INSUFFICIENT: {len(short)} check(s) with too little data for a verdict "
                              f"(accepted by --faith-allow-insufficient; not a pass): {listed}")
            return
        self.notes.append(f"INSUFFICIENT: {len(short)} check(s) with too little data for a verdict: "
                          f"{listed}; {EXIT_STATUS} ({EXIT_INSUFFICIENT} when nothing else failed; "
                          "--faith-allow-insufficient accepts them)")
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = EXIT_INSUFFICIENT

    def _refusals(self, sc: Scorecard) -> list[str]:
        """Why this run must not replace the baseline (see --faith-force-update-baseline)."""
        out: list[str] = []
        bad = sorted(t.test for t in sc.tests if t.outcome in ("failed", "error", "crashed"))
        if bad:
            more = " ..." if len(bad) > 3 else ""
            out.append(f"{len(bad)} test(s) failed or errored ({', '.join(bad[:3])}{more})")
        if not sc.results or all(t.outcome == "skipped" for t in sc.tests):
            out.append("every test was skipped or recorded nothing")
        short = [r for r in sc.results if r.verdict == "insufficient"]
        stuck = [t for t in sc.tests
                 if t.outcome == "insufficient" and not any(r.insufficient for r in t.results)]
        if short or stuck:
            out.append(f"{len(short) + len(stuck)} INSUFFICIENT check(s) or step(s) with too little data")
        return out + self._against_baseline(sc)

    def _against_baseline(self, sc: Scorecard) -> list[str]:
        """Why this run must not replace the baseline it was compared with: it regressed (its checks
        may still pass: a better baseline is never replaced by a worse run unless forced), or it
        produced fewer results."""
        if self.baseline is None:
            return []
        out: list[str] = []
        regressed = self.comparison.regressions if self.comparison is not None else []
        if regressed:
            first = ", ".join(f"{d.label} ({d.model})" for d in regressed[:3])
            first += " ..." if len(regressed) > 3 else ""
            out.append(f"{len(regressed)} regression(s) against the baseline it would replace ({first})")
        missing = self.comparison.missing if self.comparison is not None else []
        n_base, n_run = len(self.baseline.results), len(sc.results)
        if missing or n_run < n_base:
            out.append(f"this run produced {n_run} result(s), the baseline holds {n_base} "
                       f"({len(missing)} of them not produced: a -k selection or a renamed label?)")
        return out

    def _write(self, sc: Scorecard, session: pytest.Session) -> None:
        out = self.opts.report_dir
        if self.lock_error is not None:  # another run owns the directory: never clobber its report
            self.notes.append(f"ERROR: scorecard not written: {self.lock_error}")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        try:
            self.written.append(write_scorecard(sc, out / "scorecard.json"))
        except OSError as exc:
            self._write_failed("the scorecard", out / "scorecard.json", exc, session)
            return
        html_path = out / "scorecard.html"
        try:
            from faithtests.reports.html import render_html  # lazy: jinja and plots, only when writing
        except ImportError as exc:
            if isinstance(exc, ModuleNotFoundError) and exc.name == "faithtests.reports.html":
                self.notes.append("warning: HTML renderer not available; wrote scorecard.json only")
            else:
                self.notes.append(f"ERROR: HTML renderer failed to import: {exc}")
            html_path.unlink(missing_ok=True)  # a stale HTML must not contradict the new JSON
            return
        try:
            html = render_html(sc, self.baseline, tolerance=self.opts.tolerance,
                               gate=self.opts.regression_gate)
            atomic_write_text(html_path, html)
            self.written.append(html_path)
        except OSError as exc:
            html_path.unlink(missing_ok=True)
            self._write_failed("the HTML scorecard", html_path, exc, session)
        except Exception as exc:  # the JSON is written; report the HTML failure loudly, keep the run
            html_path.unlink(missing_ok=True)
            self.notes.append(f"ERROR: HTML rendering failed: {type(exc).__name__}: {exc}")
        self._write_items(sc, out, session)

    def _write_items(self, sc: Scorecard, out: Path, session: pytest.Session) -> None:
        """The item log and its viewer (``faithtests.plugin.item_report``); a failure is an ERROR line."""
        from faithtests.plugin.item_report import write_item_report  # lazy: jinja, only when writing

        base = baseline_file(self.opts.baseline) if self.opts.baseline is not None else None
        try:
            self.written += write_item_report(out, sc, self.outputs, base, self.notes)
        except OSError as exc:
            self._write_failed("the item log", out / "items.jsonl.gz", exc, session)
        except Exception as exc:  # the scorecard is written; say what broke, keep the run
            self.notes.append(f"ERROR: item log or viewer failed: {type(exc).__name__}: {exc}")

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        # the notes state the final exit status (``exitstatus`` is the one before sessionfinish hooks ran)
        self.notes[:] = final_notes(self.notes, self.session.exitstatus if self.session else exitstatus)
        if self.scorecard is None:
            lines = [n for n in self.notes if n.startswith(("FAIL", "ERROR"))]  # nothing recorded
            if not lines:
                return
        else:
            verbose = config.get_verbosity() > 0
            width = output_width(terminalreporter.isatty(), config.get_terminal_writer().fullwidth)
            lines = summary_lines(self.scorecard, self.written, self.comparison, self.notes, full=verbose,
                                  quiet=config.get_verbosity() < 0, width=width, missing=self.missing)
        terminalreporter.write_sep("=", "faithtests scorecard")
        for line in lines:
            red = line.startswith(("REGRESSION", "ERROR", "FAIL"))
            terminalreporter.write_line(line, red=red, bold=red)
