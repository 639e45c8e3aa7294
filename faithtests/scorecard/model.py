"""The results model: what a test records, and the scorecard that aggregates a run.

Everything here is plain data with JSON round-trips, so records can ride on pytest reports across
xdist workers and be merged, compared and rendered without the run that produced them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

SCHEMA_VERSION = 1

Op = Literal[">=", ">", "<=", "<"]
OPS: tuple[Op, ...] = (">=", ">", "<=", "<")
GateMode = Literal["point", "ci"]
#: Resamples (B) of the regression gate's paired bootstrap: one count for every metric, seed 0.
GATE_RESAMPLES = 2000
Verdict = Literal["pass", "fail", "insufficient"]


class InsufficientData(Exception):
    """Too little data for a verdict (too few items, clusters or classes): the check or step is
    INSUFFICIENT, never a pass and never a crash. ``reason`` is one line in plain words ("needs >= 20
    strict-correct items, got 16"). Raised by :meth:`Faith.check` and by protocol steps (a probe trained
    on too few stimuli); the plugin records the test as ``insufficient`` instead of failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FaithCheckFailed(AssertionError):
    """A metric failed its threshold (a test failure, not an error)."""


class FaithInsufficient(FaithCheckFailed, InsufficientData):
    """Too little data for a verdict (INSUFFICIENT, never a pass): the plugin records the test as
    ``insufficient``; without the plugin it fails like any check."""

    def __init__(self, message: str) -> None:
        FaithCheckFailed.__init__(self, message)
        self.reason = message


class MalformedResult(ValueError):
    """A stored result whose value cannot be read (NaN, a string): an error naming the result's key."""


def passes(value: float, op: Op, threshold: float) -> bool:
    if op == ">=":
        return value >= threshold
    if op == ">":
        return value > threshold
    if op == "<=":
        return value <= threshold
    return value < threshold


def test_key(test: str) -> str:
    """The run-independent key of a test: ``<test file name>::<test name[params]>``. Node ids carry the
    file's path relative to pytest's rootdir, which moves with the invocation (an option value that looks
    like a path can move it up a folder), so keys drop the folders; older scorecards, which stored node
    ids, are normalised the same way when matched. Idempotent."""
    head, sep, rest = test.partition("::")
    if not sep:
        return test
    return head.replace("\\", "/").rsplit("/", 1)[-1] + sep + rest


def round7(x: float) -> float:
    """``x`` to 7 significant digits: what a float32 score carries, at half the JSON of a full repr."""
    return float(f"{x:.7g}")


@dataclass(frozen=True)
class ItemValues:
    """The per-item values a metric is the mean of (``value == mean(values)``), for paired comparison of
    two runs on the items both share. ``clusters`` (optional) names each item's cluster (its image or
    stimulus) so the paired bootstrap resamples clusters, as the suite's own CI does. Stored column-wise
    (ids, values, cluster indexes), values rounded to 7 significant digits."""

    values: dict[str, float]
    clusters: dict[str, str] | None = None

    @classmethod
    def make(cls, values: Any, clusters: Any = None, what: str = "per_item") -> ItemValues:
        """Validated copy: ids as str, values finite floats (bool -> 0/1), one cluster per item."""
        vals: dict[str, float] = {}
        for k, v in dict(values).items():
            f = float(v)
            if not math.isfinite(f):
                raise ValueError(f"{what}[{str(k)!r}] is not finite ({f}); leave the item out")
            vals[str(k)] = round7(f)
        cl = None if clusters is None else {str(k): str(c) for k, c in dict(clusters).items()}
        if cl is not None and cl.keys() != vals.keys():
            raise ValueError(f"{what}: clusters must name exactly the items of values "
                             f"({len(cl.keys() ^ vals.keys())} item(s) differ)")
        return cls(vals, cl)

    def mean(self) -> float | None:
        return sum(self.values.values()) / len(self.values) if self.values else None

    def to_json(self) -> dict[str, Any]:
        ids = list(self.values)
        out: dict[str, Any] = {"ids": ids, "values": [self.values[i] for i in ids]}
        if self.clusters is not None:
            names = sorted(set(self.clusters.values()))
            index = {c: j for j, c in enumerate(names)}
            out["cluster_names"] = names
            out["clusters"] = [index[self.clusters[i]] for i in ids]
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ItemValues:
        ids = [str(i) for i in d["ids"]]
        values = dict(zip(ids, (float(v) for v in d["values"]), strict=True))
        bad = next((i for i, v in values.items() if not math.isfinite(v)), None)
        if bad is not None:  # a scorecard never writes one: the file was edited or damaged (issue 46)
            raise ValueError(f"per-item value of {bad!r} is {values[bad]}, not a finite number")
        if "clusters" not in d:
            return cls(values)
        names = [str(c) for c in d["cluster_names"]]
        return cls(values, dict(zip(ids, (names[int(j)] for j in d["clusters"]), strict=True)))


