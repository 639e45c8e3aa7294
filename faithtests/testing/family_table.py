"""What the family conformance matrix measured, read off a suite run's scorecard, and the table of
families x suites x capabilities that ``docs/models.md`` shows between :data:`BEGIN` and :data:`END`.

``tests/models/test_family_matrix.py`` runs every suite on every family's tiny checkpoint (each model
under its ``model_type`` as its label), checks that no test crashed, and compares the rows it measured
with the page: the page is generated from the matrix and cannot drift (``FAITH_WRITE_FAMILY_TABLE=1``
rewrites it). Torch-free.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faithtests.manifest import suite_order
from faithtests.models.errors import FEATURES
from faithtests.protocols import manifests
from faithtests.testing.families import FAMILIES, Family

#: The table's suite columns: every protocol's suites, in the product's order (a bundled protocol's suite
#: becomes a column, and the matrix then asks for the page to be regenerated).
SUITES: tuple[str, ...] = suite_order(manifests())
BEGIN = "<!-- family-matrix:begin (generated from tests/models/test_family_matrix.py; do not edit) -->"
END = "<!-- family-matrix:end -->"
WRITE_ENV = "FAITH_WRITE_FAMILY_TABLE"
_LACKS = re.compile(r"not applicable: \S+ lacks (.+?): ")


@dataclass
class Measured:
    """One family's outcomes in a suite run: per suite, tests that gave a verdict (PASS, FAIL or
    INSUFFICIENT) and tests not applicable by reason; crashes (an exception instead of a verdict)."""

    verdicts: dict[str, int] = field(default_factory=dict)
    not_applicable: dict[str, dict[str, int]] = field(default_factory=dict)
    crashes: list[str] = field(default_factory=list)
    lacks: tuple[str, ...] = ()


def reason_key(message: str) -> str:
    """A short, stable name for a not-applicable reason (the feature a model lacks, or the suite's own)."""
    found = _LACKS.search(message)
    if found:
        by_text = {text: name for name, text in FEATURES.items()}
        return by_text.get(found.group(1), found.group(1))
    if "takes no audio" in message:
        return "audio"
    if "CECS not run" in message:
        return "no sink window"
    return message.split(":")[0][:40]


def _labels(test_id: str, labels: Iterable[str]) -> list[str]:
    params = test_id.partition("[")[2].rstrip("]").split("-")
    return [label for label in labels if label in params]


def crashed(test: Mapping[str, Any]) -> bool:
    """An exception instead of a verdict: an error, or a failure that no failed check explains."""
    outcome = str(test.get("outcome"))
    if outcome in ("error", "crashed"):
        return True
    return outcome == "failed" and not any(r.get("verdict") == "fail" for r in test.get("results") or [])


def measure(card: Mapping[str, Any], labels: Iterable[str]) -> dict[str, Measured]:
    """Per model label (a family's ``model_type``), what the run's tests gave."""
    wanted = list(labels)
    out = {label: Measured() for label in wanted}
    models = card.get("fingerprint", {}).get("models", {})
    for label in wanted:
        out[label].lacks = tuple(sorted(dict(models.get(label, {}).get("lacks") or {})))
    for test in card["tests"]:
        suite = str(test.get("suite"))
        for label in _labels(str(test["test"]), wanted):
            got = out[label]
            if crashed(test):
                got.crashes.append(f"{test['test']}: {test.get('message', '')}")
            elif test.get("outcome") == "skipped":
                why = got.not_applicable.setdefault(suite, {})
                key = reason_key(str(test.get("message", "")))
                why[key] = why.get(key, 0) + 1
            else:
                got.verdicts[suite] = got.verdicts.get(suite, 0) + 1
    return out


def _cell(m: Measured, suite: str) -> str:
    ran, na = m.verdicts.get(suite, 0), m.not_applicable.get(suite, {})
    if not ran and not na:
        return "—"
    parts = [f"{ran} run"] if ran else []
    parts += [f"{n} n/a ({why})" for why, n in sorted(na.items())]
    return ", ".join(parts)


def row(family: Family, m: Measured | None) -> str:
    """One table row (``m`` None: the family's own transformers model does not run)."""
    extra = f"`[{family.extra}]`" if family.extra else ""
    head = f"| {family.label} | `{family.model_type}` | {family.kind} | {extra} |"
    if m is None:
        return head + f" not run: {family.broken} |" + " |" * (len(SUITES) - 1) + " |"
    lacks = ", ".join(m.lacks) or "—"
    return head + "".join(f" {_cell(m, s)} |" for s in SUITES) + f" {lacks} |"


def header() -> list[str]:
    cols = ["family", "`model_type`", "adapter", "extra", *SUITES, "lacks (found at load)"]
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]


def family_rows(measured: Mapping[str, Measured | None]) -> dict[str, str]:
    """model_type -> its table row, for the families measured (None: its own model does not run)."""
    return {f.model_type: row(f, measured[f.model_type]) for f in FAMILIES if f.model_type in measured}


def page_rows(page: Path) -> dict[str, str]:
    """model_type -> row of the table between the markers of ``page``."""
    text = page.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{page}: no family table markers ({BEGIN} ... {END})")
    inner = text.split(BEGIN, 1)[1].split(END, 1)[0]
    rows = [line for line in inner.splitlines() if line.startswith("| ") and "`" in line]
    return {line.split("`")[1]: line for line in rows if not line.startswith("| family")}


def write_rows(page: Path, rows: Mapping[str, str]) -> None:
    """Replace (or add) ``rows`` in the page's table, every family in :data:`FAMILIES` order."""
    text = page.read_text(encoding="utf-8")
    merged = {**page_rows(page), **rows}
    lines = header() + [merged[f.model_type] for f in FAMILIES if f.model_type in merged]
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    page.write_text(head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + tail, encoding="utf-8")
