"""Semantic flips F(I, c) of LGIP (§3.2, App. A.2) and the combined paraphrase-then-flip (Table 3).

Per flip type (in vocabulary order): the first whole-word regex match of any word of that type's list
(``\\b(w1|w2|...)\\b``, case-sensitive like the public code unless ``ignore_case``) is replaced by a
word drawn uniformly from the *other* words of the same list; only that occurrence changes (count=1).
At most one flip per type. Flips identical to c or shorter than 5 characters are dropped, duplicates
keep the first type label, and at most K_diff = 6 are kept (sampled without replacement).

Random draws go through one ``numpy.random.Generator``: one ``rng.integers(len(others))`` per type that
matched, in vocabulary order, then the cap (consumed only when more than K_diff flips exist, which the
LGIP vocabularies can never produce). This is the public code's draw order with numpy in place of
Python's ``random.choice``/``random.sample``.

Vocabularies are parameters: :data:`LGIP_VOCABULARIES` for COCO-style captions; the reference world
passes its own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from faithtests.protocols.lgip.paraphrase import MIN_CHARS, Paraphrase, filter_candidates, sample_capped

#: LGIP App. A.2 replacement vocabularies, in the public code's type order (color, number, object).
LGIP_VOCABULARIES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "color": ("red", "blue", "green", "yellow", "black", "white", "brown", "gray", "orange", "pink",
                  "purple"),
        "number": ("one", "two", "three", "four", "five"),
        "object": ("dog", "cat", "horse", "car", "bus", "train", "person", "bird", "boat", "bicycle",
                   "truck"),
    }
)

K_DIFF = 6

#: Count words a number flip may swap (LGIP's and the world's number vocabularies are subsets).
COUNT_WORDS: Mapping[str, int] = MappingProxyType(
    {w: i for i, w in enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                                 "nine", "ten"))})


def count_change(rule: str) -> tuple[int, int] | None:
    """(true count, flipped count) of a number flip from its rule ("two->three", or "RULE+two->three" for
    a combined flip); None when the rule does not swap two count words (e.g. a flip read from a file)."""
    a, sep, b = rule.rpartition("+")[2].partition("->")
    if not sep:
        return None
    x, y = COUNT_WORDS.get(a.strip().lower()), COUNT_WORDS.get(b.strip().lower())
    return (x, y) if x is not None and y is not None and x != y else None


@dataclass(frozen=True)
class Flip:
    """One flipped caption c† of type ``flip_type``; ``source`` is the caption that was edited (the
    original c, or a paraphrase c' for a combined flip)."""

    text: str
    flip_type: str
    original_word: str
    new_word: str
    source: str


@dataclass(frozen=True)
class CombinedFlip:
    """Table 3: a paraphrase c' of c, then a flip of c' (the flip's type is kept)."""

    flip: Flip
    paraphrase: Paraphrase

    @property
    def text(self) -> str:
        return self.flip.text

    @property
    def flip_type(self) -> str:
        return self.flip.flip_type


def validate_vocabularies(vocabularies: Mapping[str, Sequence[str]]) -> None:
    """Each type needs >= 2 distinct non-empty words (a replacement must exist); raise otherwise."""
    if not vocabularies:
        raise ValueError("flip vocabularies are empty")
    for flip_type, words in vocabularies.items():
        if len(words) < 2:
            raise ValueError(f"flip vocabulary {flip_type!r} needs at least 2 words, got {list(words)}")
        if any(not w or w != w.strip() for w in words):
            raise ValueError(f"flip vocabulary {flip_type!r} has an empty or padded word: {list(words)}")
        if len({w.lower() for w in words}) != len(words):
            raise ValueError(f"flip vocabulary {flip_type!r} has duplicate words: {list(words)}")


def _match_case(template: str, word: str) -> str:
    if template.isupper() and len(template) > 1:
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


@functools.lru_cache(maxsize=256)
def _word_pattern(words: tuple[str, ...], ignore_case: bool) -> re.Pattern[str]:
    return re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b",
                      re.IGNORECASE if ignore_case else 0)


def flip_one(caption: str, words: Sequence[str], rng: np.random.Generator, *, ignore_case: bool = False
             ) -> tuple[str, str, str] | None:
    """(flipped caption, matched word, vocabulary replacement) for the first whole-word match, or None.

    With ``ignore_case`` the match is case-insensitive and the replacement copies the matched word's
    capitalisation ("Two dogs" -> "Four dogs"); by default only exact-case words match, as in the
    public code (so a sentence-initial "Two" is not a number flip there).
    """
    m = _word_pattern(tuple(words), ignore_case).search(caption)
    if m is None:
        return None
    found = m.group(1)
    key = found.lower() if ignore_case else found
    others = [w for w in words if (w.lower() if ignore_case else w) != key]
    new = others[int(rng.integers(len(others)))]
    written = _match_case(found, new) if ignore_case else new
    return caption[: m.start()] + written + caption[m.end() :], found, new


def make_flips(
    caption: str,
    rng: np.random.Generator,
    *,
    vocabularies: Mapping[str, Sequence[str]] = LGIP_VOCABULARIES,
    k_diff: int = K_DIFF,
    min_chars: int = MIN_CHARS,
    ignore_case: bool = False,
) -> tuple[Flip, ...]:
    """F(I, c): at most one flip per type, filtered, deduped (first type kept), capped (LGIP App. A.2)."""
    if not caption.strip():
        raise ValueError("make_flips: empty caption")
    validate_vocabularies(vocabularies)
    c = caption.strip()
    raw: list[tuple[str, Flip]] = []
    for flip_type, words in vocabularies.items():
        res = flip_one(c, words, rng, ignore_case=ignore_case)
        if res is not None:
            text, found, new = res
            raw.append((text, Flip(text.strip(), flip_type, found, new, c)))
    kept = sample_capped(filter_candidates(raw, c, min_chars=min_chars), k_diff, rng)
    return tuple(flip for _, flip in kept)


def make_combined_flips(
    caption: str,
    paraphrases: Sequence[Paraphrase],
    rng: np.random.Generator,
    *,
    vocabularies: Mapping[str, Sequence[str]] = LGIP_VOCABULARIES,
    k_combined: int = K_DIFF,
    min_chars: int = MIN_CHARS,
    ignore_case: bool = False,
) -> tuple[CombinedFlip, ...]:
    """Paraphrase first, then flip the paraphrase, type kept (LGIP §3.2 "Combined perturbations").

    Every given paraphrase is flipped with :func:`make_flips` rules (no cap per paraphrase); the pooled
    flips are filtered against the original c, deduped (first wins) and capped at ``k_combined``.
    The public code instead flips the first 5 paraphrases of an unordered set and keeps the first 6.
    """
    pooled: list[tuple[str, CombinedFlip]] = []
    for para in paraphrases:
        for flip in make_flips(para.text, rng, vocabularies=vocabularies, k_diff=len(vocabularies),
                               min_chars=min_chars, ignore_case=ignore_case):
            pooled.append((flip.text, CombinedFlip(flip, para)))
    kept = sample_capped(filter_candidates(pooled, caption, min_chars=min_chars), k_combined, rng)
    return tuple(item for _, item in kept)