@dataclass(frozen=True)
class MetricRow:
    """One result a protocol's pure function computes, with the arguments of ``Faith.metric`` (recorded
    by :meth:`~faithtests.scorecard.recording.Faith.rows`). ``higher_is_better`` None: the metric's
    glossary term says (declared once). ``gated``: the protocol says this row is the quantity its paper
    gates (a paper row or a floor in the thresholds file); ``Faith.rows(..., gate=True)`` checks it, so a
    new gated result is declared in its protocol folder and the thresholds file, never in a suite."""

    name: str
    value: float
    n: int
    ci: tuple[float, float] | None = None
    slice: str | None = None
    higher_is_better: bool | None = None
    per_item: ItemValues | None = None
    gated: bool = False


def _finite_or_none(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _stored_number(d: dict[str, Any], name: str, owner: dict[str, Any] | None = None) -> float | None:
    """A stored number: null is undefined (None); NaN, inf or a non-number is a :class:`MalformedResult`
    naming the result (a scorecard never writes them, so the file was edited or corrupted)."""
    x = d.get(name)
    if x is None:
        return None
    v: float | None = None
    if isinstance(x, int | float) and not isinstance(x, bool):
        v = float(x)
    if v is None or not math.isfinite(v):
        r = owner if owner is not None else d
        sl = f"[{r.get('slice')}]" if r.get("slice") else ""
        raise MalformedResult(
            f"result {r.get('test')} {r.get('suite')}/{r.get('metric')}{sl} (model {r.get('model') or '-'}, "
            f"variant {r.get('variant', 'base')}): {name} {x!r} is not a finite number (undefined is null)")
    return v


@dataclass(frozen=True)
class MetricResult:
    """One recorded metric of one test, for one model/variant and an optional slice."""

    suite: str
    test: str  # test key (see test_key); older scorecards hold the pytest node id
    metric: str
    value: float | None  # None when the metric is undefined (NaN); such a result never passes a check
    model: str = ""
    variant: str = "base"
    ci: tuple[float, float] | None = None
    n: int | None = None
    higher_is_better: bool = True
    slice: str | None = None
    threshold: float | None = None
    op: Op | None = None
    passed: bool | None = None  # None: recorded without a check
    gate: GateMode | None = None
    ci_note: str | None = None  # why the CI is undefined ("undefined (n clusters 1 < 2)"); ci is then None
    coverage: str | None = None  # why the check has no verdict (too little data, broken outputs)
    insufficient: bool = False  # too little data: INSUFFICIENT (passed is False), the reason in coverage
    per_item: ItemValues | None = None  # the items this metric is the mean of (paired comparison)
    gate_kind: str | None = None  # "paper" / "floor" / "user" (thresholds.Threshold.kind), with a check
    gate_note: str | None = None  # the paper gate's anchor, what a failed floor means, the user's file

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """Identity used to match a result across runs (baseline, compare, merge)."""
        return (test_key(self.test), self.model, self.variant, self.metric, self.slice or "")

    @property
    def verdict(self) -> Verdict | None:
        """``pass`` / ``fail`` / ``insufficient`` (too little data: never a pass); None without a check."""
        if self.passed is None:
            return None
        return "pass" if self.passed else ("insufficient" if self.insufficient else "fail")

    def _power_inputs(self) -> tuple[float, tuple[float, float], Op, float] | None:
        if self.passed is None or self.value is None or self.ci is None or self.op is None \
                or self.threshold is None:
            return None
        return self.value, self.ci, self.op, self.threshold

    @property
    def detectable_diff(self) -> float | None:
        """The smallest distance from the threshold this check's n can resolve: the 95% CI's half-width
        on the threshold's side of the value (value - lo when the value is at or above the threshold,
        hi - value below it). A true value nearer the threshold than this cannot be told from it, so
        the check is :attr:`inconclusive` exactly when the value is that close. None for a result
        without a check, a value or a CI."""
        got = self._power_inputs()
        if got is None:
            return None
        value, (lo, hi), _, threshold = got
        return round(max(0.0, value - lo if value >= threshold else hi - value), 12)

    @property
    def inconclusive(self) -> bool | None:
        """True when the check's 95% CI straddles the threshold (one bound passes, the other fails): the
        verdict could flip on another sample of the same size. Under gate ``point`` such a check still
        passes or fails on its value; under gate ``ci`` it fails. None without a check, value or CI."""
        got = self._power_inputs()
        if got is None:
            return None
        _, (lo, hi), op, threshold = got
        return passes(lo, op, threshold) != passes(hi, op, threshold)

    def to_json(self) -> dict[str, Any]:
        # a shallow copy: asdict would deep-copy per_item's values only to replace them (a second per result)
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["ci"] = list(self.ci) if self.ci is not None else None
        if self.per_item is None:  # absent, not null: scorecards without per-item values stay as they were
            del d["per_item"]
        else:
            d["per_item"] = self.per_item.to_json()
        d["inconclusive"] = self.inconclusive  # derived (from ci, op, threshold): not read back
        d["detectable_diff"] = self.detectable_diff
        d["verdict"] = self.verdict  # derived (from passed and insufficient): not read back
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MetricResult:
        ci = d.get("ci")
        value = _stored_number(d, "value")
        if ci is not None:
            if not isinstance(ci, list) or len(ci) != 2:  # a damaged file: named, never an IndexError
                raise ValueError(f"result {d.get('test')!r} {d.get('metric')!r}: ci {ci!r} is not [lo, hi]")
            ci = [_stored_number({"ci": c}, "ci", d) for c in ci]
        return cls(
            suite=str(d["suite"]),
            test=str(d["test"]),
            metric=str(d["metric"]),
            value=value,
            model=str(d.get("model", "")),
            variant=str(d.get("variant", "base")),
            ci=(float(ci[0]), float(ci[1])) if ci is not None else None,
            n=int(d["n"]) if d.get("n") is not None else None,
            higher_is_better=bool(d.get("higher_is_better", True)),
            slice=d.get("slice"),
            threshold=_finite_or_none(d.get("threshold")),
            op=d.get("op"),
            passed=d.get("passed"),
            gate=d.get("gate"),
            ci_note=d.get("ci_note"),
            coverage=d.get("coverage"),
            insufficient=bool(d.get("insufficient", False)),
            per_item=ItemValues.from_json(d["per_item"]) if d.get("per_item") else None,
            gate_kind=d.get("gate_kind"),
            gate_note=d.get("gate_note"),
        )


@dataclass(frozen=True)
class Exemplar:
    """A failure exemplar: a thumbnail (data URI, already small), the texts, the scores, and why."""

    reason: str
    texts: dict[str, str] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    image: str | None = None  # "data:image/jpeg;base64,..." thumbnail
    image_b: str | None = None  # second image of a pair (difference suite)
    model: str = ""
    variant: str = "base"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Exemplar:
        return cls(
            reason=str(d.get("reason", "")),
            texts={str(k): str(v) for k, v in d.get("texts", {}).items()},
            scores={str(k): float(v) for k, v in d.get("scores", {}).items()},
            image=d.get("image"),
            image_b=d.get("image_b"),
            model=str(d.get("model", "")),
            variant=str(d.get("variant", "base")),
        )


@dataclass(frozen=True)
class Series:
    """One line/bar series of a plot; ``lo``/``hi`` draw a confidence band when given.
    ``None`` marks an undefined point (NaN), drawn as a gap; JSON has no NaN."""

    name: str
    x: list[float | str]
    y: Sequence[float | None]
    lo: Sequence[float | None] | None = None
    hi: Sequence[float | None] | None = None


@dataclass(frozen=True)
class Plot:
    title: str
    kind: Literal["line", "bar", "scatter"]
    series: list[Series]
    x_label: str = ""
    y_label: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Plot:
        return cls(
            title=str(d["title"]),
            kind=d["kind"],
            series=[Series(**s) for s in d.get("series", [])],
            x_label=str(d.get("x_label", "")),
            y_label=str(d.get("y_label", "")),
        )


@dataclass(frozen=True)
class InvalidCount:
    """Inputs a test could not use (missing image, unparseable answer, ...): counted, never dropped."""

    kind: str
    count: int
    total: int | None = None
    examples: list[str] = field(default_factory=list)
    model: str = ""
    variant: str = "base"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> InvalidCount:
        return cls(
            kind=str(d["kind"]),
            count=int(d["count"]),
            total=int(d["total"]) if d.get("total") is not None else None,
            examples=[str(e) for e in d.get("examples", [])],
            model=str(d.get("model", "")),
            variant=str(d.get("variant", "base")),
        )


@dataclass
class TestRecord:
    """Everything one test recorded; this is what rides on the pytest report."""

    test: str
    suite: str
    outcome: str = "passed"  # passed | failed | skipped | error
    duration: float = 0.0
    results: list[MetricResult] = field(default_factory=list)
    exemplars: list[Exemplar] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    invalid: list[InvalidCount] = field(default_factory=list)
    # item-level outcomes, name -> item id -> outcome (bool or float), for item-by-item comparison
    items: dict[str, dict[str, float | bool]] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # spec -> fingerprint info
    message: str = ""  # failure message (short), when the test failed
    dataset: str = ""  # the test's dataset parameter ("world", "coco", ...); "" when it has none
    # per-item outputs (faithtests.scorecard.item_log rows): ride to the controller with the record, which
    # moves them to the run's item log; never in scorecard.json
    outputs: list[dict[str, Any]] = field(default_factory=list)

    __test__ = False  # not a pytest test class

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "suite": self.suite,
            "dataset": self.dataset,
            "outcome": self.outcome,
            "duration": round(self.duration, 3),
            "results": [r.to_json() for r in self.results],
            "exemplars": [e.to_json() for e in self.exemplars],
            "plots": [p.to_json() for p in self.plots],
            "invalid": [i.to_json() for i in self.invalid],
            "items": self.items,
            "models": self.models,
            "message": self.message,
        } | ({"outputs": self.outputs} if self.outputs else {})

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TestRecord:
        return cls(
            test=str(d["test"]),
            suite=str(d["suite"]),
            dataset=str(d.get("dataset", "")),
            outcome=str(d.get("outcome", "passed")),
            duration=float(d.get("duration", 0.0)),
            results=[MetricResult.from_json(r) for r in d.get("results", [])],
            exemplars=[Exemplar.from_json(e) for e in d.get("exemplars", [])],
            plots=[Plot.from_json(p) for p in d.get("plots", [])],
            invalid=[InvalidCount.from_json(i) for i in d.get("invalid", [])],
            items={str(k): dict(v) for k, v in d.get("items", {}).items()},
            models={str(k): dict(v) for k, v in d.get("models", {}).items()},
            message=str(d.get("message", "")),
            outputs=[dict(o) for o in d.get("outputs", [])],
        )
