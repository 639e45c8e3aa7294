"""What a run asks its served models (``openai:``), per suite, and ``--faith-api-estimate``: the same
counted before anything is asked.

- :func:`endpoint_info` (after each test, from the model fixtures): a real run's requests per suite, in
  the scorecard's ``fingerprint.models.LABEL.endpoint`` (``suites``; the probe's apart, as ``probe``).
- :func:`configure` (from ``pytest_hooks.pytest_configure``, once the options are read and before any
  model or a protocol's judge loads): a run naming no ``openai:`` model, or asking to write a baseline,
  is a usage error; every endpoint the process loads from then on probes and then only counts
  (:mod:`faithtests.models.api_estimate`); the controller gets an :class:`EstimateSummary`.
- Collection: a recorded test not parametrised with an ``openai:`` model is deselected (an in-process
  model would run for real: it costs time, not money); how many, and which models, reach the controller
  (under xdist in ``workeroutput``, as each worker collects them all).
- Each report of a phase of a test carries what the process's endpoints counted since the previous
  report (the ``faithtests-estimate`` user property: suite and, per endpoint, the counts of a
  :class:`~faithtests.models.api_estimate.Tally`). Every count rides on exactly one report, so the
  controller's plain sum over reports is the run's, however the tests were spread over workers. A
  session fixture's requests count for the test whose setup ran it: a suite's own fixtures, its suite.
- A test of an estimating model that ran is reported skipped, "--faith-api-estimate: counted N
  request(s) to send, sent none": whatever it concluded, it concluded on placeholder answers. One that
  raised on them (a suite asserting that some answer was read) is skipped too, saying so, and the
  summary names it: a request it would have made after that point is not counted. A test skipped for
  its own reason (not applicable) keeps it; an :class:`~faithtests.models.errors.EndpointError` fails.
- The controller writes no report (:class:`~faithtests.plugin.controller.Controller`) and prints the
  table per endpoint: suite, requests to send, cached, images, and whether the count is exact.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from faithtests.models.api_estimate import TALLY_FIELDS, Tally, estimate_endpoints, estimating_models
from faithtests.models.errors import EndpointError
from faithtests.plugin.controller import INSUFFICIENT_PROPERTY, MESSAGE_CHARS, strip_group
from faithtests.plugin.item_keys import model_param, suite_name, wants_record
from faithtests.plugin.options import FAITH_OPTIONS, FaithOptions
from faithtests.protocols import manifests
from faithtests.reports.text_table import output_width, table
from faithtests.scorecard.recording import FaithCheckFailed

PROPERTY = "faithtests-estimate"  # user_properties name: {"suite": ..., "counts": {spec: tally}}
STOPPED_PROPERTY = "faithtests-estimate-stopped"  # a test that raised on the placeholders: the exception
PREFIX = "openai:"
_LEFT = "faith_estimate_left"  # xdist workeroutput key: {"tests": n, "models": [labels]}
_SUMMARY = pytest.StashKey["EstimateSummary"]()
_LAST = pytest.StashKey[dict[int, Tally]]()  # id(endpoint) -> its tally at the last report
_TEST = pytest.StashKey[Tally]()  # what a test counted over its phases so far
_SENT = pytest.StashKey[dict[int, tuple[int, dict[str, int]]]]()  # id(endpoint) -> (requests seen, per suite)
HOW = ("an estimate made without sending: each request the suites make is fixed by the data and by what "
       "the probe found (option log-probabilities or generated answers), so the count is {exact}; price "
       "it per request and per image, and see --faith-api-max-requests for a budget")


def configure(config: pytest.Config, opts: FaithOptions) -> None:
    """See the module doc; nothing without ``--faith-api-estimate``."""
    if not opts.api.estimate:
        return
    if not any(spec.startswith(PREFIX) for spec in opts.model_specs().values()):
        raise pytest.UsageError("--faith-api-estimate counts what openai: models would be sent, and the run "
                                "names none (--faith-vlm LABEL=openai:MODEL@BASE_URL)")
    if opts.update_baseline:
        raise pytest.UsageError("--faith-api-estimate writes no report, so no baseline: drop "
                                "--faith-update-baseline (run the estimate, then the real run)")
    estimate_endpoints(True)
    if not hasattr(config, "workerinput"):
        summary = EstimateSummary(opts)
        config.stash[_SUMMARY] = summary
        config.pluginmanager.register(summary, "faithtests-estimate")


def _on(config: pytest.Config) -> bool:
    opts = config.stash.get(FAITH_OPTIONS, None)
    return opts is not None and opts.api.estimate


def pytest_unconfigure(config: pytest.Config) -> None:
    if _on(config):
        estimate_endpoints(False)


def _served(item: pytest.Item) -> bool:
    spec = model_param(item)
    return spec is not None and spec.spec.startswith(PREFIX)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Recorded tests of in-process models (or of none) are deselected (module doc)."""
    if not _on(config):
        return
    left = [item for item in items if wants_record(item) and not _served(item)]
    if not left:
        return
    items[:] = [item for item in items if not (wants_record(item) and not _served(item))]
    config.hook.pytest_deselected(items=left)
    labels = sorted({m.label for item in left if (m := model_param(item)) is not None})
    if (summary := config.stash.get(_SUMMARY, None)) is not None:
        summary.left(len(left), labels)
    if (output := getattr(config, "workeroutput", None)) is not None:  # xdist: for the controller
        output[_LEFT] = {"tests": len(left), "models": labels}


