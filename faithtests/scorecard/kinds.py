"""The invalid-count kinds with a fixed meaning: one vocabulary, read by the coverage rule.

Every loader, runner and suite names a model output that is NaN or infinite :data:`NONFINITE`, and only
that: which output it was (letter logits, P(Yes), a probe) goes into the example (``item: detail``),
never into the kind, so the rule that fails a model's checks reads the kind alone and cannot miss a
decorated spelling ("non-finite logits", "non-finite score [base]"). Every count passes through
:func:`one_vocabulary`, which refuses such a spelling where it is counted (a suite's bug, raised).
"""

from __future__ import annotations

from typing import Final

#: Model outputs (logits, scores, states, judge counts) that are NaN or inf: fatal for the model's checks.
NONFINITE: Final = "non-finite score"

#: Kinds that fail every check of the model they were counted for, whatever the fraction.
FATAL_KINDS: Final = frozenset({NONFINITE})


def is_fatal(kind: str) -> bool:
    """Whether an invalid count of ``kind`` fails every check it touches (an exact kind, no pattern)."""
    return kind in FATAL_KINDS


def one_vocabulary(kind: str) -> str:
    """``kind``, unless it spells a non-finite output another way than :data:`NONFINITE`: that count
    would slip past the fatal rule and let a broken model pass, so it is a ValueError where it is made."""
    if kind != NONFINITE and "nonfinite" in kind.lower().replace("-", "").replace(" ", ""):
        raise ValueError(f"invalid-count kind {kind!r}: a NaN or infinite output is counted as {NONFINITE!r} "
                         "(faithtests.scorecard.kinds.NONFINITE); what was non-finite goes into the detail")
    return kind
