"""A suite's exemplar cards: thumbnails kept inline, repeats counted, near-identical cards grouped.

* A card identical to one shown earlier on the page (the same JSON: another test's copy) is counted,
  not repeated.
* Near-identical cards of one test (:func:`near_identical`: the same outcome, i.e. the same reason with
  its numbers masked, the same text fields, and texts that differ in at most a quarter of their words,
  as the cards of one description template answered the same way do) are shown once with ``×N``; the
  others stay one click away (``ExemplarView.similar``, folded under the card).
* At most ``max_exemplars`` distinct cards per test, grouped after the cap (the page says when it capped).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from faithtests.reports.render_views import Column, fmt, strip_file
from faithtests.reports.word_diff import marked_texts  # the flipped word of a flip, in <mark>
from faithtests.scorecard.model import Exemplar, TestRecord

__all__ = ["ExemplarGroup", "ExemplarView", "exemplar_groups", "group_similar", "near_identical"]

_DATA_URI = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
SIMILAR = 0.75  # share of words two cards' texts must have in common (difflib's ratio) to be grouped


@dataclass
class ExemplarView:
    reason: str
    column: str
    texts: dict[str, str]
    scores: dict[str, str]
    images: list[tuple[str, str]]  # (data URI, alt)
    image_notes: list[str]
    similar: list[ExemplarView] = field(default_factory=list)  # near-identical cards shown under this one

    @property
    def count(self) -> int:
        return 1 + len(self.similar)


@dataclass
class ExemplarGroup:
    test: str
    failed: bool  # the test failed: these are failure exemplars; else the hardest items of a pass
    shown: list[ExemplarView]  # one card per group of near-identical ones
    total: int  # distinct cards of this test not shown earlier on the page
    repeated: int = 0  # cards identical to ones shown under an earlier test
    repeated_from: list[str] = field(default_factory=list)

    @property
    def shown_cards(self) -> int:
        return sum(v.count for v in self.shown)

    @property
    def capped(self) -> bool:
        return self.total > self.shown_cards


def _image(uri: str | None, alt: str, max_chars: int, notes: list[str]) -> tuple[str, str] | None:
    if uri is None:
        return None
    if len(uri) > max_chars:
        notes.append(f"{alt}: thumbnail of {len(uri) // 1024} KiB left out (over {max_chars // 1024} KiB)")
        return None
    if not _DATA_URI.fullmatch(uri):
        notes.append(f"{alt}: not an inline image (left out to keep the page offline): {uri[:80]}")
        return None
    return uri, alt


def _exemplar_view(e: Exemplar, max_chars: int) -> ExemplarView:
    notes: list[str] = []
    imgs = [
        im
        for im in (_image(e.image, "image", max_chars, notes), _image(e.image_b, "image B", max_chars, notes))
        if im is not None
    ]
    return ExemplarView(e.reason, Column(e.model, e.variant).label, marked_texts(e.texts),
                        {k: fmt(v) for k, v in e.scores.items()}, imgs, notes)


def _words(e: Exemplar) -> list[str]:
    return " ".join(e.texts[k] for k in sorted(e.texts)).lower().split()


def near_identical(a: Exemplar, b: Exemplar) -> bool:
    """Whether two cards tell the same story: the same model/variant, the same outcome (their reasons
    equal once numbers are masked: ``Δlex = 0.26`` and ``Δlex = 0.25`` alike), the same text fields, and
    texts sharing at least :data:`SIMILAR` of their words in order (one template, a word or two swapped)."""
    if (a.model, a.variant) != (b.model, b.variant) or sorted(a.texts) != sorted(b.texts):
        return False
    if _NUMBER.sub("#", a.reason) != _NUMBER.sub("#", b.reason):
        return False
    wa, wb = _words(a), _words(b)
    return wa == wb or SequenceMatcher(None, wa, wb, autojunk=False).ratio() >= SIMILAR


def group_similar(cards: list[Exemplar]) -> list[list[Exemplar]]:
    """``cards`` in groups of near-identical ones, in order of first appearance; each group is led by
    its first card, which every other card of it is near-identical to."""
    groups: list[list[Exemplar]] = []
    for e in cards:
        home = next((g for g in groups if near_identical(g[0], e)), None)
        if home is None:
            groups.append([e])
        else:
            home.append(e)
    return groups


def _views(cards: list[Exemplar], max_chars: int) -> list[ExemplarView]:
    out = []
    for lead, *rest in group_similar(cards):
        view = _exemplar_view(lead, max_chars)
        view.similar = [_exemplar_view(e, max_chars) for e in rest]
        out.append(view)
    return out


def exemplar_groups(tests: list[TestRecord], seen: dict[str, str], max_exemplars: int,
                    max_image_chars: int) -> list[ExemplarGroup]:
    """Exemplar groups of a suite's tests; ``seen`` (card JSON -> test that showed it) spans the page."""
    out = []
    for t in tests:
        if not t.exemplars:
            continue
        fresh: list[Exemplar] = []
        repeated_from: dict[str, None] = {}
        for e in t.exemplars:
            key = json.dumps(e.to_json(), sort_keys=True)
            if key in seen:
                repeated_from[seen[key]] = None
            else:
                seen[key] = strip_file(t.test)
                fresh.append(e)
        out.append(ExemplarGroup(
            strip_file(t.test), t.outcome in ("failed", "error"),
            _views(fresh[:max_exemplars], max_image_chars), len(fresh), len(t.exemplars) - len(fresh),
            [k for k in repeated_from if k != strip_file(t.test)]))
    return out
