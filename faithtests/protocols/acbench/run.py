"""Running AC-Bench on a VLM: the only module of this protocol that calls a model (§4, §5, App. C.3, D).

* :func:`usable` — the records whose image loads (each image decoded once; a failure is counted by kind
  for every record of that image and the others keep going), and the image-only baseline's rows (one
  per image).
* :func:`answer` — one App. C.3 prompt kind in one answer mode. (a) ``constrained`` (default): the label
  whose full continuation has the highest log-probability (``answer_logprob`` over the eight labels as
  whole replies, through the adapter's prefix cache: no parsing, multi-token labels score whole); a tie
  at the top is no answer ("other"), counted, never guessed. (b) ``generation``: greedy decoding of at
  most :data:`MAX_NEW_TOKENS` tokens read by the strict ``prompts.parse_label``; anything else is "other"
  (P_oth), counted, never mapped to the nearest label.
* :func:`rescored` — constrained answers re-decided by mean per-token log-probability (a labelled,
  recorded option; :func:`label_token_counts` counts each label's reply tokens as ``answer_logprob`` does).
* :func:`conflict_scores` — CECS Phase I (Eq. 5) from the probe prompt's "Yes"/"No".
* :func:`lss_run` — per-item LSS (Eq. 22) from ``vlm.attentions`` at the answer query, in chunks.
* CECS Phase II runs through :mod:`.steering` (``steering_hooks`` for one prompt's call, with the two
  fixes a real adapter call needs (below), a ``MassMonitor`` of every row the modifier changed, and
  ``choose_window``); :func:`gate_check` and :func:`mass_check` run it on the model.

Choices (each measured or forced by the interfaces):

* Label scoring makes one call per prompt: the adapter's prefix cache shares the longest common token
  prefix of a call's rows, so the eight continuations of one prompt share the whole prompt (two prompts
  of one image would share only the image). On reference:vlm this is 1.8x faster than one call for all
  prompts, and it gives every CECS call a single conflict score (next point).
* CECS per-row scores: ``cecs.make_modifier`` takes one s per batch row of each call it sees, but an
  adapter regroups rows internally (the HF adapter by image and batch size; ``answer_logprob`` expands a
  prompt into one row per label), so each steered prompt runs in its own call with a scalar s. Under
  the hard gate a prompt with s < τ stays in Default Mode and its outputs are the base run's: the
  modifier returns its input, which :func:`gate_check` verifies on the real model.
* The answer query in constrained mode: ``answer_logprob`` encodes prompt + label, and the adapter's
  ``TokenSpans.length`` then counts the label's tokens, so the modifier's "last real prompt token" would
  be the end of the label and no query that predicts the label would be steered (CECS a silent no-op).
  The hooks of a constrained call therefore give the modifier spans whose ``length`` is the prompt's own
  (from the base attentions run: the same rendering, which the adapter's ``render_with_answer`` asserts
  is a prefix of prompt + answer), so the last prompt token and every label token after it are steered,
  as in generation.
* The probe's Yes/No come from ``answer_logprob(probe, YES_NO)``, not ``option_logits``: option logits
  need each verbalizer to be exactly one token as written without context (an ``OptionTokenError`` on
  tokenizers that start a reply with "▁Yes" or split it), while ``answer_logprob`` scores each as the
  assistant's whole reply through the chat template. For one-token verbalizers log p(Yes) − log p(No) =
  z_yes − z_no (the softmax normaliser cancels), so σ(lp_no − lp_yes) is exactly Eq. 5.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import numpy as np
from numpy.typing import NDArray

from faithtests.data.invalid import NONFINITE, Counted
from faithtests.data.load_errors import ImageLoadError
from faithtests.models.interfaces import Hooks, Prompt, VisionLanguageModel
from faithtests.progress import label as progress_label
from faithtests.progress import stage
from faithtests.protocols.acbench import cecs, steering
from faithtests.protocols.acbench.cecs import TAU, conflict_score
from faithtests.protocols.acbench.metrics import length_normalised, lss, masks_from_spans
from faithtests.protocols.acbench.prompts import (
    YES_NO,
    emotion_prompt,
    image_only_emotion_prompt,
    parse_label,
    probe_prompt,
    text_only_emotion_prompt,
)
from faithtests.protocols.acbench.records import EMOTIONS, AcRecord
from faithtests.protocols.acbench.steering import MassMonitor, steering_hooks

if TYPE_CHECKING:
    import torch
    from PIL import Image

AnswerMode = Literal["constrained", "generation"]
ANSWER_MODES: Final[tuple[AnswerMode, ...]] = ("constrained", "generation")
PromptKind = Literal["emotion", "image-only", "text-only"]
#: Greedy tokens per answer: the prompts ask for the emotion word alone; 16 leave room for a label of
#: several tokens and a short sentence around it ("The emotion is awe."), which ``parse_label`` reads.
MAX_NEW_TOKENS: Final = 16
TIE: Final = "tied top label log-probability (no answer, never guessed)"
NON_FINITE: Final = NONFINITE  # the one non-finite kind (label log-probabilities)
UNPARSEABLE: Final = "unparseable generated answer (counted as other)"
UNREADABLE: Final = "unreadable image"
PROBE_NON_FINITE: Final = NONFINITE  # the probe's, with the detail in the example
IMAGE_LABEL_CLASH: Final = "records of one image disagree on y_img (left out of the image-only baseline)"
#: Prompts per ``attentions`` / probe call: bounds memory (a real VLM's weights are L x heads x keys
#: per prompt) while keeping batches.
CHUNK: Final = 16


# ------------------------------------------------------------------------------------------ records
@dataclass
class Usable(Counted):
    """Described records whose image loaded (``records``, the rows of every emotion / text-only / probe
    run), one record per image for the image-only baseline (``images``: its gold is y_img), and
    ``total`` records given."""

    records: list[AcRecord] = field(default_factory=list)
    images: list[AcRecord] = field(default_factory=list)
    total: int = 0


def usable(records: Sequence[AcRecord]) -> Usable:
    """Decode each image once; every record of an image that fails is counted ``unreadable image``
    (ImageLoadError: missing or undecodable file), the rest go on. An image whose records disagree on
    y_img is left out of the image-only baseline (counted), its records stay."""
    out = Usable(total=len(records))
    error: dict[str, str | None] = {}  # stimulus -> why its image failed (None: it loaded)
    first: dict[str, AcRecord] = {}
    clash: set[str] = set()
    for r in records:
        if r.stimulus_id not in error:
            try:
                r.load_image()
                error[r.stimulus_id] = None
            except ImageLoadError as e:
                error[r.stimulus_id] = str(e)
        if error[r.stimulus_id] is not None:
            out.reject(UNREADABLE, f"{r.item_id}: {error[r.stimulus_id]}")
            continue
        if r.description is not None:
            out.records.append(r)
        if r.stimulus_id not in first:
            first[r.stimulus_id] = r
        elif first[r.stimulus_id].image_emotion != r.image_emotion and r.stimulus_id not in clash:
            clash.add(r.stimulus_id)
            out.reject(
                IMAGE_LABEL_CLASH,
                f"{r.stimulus_id}: {first[r.stimulus_id].image_emotion} vs {r.image_emotion}",
            )
    out.images = [r for s, r in first.items() if s not in clash]
    return out


def _images(records: Sequence[AcRecord]) -> dict[str, Image.Image]:
    cache: dict[str, Image.Image] = {}
    for r in records:
        if r.stimulus_id not in cache:
            cache[r.stimulus_id] = r.load_image()
    return cache


def prompts_for(kind: PromptKind | Literal["probe"], records: Sequence[AcRecord]) -> list[Prompt]:
    """The App. C.3 prompt ``kind`` of each record (``probe``: CECS's P_probe); images load here."""
    if kind == "text-only":
        return [text_only_emotion_prompt(_description(r)) for r in records]
    ims = _images(records)
    if kind == "image-only":
        return [image_only_emotion_prompt(ims[r.stimulus_id]) for r in records]
    if kind == "emotion":
        return [emotion_prompt(ims[r.stimulus_id], _description(r)) for r in records]
    if kind == "probe":
        return [probe_prompt(ims[r.stimulus_id], _description(r)) for r in records]
    raise ValueError(f"unknown prompt kind {kind!r}")


def _description(r: AcRecord) -> str:
    if r.description is None:
        raise ValueError(f"{r.item_id}: an image-only record has no description to prompt with")
    return r.description


def _chunks(n: int, size: int = CHUNK) -> Iterator[range]:
    for start in range(0, n, size):
        yield range(start, min(start + size, n))


# ------------------------------------------------------------------------------------------ answers
@dataclass
class Answers:
    """Answers of one prompt kind in one mode, row by row: ``pred`` a label or None ("other");
    ``kinds`` why a row has no label (None when it has one, or when a generated label is simply not
    y_img / y_txt); ``logprobs`` [N, 8] (constrained) or ``replies`` (generation)."""

    mode: AnswerMode
    ids: list[str]
    pred: list[str | None]
    kinds: list[str | None]
    logprobs: NDArray[np.float64] | None = None
    replies: list[str] = field(default_factory=list)

    @property
    def counted(self) -> Counted:
        out = Counted()
        for row, (i, k) in enumerate(zip(self.ids, self.kinds, strict=True)):
            if k is not None:
                out.reject(k, f"{i}: {self.replies[row][:60]!r}" if self.replies else i)
        return out

    def take(self, rows: Sequence[int], other: Answers, other_rows: Sequence[int]) -> Answers:
        """A copy with ``rows`` replaced by ``other``'s ``other_rows`` (the steered rows of CECS)."""
        out = Answers(
            self.mode,
            list(self.ids),
            list(self.pred),
            list(self.kinds),
            None if self.logprobs is None else self.logprobs.copy(),
            list(self.replies),
        )
        for i, j in zip(rows, other_rows, strict=True):
            out.pred[i], out.kinds[i] = other.pred[j], other.kinds[j]
            if out.logprobs is not None and other.logprobs is not None:
                out.logprobs[i] = other.logprobs[j]
            if out.replies:
                out.replies[i] = other.replies[j]
        return out


def label_of(row: NDArray[np.float64]) -> tuple[str | None, str | None]:
    """(label, None) for the argmax of eight finite log-probabilities; (None, kind) on a tie at the top
    or a non-finite value."""
    if not np.isfinite(row).all():
        return None, NON_FINITE
    top = np.flatnonzero(row == row.max())
    return (EMOTIONS[int(top[0])], None) if top.size == 1 else (None, TIE)


HooksFor = Callable[[int], "Hooks | None"]


def answer(
    vlm: VisionLanguageModel,
    prompts: Sequence[Prompt],
    ids: Sequence[str],
    mode: AnswerMode,
    hooks_for: HooksFor | None = None,
) -> Answers:
    """Answers to ``prompts`` (module doc); ``hooks_for(i)`` gives prompt i's hooks (CECS), else none.
    Constrained: one ``answer_logprob`` call per prompt. Generation: one ``generate`` call for all
    prompts without hooks, one per prompt with hooks."""
    if mode not in ANSWER_MODES:
        raise ValueError(f"answer mode {mode!r} is not one of {ANSWER_MODES}")
    n = len(prompts)
    out = Answers(mode, list(ids), [None] * n, [None] * n)
    if not n:
        out.logprobs = np.zeros((0, len(EMOTIONS))) if mode == "constrained" else None
        return out
    what = ("AC steered " if hooks_for is not None else "AC ") + mode  # a progress stage's name
    if mode == "constrained":
        rows = []
        with stage(what, total=n, model=vlm.spec) as progress:  # one call per prompt (module doc)
            for i, p in enumerate(prompts):
                h = hooks_for(i) if hooks_for is not None else None
                rows.append(_numpy(vlm.answer_logprob([p], EMOTIONS, h))[0])
                progress.advance()
        out.logprobs = np.stack(rows)
        for i, row in enumerate(out.logprobs):
            out.pred[i], out.kinds[i] = label_of(row)
        return out
    if hooks_for is None:
        with progress_label(what):  # one call: the model's own progress stage reports its decoding steps
            out.replies = list(vlm.generate(list(prompts), max_new_tokens=MAX_NEW_TOKENS))
    else:
        with stage(what, total=n, model=vlm.spec) as progress:
            for i, p in enumerate(prompts):
                out.replies.append(vlm.generate([p], MAX_NEW_TOKENS, hooks_for(i))[0])
                progress.advance()
    for i, text in enumerate(out.replies):
        out.pred[i] = parse_label(text)
        out.kinds[i] = None if out.pred[i] is not None else UNPARSEABLE
    return out


def label_token_counts(vlm: VisionLanguageModel, prompts: Sequence[Prompt]) -> NDArray[np.float64] | None:
    """[N, 8]: how many tokens each label has as the assistant's reply to each prompt, counted as
    ``answer_logprob`` sums them (the chat-template rendering of prompt + label, the tokens overlapping
    the label's characters); None when the adapter exposes no processor to count with."""
    from faithtests.models.answer_tokens import answer_token_counts  # lazy: torch (torch-free at import)

    # stored with the adapter's outputs under --faith-cache: a warm run loads no processor for them
    return answer_token_counts(vlm, prompts, EMOTIONS)


def rescored(ans: Answers, token_counts: NDArray[np.float64]) -> Answers:
    """Constrained answers re-decided on the mean per-token log-probability (``metrics.length_normalised``),
    from the same log-probabilities: no model call."""
    if ans.logprobs is None:
        raise ValueError("length-normalised scoring needs constrained answers (log-probabilities)")
    lp = length_normalised(ans.logprobs, token_counts)
    out = Answers(ans.mode, list(ans.ids), [None] * len(ans.ids), [None] * len(ans.ids), lp)
    for i, row in enumerate(lp):
        out.pred[i], out.kinds[i] = label_of(row)
    return out


def _numpy(t: torch.Tensor) -> NDArray[np.float64]:
    return np.asarray(t.detach().float().cpu().numpy(), dtype=np.float64)


# ------------------------------------------------------------------------------------------ CECS / LSS
def conflict_scores(
    vlm: VisionLanguageModel, records: Sequence[AcRecord]
) -> tuple[NDArray[np.float64], Counted]:
    """Eq. 5 per record from the probe prompt's "Yes" / "No" (module doc); NaN (counted) where the
    log-probabilities are not finite: CECS then leaves the row in Default Mode."""
    s = np.full(len(records), np.nan)
    bad = Counted()
    with stage("CECS scores", total=len(records), model=vlm.spec) as progress:
        for rows in _chunks(len(records)):
            lp = _numpy(vlm.answer_logprob(prompts_for("probe", [records[i] for i in rows]), YES_NO))
            for j, i in enumerate(rows):
                if np.isfinite(lp[j]).all():
                    s[i] = conflict_score(float(lp[j, 0]), float(lp[j, 1]))
                else:
                    bad.reject(PROBE_NON_FINITE, records[i].item_id,
                               detail="probe log-probabilities (CECS left off for the row)")
            progress.advance(len(rows))
    return s, bad


@dataclass
class LssRun:
    """Per-item LSS [L, N] (Eq. 22; NaN where undefined) and each prompt's token length."""

    per_item: NDArray[np.float64]
    lengths: list[int]


def lss_run(vlm: VisionLanguageModel, prompts: Sequence[Prompt], hooks_for: HooksFor | None = None) -> LssRun:
    """LSS of each emotion prompt from ``vlm.attentions`` (the answer query's weights after any
    modifier): chunks of :data:`CHUNK` prompts without hooks, one prompt per call with them."""
    cols: list[NDArray[np.float64]] = []
    lengths: list[int] = []
    groups = (
        [range(i, i + 1) for i in range(len(prompts))] if hooks_for is not None else _chunks(len(prompts))
    )
    what = "AC steered LSS" if hooks_for is not None else "AC LSS"
    with stage(what, total=len(prompts), model=vlm.spec) as progress:
        for rows in groups:
            h = hooks_for(rows[0]) if hooks_for is not None else None
            att = vlm.attentions([prompts[i] for i in rows], h)
            width = int(att.weights[0].shape[-1])
            img, desc = masks_from_spans(att.spans, width)
            cols.append(lss([_numpy(w) for w in att.weights], img, desc).per_item)
            lengths += list(att.spans.length)
            progress.advance(len(rows))
    per_item = np.concatenate(cols, axis=1) if cols else np.zeros((vlm.num_layers, 0))
    return LssRun(per_item, lengths)


# ------------------------------------------------------------------------------------------ checks
@dataclass(frozen=True)
class GateCheck:
    """Below the gate (s < τ) on real prompts: max |Δ log-prob| of the eight labels and max |Δ LSS|
    against the unhooked run, and whether every greedy reply is identical."""

    max_logprob_diff: float
    max_lss_diff: float
    same_replies: bool
    prompts: int
    scores: tuple[float, ...]


def gate_check(
    vlm: VisionLanguageModel,
    prompts: Sequence[Prompt],
    lengths: Sequence[int],
    window: tuple[int, int],
    scores: Sequence[float] = (0.0, TAU - 0.01),
) -> GateCheck:
    """Run ``prompts`` through the CECS hooks at each score of ``scores`` (all below τ) and compare
    with the unhooked outputs: the hard gate must leave them unchanged (eager vs fused attention
    kernels may differ by float rounding only)."""
    if any(x >= TAU for x in scores):
        raise ValueError(f"gate_check scores must lie below tau={TAU}, got {scores}")
    ids = [str(i) for i in range(len(prompts))]
    base_lp = answer(vlm, prompts, ids, "constrained").logprobs
    base_gen = answer(vlm, prompts, ids, "generation").replies
    base_lss = lss_run(vlm, prompts).per_item
    lp_diff = lss_diff = 0.0
    same = True
    for x in scores:

        def hooks_for(i: int, x: float = x) -> Hooks:
            return steering_hooks(x, window, prompt_length=lengths[i])

        lp = answer(vlm, prompts, ids, "constrained", hooks_for).logprobs
        assert lp is not None and base_lp is not None
        lp_diff = max(lp_diff, float(np.abs(lp - base_lp).max()))
        same &= answer(vlm, prompts, ids, "generation", hooks_for).replies == base_gen
        hooked = lss_run(vlm, prompts, hooks_for).per_item
        both = np.isfinite(hooked) & np.isfinite(base_lss)
        lss_diff = max(lss_diff, float(np.abs(hooked - base_lss)[both].max(initial=0.0)))
    return GateCheck(lp_diff, lss_diff, same, len(prompts), tuple(float(x) for x in scores))


def mass_check(
    vlm: VisionLanguageModel, prompts: Sequence[Prompt], window: tuple[int, int], s: float = 1.0
) -> MassMonitor:
    """The CECS update at gate-open ``s`` on real attentions of ``prompts`` (one call each): the
    monitor of every row it changed (the suite asserts they sum to 1 within 1e-6)."""
    return monitored_run(vlm, prompts, lambda i, m: steering_hooks(s, window, monitor=m))


def monitored_run(
    vlm: VisionLanguageModel, prompts: Sequence[Prompt], hooks_for: Callable[[int, MassMonitor | None], Hooks]
) -> MassMonitor:
    """What the CECS modifier did on ``prompts`` (one call each, ``hooks_for(i, monitor)``), observed on
    the real attention rows. A monitored call cannot be served from the output store (the observations
    happen during the forward), so the monitor's totals are stored beside the model's outputs instead,
    under each call's unmonitored hooks tag and prompt content: a re-run on a warm cache reads the totals
    the same forwards gave, and an adapter without a store (or an untagged hook) always runs. The key
    also holds the source of the CECS modules (``cecs``, ``steering``): a tag names the parameters, not
    the code, and this check exists to catch a change in the code."""
    # lazy: torch (models.prompt_keys and models.store import it; this module is torch-free at import)
    from faithtests.models.prompt_keys import prompt_key
    from faithtests.models.store import TEXT_CODEC, digest  # lazy: torch

    def run() -> MassMonitor:
        monitor = MassMonitor()
        lss_run(vlm, prompts, lambda i: hooks_for(i, monitor))
        return monitor

    store, owner = getattr(vlm, "store", None), getattr(vlm, "store_namespace", None)
    tags = [hooks_for(i, None).tag for i in range(len(prompts))]
    if store is None or owner is None or any(t is None for t in tags):
        return run()
    code = [digest(Path(m.__file__ or "").read_text(encoding="utf-8")) for m in (cecs, steering)]
    key = digest([tags, [prompt_key(p) for p in prompts], code])
    [totals] = store.rows(owner, f"{owner}|cecs_mass", [key], lambda _: [json.dumps(asdict(run()))],
                          TEXT_CODEC)
    return MassMonitor(**json.loads(totals))
