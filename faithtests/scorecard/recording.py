"""The ``faith`` recorder: what a suite test records (metrics, checks, exemplars, plots, item outcomes).

One :class:`Faith` exists per test; its :attr:`Faith.record` (a :class:`TestRecord`) rides to the
controller on the pytest report. Nothing here imports pytest or torch; PIL loads only for exemplars.

Labels: every record carries the currently bound ``model`` and ``variant`` (see :meth:`Faith.bind`), so
one test can record several models/variants side by side.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, cast

from faithtests.scorecard.coverage import NONFINITE, coverage_problem, nonfinite_problem, short_of_data
from faithtests.scorecard.gate_kinds import ThresholdError
from faithtests.scorecard.glossary import MetricTerm, recorded_higher
from faithtests.scorecard.item_log import output_row
from faithtests.scorecard.kinds import is_fatal, one_vocabulary
from faithtests.scorecard.model import (
    Exemplar,
    GateMode,
    InvalidCount,
    ItemValues,
    MetricResult,
    MetricRow,
    Op,
    Plot,
    Series,
    TestRecord,
    passes,
)
from faithtests.scorecard.model import FaithCheckFailed as FaithCheckFailed  # re-exported: suites use it
from faithtests.scorecard.model import FaithInsufficient as FaithInsufficient
from faithtests.scorecard.record_values import (
    THUMBNAIL_SIDE,
    Counts,
    call_site,
    check_exemplar,
    count,
    counted_rows,
    exemplar,
    failure_message,
    finite,
    fmt_number,
    json_safe,
    metric_ci,
    number,
    per_item_values,
    thumbnail_data_uri,
)
from faithtests.scorecard.thresholds import ResolvedThreshold, Thresholds, higher_is_better

__all__ = ["THUMBNAIL_SIDE", "Faith", "FaithCheckFailed", "FaithInsufficient", "MissingThresholdError",
           "ThresholdDirectionError", "fmt_number", "items_key", "json_safe", "thumbnail_data_uri"]
PlotKind = Literal["line", "bar", "scatter"]


class MissingThresholdError(LookupError):
    """``check()`` found no threshold in the thresholds files and none was passed explicitly."""


class ThresholdDirectionError(ThresholdError):
    """A threshold's op contradicts the direction the metric was recorded with (``higher_is_better``)."""


def items_key(name: str, model: str = "", variant: str = "base") -> str:
    """Key of an item set in :attr:`TestRecord.items`: the name, qualified by model/variant when bound
    (``"flips | clip | base"``) so two models' items in one test never collide."""
    return name if (not model and variant == "base") else f"{name} | {model} | {variant}"



