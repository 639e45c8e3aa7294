"""Answers to a multiple-choice prompt as a generated option letter, for a model that gives no option
log-probabilities (a served model whose endpoint returns none: ``transformers serve``, most hosted APIs).

The default answer is *option scoring* (the argmax of the option letters' next-token logits). A model
that cannot be scored answers by greedy generation instead, and its reply is parsed by
:func:`parse_letter`, a strict rule: a reply that names no option letter is its own outcome (counted
by the caller, and no option is chosen), never a guess. ``--faith-answer-mode generated`` makes every
model answer this way, so an in-process checkpoint can be compared with its served form answer for
answer.

The choice is handed to the protocols as *indicator scores* (1 for the letter the reply names, 0 for
the rest; all 0 when it names none, a tie at the top, which every protocol already counts as no
answer and wrong): argmax-based metrics (accuracy, rejection rate, strict correctness) read them as
they read logits; nothing else may (no margin, no probability), and the protocols read no states with
them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faithtests.config import ANSWER_MODES
from faithtests.models.capabilities import lacks
from faithtests.models.interfaces import Hooks, Prompt, VisionLanguageModel

#: Tokens a generated letter answer may take ("A", " (B)", "Answer: C."): past the letter nothing is read.
LETTER_TOKENS = 8
#: The outcome of a reply that names no option letter (counted; the answer then is no option, wrong).
NO_LETTER = "reply names no option letter (counted wrong, never guessed)"
_PUNCT = ".,!:;\"'()[]{}*`"
_LEAD = re.compile(r"^\s*(?:the\s+)?(?:correct\s+)?(?:answer|option)\s*(?:is)?\s*[:\-]?\s*", re.IGNORECASE)


def parse_letter(reply: str, options: Sequence[str]) -> int | None:
    """The index of the option letter ``reply`` answers with, or None.

    The reply's first word, after an optional lead-in ("Answer:", "The answer is", "Option") and with
    surrounding punctuation and brackets removed, must be exactly one of ``options`` (case-sensitive:
    "a" is an article, not option A), and the next two words must name no other option ("A or B", "A,
    B": two answers). "B", " (B)", "B: the red cup", "Answer: B." → B; "I think B", "A or B", "b",
    "" → None."""
    return parse_word(reply, options)


def parse_word(reply: str, options: Sequence[str], *, fold_case: bool = False,
               lead: re.Pattern[str] = _LEAD) -> int | None:
    """:func:`parse_letter`'s rule for any one-word answer (Yes / No): the first word after the optional
    ``lead`` must be one option, and the next two words name no other. ``fold_case`` for words that are
    no article ("yes" is Yes)."""
    return read_first(reply, {o: i for i, o in enumerate(options)}, fold_case=fold_case, lead=lead)


def read_first(reply: str, value: Mapping[str, int], *, fold_case: bool = False,
               lead: re.Pattern[str] = _LEAD) -> int | None:
    """The rule under every parser here: the reply's first word after ``lead`` (punctuation stripped)
    must be a key of ``value``, and the next two words name no key of another value ("three or four";
    "3 (three)" is one answer). Returns that value, or None."""
    def norm(w: str) -> str:
        return w.casefold() if fold_case else w

    keys = {norm(k): v for k, v in value.items()}
    words = [norm(w.strip(_PUNCT)) for w in lead.sub("", reply, count=1).split()]
    if not words or words[0] not in keys:
        return None
    first = keys[words[0]]
    if any(w in keys and keys[w] != first for w in words[1:3]):
        return None
    return first


def generated_by(vlm: object, mode: str) -> str:
    """Why ``vlm`` answers multiple-choice prompts by generated letters ("" when its options are scored):
    the run asks for it (``mode`` "generated"), or the model gives no option log-probabilities."""
    if mode not in ANSWER_MODES:
        raise ValueError(f"answer mode {mode!r} is not one of {ANSWER_MODES}")
    if mode == "generated":
        return "--faith-answer-mode generated"
    why = lacks(vlm, "logprobs")
    return f"no option log-probabilities: {why}" if why else ""


def states_not_read(why: str) -> str:
    """The not-applicable reason of a check that needs pre-answer states when the answers are generated
    (``why``: :func:`generated_by`): generation reads none."""
    return f"the answers are generated ({why}): no pre-answer states read"


def answer_mode_of(vlm: object, mode: str) -> str:
    """How ``vlm`` answers multiple-choice prompts under ``mode``, in words (fingerprint: ``answers``)."""
    why = generated_by(vlm, mode)
    return f"generated letters ({why})" if why else "option scoring"


@dataclass(frozen=True)
class LetterChoice:
    """Generated answers to N prompts: ``chosen`` option index per prompt (-1: the reply names none)."""

    chosen: NDArray[np.int64]
    replies: list[str]
    n_options: int

    @property
    def unparsed(self) -> NDArray[np.bool_]:
        return np.asarray(self.chosen < 0)

    def indicators(self) -> NDArray[np.float32]:
        """[N, options]: 1 at the chosen option, else 0 (a row of zeros: no option chosen, a tie)."""
        out = np.zeros((len(self.chosen), self.n_options), dtype=np.float32)
        rows = np.flatnonzero(self.chosen >= 0)
        out[rows, self.chosen[rows]] = 1.0
        return out


def generated_choice(vlm: VisionLanguageModel, prompts: Sequence[Prompt], options: Sequence[str],
                     hooks: Hooks | None = None,
                     parse: Callable[[str, Sequence[str]], int | None] = parse_letter) -> LetterChoice:
    """Each prompt answered by greedy generation (:data:`LETTER_TOKENS` tokens), read by ``parse``
    (:func:`parse_letter`, or a protocol's own one-word rule built on :func:`parse_word`)."""
    replies = [str(r) for r in vlm.generate(list(prompts), LETTER_TOKENS, hooks)] if prompts else []
    chosen = [parse(r, options) for r in replies]
    return LetterChoice(np.array([-1 if c is None else c for c in chosen], dtype=np.int64), replies,
                        len(options))


@dataclass(frozen=True)
class Chosen:
    """One call's answers to N multiple-choice prompts: ``scores`` [N, options] (the option logits, or a
    generated letter's indicators), ``states`` [L, N, D] (``None`` when not read: never with generated
    letters) and, for generated letters, each reply naming no option (row -> reply)."""

    scores: NDArray[np.float64]
    states: NDArray[np.float32] | None
    unparsed: dict[int, str]


def choose(vlm: VisionLanguageModel, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None,
           generated: str, want_states: bool = True) -> Chosen:
    """The answers of one call: ``vlm.decide`` (logits and states), or with ``generated`` (why:
    :func:`generated_by`) greedy letters (:func:`generated_choice`)."""
    if generated:
        choice = generated_choice(vlm, prompts, options, hooks)
        return Chosen(choice.indicators().astype(np.float64), None,
                      {int(i): choice.replies[i] for i in np.flatnonzero(choice.unparsed)})
    d = vlm.decide(list(prompts), options, hooks)
    states = np.asarray(d.states.float().cpu().numpy(), dtype=np.float32) if want_states else None
    return Chosen(np.asarray(d.logits.float().cpu().numpy(), dtype=np.float64), states, {})
