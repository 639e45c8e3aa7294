"""Item-log rows and exemplars of the affective-conflict suite: what a reader sees of one record (the
image and its description, both emotions, the subset, what the model answered and how sure it was)."""

from __future__ import annotations

from collections.abc import Sequence

from faithtests.protocols.acbench.records import EMOTIONS, AcRecord
from faithtests.protocols.acbench.run import Answers


def item_outputs(recs: Sequence[AcRecord], ans: Answers, rows: Sequence[int],
             outcomes: Sequence[bool]) -> dict[str, dict[str, object]]:
    """Item-log rows: the image and description, the label answered (with the reply or label
    log-probabilities), the outcome, and why a row has no label."""
    out: dict[str, dict[str, object]] = {}
    for i, o in zip(rows, outcomes, strict=True):
        r = recs[i]
        output: dict[str, object] = {"answer": ans.pred[i] or "other"}
        if ans.replies:
            output["reply"] = ans.replies[i]
        if ans.logprobs is not None:
            output["log p"] = {k: float(v) for k, v in zip(EMOTIONS, ans.logprobs[i], strict=True)}
        out[r.item_id] = {"inputs": {"image": r.image, "description": r.description or "",
                                     "y_img": r.image_emotion, "y_txt": r.text_emotion or "",
                                     "subset": r.subset},
                          "output": output, "outcome": o, "invalid": ans.kinds[i]}
    return out


def exemplar(r: AcRecord, ans: Answers, i: int, reason: str) -> dict[str, object]:
    texts = {
        "description": r.description or "",
        "y_img": r.image_emotion,
        "y_txt": r.text_emotion or "",
        "subset": r.subset,
        "answer": ans.pred[i] or "other",
    }
    if ans.replies:
        texts["reply"] = ans.replies[i]
    scores = (
        {}
        if ans.logprobs is None
        else {f"log p({k})": float(v) for k, v in zip(EMOTIONS, ans.logprobs[i], strict=True)}
    )
    return {"image": r.load_image(), "texts": texts, "scores": scores, "reason": f"{reason} ({ans.mode})"}