def endpoint_info(item: pytest.Item, model: Any) -> dict[str, Any]:
    """A served model's ``endpoint`` fingerprint entry after ``item`` (a real run's cost): requests sent by
    this process (the probe's included), the probe's, bounded option letters, and per suite the requests
    its tests sent (each test's since the previous one; under xdist the entries are summed over workers)."""
    seen = item.config.stash.setdefault(_SENT, {})
    counted, suites = seen.get(id(model), (model.probe_requests, {}))
    if model.requests > counted:
        suite = suite_name(item)
        suites[suite] = suites.get(suite, 0) + model.requests - counted
    seen[id(model)] = (model.requests, suites)
    return {"requests": model.requests, "bounded_letters": model.bounded, "probe": model.probe_requests,
            "suites": dict(suites)}


def _counted(config: pytest.Config) -> dict[str, Tally]:
    """Per endpoint (spec), what this process's endpoints counted since the last call."""
    last = config.stash.setdefault(_LAST, {})
    out: dict[str, Tally] = {}
    for model in estimating_models():
        now = model.tally()
        delta = now.minus(last.get(id(model), Tally()))
        last[id(model)] = now
        if delta:
            out[model.spec] = out.get(model.spec, Tally()).plus(delta)
    return out


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after pytest_hooks has settled the report
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if not _on(item.config):
        return report
    counts = _counted(item.config)
    if counts:
        prop = {"suite": suite_name(item), "counts": {k: v.as_dict() for k, v in counts.items()}}
        report.user_properties = [*report.user_properties, (PROPERTY, json.dumps(prop, sort_keys=True))]
    so_far = item.stash.get(_TEST, Tally())
    for tally in counts.values():
        so_far = so_far.plus(tally)
    item.stash[_TEST] = so_far
    if call.when == "call" and _served(item):
        _as_estimate(item, call, report, so_far)
    return report


def _as_estimate(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport,
                 counted: Tally) -> None:
    """A verdict reached on placeholder answers is none: the test is skipped with what it counted (module
    doc)."""
    exc = call.excinfo.value if call.excinfo is not None else None
    if report.skipped or isinstance(exc, EndpointError):
        return
    cached = f" ({counted.cached} cached)" if counted.cached else ""
    why = f"--faith-api-estimate: counted {counted.requests} request(s) to send{cached}, sent none"
    if report.failed and exc is not None and not isinstance(exc, FaithCheckFailed):
        stopped = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:MESSAGE_CHARS]
        why += f"; then it stopped on the placeholder answers ({stopped})"
        report.user_properties = [*report.user_properties, (STOPPED_PROPERTY, stopped)]
    report.outcome = "skipped"
    report.longrepr = (str(item.path), (item.location[1] or 0) + 1, f"Skipped: {why}")
    report.sections = [s for s in report.sections if not s[0].startswith("Captured ")]
    report.user_properties = [(k, v) for k, v in report.user_properties if k != INSUFFICIENT_PROPERTY]


