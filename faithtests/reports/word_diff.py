"""The words that differ between two near-identical texts (a caption and its one-word flip), marked for
display: an exemplar's texts are shown with ``<mark>`` around each word that differs from the closest
other text of the card, when the two differ in at most :data:`MAX_CHANGED` words and share most of the
rest (a paraphrase that rewrites the sentence is left unmarked)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from markupsafe import Markup, escape

MAX_CHANGED = 3  # words changed in a text for it to count as a near-duplicate of another
MIN_WORDS = 3  # texts shorter than this (labels, letters) are never diffed
_TOKEN = re.compile(r"(\s+)")


def _words(text: str) -> list[str]:
    """Tokens of ``text``: words and the whitespace between them (joined back, they are the text)."""
    return [t for t in _TOKEN.split(text) if t]


def _norm(word: str) -> str:
    return re.sub(r"[^\w]", "", word.lower())


def changed_words(a: str, b: str) -> set[int] | None:
    """Token indexes of ``a`` whose word differs from ``b`` (compared case- and punctuation-blind), or
    None when the texts are not near-duplicates (nothing differs, more than :data:`MAX_CHANGED` words
    changed, or fewer than half of ``a``'s words are shared)."""
    ta, tb = _words(a), _words(b)
    ia = [i for i, t in enumerate(ta) if not t.isspace()]
    ib = [t for t in tb if not t.isspace()]
    if len(ia) < MIN_WORDS or len(ib) < MIN_WORDS:
        return None
    sm = difflib.SequenceMatcher(a=[_norm(ta[i]) for i in ia], b=[_norm(t) for t in ib], autojunk=False)
    changed: set[int] = set()
    other = 0
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        if op != "equal":
            changed.update(ia[a0:a1])
            other += b1 - b0
    shared = len(ia) - len(changed)
    if not (changed or other) or max(len(changed), other) > MAX_CHANGED or 2 * shared < len(ia):
        return None
    return changed


def mark_changed(text: str, changed: set[int]) -> Markup:
    """``text`` escaped, with each token of ``changed`` wrapped in ``<mark>``."""
    parts = [Markup("<mark>{}</mark>").format(t) if i in changed else escape(t)
             for i, t in enumerate(_words(text))]
    return Markup("").join(parts)


def marked_texts(texts: Mapping[str, str]) -> dict[str, str]:
    """``texts`` with the words that differ from their closest near-duplicate among the other texts
    marked (:func:`mark_changed`); a text with no near-duplicate is returned as it was."""
    out: dict[str, str] = {}
    for k, v in texts.items():
        best: set[int] | None = None
        for k2, v2 in texts.items():
            c = changed_words(v, v2) if k2 != k else None
            if c is not None and (best is None or len(c) < len(best)):
                best = c
        out[k] = mark_changed(v, best) if best else v
    return out
