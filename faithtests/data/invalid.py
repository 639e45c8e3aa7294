"""Counting invalid rows by kind: the one rule every loader and runner follows (never a silent drop).

Kinds are plain names; a model output that is NaN or infinite is always :data:`NONFINITE` (the one kind
the coverage rule treats as fatal, :mod:`faithtests.scorecard.kinds`), with what was non-finite given as
``detail``, never spelt into the kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from faithtests.scorecard.kinds import NONFINITE, is_fatal, one_vocabulary

__all__ = ["EXAMPLES_PER_KIND", "NONFINITE", "Counted", "CountsInvalid", "Loaded", "is_fatal",
           "jsonl_files"]

#: Rows named per kind (the scorecard shows them as examples; the count is always complete).
EXAMPLES_PER_KIND = 5


class CountsInvalid:
    """Mixin for a (data)class with ``invalid: dict[str, int]`` and ``examples: dict[str, list[str]]``
    fields: :meth:`reject` counts one row of ``kind`` and names the first few. A class that also has
    ``out_of: dict[str, int]`` may count a kind out of a total of its own (``reject(..., out_of=N)``:
    COCO annotations, not pairs), which :func:`invalid_rows` reports instead of the rows' total."""

    invalid: dict[str, int]
    examples: dict[str, list[str]]

    def reject(self, kind: str, where: str, *, detail: str = "", out_of: int | None = None) -> None:
        """Count one row of ``kind``; ``detail`` (what was wrong: "letter logits", "empty mask") goes
        into the example, so kinds stay one vocabulary."""
        self.invalid[kind] = self.invalid.get(one_vocabulary(kind), 0) + 1
        named = self.examples.setdefault(kind, [])
        if len(named) < EXAMPLES_PER_KIND:
            named.append(f"{where}: {detail}" if detail else where)
        if out_of is not None:
            totals: dict[str, int] | None = getattr(self, "out_of", None)
            if totals is None:
                raise TypeError(f"{type(self).__name__} has no out_of field: cannot count {kind!r} out of "
                                "a total of its own")
            totals[kind] = out_of

    def totals(self) -> dict[str, int]:
        """Kinds counted out of a total of their own (``reject(..., out_of=...)``)."""
        return dict(getattr(self, "out_of", {}))


@dataclass
class Counted(CountsInvalid):
    """Rows that could not be used or answered, by kind (``examples`` name up to five per kind)."""

    invalid: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    out_of: dict[str, int] = field(default_factory=dict)  # kind -> its own total (else the rows')

    @classmethod
    def copy_of(cls, part: CountsInvalid) -> Counted:
        """A copy of any counter's counts, examples and own totals."""
        return cls(dict(part.invalid), {k: list(v) for k, v in part.examples.items()}, part.totals())


R = TypeVar("R")


@dataclass
class Loaded(CountsInvalid, Generic[R]):
    """A loader's result: the records that passed validation, what did not by kind (``examples`` name
    the rows), and the rows read (``total``: coverage's denominator). A protocol that needs more (per
    split counts) subclasses it."""

    records: list[R] = field(default_factory=list)
    invalid: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    total: int = 0


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
