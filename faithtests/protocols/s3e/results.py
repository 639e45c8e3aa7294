"""Each S3E test's result rows (``suites/test_flip_sensitivity.py``, 2b), and which of them are gates.

Pure numpy over :mod:`~faithtests.protocols.s3e.metrics` (the equations); the model work is in
:mod:`~faithtests.protocols.s3e.run`. Inputs are the stress trials' A/B logits ``[items, orders=2,
letters=2]`` of the finite records and their item ids, or the summary of the hidden-state analysis.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.protocols.s3e.metrics import (
    BehaviourSummary,
    S3ESummary,
    item_rate,
    positive_chosen,
    rate_by_label,
    strict_correct,
)
from faithtests.scorecard.model import ItemValues
from faithtests.scorecard.model import MetricRow as Row  # one result row of a pure function

BoolArray = NDArray[np.bool_]
ORDERS = ("orig", "swap")  # the option orders: [c+, c] and [c, c+]


def order_accuracy(stress_logits: ArrayLike, b: BehaviourSummary, item_ids: Sequence[str],
                   order: str) -> tuple[list[Row], BoolArray]:
    """AB_accuracy in ``order`` (Table 6 "Orig." / "Swap": c+ chosen over the stress foil; gated) with its
    per-item values, and the share of A answers in that order (Table 14, position bias; recorded; from
    ``b``, :func:`~faithtests.protocols.s3e.metrics.stress_behaviour` of the same logits); and whether c+
    was chosen per item."""
    correct = positive_chosen(stress_logits)[:, ORDERS.index(order)]
    acc = item_rate(correct)
    rows = [Row("AB_accuracy", acc.value, b.n, acc.ci, order,
                per_item=ItemValues.make(dict(zip(item_ids, correct, strict=True))), gated=True),
            Row("A_rate", b.a_rate_orig if order == "orig" else b.a_rate_swap, b.n, slice=order)]
    return rows, correct


def strict(stress_logits: ArrayLike, item_ids: Sequence[str],
           stress_types: Sequence[str]) -> tuple[list[Row], BoolArray]:
    """The strict-correct rate (§3.2, Table 6 "Strict": c+ chosen in both orders; gated) with its per-item
    values, then per stress type (``type=...``, Table 17's slices; recorded); and the per-item mask."""
    mask = strict_correct(stress_logits)
    rate = item_rate(mask)
    rows = [Row("strict_correct", rate.value, rate.n, rate.ci,
                per_item=ItemValues.make(dict(zip(item_ids, mask, strict=True))), gated=True)]
    rows += [Row("strict_correct", value, n, slice=f"type={t}")
             for t, value, n in rate_by_label(mask, stress_types)]
    return rows, mask


def hidden_stress(summary: S3ESummary) -> list[Row]:
    """At the frozen layer: Δ of stress over each control (Eqs. 3-5; Δ_lex gated, the others recorded), d_p
    (Eq. 8), HSR on strict-correct items (App. J), the top-half band (Eq. 7) and margin-matched Δ_lex."""
    rows: list[Row] = []
    for control in ("lex", "pres", "rand"):
        ex = summary.excess[control]
        rows.append(Row(f"Delta_{control}", ex.mean, ex.n, ex.ci, gated=control == "lex"))
        if ex.d_p is not None:
            rows.append(Row(f"d_p_{control}", ex.d_p, ex.n))
    for control, hsr in sorted(summary.hsr.items()):  # App. J defines HSR for the lex and rand controls
        rows.append(Row(f"HSR_correct_{control}", hsr.hsr_correct, hsr.n_strict))
    if summary.band is not None:
        rows.append(Row("top_half_band", summary.band.mean, summary.band.n, summary.band.ci))
    mm = summary.margin_matched_lex
    rows.append(Row("Delta_lex_margin_matched", mm.mean, mm.n, mm.ci))
    return rows
