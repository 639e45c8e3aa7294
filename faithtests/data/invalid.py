"""Counting invalid rows by kind: the one rule every loader and runner follows (never a silent drop)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: Rows named per kind (the scorecard shows them as examples; the count is always complete).
EXAMPLES_PER_KIND = 5


class CountsInvalid:
    """Mixin for a (data)class with ``invalid: dict[str, int]`` and ``examples: dict[str, list[str]]``
    fields: :meth:`reject` counts one row of ``kind`` and names the first few."""

    invalid: dict[str, int]
    examples: dict[str, list[str]]

    def reject(self, kind: str, where: str) -> None:
        self.invalid[kind] = self.invalid.get(kind, 0) + 1
        named = self.examples.setdefault(kind, [])
        if len(named) < EXAMPLES_PER_KIND:
            named.append(where)


@dataclass
class Counted(CountsInvalid):
    """Rows that could not be used or answered, by kind (``examples`` name up to five per kind)."""

    invalid: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)


def invalid_rows(loaded: CountsInvalid, loaded_total: int, checked: CountsInvalid,
                 checked_total: int) -> list[tuple[str, int, int, list[str]]]:
    """(kind, count, out of, examples) of a loader's rejections (out of the rows it read) and then of a
    later check's (e.g. images that fail to decode, out of the records it checked), sorted by kind."""
    return [(k, v, total, part.examples.get(k, []))
            for part, total in ((loaded, loaded_total), (checked, checked_total))
            for k, v in sorted(part.invalid.items())]


def jsonl_files(path: Path, what: str) -> list[Path]:
    """``path`` itself, or the ``*.jsonl`` files of a folder (sorted); a clear error naming ``what``
    when there is nothing to read."""
    if not path.exists():
        raise FileNotFoundError(f"{what} data not found: {path}")
    if path.is_file():
        return [path]
    files = sorted(path.glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"{path}: no *.jsonl file in this folder")
    return files
