"""Item-log rows and exemplars of the difference-consistency suite: what a reader sees of one pair (both
images with the true edits outlined, the edits in words, what the model said and how sure it was)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from faithtests.protocols.spdfaith.figures import edits_text, outlined
from faithtests.protocols.spdfaith.fixtures import SpdData
from faithtests.protocols.spdfaith.judge import Judgement
from faithtests.protocols.spdfaith.run import Answers


def exemplar(data: SpdData, i: int, reason: str, texts: dict[str, str],
             scores: dict[str, float] | None = None) -> dict[str, object]:
    """A pair with its true edits outlined on both images, ``reason`` and what the model said."""
    r = data.usable.records[i]
    a, b = data.usable.pairs[i]
    return {"image": outlined(a, r.edits), "image_b": outlined(b, r.edits),
            "texts": {"pair": r.ref, "ground truth": edits_text(r.edits), **texts},
            "scores": scores or {}, "reason": reason}


def item_outputs(data: SpdData, rows: Sequence[int], outcomes: Sequence[bool | float],
                 output: Callable[[int], dict[str, object]]) -> dict[str, dict[str, object]]:
    """Item-log rows of the pairs ``rows``: the pair's ref and true edits, the model's ``output(i)``."""
    recs = data.usable.records
    return {recs[i].item_id: {"inputs": {"image": recs[i].ref, "ground truth": edits_text(recs[i].edits)},
                              "output": output(i), "outcome": o} for i, o in zip(rows, outcomes, strict=True)}


def unmatched(j: Judgement | None) -> str:
    """The judged claims that matched no true edit, joined (empty without a judgement)."""
    if j is None:
        return ""
    return "; ".join(c.text for c, m in zip(j.claims, j.matched, strict=True) if m is None)


def contradiction_exemplar(data: SpdData, ans: Answers, i: int) -> dict[str, object]:
    return exemplar(data, i, "contradicts itself on the symmetric questions",
                    {"same?": "Yes" if ans.p_yes_same[i] > 0.5 else "No",
                     "different?": "Yes" if ans.p_yes_diff[i] > 0.5 else "No"},
                    {"P(Yes | same?)": float(ans.p_yes_same[i]),
                     "P(Yes | different?)": float(ans.p_yes_diff[i])})
