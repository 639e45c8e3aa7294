"""Every gate the docs quote (`` `METRIC OP VALUE` ``) is the gate ``suites/thresholds.toml`` sets.

A gate value written by hand in prose drifts from the file that decides (the README once said
``std_v >= 0.20`` while the file said 0.35). Docs quote a gate as `` `std_v >= 0.35` ``, optionally
`` `DS_count[subset=multi] >= 0.50` ``; this test reads every such quote in README.md, the protocol
READMEs and docs/, and requires the metric (or its declared slice) to exist with that op and value.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_QUOTE = re.compile(r"`([A-Za-z][\w]*)(\[[^\]`]+\])? *(<=|>=) *(-?\d+(?:\.\d+)?)`")


def _docs() -> list[Path]:
    paths = [ROOT / "README.md", *sorted((ROOT / "faithtests" / "protocols").glob("*/README.md"))]
    return paths + sorted((ROOT / "docs").rglob("*.md")) if (ROOT / "docs").is_dir() else paths


def quoted_gates(text: str) -> list[tuple[str, str, float]]:
    """(key, op, value) of each backticked gate quote; key is ``metric`` or ``metric[slice]``."""
    return [(m.group(1) + (m.group(2) or ""), m.group(3), float(m.group(4))) for m in _QUOTE.finditer(text)]


def file_gates(data: dict[str, object]) -> dict[str, tuple[str, float]]:
    """key -> (op, value) of every suite table, a declared slice taking its metric's op and value."""
    gates: dict[str, tuple[str, float]] = {}
    for suite, table in data.items():
        if suite == "coverage" or not isinstance(table, dict):
            continue
        for key, spec in table.items():
            if not isinstance(spec, dict) or "op" not in spec:
                continue
            gates[key] = (spec["op"], float(spec["value"]))
            for sl in spec.get("slices", []):
                gates.setdefault(f"{key}[{sl}]", (spec["op"], float(spec["value"])))
    return gates


def test_quote_parser_reads_metric_slice_op_and_value() -> None:
    text = "Gates: `std_v >= 0.35`, `DS[subset=multi] >= 0.50` and `TBR <= 0.5`; not `--faith-gate` or `<=`."
    assert quoted_gates(text) == [("std_v", ">=", 0.35), ("DS[subset=multi]", ">=", 0.5), ("TBR", "<=", 0.5)]


@pytest.mark.parametrize("doc", _docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_quoted_gate_is_the_thresholds_file_gate(doc: Path) -> None:
    gates = file_gates(tomllib.loads((ROOT / "suites" / "thresholds.toml").read_text(encoding="utf-8")))
    wrong = []
    for key, op, value in quoted_gates(doc.read_text(encoding="utf-8")):
        if gates.get(key) != (op, value):
            wrong.append(f"`{key} {op} {value}` (thresholds.toml: {gates.get(key, 'no such gate')})")
    where = doc.relative_to(ROOT)
    assert not wrong, f"{where} quotes gates that suites/thresholds.toml does not set: " + "; ".join(wrong)
