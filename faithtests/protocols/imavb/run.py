"""Running IMAVB on a VLM: the only module of this protocol that calls a model.

* :func:`run_choice` — A1 (or A4) as six-option letter logits (no free-text parsing), under the fixed
  order and K MD5-seeded shuffles (:mod:`.shuffles`). All orders of one record share its stimulus, so
  they go to ``vlm.decide`` together and the adapter's prefix cache runs image + shared prompt head once.
  Logits come back mapped to the canonical options (inverse permutation); the last-token states of every
  decoder layer come from the fixed-order prompt of the same pass (App. G: "a single forward pass").
* :func:`logit_lens` — P_l(correct letter) per layer through the model's own norm and unembedding
  (Eqs. 3–4, :mod:`faithtests.models.lens`); HF adapters only, otherwise the reason it cannot run.
* :func:`pgla_hooks` — PGLA (:mod:`.pgla`) as a ``Hooks.logit_adjuster`` for :func:`run_choice`.
* :func:`run_variant` — A2 (TRUE/FALSE by the two replies' log-probabilities), A3 (greedy generation,
  last valid letter; unparseable answers counted invalid), A4 (the A1 protocol with the warning), A5
  (greedy generation up to 256 tokens, verdict and explanation parsed; unparseable verdicts counted
  invalid) and A6/A7 (the A1 protocol on the clip trimmed to the answer timestamp, video only: image
  stimuli and rows without a timestamp are counted not applicable with the reason).

Stimuli that cannot be loaded (an unreadable video) and rows with non-finite logits are counted invalid
by kind, never dropped silently: ``invalid`` maps kind → count, ``examples`` names the records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faithtests.data.invalid import NONFINITE, CountsInvalid
from faithtests.models.capabilities import lacks
from faithtests.models.interfaces import Hooks, Prompt, VisionLanguageModel
from faithtests.models.letters import NO_LETTER as NO_LETTER
from faithtests.models.letters import choose
from faithtests.progress import label, stage
from faithtests.protocols.imavb.metrics import TIE, answers, correct
from faithtests.protocols.imavb.minilm import MINILM_SHA256 as MINILM_SHA256
from faithtests.protocols.imavb.minilm import EmbedderUnavailable as EmbedderUnavailable
from faithtests.protocols.imavb.minilm import minilm_path as minilm_path
from faithtests.protocols.imavb.minilm import sentence_embeddings as sentence_embeddings
from faithtests.protocols.imavb.pgla import PGLAConfig, pgla_adjust
from faithtests.protocols.imavb.prompts import (
    A2_ANSWERS,
    MAX_NEW_TOKENS,
    TRIMMED,
    Stimulus,
    last_valid_letter,
    parse_verdict,
    prompt_text,
    stimulus_prompt,
    trim_audio,
    trim_window,
)
from faithtests.protocols.imavb.records import LETTERS, PremiseRecord
from faithtests.protocols.imavb.shuffles import K_SHUFFLES, displayed, record_permutation, shuffle_ids
from faithtests.protocols.imavb.video import VideoError

#: ``hooks_for(records, perms)`` → Hooks for one ``decide`` call whose rows are every (record, order)
#: in record-major order; ``perms`` is [rows, 6] (displayed position → canonical option).
HooksFor = Callable[[Sequence[PremiseRecord], NDArray[np.int64]], Hooks | None]


@dataclass
class ChoiceRun(CountsInvalid):
    """One model's answers. ``logits`` [N, S, 6] are canonical-order (column c = option c), S = orders
    (``orders[0]`` = "fixed", then shuffles 0..K-1); ``perms`` [N, S, 6]; ``states`` [L, N, D] at the
    fixed order's last prompt token."""

    records: list[PremiseRecord]
    orders: tuple[str | int, ...]
    logits: NDArray[np.float64]
    perms: NDArray[np.int64]
    states: NDArray[np.float32] | None
    invalid: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    total: int = 0
    #: Why the answers are generated letters, not scored ones ("" when scored; ``models.letters``):
    #: then ``logits`` hold indicator scores, a tied row is a reply that names no letter, no states.
    generated: str = ""
    unparsed: dict[str, str] = field(default_factory=dict)  # item -> a reply that named no letter


#: ``media_of(record)`` → the stimulus a prompt carries (default: the record's frames and soundtrack).
MediaOf = Callable[[PremiseRecord], Stimulus]
UNREADABLE_VIDEO = "unreadable video"
#: A soundtrack that cannot be decoded: counted by this kind, never replaced by silence.
UNREADABLE_AUDIO = "unreadable audio"
#: A soundtrack longer than the model hears whole (its adapter's ``audio_window_s``, found at load): left
#: out and counted, never heard in part.
AUDIO_PAST_WINDOW = "soundtrack longer than the model's audio window"