# -- the controller: sum the reports' counts, print the table ----------------------------------------
@dataclass
class EstimateSummary:
    """Controller only (registered by :func:`configure`)."""

    opts: FaithOptions
    counts: dict[str, dict[str, Tally]] = field(default_factory=dict)  # spec -> suite -> tally
    deselected: int = 0
    deselected_models: set[str] = field(default_factory=set)
    stopped: list[str] = field(default_factory=list)  # "node id (exception)": raised on the placeholders

    def left(self, tests: int, labels: list[str]) -> None:
        self.deselected = max(self.deselected, tests)  # each xdist worker collects (and leaves) them all
        self.deselected_models.update(labels)

    def add_report(self, prop: Mapping[str, Any]) -> None:
        suite = str(prop["suite"])
        for spec, tally in dict(prop["counts"]).items():
            per = self.counts.setdefault(str(spec), {})
            got = Tally(**{f: int(tally.get(f, 0)) for f in TALLY_FIELDS})
            per[suite] = per.get(suite, Tally()).plus(got)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == PROPERTY:
                self.add_report(json.loads(str(value)))
            elif name == STOPPED_PROPERTY:
                self.stopped.append(f"{strip_group(report.nodeid)} ({value})")

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        left = getattr(node, "workeroutput", {}).get(_LEFT)
        if isinstance(left, dict):
            self.left(int(left.get("tests", 0)), [str(x) for x in left.get("models", [])])

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        width = output_width(terminalreporter.isatty(), config.get_terminal_writer().fullwidth)
        terminalreporter.write_sep("=", "faithtests API estimate (--faith-api-estimate)")
        for line in self.lines(width):
            terminalreporter.write_line(line)

    def lines(self, width: int | None = None) -> list[str]:
        labels = self.opts.model_specs()
        notes = {s: m.answer_dependent for m in manifests() for s in m.suites if m.answer_dependent}
        out: list[str] = []
        for spec in sorted(self.counts):
            named = [label for label, s in labels.items() if s == spec and label != spec]
            out += [f"endpoint {' = '.join([*named, spec])}:", *endpoint_table(self.counts[spec], width)]
        if not self.counts:
            out.append("no endpoint was asked anything (every selected test skipped before asking)")
        out += bound_lines(self.counts, notes, stopped=bool(self.stopped))
        if self.deselected:
            models = ", ".join(sorted(self.deselected_models)) or "no model"
            out.append(f"deselected {self.deselected} test(s) of in-process models ({models}): they would "
                       "run for real, costing time, not money")
        if self.stopped:
            out.append(f"{len(self.stopped)} test(s) stopped on the placeholder answers: a request one of "
                       "them would have made after that point is not counted (a lower bound there):")
            out += [f"  {s}" for s in self.stopped]
        out.append("no report written: an estimate has no verdicts (the skipped tests sent nothing)")
        return out


def endpoint_table(per_suite: Mapping[str, Tally], width: int | None = None) -> list[str]:
    """suite | requests to send | cached | images (| up to ... more) rows and a total row."""
    total = Tally()
    for tally in per_suite.values():
        total = total.plus(tally)
    more = total.more > 0
    header = ["suite", "requests to send", "cached", "images", *(["answers may add up to"] if more else [])]

    def row(name: str, t: Tally) -> list[str]:
        cells = [name, f"{t.requests:,}", f"{t.cached:,}", f"{t.images:,}"]
        return cells + ([f"{t.more:,}"] if more else [])

    rows = [row(suite, per_suite[suite]) for suite in sorted(per_suite)] + [row("total", total)]
    fitted = table(header, rows, None if width is None else width - 2, wrap=[0], rule=True)
    lines = ["  " + line for line in fitted]
    return [*lines, f"  sent: {total.sent} request(s), the probe at load (nothing after it)"]


def bound_lines(counts: Mapping[str, Mapping[str, Tally]], notes: Mapping[str, str],
                stopped: bool = False) -> list[str]:
    """Whether each count is exact (:data:`HOW`), and where the answers decide more."""
    suites = sorted({s for per in counts.values() for s in per})
    bounded = [f"{s}: a lower bound: {notes[s]}" for s in suites if s in notes]
    more = any(t.more for per in counts.values() for t in per.values())
    exact = "exact except where said below" if bounded or more or stopped else "exact"
    out = [HOW.format(exact=exact) + ".", *bounded]
    if more:
        out.append("'answers may add up to': the endpoint scores given replies, and each option letter "
                   "outside the top 20 log-probabilities it lists is scored by one more request: how many "
                   "only the answers say (an upper bound on that extra)")
    return out
