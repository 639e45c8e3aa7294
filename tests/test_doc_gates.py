"""Every gate the docs quote (`` `METRIC OP VALUE` ``) is the gate ``suites/thresholds.toml`` sets.

A gate value written by hand in prose drifts from the file that decides (the README once said
``std_v >= 0.20`` while the file said 0.35). Docs quote a gate as `` `std_v >= 0.35` ``, optionally
`` `DS_count[subset=multi] >= 0.60` ``; this test reads every such quote in the docs site's sources (the
pages under docs/, each protocol's README.md, which is its page, the reference models' cards and the
README) and requires the metric (or its declared slice) to exist with that op and value. Each suite's
gates are quoted on its protocol's page, so a page that lost its gates fails too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from faithtests.protocols import load_suite_thresholds
from faithtests.scorecard.thresholds import Thresholds

ROOT = Path(__file__).resolve().parents[1]
_QUOTE = re.compile(r"`([A-Za-z][\w]*)(\[[^\]`]+\])? *(<=|>=) *(-?\d+(?:\.\d+)?)`")
PROTOCOL_READMES = sorted((ROOT / "faithtests" / "protocols").glob("*/README.md"))


def _docs() -> list[Path]:
    """Every Markdown source of the site, and the README."""
    return [ROOT / "README.md", ROOT / "fixtures" / "README.md", *PROTOCOL_READMES,
            *sorted((ROOT / "docs").rglob("*.md"))]


def _thresholds() -> Thresholds:
    """The shipped file as the plugin loads it: each op is the metric's declared direction."""
    return load_suite_thresholds(ROOT / "suites" / "thresholds.toml", default_required=True)


def quoted_gates(text: str) -> list[tuple[str, str, float]]:
    """(key, op, value) of each backticked gate quote; key is ``metric`` or ``metric[slice]``."""
    return [(m.group(1) + (m.group(2) or ""), m.group(3), float(m.group(4))) for m in _QUOTE.finditer(text)]


def suite_gates(th: Thresholds, suite: str) -> dict[str, tuple[str, float]]:
    """key -> (op, value) of one suite table, a declared slice taking its metric's op and value."""
    gates: dict[str, tuple[str, float]] = {}
    for key, entry in th.entries(suite).items():
        gates[key] = (entry.op, entry.value)
        for sl in entry.slices:
            gates.setdefault(f"{key}[{sl}]", (entry.op, entry.value))
    return gates


def file_gates(th: Thresholds) -> dict[str, tuple[str, float]]:
    """key -> (op, value) of every suite table of the thresholds file."""
    gates: dict[str, tuple[str, float]] = {}
    for suite in th.suites():
        gates.update(suite_gates(th, suite))
    return gates


def test_quote_parser_reads_metric_slice_op_and_value() -> None:
    text = "Gates: `std_v >= 0.35`, `DS[subset=multi] >= 0.50` and `TBR <= 0.5`; not `--faith-gate` or `<=`."
    assert quoted_gates(text) == [("std_v", ">=", 0.35), ("DS[subset=multi]", ">=", 0.5), ("TBR", "<=", 0.5)]


def test_the_docs_sources_are_the_site_pages() -> None:
    """The pages this test reads are the ones the site is built from: docs/, and a README per protocol."""
    names = {p.relative_to(ROOT).as_posix() for p in _docs()}
    assert {"docs/gates.md", "docs/index.md", "faithtests/protocols/lgip/README.md"} <= names
    assert len(PROTOCOL_READMES) >= 5


@pytest.mark.parametrize("doc", _docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_quoted_gate_is_the_thresholds_file_gate(doc: Path) -> None:
    gates = file_gates(_thresholds())
    wrong = []
    for key, op, value in quoted_gates(doc.read_text(encoding="utf-8")):
        if gates.get(key) != (op, value):
            wrong.append(f"`{key} {op} {value}` (thresholds.toml: {gates.get(key, 'no such gate')})")
    where = doc.relative_to(ROOT)
    assert not wrong, f"{where} quotes gates that suites/thresholds.toml does not set: " + "; ".join(wrong)


def test_each_suite_has_its_gates_quoted_on_a_protocol_page() -> None:
    """Every suite table of thresholds.toml has at least one gate quoted, correctly, on a protocol's page
    (a page rewritten without its gates, or a suite added without a page, fails here)."""
    quoted = {gate for p in PROTOCOL_READMES for gate in quoted_gates(p.read_text(encoding="utf-8"))}
    missing = []
    th = _thresholds()
    for suite in th.suites():
        gates = suite_gates(th, suite)
        if gates and not any((k, *gate) in quoted for k, gate in gates.items()):
            missing.append(suite)
    assert not missing, f"no protocol README quotes a gate of the suite(s) {missing}"