def hears(vlm: object) -> bool:
    """Whether the model takes audio (an omni adapter's ``accepts_audio``): only then do prompts carry a
    record's soundtrack; an image-only model gets exactly the frames it always got."""
    return bool(getattr(vlm, "accepts_audio", False))


def audio_window(vlm: object) -> float | None:
    """The longest audio (seconds) the model hears whole, None when it says no limit."""
    window = getattr(vlm, "audio_window_s", None)
    return float(window) if isinstance(window, int | float) and window > 0 else None


def _heard(run: Any, r: PremiseRecord, stimulus: Stimulus, window: float | None) -> Stimulus | None:
    """``stimulus``, or None (counted) when its soundtrack is longer than ``window``."""
    a = stimulus.audio
    if window is None or a is None or a.samples.size <= window * a.sampling_rate:
        return stimulus
    seconds = a.samples.size / a.sampling_rate
    run.reject(AUDIO_PAST_WINDOW,
               f"{r.item_id}: {seconds:.1f} s of audio; the model hears {window:g} s whole")
    return None


def _media(run: Any, r: PremiseRecord, with_audio: bool, media_of: MediaOf | None = None,
           window: float | None = None) -> Stimulus | None:
    """The record's frames, and its soundtrack when ``with_audio`` and the record has one (a clip with
    sound goes to an omni model as video + audio, :func:`.prompts.stimulus_prompt`); ``None`` with the
    failure counted by kind (an unreadable video, an unreadable soundtrack: never silence instead; a
    soundtrack past the model's audio ``window``: never heard in part)."""
    got = _loaded(run, r, with_audio, media_of)
    return None if got is None else _heard(run, r, got, window)


def _loaded(run: Any, r: PremiseRecord, with_audio: bool, media_of: MediaOf | None) -> Stimulus | None:
    try:
        if media_of is not None:
            return media_of(r)
        frames = r.load_media()
    except VideoError as e:
        run.reject(UNREADABLE_VIDEO, f"{r.item_id}: {e}")
        return None
    except (OSError, ValueError) as e:  # media_of's soundtrack (A6/A7 cut it with the frames)
        run.reject(UNREADABLE_AUDIO, f"{r.item_id}: {e}")
        return None
    if not with_audio or r.audio is None:
        return Stimulus(frames)
    try:
        return Stimulus(frames, r.audio(), r.fps)
    except (VideoError, OSError, ValueError) as e:  # missing or corrupt track; Audio refuses empty/NaN
        run.reject(UNREADABLE_AUDIO, f"{r.item_id}: {e}")
        return None


