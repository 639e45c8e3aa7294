"""Counting invalid rows by kind: the one rule every loader and runner follows (never a silent drop)."""

from __future__ import annotations

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
