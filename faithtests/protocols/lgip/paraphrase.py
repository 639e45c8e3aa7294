"""Meaning-preserving paraphrases P(I, c) of LGIP (§3.2, App. A.1).

Candidates are the 9 simple templates of App. A.1(i) followed by the advanced rules of App. A.1(ii)
(:mod:`faithtests.protocols.lgip.rewrite_rules`); then, exactly as App. A.1 says: strip, drop candidates under
5 characters, order-preserving exact-match dedupe, drop the original caption, and sample at most
K_same = 6 uniformly without replacement.

Choices where the paper is silent (documented differences from the public code):
- The caption is stripped *before* it is put into a template, so "water. " + " in the scene" does not
  leave a double space (the public code formats the raw caption and strips only the ends).
- The template text is used verbatim: "a photo of A man ..." keeps the caption's capital, as the
  paper's template list and the public code do.
- Sampling uses ``numpy.random.Generator`` (the public code uses Python's ``random.sample`` on a
  global ``random.seed(42)`` stream); see :func:`sample_capped` for the exact draw. Kept paraphrases
  are returned in candidate order, not draw order.
- Each :class:`Paraphrase` carries its provenance ``kind``. The simple / advanced label of the metrics
  (E_inv^simple, E_inv^adv, Table 4) is the paper's by default (:func:`paraphrase_kinds`,
  ``labels="markers"``): App. A.1 and the public code (``rebuttal_enhanced_lgip_by_transformation.py``)
  tag a string "simple" iff it contains a template marker (:data:`LGIP_SIMPLE_MARKERS`, substring,
  case-insensitive). That rule tags templates 5 and 6 ("{c} in the scene", "a scene showing {c}")
  advanced and every rewrite of a caption that itself says "a picture of" simple; Table 4 was computed
  with it, so it is the default. ``labels="provenance"`` uses the generator's kind instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar, get_args

import numpy as np

from faithtests.protocols.lgip.rewrite_rules import SYNONYM_TABLE, advanced_candidates, usable_synonyms

ParaphraseKind = Literal["simple", "advanced"]
#: How a paraphrase is labelled simple / advanced: the paper's marker rule, or how it was generated.
ParaphraseLabels = Literal["markers", "provenance"]
PARAPHRASE_LABELS: tuple[ParaphraseLabels, ...] = get_args(ParaphraseLabels)

#: App. A.1(i), in the paper's order.
SIMPLE_TEMPLATES: tuple[str, ...] = (
    "a photo of {c}",
    "an image of {c}",
    "a picture of {c}",
    "{c}",
    "{c} in the scene",
    "a scene showing {c}",
    "In this image, {c}",
    "In the picture, {c}",
    "This image shows {c}",
)

#: App. A.1 "Simple vs. advanced labels": the markers the paper (and its code) test for.
LGIP_SIMPLE_MARKERS: tuple[str, ...] = (
    "a photo of",
    "an image of",
    "a picture of",
    "in this image",
    "in the picture",
    "this image shows",
)

K_SAME = 6
MIN_CHARS = 5
LGIP_SEED = 42

T = TypeVar("T")


@dataclass(frozen=True)
class Paraphrase:
    """One paraphrase c' of a caption c.

    ``rule`` is the template string (e.g. ``"a photo of {c}"``) or the advanced rule name
    (``passive``, ``synonym``, ``pp_front``, ``clause_front``, ``discourse``).
    """

    text: str
    kind: ParaphraseKind
    rule: str


def tag_paraphrase(text: str, markers: Sequence[str] = LGIP_SIMPLE_MARKERS) -> ParaphraseKind:
    """"simple" iff ``text`` contains a template marker, case-insensitive (LGIP App. A.1 labels)."""
    low = text.lower()
    return "simple" if any(m.lower() in low for m in markers) else "advanced"


def paraphrase_kinds(texts: Sequence[str], provenance: Sequence[str | None],
                     labels: ParaphraseLabels = "markers", markers: Sequence[str] = LGIP_SIMPLE_MARKERS
                     ) -> list[ParaphraseKind]:
    """The simple / advanced label of each paraphrase (LGIP App. A.1 "Simple vs. advanced labels").

    ``labels="markers"`` (default, Table 4 comparable): :func:`tag_paraphrase` of every string.
    ``labels="provenance"``: ``provenance[i]`` ("simple" for the 9 templates, "advanced" for the rewrite
    rules); a paraphrase without one (None: read from a file) falls back to its marker label.
    """
    if len(texts) != len(provenance):
        raise ValueError(f"paraphrase_kinds: {len(texts)} texts but {len(provenance)} provenance labels")
    if labels == "markers":
        return [tag_paraphrase(t, markers) for t in texts]
    if labels != "provenance":
        raise ValueError(f"unknown paraphrase labels {labels!r}; one of {PARAPHRASE_LABELS}")
    out: list[ParaphraseKind] = []
    for t, k in zip(texts, provenance, strict=True):
        if k is None:
            out.append(tag_paraphrase(t, markers))
        elif k in ("simple", "advanced"):
            out.append("simple" if k == "simple" else "advanced")
        else:
            raise ValueError(f"paraphrase_kinds: provenance {k!r} is not 'simple' or 'advanced'")
    return out


def filter_candidates(candidates: Iterable[tuple[str, T]], original: str, *, min_chars: int = MIN_CHARS
                      ) -> list[tuple[str, T]]:
    """Strip, drop < ``min_chars`` characters, order-preserving dedupe (first label wins), drop the
    original (stripped, exact match) — LGIP App. A.1/A.2 "Filtering and deduplication"."""
    orig = original.strip()
    seen: set[str] = set()
    out: list[tuple[str, T]] = []
    for text, label in candidates:
        t = text.strip()
        if len(t) < min_chars or t in seen or t == orig:
            continue
        seen.add(t)
        out.append((t, label))
    return out


def sample_capped(items: Sequence[T], k: int, rng: np.random.Generator) -> list[T]:
    """At most ``k`` items uniformly without replacement (LGIP App. A.1 "Sampling cap").

    Exactly as the public code, the generator is consumed only when there are more than ``k`` items:
    then one call ``rng.choice(len(items), size=k, replace=False)``. The kept items are returned in
    their original order.
    """
    if k < 0:
        raise ValueError(f"cap must be >= 0, got {k}")
    if len(items) <= k:
        return list(items)
    keep = np.sort(rng.choice(len(items), size=k, replace=False))
    return [items[int(i)] for i in keep]


def paraphrase_candidates(
    caption: str,
    *,
    templates: Sequence[str] = SIMPLE_TEMPLATES,
    advanced: bool = True,
    synonyms: Mapping[str, str] = SYNONYM_TABLE,
    vocabularies: Mapping[str, Sequence[str]] | None = None,
) -> list[tuple[str, tuple[ParaphraseKind, str]]]:
    """All candidates (text, (kind, rule)) before filtering: templates first, then advanced rules.

    ``vocabularies`` are the flip vocabularies; synonym entries touching them are never used.
    """
    if not caption.strip():
        raise ValueError("paraphrase_candidates: empty caption")
    c = caption.strip()
    out: list[tuple[str, tuple[ParaphraseKind, str]]] = [
        (t.format(c=c), ("simple", t)) for t in templates
    ]
    if advanced:
        syn = usable_synonyms((vocabularies or {}).values(), synonyms)
        out.extend((text, ("advanced", rule)) for text, rule in advanced_candidates(c, syn))
    return out


def make_paraphrases(
    caption: str,
    rng: np.random.Generator,
    *,
    k_same: int = K_SAME,
    min_chars: int = MIN_CHARS,
    templates: Sequence[str] = SIMPLE_TEMPLATES,
    advanced: bool = True,
    synonyms: Mapping[str, str] = SYNONYM_TABLE,
    vocabularies: Mapping[str, Sequence[str]] | None = None,
) -> tuple[Paraphrase, ...]:
    """P(I, c): candidates -> filter -> dedupe -> drop original -> cap K_same (LGIP App. A.1).

    Pass the flip ``vocabularies`` in use so the synonym rule avoids them (App. A.1(ii) 2).
    """
    cands = paraphrase_candidates(caption, templates=templates, advanced=advanced, synonyms=synonyms,
                                  vocabularies=vocabularies)
    kept = sample_capped(filter_candidates(cands, caption, min_chars=min_chars), k_same, rng)
    return tuple(Paraphrase(text, kind, rule) for text, (kind, rule) in kept)
