"""The scorecard's table model: columns (model · variant), rows (test · metric · slice) and cells.

Pure data for the templates of :mod:`faithtests.reports.html`; no jinja here. Every result key
gets one row anchor (:func:`row_anchor`) that the verdict block and the regression list link to.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from faithtests.scorecard.baseline import MetricDelta
from faithtests.scorecard.gate_kinds import kind_word
from faithtests.scorecard.model import MetricResult, test_key

Key = tuple[str, str, str, str, str]  # MetricResult.key: test key, model, variant, metric, slice


@dataclass(frozen=True, order=True)
class Column:
    model: str
    variant: str

    @property
    def label(self) -> str:
        name = self.model or "(no model)"
        return name if self.variant == "base" else f"{name} · {self.variant}"


@dataclass
class Cell:
    value: str
    ci: str = ""
    n: str = ""
    threshold: str = ""
    status: str = "none"  # pass | fail | insufficient | none
    inconclusive: bool = False  # the CI straddles the threshold (see MetricResult.inconclusive)
    detectable: str = ""  # ±(smallest distance from the threshold the check's n resolves)
    kind: str = ""  # paper | floor | user: what kind of gate the threshold is (thresholds.toml)
    kind_word: str = ""  # how the page names it (gate_kinds.KIND_WORDS)
    kind_note: str = ""  # its anchor, what a failure means, or the user's file
    delta: str = ""
    delta_class: str = ""  # better | worse | same | new
    baseline_value: str = ""


@dataclass
class Row:
    anchor: str
    test: str
    metric: str
    slice: str | None
    higher_is_better: bool
    cells: list[Cell | None]

    @property
    def failed(self) -> bool:
        return any(c is not None and c.status == "fail" for c in self.cells)

    @property
    def flags(self) -> str:
        """``fail inconclusive``: what the table filter's "flagged rows only" keeps ("" for none)."""
        cells = [c for c in self.cells if c is not None]
        return " ".join(f for f, hit in (("fail", self.failed),
                                         ("insufficient", any(c.status == "insufficient" for c in cells)),
                                         ("inconclusive", any(c.inconclusive for c in cells))) if hit)


def fmt(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or abs(v) < 1e-3:
        return f"{v:.3g}"
    return f"{v:.4g}" if abs(v) >= 1 else f"{v:.3f}"


def slug(prefix: str, *parts: object) -> str:
    return prefix + hashlib.sha1("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:10]


def node_function(node_id: str) -> str:
    """``suites/test_x.py::TestX::test_inv[clip-base]`` -> ``TestX::test_inv`` (no file, no params)."""
    return strip_file(node_id).split("[", 1)[0]


def strip_file(node_id: str) -> str:
    """``suites/test_x.py::test_inv[world-clip]`` -> ``test_inv[world-clip]``: the parametrised test."""
    return node_id.split("::", 1)[1] if "::" in node_id else node_id


def test_params(node_id: str) -> str:
    """The parametrisation of a node id (``world-reference:clip-all``), "" when none."""
    name = strip_file(node_id)
    return name.split("[", 1)[1][:-1] if "[" in name and name.endswith("]") else ""


def metric_label(metric: str, sl: str | None) -> str:
    return f"{metric}[{sl}]" if sl else metric


def row_labels(results: Iterable[MetricResult]) -> dict[str, str]:
    """Node id -> row label. Params are dropped so models line up as columns, unless two param sets of
    the same function would then land in one cell; those keep their params to stay distinct."""
    results = list(results)
    cells: dict[tuple[str, str, str, str, str], set[str]] = defaultdict(set)
    for r in results:
        cells[(node_function(r.test), r.metric, r.slice or "", r.model, r.variant)].add(r.test)
    ambiguous = {k[0] for k, ids in cells.items() if len(ids) > 1}
    return {
        r.test: (strip_file(r.test) if node_function(r.test) in ambiguous else node_function(r.test))
        for r in results
    }


_DELTA_CLASS = {"regression": "worse", "improvement": "better", "unchanged": "same", "new": "new"}


def delta_index(deltas: Iterable[MetricDelta]) -> dict[Key, MetricDelta]:
    """Deltas by result key; test ids normalised like :attr:`MetricResult.key` does."""
    return {(test_key(d.test), d.model, d.variant, d.metric, d.slice or ""): d for d in deltas}


def cell(r: MetricResult, d: MetricDelta | None) -> Cell:
    """One table cell; ``d`` is the baseline comparison of this result (None: no baseline given)."""
    c = Cell(value=fmt(r.value))
    if r.ci is not None:
        c.ci = f"[{fmt(r.ci[0])}, {fmt(r.ci[1])}]"
    elif getattr(r, "ci_note", None):  # why the CI is undefined (e.g. too few clusters)
        c.ci = str(r.ci_note)
    if r.n is not None:
        c.n = str(r.n)
    if r.threshold is not None and r.op is not None:
        c.threshold = f"{r.op} {fmt(r.threshold)}" + (" (CI)" if r.gate == "ci" else "")
        c.kind, c.kind_word, c.kind_note = r.gate_kind or "", kind_word(r.gate_kind), r.gate_note or ""
    c.status = r.verdict or "none"
    c.inconclusive = bool(r.inconclusive)
    c.detectable = "" if r.detectable_diff is None else f"±{fmt(r.detectable_diff)}"
    if d is None:
        return c
    c.delta_class = _DELTA_CLASS.get(d.status, "same")
    if d.status == "moved" and d.delta is not None:  # an unchecked metric's move: coloured, not gated
        c.delta_class = "worse" if (d.delta < 0) == d.higher_is_better else "better"
    if d.status == "new":
        c.delta = "new"
        return c
    c.baseline_value = fmt(d.baseline)
    c.delta = "n/a" if d.delta is None else f"{d.delta:+.3g}"
    return c


def row_anchor(suite: str, label: str, metric: str, sl: str) -> str:
    return slug("r-", suite, label, metric, sl)


def build_rows(
    suite: str,
    results: list[MetricResult],
    columns: list[Column],
    labels: dict[str, str],
    deltas: dict[Key, MetricDelta] | None,
) -> list[Row]:
    by_row: dict[tuple[str, str, str], dict[Column, MetricResult]] = defaultdict(dict)
    for r in results:
        by_row[(labels[r.test], r.metric, r.slice or "")][Column(r.model, r.variant)] = r
    rows = []
    for (test, metric, sl), cols in sorted(by_row.items()):
        first = next(iter(cols.values()))
        cells = [
            None if col not in cols else cell(cols[col], deltas.get(cols[col].key) if deltas else None)
            for col in columns
        ]
        rows.append(
            Row(row_anchor(suite, test, metric, sl), test, metric, sl or None, first.higher_is_better, cells)
        )
    return rows