class Faith:
    """Records one test's results. Created by the ``faith`` fixture; usable directly in library tests."""

    def __init__(
        self,
        test: str,
        suite: str,
        *,
        thresholds: Thresholds | None = None,
        gate: GateMode = "point",
        model: str = "",
        variant: str = "base",
        max_exemplars: int = 8,
        role: str | None = None,
        declared: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
        limit: int | None = None,
        terms: Mapping[str, MetricTerm] | None = None,
    ) -> None:
        self.record = TestRecord(test=test, suite=suite)
        self.limit = limit  # --faith-limit: a point failure its CI cannot confirm is then INSUFFICIENT
        self.thresholds = thresholds if thresholds is not None else Thresholds()
        self.gate: GateMode = gate
        self.max_exemplars = max_exemplars
        self.dropped_exemplars = 0  # exemplars beyond the cap (not converted, not stored)
        self._model = model
        self._variant = variant
        self._family: str | None = None
        self._role = role
        self._declared = declared if declared is not None else {}
        self._terms = terms if terms is not None else {}  # the glossary: each metric's declared direction
        self._infinite: dict[tuple[str, str | None, str, str], float] = {}  # metrics recorded as +-inf
        #: Set by the plugin's ``faith`` fixture: :meth:`check` records every verdict and keeps what did
        #: not pass; :meth:`settle` (after the test function) raises once for all of them, so one failed
        #: check never hides the verdicts of the checks after it. Off: each check raises at once.
        self.deferred = False
        self._unsettled: list[FaithCheckFailed] = []
        self._output_keys: set[tuple[str, str | None, str, str, str]] = set()  # item-log rows recorded
        #: (metric, slice, (model, variant, family, role)) of the rows :meth:`rows` kept as gates
        self._gates: list[tuple[str, str | None, tuple[str, str, str | None, str | None]]] = []

    # -- labels -------------------------------------------------------------------------------------
    @property
    def suite(self) -> str:
        return self.record.suite

    @property
    def test(self) -> str:
        return self.record.test

    @property
    def model(self) -> str:
        return self._model

    @property
    def variant(self) -> str:
        return self._variant

    def bind(self, *, model: str | None = None, variant: str | None = None,
             family: str | None = None) -> Faith:
        """Set the labels of subsequent records. Changing the model forgets an explicit family and the
        role of the model the test was parametrised with."""
        if model is not None and model != self._model:
            self._model, self._family, self._role = str(model), None, None
        if variant is not None:
            self._variant = str(variant)
        if family is not None:
            self._family = family.lower()
        return self

    def model_info(self, label: str, info: Mapping[str, Any]) -> None:
        """Fingerprint info of a model used by this test (spec, checkpoint hash, family, ...);
        non-JSON values (paths, dtypes) are stored as strings."""
        self.record.models[str(label)] = json_safe(info, f"model_info({label!r})")

    def families(self) -> list[str]:
        """Candidate model families for threshold lookup, most specific first: the bound family, then
        what the model declares (the ``score`` kind of a non-cosine scorer such as
        ``caption_mean_logprob``, then its ``family``) in the role the test uses it, else in the info
        this test recorded with :meth:`model_info`. Labels are never parsed."""
        out: list[str] = []
        if self._family:
            out.append(self._family)
        declared = self._declared.get((self._model, self._role)) if self._role else None
        info = declared or self.record.models.get(self._model) or {}
        if info.get("score") and info["score"] != "cosine":  # a non-cosine scale before the architecture
            out.append(str(info["score"]).lower())
        if info.get("family"):
            out.append(str(info["family"]).lower())
        return list(dict.fromkeys(out))

    # -- metrics ------------------------------------------------------------------------------------
    def _find(self, name: str, slice: str | None) -> int | None:
        for i, r in enumerate(self.record.results):
            if (r.metric, r.slice, r.model, r.variant) == (name, slice, self._model, self._variant):
                return i
        return None

    def _new_key(self, name: str, slice: str | None) -> str:
        """``suite/name[slice]`` of a metric not yet recorded for the bound model/variant."""
        if not name or "[" in name or "]" in name:
            raise ValueError(f"metric name {name!r} must be non-empty without brackets (use slice=)")
        where = f"{self.suite}/{name}" + (f"[{slice}]" if slice else "")
        if self._find(name, slice) is not None:
            raise ValueError(
                f"{where} recorded twice for model={self._model!r}, variant={self._variant!r}"
            )
        return where

    def metric(self, name: str, value: Any, *, ci: Sequence[Any] | None = None, n: int | None = None,
               higher_is_better: bool | None = None, slice: str | None = None,
               per_item: ItemValues | Mapping[Any, Any] | None = None) -> MetricResult:
        """Record a metric value (NaN -> undefined, which never passes a check). ``per_item``: the item
        values (or an :class:`ItemValues` with clusters) the value is the mean of, for the paired gate.
        Its direction is its glossary term's (:func:`~faithtests.scorecard.glossary.recorded_higher`):
        ``higher_is_better`` only for a metric whose term declares no better side."""
        where = self._new_key(name, slice)
        higher_is_better = recorded_higher(name, higher_is_better, self._terms, where)
        v = number(value, f"{where} value")
        if v is not None and math.isinf(v):  # a broken model's output, not a suite bug: undefined, said why
            self._infinite[(name, slice, self._model, self._variant)] = v
            v = None
        ci_t, ci_note = metric_ci(ci, v, where)
        result = MetricResult(
            suite=self.suite, test=self.test, metric=name, value=v, model=self._model,
            variant=self._variant, ci=ci_t, n=count(n, where),
            higher_is_better=bool(higher_is_better), slice=slice, ci_note=ci_note,
            per_item=per_item_values(per_item, v, where),
        )
        self.record.results.append(result)
        return result

    def rows(self, rows: Iterable[MetricRow], *, gate: bool = False) -> list[MetricResult]:
        """Record each of a protocol's :class:`MetricRow` results (its pure functions return them). With
        ``gate`` (the suite's gated parametrisation), the rows the protocol marks ``gated`` are checked
        by :meth:`gate_rows` when the test ends, after every invalid count it records: the protocol
        declares which results are gates, the thresholds file their values, the suite neither."""
        rows = list(rows)
        out = [self.metric(r.name, r.value, ci=r.ci, n=r.n, higher_is_better=r.higher_is_better,
                           slice=r.slice, per_item=r.per_item) for r in rows]
        if gate:
            bound = (self._model, self._variant, self._family, self._role)
            self._gates += [(r.name, r.slice, bound) for r in rows if r.gated]
        return out

    def pending_gates(self) -> set[str]:
        """The metrics of the rows kept as gates that :meth:`gate_rows` has not judged yet."""
        return {name for name, _, _ in self._gates}

    def gate_rows(self) -> None:
        """:meth:`check` every row :meth:`rows` kept as a gate and that no explicit check judged, under the
        labels it was recorded with (the fixture calls this, then :meth:`settle`)."""
        __tracebackhide__ = True
        gates, self._gates = self._gates, []
        labels = (self._model, self._variant, self._family, self._role)
        try:
            for name, slice_, recorded_with in gates:
                self._model, self._variant, self._family, self._role = recorded_with
                idx = self._find(name, slice_)
                if idx is None or self.record.results[idx].op is None:
                    self.check(name, slice=slice_)
        finally:
            self._model, self._variant, self._family, self._role = labels

    def check(self, name: str, op: Op | None = None, threshold: float | None = None, *,
              slice: str | None = None, min_n: int | None = None, unit: str = "items") -> MetricResult:
        """Compare a recorded metric with its threshold, record the verdict, and assert.

        The threshold comes from the thresholds files (family-specific value when the model's family
        has one); ``op``/``threshold`` are the fallback when the files define none. Gate ``point``
        compares the value; gate ``ci`` the conservative CI bound (lo for >=/>, hi for <=/<), or the
        value when no CI was recorded (the result then says gate="point").

        PASS; FAIL (:class:`FaithCheckFailed`; broken outputs such as non-finite scores too); INSUFFICIENT
        (:class:`FaithInsufficient`) under the coverage rule or :func:`coverage.short_of_data` (this
        check's ``min_n`` of ``unit``: "needs >= 20 strict-correct items, got 16"). Raised at once, or
        kept for :meth:`settle` when :attr:`deferred` (the suites' fixture)."""
        __tracebackhide__ = True  # pytest shows the suite's line, not this one
        where = f"{self.suite}/{name}" + (f"[{slice}]" if slice else "")
        idx = self._find(name, slice)
        if idx is None:
            raise LookupError(
                f"{where}: check() before metric() for model={self._model!r}, variant={self._variant!r}"
            )
        r = self.record.results[idx]
        resolved = self.thresholds.lookup(self.suite, name, slice, self.families())
        op, threshold = self._threshold(r, resolved, op, threshold, where)
        r = self._judged(r, op, threshold, min_n, unit)
        if resolved is not None and resolved.kind:
            r = replace(r, gate_kind=resolved.kind, gate_note=resolved.note or None)
        self.record.results[idx] = r
        family = resolved.family if resolved is not None else None
        inf = self._infinite.get((r.metric, r.slice, r.model, r.variant))
        if r.passed:
            return r
        message = failure_message(r, family, inf)
        exc = FaithInsufficient(message) if r.insufficient else FaithCheckFailed(message)
        if not self.deferred:
            raise exc
        self._unsettled.append(exc.with_traceback(call_site()))
        return r

    def settle(self) -> None:
        """Raise for the deferred checks that did not pass (:attr:`deferred`): a FAIL (every failed
        check's message, one per line) before INSUFFICIENT (every short check's reason), none if all
        passed. A test that recorded broken (non-finite) outputs fails too, checked or not: its recorded
        numbers would otherwise pass silently. The kept verdicts are forgotten, so a second call raises
        nothing. The rows kept as gates are checked first (:meth:`gate_rows`)."""
        __tracebackhide__ = True
        self.gate_rows()
        unsettled, self._unsettled = self._unsettled, []
        failed = [e for e in unsettled if not isinstance(e, FaithInsufficient)]
        if not failed and (broken := self._broken()):
            failed = [FaithCheckFailed(broken)]
        if failed:  # (where the first one was checked: its traceback)
            joined = FaithCheckFailed("\n".join(map(str, failed))) if len(failed) > 1 else failed[0]
            raise joined.with_traceback(failed[0].__traceback__)
        if unsettled:
            short = FaithInsufficient("; ".join(map(str, unsettled))) if len(unsettled) > 1 else unsettled[0]
            raise short.with_traceback(unsettled[0].__traceback__)

    def _broken(self) -> str:
        """What this test's fatal invalid counts say (non-finite model outputs), "" when none."""
        return "; ".join(f"{self.suite}: {nonfinite_problem(i)}" for i in self.record.invalid
                         if is_fatal(i.kind) and i.count)

    def _threshold(self, r: MetricResult, resolved: ResolvedThreshold | None, op: Op | None,
                   threshold: float | None, where: str) -> tuple[Op, float]:
        """The check's op and threshold: the thresholds files', else the arguments; its direction must be
        the metric's."""
        if resolved is not None:
            op, threshold = resolved.op, resolved.value
        elif op is None or threshold is None:
            raise MissingThresholdError(
                f"no threshold for suite {self.suite!r}, metric {r.metric!r}"
                + (f", slice {r.slice!r}" if r.slice else "")
                + f" in {self.thresholds.describe_files()}, and check() was given no op and threshold"
            )
        if op is None or threshold is None:  # unreachable; narrows the types
            raise MissingThresholdError(where)
        if higher_is_better(op) != r.higher_is_better:
            src = resolved.source if resolved is not None else "the check() arguments"
            raise ThresholdDirectionError(
                f"{where}: threshold op {op!r} (from {src}) contradicts the metric's direction: "
                f"{r.metric} is recorded as {'higher' if r.higher_is_better else 'lower'}-is-better, so use "
                f"{'>=' if r.higher_is_better else '<='}"
            )
        return op, float(threshold)

    def _judged(self, r: MetricResult, op: Op, threshold: float, min_n: int | None,
                unit: str) -> MetricResult:
        """``r`` with its verdict: the gate's compared value against the threshold, and the coverage
        rule or too little data making it INSUFFICIENT (a fatal invalid input never does)."""
        gate: GateMode = self.gate if (r.ci is not None or r.ci_note) else "point"
        compared = r.value
        if gate == "ci":
            compared = None if r.ci is None else (r.ci[0] if op in (">=", ">") else r.ci[1])
        ok = compared is not None and passes(compared, op, threshold)
        coverage = coverage_problem(r, self.record.invalid, self.thresholds.coverage(self.suite), self.limit)
        fatal = any(is_fatal(i.kind) for i in self.record.invalid if i.model in ("", r.model)
                    and i.variant == r.variant and i.count)
        short = short_of_data(r, gate, ok, op, threshold, self.limit, min_n, unit)
        if short:
            coverage = "; ".join([*short, *([coverage] if coverage else [])])
        insufficient = coverage is not None and not fatal
        return replace(r, threshold=threshold, op=op, passed=ok and coverage is None,
                       gate=gate, coverage=coverage, insufficient=insufficient)

    def nonfinite(self, values: Any, items: Sequence[Any], *, what: str = "score") -> Any:
        """Screen model outputs: rows of ``values`` (one per item) holding NaN or inf are counted as invalid
        (kind ``'non-finite score'``, bound model/variant, item ids as examples) and every later
        :meth:`check` of this model fails with a message saying so. Returns the boolean mask of the
        finite rows, to aggregate only those."""
        import numpy as np  # lazy: numpy, only when a suite screens outputs

        x = np.asarray(values, dtype=np.float64)
        if x.shape[:1] != (len(items),):
            raise ValueError(f"nonfinite({what!r}): {x.shape[:1]} rows for {len(items)} items")
        ok = np.isfinite(x.reshape(len(items), -1)).all(axis=1)
        bad = [str(items[int(i)]) for i in np.flatnonzero(~ok)]
        if bad:
            self.invalid(NONFINITE, len(bad), total=len(items), examples=bad)
        return ok

    # -- everything else ----------------------------------------------------------------------------
    def exemplars(self, items: Iterable[Mapping[str, Any]]) -> list[Exemplar]:
        """Keep failure exemplars (capped per test); images become small JPEG thumbnails here, on the
        worker. An unreadable image is recorded as ``image=None`` with the reason saying why."""
        kept: list[Exemplar] = []
        for i, item in enumerate(items):
            if len(self.record.exemplars) >= self.max_exemplars:
                check_exemplar(i, item)  # a malformed one is a suite bug, kept or not
                self.dropped_exemplars += 1
                continue
            ex = exemplar(i, item, self._model, self._variant)
            self.record.exemplars.append(ex)
            kept.append(ex)
        return kept

    def invalid(self, kind: str, count: int, total: int | None = None,
                examples: Iterable[Any] = ()) -> InvalidCount:
        """Count inputs that could not be used (never dropped silently)."""
        if count < 0 or (total is not None and total < count):
            raise ValueError(f"invalid({kind!r}): need 0 <= count <= total, got {count}, {total}")
        rec = InvalidCount(kind=one_vocabulary(kind), count=int(count),
                           total=int(total) if total is not None else None,
                           examples=[str(e) for e in examples][:20], model=self._model, variant=self._variant)
        self.record.invalid.append(rec)
        return rec

    def counted(self, part: Counts, total: int, *, tag: str | None = None,
                untotalled: Collection[str] = ()) -> None:
        """:meth:`invalid` for every kind a loader or runner counted (:func:`counted_rows` says how)."""
        for kind, n, of, examples in counted_rows(part, total, tag, untotalled):
            self.invalid(kind, n, total=of, examples=examples)

    def items(self, name: str, outcomes: Mapping[Any, Any]) -> None:
        """Item-level outcomes (bool or number per item id), for item-by-item comparison of runs."""
        key = items_key(name, self._model, self._variant)
        store = self.record.items.setdefault(key, {})
        for item, outcome in outcomes.items():
            iid = str(item)
            if iid in store:
                raise ValueError(f"items({name!r}): item {iid!r} recorded twice")
            if type(outcome).__name__ in ("bool", "bool_"):  # Python and numpy (1.x: bool_, 2.x: bool)
                store[iid] = bool(outcome)
                continue
            v = finite(outcome, f"items({name!r})[{iid!r}]")
            if v is None:
                raise ValueError(f"items({name!r})[{iid!r}] is NaN; count it with faith.invalid() instead")
            store[iid] = v

    def outputs(self, metric: str, rows: Mapping[Any, Mapping[str, Any]], *, slice: str | None = None) -> int:
        """What the model answered on each item ``metric[slice]`` is computed over, for the run's item log
        (``items.jsonl.gz``; never ``scorecard.json``): item id -> ``{"inputs": {...} by reference (image
        ref / path, texts), "output": {...} (answer, chosen option, text, scores), "outcome": bool, number
        or label, "invalid": kind or None}``, bounded by :mod:`faithtests.scorecard.item_log`. The rows of
        one ``metric[slice]`` should number its result's ``n``. Returns the rows recorded."""
        for item, payload in rows.items():
            row = output_row(item, payload, metric=metric, slice=slice, model=self._model,
                             variant=self._variant)
            key = (metric, slice, self._model, self._variant, row["item"])
            if key in self._output_keys:
                raise ValueError(f"outputs({metric!r}): item {row['item']!r} recorded twice")
            self._output_keys.add(key)
            self.record.outputs.append(row)
        return len(rows)

    def plot(self, title: str, kind: str = "line", series: Iterable[Series | Mapping[str, Any]] = (),
             x_label: str = "", y_label: str = "") -> Plot:
        """Add a plot; NaN points become ``None`` (a gap), lengths must match."""
        if kind not in ("line", "bar", "scatter"):
            raise ValueError(f"plot {title!r}: kind {kind!r} is not line, bar or scatter")
        out: list[Series] = []
        for s in series:
            s = s if isinstance(s, Series) else Series(**s)

            def nums(vals: Sequence[Any] | None, what: str, s: Series = s) -> list[float | None] | None:
                if vals is None:
                    return None
                if len(vals) != len(s.x):
                    raise ValueError(
                        f"plot {title!r}, series {s.name!r}: {len(vals)} {what} for {len(s.x)} x"
                    )
                return [finite(v, f"plot {title!r}, series {s.name!r} {what}") for v in vals]

            x = [v if isinstance(v, str) else float(v) for v in s.x]
            y = nums(s.y, "y") or []
            out.append(Series(name=str(s.name), x=x, y=y, lo=nums(s.lo, "lo"), hi=nums(s.hi, "hi")))
        p = Plot(title=title, kind=cast(PlotKind, kind), series=out, x_label=x_label, y_label=y_label)
        self.record.plots.append(p)
        return p