def run_choice(
    vlm: VisionLanguageModel,
    records: Sequence[PremiseRecord],
    *,
    variant: str = "A1",
    k: int = K_SHUFFLES,
    hooks_for: HooksFor | None = None,
    want_states: bool = True,
    records_per_call: int = 4,
    media_of: MediaOf | None = None,
    generated: str = "",
) -> ChoiceRun:
    """Six-letter logits of every record under the fixed order and ``k`` shuffles (module doc); the
    stimulus comes from ``media_of`` when given (A6/A7's trimmed clip). A model that hears gets each
    record's soundtrack with its frames (:func:`hears`). With ``generated`` (why: ``models.letters``)
    each prompt is answered by a generated letter instead, as indicator scores, and no states are read."""
    # a served model shows no states; a generated letter comes with none
    want_states = want_states and not generated and not lacks(vlm, "hidden_states")
    if not records:
        raise ValueError("run_choice: no records")
    orders = shuffle_ids(k)
    out = ChoiceRun(
        [],
        orders,
        np.zeros((0, len(orders), 6)),
        np.zeros((0, len(orders), 6), np.int64),
        None,
        total=len(records),
        generated=generated,
    )
    logits: list[NDArray[np.float64]] = []
    perms: list[NDArray[np.int64]] = []
    states: list[NDArray[np.float32]] = []
    audio, window = hears(vlm), audio_window(vlm)
    with stage(f"IMAVB {variant} choice", total=len(records), model=vlm.spec) as progress:
        for start in range(0, len(records), records_per_call):
            chunk: list[PremiseRecord] = []
            prompts: list[Prompt] = []
            chunk_perms: list[NDArray[np.int64]] = []
            for r in records[start : start + records_per_call]:
                media = _media(out, r, audio, media_of, window)
                if media is None:
                    continue
                chunk.append(r)
                for sid in orders:
                    perm = record_permutation(r.stimulus_id, r.correct_answer, sid)
                    chunk_perms.append(perm)
                    text = prompt_text(variant, r.question, displayed(r.options, perm), r.split)
                    prompts.append(stimulus_prompt(media, text))
            if not chunk:
                progress.advance(len(records[start : start + records_per_call]))
                continue
            pm = np.stack(chunk_perms)
            hooks = hooks_for(chunk, pm) if hooks_for is not None else None
            got = choose(vlm, prompts, LETTERS, hooks, generated, want_states)
            for row, reply in got.unparsed.items():  # a generated reply that named no letter, shown
                out.unparsed.setdefault(chunk[row // len(orders)].item_id, reply[:60])
            lg, st = got.scores.reshape(len(chunk), len(orders), 6), got.states
            pm3 = pm.reshape(len(chunk), len(orders), 6)
            for j, r in enumerate(chunk):
                if not np.isfinite(lg[j]).all():
                    out.reject(NONFINITE, r.item_id, detail="letter logits")
                    continue
                canon = np.empty(lg[j].shape)
                for s in range(len(orders)):
                    canon[s, pm3[j, s]] = lg[j, s]  # displayed letter p shows canonical option perm[p]
                out.records.append(r)
                logits.append(canon)
                perms.append(pm3[j])
                if st is not None:
                    states.append(st[:, j * len(orders)])  # the fixed order's row
            progress.advance(len(records[start : start + records_per_call]))
    if not out.records:
        return out
    out.logits = np.stack(logits)
    out.perms = np.stack(perms)
    out.states = np.stack(states, axis=1).astype(np.float32) if states else None
    return out


def logit_lens(
    vlm: VisionLanguageModel, states: NDArray[np.float32]
) -> tuple[NDArray[np.float64] | None, str]:
    """(P_l(letter) for the six letters at every layer [L, N, 6] (Eqs. 3–4), "") or (``None``, why the
    lens cannot run: no HF modules to read through, or no final norm / unembedding found)."""
    import torch  # lazy: torch (this module is torch-free at import: the suite imports it at collection)

    from faithtests.models.lens import LensUnsupported  # lazy: torch

    lens = getattr(vlm, "lens_probs", None)  # HF adapters (stored per row: a warm run loads no model)
    if lens is None:
        return None, f"{type(vlm).__name__} has no lens_probs (no HF model to read the lens through)"
    try:
        with label("IMAVB"):  # names the lens call's progress stage
            probs = lens(torch.from_numpy(np.ascontiguousarray(states)), LETTERS)
    except LensUnsupported as e:
        return None, f"logit lens unsupported: {e}"
    return probs.numpy().astype(np.float64), ""


def pgla_hooks(configs: Mapping[str, PGLAConfig], p_mis: Mapping[str, float], beta: float) -> HooksFor:
    """``hooks_for(records, perms)`` for :func:`run_choice`: one ``Hooks`` per call whose
    ``logit_adjuster`` maps each row's displayed logits to canonical order, applies Eqs. 5–6 with that
    record's held-out configuration and P_mis, and maps them back."""
    import torch  # lazy: torch (this module is torch-free at import)

    def hooks_for(records: Sequence[PremiseRecord], perms: NDArray[np.int64]) -> Hooks:
        per_record = perms.shape[0] // max(1, len(records))
        rows = [r.item_id for r in records for _ in range(per_record)]

        def adjust(logits: torch.Tensor, letters: Sequence[str]) -> torch.Tensor:
            if logits.shape != (len(rows), 6) or len(letters) != 6:
                raise ValueError(
                    f"PGLA adjuster: expected [{len(rows)}, 6] logits, got {tuple(logits.shape)}"
                )
            x = logits.detach().cpu().double().numpy()
            out = np.empty_like(x)
            for i, item in enumerate(rows):
                canon = np.empty(6)
                canon[perms[i]] = x[i]
                adj = pgla_adjust(canon, p_mis[item], configs[item], beta)
                out[i] = adj[perms[i]]
            return torch.from_numpy(out).to(device=logits.device, dtype=logits.dtype)

        return Hooks(logit_adjuster=adjust)

    return hooks_for


@dataclass
class VariantRun(CountsInvalid):
    """A prompt variant beside A1 (App. I.1) on the records: ``correct`` [N] in [0, 1] per record (A4:
    the mean over the K shuffles; A2: TRUE for a standard question, FALSE for a misleading one; A3: the
    last valid letter under the fixed order). Answers that cannot be read (a TRUE/FALSE tie, a CoT reply
    without a letter, a tied top logit) count wrong and by kind in ``invalid``, never guessed; records
    whose stimulus cannot be loaded are counted there too and are not in ``records``."""

    prompt: str
    records: list[PremiseRecord]
    correct: NDArray[np.float64]
    invalid: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    replies: list[str] = field(default_factory=list)  # A2 "TRUE"/"FALSE"/"tie", A3/A5 the generated text
    #: records the variant does not apply to (A6/A7: image stimuli, rows without a timestamp), by reason
    not_applicable: dict[str, int] = field(default_factory=dict)
    explanations: list[str] = field(default_factory=list)  # A5: the reply without its verdict word
    #: what a kind of ``invalid`` counts out of, where that is not the records (``totals()``): a tied or
    #: letterless answer of an A1-protocol variant (A4, A6, A7) is counted per shuffle, K per record
    out_of: dict[str, int] = field(default_factory=dict)


def run_variant(
    vlm: VisionLanguageModel, records: Sequence[PremiseRecord], prompt: str, *, k: int = K_SHUFFLES,
    generated: str = "",
) -> VariantRun:
    """A2–A7 on ``records`` (:class:`VariantRun`); A4/A6/A7 answered as :func:`run_choice` answers
    (``generated``: by generated letters)."""
    if prompt != "A4" and prompt not in TRIMMED and prompt not in _ANSWERED:
        raise ValueError(f"run_variant: prompt {prompt!r} is not one of A2-A7 (A1 is run_choice)")
    if not records:  # every A1 record was non-finite or rejected: nothing to ask (counted already)
        return VariantRun(prompt, [], np.zeros(0))
    if prompt == "A4":
        return _run_warned(vlm, records, k, generated)
    if prompt in TRIMMED:
        return _run_trimmed(vlm, records, prompt, k, generated)
    out = VariantRun(prompt, [], np.zeros(0))
    prompts: list[Prompt] = []
    audio, window = hears(vlm), audio_window(vlm)
    for r in records:
        media = _media(out, r, audio, window=window)
        if media is not None:
            out.records.append(r)
            prompts.append(stimulus_prompt(media, prompt_text(prompt, r.question, r.options, r.split)))
    if not prompts:
        return out
    with label(f"IMAVB {prompt}"):  # names the model calls' progress stages
        out.correct = np.array(_ANSWERED[prompt](vlm, prompts, out), dtype=np.float64)
    return out


def _true_false(vlm: VisionLanguageModel, prompts: list[Prompt], out: VariantRun) -> list[bool]:
    """A2: TRUE for a standard question, FALSE for a misleading one; a tie counted, never guessed."""
    # the paper generates up to 64 tokens and parses TRUE/FALSE; the two words' log-probabilities as
    # whole replies decide the same first word without parsing (multi-token spellings included)
    lp = vlm.answer_logprob(prompts, A2_ANSWERS).float().cpu().numpy()
    ok = []
    for r, (lp_true, lp_false) in zip(out.records, lp, strict=True):
        if lp_true == lp_false:
            out.reject("TRUE/FALSE tie (never guessed)", r.item_id)
        out.replies.append("tie" if lp_true == lp_false else ("TRUE" if lp_true > lp_false else "FALSE"))
        ok.append(out.replies[-1] == ("FALSE" if r.misleading else "TRUE"))
    return ok


def _explained(vlm: VisionLanguageModel, prompts: list[Prompt], out: VariantRun) -> list[bool]:
    """A5: the generated verdict (TRUE/FALSE) scored as A2; its explanation kept, a missing one counted."""
    out.replies = vlm.generate(prompts, max_new_tokens=MAX_NEW_TOKENS["A5"])
    ok = []
    for r, text in zip(out.records, out.replies, strict=True):
        verdict, why = parse_verdict(text)
        out.explanations.append(why)
        if verdict is None:
            out.reject("unparseable A5 verdict (not one of TRUE/FALSE)", f"{r.item_id}: {text[:80]!r}")
        elif not why:
            out.reject("A5 reply without explanation (verdict scored)", f"{r.item_id}: {text[:80]!r}")
        ok.append(verdict == ("FALSE" if r.misleading else "TRUE"))
    return ok


def _chain_of_thought(vlm: VisionLanguageModel, prompts: list[Prompt], out: VariantRun) -> list[bool]:
    """A3: the last valid letter of the greedy reply; a reply without one counted, scored wrong."""
    out.replies = vlm.generate(prompts, max_new_tokens=MAX_NEW_TOKENS["A3"])
    ok = []
    for r, text in zip(out.records, out.replies, strict=True):
        letter = last_valid_letter(text)
        if letter is None:
            out.reject("unparseable CoT answer (no letter A-F)", f"{r.item_id}: {text[:80]!r}")
        ok.append(letter is not None and LETTERS.index(letter) == r.correct_index)
    return ok


#: The generated / TRUE-FALSE variants: prompt -> scorer of its replies (per record correct or not).
_ANSWERED: dict[str, Callable[[VisionLanguageModel, list[Prompt], VariantRun], list[bool]]] = {
    "A2": _true_false, "A3": _chain_of_thought, "A5": _explained,
}


def _scored(out: VariantRun, run: ChoiceRun) -> VariantRun:
    """Accuracy over the K shuffles of an A1-protocol run (the fixed order, column 0, is left out), with
    each tied top logit counted, never guessed."""
    ans = answers(run.logits[:, 1:])
    gold = np.array([r.correct_index for r in run.records])
    out.correct = correct(ans, gold).mean(axis=1).astype(np.float64)
    kind = NO_LETTER if run.generated else "tied top logit"  # a generated letter ties only when absent
    for r, a in zip(run.records, ans, strict=True):
        said = f": {run.unparsed[r.item_id]!r}" if r.item_id in run.unparsed else ""
        for _ in range(int((a == TIE).sum())):  # per answer: a constant model ties in all K shuffles
            out.reject(kind, r.item_id + said, out_of=ans.size)
    return out


def _run_warned(vlm: VisionLanguageModel, records: Sequence[PremiseRecord], k: int,
                generated: str) -> VariantRun:
    """A4: the A1 protocol (letter logits, fixed order + K shuffles) with the warning head."""
    run = run_choice(vlm, records, variant="A4", k=k, want_states=False, generated=generated)
    out = VariantRun("A4", run.records, np.zeros(0), dict(run.invalid), dict(run.examples))
    if not run.records:
        return out
    return _scored(out, run)


IMAGE_NOT_APPLICABLE = "image stimulus: A6/A7 trim a video's timeline (App. C), an image has none"
CLIP_NOT_APPLICABLE = ("clip without an answer timestamp: A6/A7 trim to the ground-truth answer window "
                       "(App. C); the reference world's short clips have none (the whole clip is the answer)")
NO_TIMESTAMP = "no readable answer timestamp: nothing to trim to"


def _not_trimmable(r: PremiseRecord) -> str | None:
    """Why A6/A7 cannot run on ``r``, or None."""
    if r.window_media is None:
        return IMAGE_NOT_APPLICABLE if r.fps is None and r.audio is None else CLIP_NOT_APPLICABLE
    return NO_TIMESTAMP if r.answer_window is None else None


def _run_trimmed(
    vlm: VisionLanguageModel, records: Sequence[PremiseRecord], prompt: str, k: int, generated: str
) -> VariantRun:
    """A6/A7: the A1 protocol (letter logits, fixed order + K shuffles) on the clip trimmed to the
    ground-truth answer timestamp (A6) or that window ±50% (A7); records it cannot apply to are counted
    by reason in ``not_applicable`` and left out."""
    todo: list[PremiseRecord] = []
    na: dict[str, int] = {}
    for r in records:
        why = _not_trimmable(r)
        if why is None:
            todo.append(r)
        else:
            na[why] = na.get(why, 0) + 1
    out = VariantRun(prompt, [], np.zeros(0), not_applicable=na)
    if not todo:
        return out

    audio = hears(vlm)

    def trimmed(r: PremiseRecord) -> Stimulus:
        """The frames in the window, and the soundtrack cut to the same window for a model that hears."""
        assert r.window_media is not None and r.answer_window is not None
        start, end = trim_window(r.answer_window, prompt)
        frames = r.window_media(start, end)
        if not audio or r.audio is None:
            return Stimulus(frames)
        fps = len(frames) / (end - start) if end > start else r.fps
        return Stimulus(frames, trim_audio(r.audio(), start, end), fps)

    run = run_choice(vlm, todo, variant=prompt, k=k, want_states=False, media_of=trimmed, generated=generated)
    out.records, out.invalid, out.examples = run.records, dict(run.invalid), dict(run.examples)
    if not run.records:
        return out
    return _scored(out, run)
