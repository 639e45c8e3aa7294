"""Judging free-text difference descriptions against a pair's ground-truth edits (App. B.2, Eqs. 14–15).

The paper uses GPT-4o as judge; here a judge is any callable ``(answer, record) -> Judgement`` with a
``name`` (recorded in the scorecard). :func:`callable_judge` wraps a user's own (e.g. an LLM judge they
run) and checks what it returns. The default, :class:`DeterministicJudge`, reads structured claims:

1. Split the answer into fragments on ";", sentence ends, newlines and enumerators ("First,", "2.",
   "-"). Overall judgements ("There are three differences between the images.", "Yes, they are
   different") and lead-ins ("Here are the differences:") mention no object and are dropped, neither
   claims nor unparseable (App. B.2: "excluding overall yes/no judgments"); so are untyped fragments
   stating sameness ("the background is identical"): they claim no difference.
2. Per fragment: the edit type from keyword cues (below), the category as the first mention of a
   vocabulary word (longest match, plurals and a few aliases; an owner before "'s", or a colour word
   such as COCO's "orange", yields to another noun), the attribute (the new colour after "turned" /
   "to" / "now" ..., or the new place after "moved to the ..."). A fragment whose cues point to
   several types, or to none, has no type.
3. A fragment without type or category is still a claim (it is in ``claims``, never matched) and is
   counted in ``unparseable``: counted, never guessed.
4. φ (Eq. 14): same type and category, and, when both the claim and the edit state an attribute,
   the same attribute (a wrong one is App. B.2's "Attribute Error"; an unstated one is not penalised).
   The before-state ("the red circle ...") is not compared. Eq. 15 takes max_j φ per claim, so two
   claims may match one edit; ``matched`` prefers an edit no earlier claim took, for coverage reports.

The world's strict claim grammar (``faithtests.protocols.spdfaith.stimuli.claims_text``) is a special case.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, NoReturn, Protocol

from faithtests.models.errors import PluginContractError
from faithtests.protocols.spdfaith.records import EDIT_TYPES, DiffRecord, EditTruth
from faithtests.world.scene import COLOURS, POSITIONS, SHAPES

__all__ = [
    "COCO_CATEGORIES", "COCO_DIRECTIONS", "COMMON_COLOURS", "DEFAULT_ALIASES", "DIRECTION_ALIASES",
    "DeterministicJudge", "Judge", "JudgedClaim", "Judgement", "callable_judge", "check_judgement",
    "coco_judge", "world_judge",
]

#: COCO 2017's 80 instance categories: the category vocabulary of COCO-made and SPD-Faith-Bench pairs.
COCO_CATEGORIES: Final[tuple[str, ...]] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
    "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
    "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
    "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
    "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard",
    "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase",
    "scissors", "teddy bear", "hair drier", "toothbrush",
)
#: Colour names a free-text answer about a COCO pair may use (SPD-Faith's examples: cyan, magenta, ...).
COMMON_COLOURS: Final[tuple[str, ...]] = (
    "red", "green", "blue", "yellow", "purple", "orange", "pink", "magenta", "cyan", "brown", "black",
    "white", "gray", "grey", "silver", "gold", "beige", "violet", "teal", "turquoise", "navy",
)
#: Surface word -> vocabulary word; used only where the target is in the judge's vocabulary.
DEFAULT_ALIASES: Final[dict[str, str]] = {
    "people": "person", "persons": "person", "man": "person", "men": "person", "woman": "person",
    "women": "person", "boy": "person", "girl": "person", "child": "person", "children": "person",
    "pedestrian": "person", "pedestrians": "person", "television": "tv", "tv set": "tv",
    "sofa": "couch", "motorbike": "motorcycle", "aeroplane": "airplane", "plane": "airplane",
    "cellphone": "cell phone", "mobile phone": "cell phone", "phone": "cell phone", "table": "dining table",
    "plant": "potted plant", "ball": "sports ball", "mice": "mouse", "bike": "bicycle", "ski": "skis",
    "fridge": "refrigerator", "doughnut": "donut", "hair dryer": "hair drier",
    "grey": "gray", "gray": "grey", "middle": "center", "centre": "center",
}
#: The directions a COCO position edit's attribute names (``coco_ops.direction``), and how answers say
#: them. Not for the world, whose places are absolute: "moved leftwards" from the right may end centred.
COCO_DIRECTIONS: Final[tuple[str, ...]] = ("left", "right", "up", "down")
DIRECTION_ALIASES: Final[dict[str, str]] = {
    "top": "up", "upward": "up", "upwards": "up", "bottom": "down", "downward": "down", "downwards": "down",
    "leftward": "left", "leftwards": "left", "rightward": "right", "rightwards": "right",
}


@dataclass(frozen=True)
class JudgedClaim:
    """One claimed difference: type (color/remove/position), category, the stated new colour or place,
    each None when the answer did not give one the judge could read; ``text`` the fragment."""

    type: str | None
    category: str | None
    attribute: str | None
    text: str
    before: str | None = None  # the object's colour as the claim names it ("the red car ...")

    def __post_init__(self) -> None:
        if self.type is not None and self.type not in EDIT_TYPES:
            raise ValueError(f"unknown claim type {self.type!r}; expected one of {EDIT_TYPES} or None")

    @property
    def parsed(self) -> bool:
        return self.type is not None and self.category is not None


@dataclass(frozen=True)
class Judgement:
    """A judged answer: ``claims`` in answer order; ``matched[i]`` the index into ``record.edits`` of the
    edit claim i matches (Eq. 14), or None; ``unparseable`` the claim fragments without type or
    category; ``judge`` the judge's name."""

    claims: tuple[JudgedClaim, ...]
    matched: tuple[int | None, ...]
    unparseable: int
    judge: str

    def __post_init__(self) -> None:
        if len(self.matched) != len(self.claims):
            raise ValueError(f"judgement: {len(self.claims)} claims but {len(self.matched)} match entries")
        # a non-number is the Judge contract's to name (callable_judge), with the judge's name
        if isinstance(self.unparseable, int | float) and self.unparseable < 0:
            raise ValueError(f"judgement: unparseable must be >= 0, got {self.unparseable}")
        if not self.judge:
            raise ValueError("judgement: the judge needs a name")

    @property
    def hits(self) -> tuple[bool, ...]:
        """max_j φ(c_i, g_j) per claim: the input of ``metrics.drf`` (Eq. 15)."""
        return tuple(m is not None for m in self.matched)

    @property
    def types(self) -> tuple[str, ...]:
        """The claimed types, for TF1 (Eq. 10); untyped claims belong to no P_t."""
        return tuple(c.type for c in self.claims if c.type is not None)

    @property
    def categories(self) -> tuple[str, ...]:
        """The claimed categories, for CF1 (Eq. 11)."""
        return tuple(c.category for c in self.claims if c.category is not None)


class Judge(Protocol):
    """Anything that judges an answer against a record and has a name for the scorecard."""

    @property
    def name(self) -> str: ...

    def __call__(self, answer: str, record: DiffRecord) -> Judgement: ...


def check_judgement(j: Judgement, record: DiffRecord) -> Judgement:
    """Reject a judgement that cannot be about ``record``: every match must index one of its edits."""
    for i, m in enumerate(j.matched):
        if m is not None and not (isinstance(m, int) and not isinstance(m, bool) and 0 <= m < record.m):
            raise ValueError(f"{j.judge}: claim {i} matched edit {m!r} but {record.item_id} has "
                             f"{record.m} edit(s)")
    return j


@dataclass(frozen=True)
class _CallableJudge:
    fn: Callable[[str, DiffRecord], Judgement]
    name: str

    def __call__(self, answer: str, record: DiffRecord) -> Judgement:
        out = self.fn(answer, record)
        if not isinstance(out, Judgement):
            self._breach(f"returned {type(out).__name__}, not a Judgement")
        # Judgement checks the sign of its count, but NaN, 1.5 or "2" pass a comparison and then poison
        # Eq. 12's denominators: a count is a non-negative int
        u = out.unparseable
        if not isinstance(u, int) or isinstance(u, bool) or u < 0:
            self._breach(f"returned unparseable={u!r}, expected a count (int >= 0)")
        bad = [i for i, c in enumerate(out.claims) if not isinstance(c, JudgedClaim)]
        if bad:
            self._breach(f"claim {bad[0]} is a {type(out.claims[bad[0]]).__name__}, not a JudgedClaim")
        return check_judgement(replace(out, judge=self.name), record)

    def _breach(self, what: str) -> NoReturn:
        raise PluginContractError(f"judge {self.name!r} broke the Judge contract: {what}")


def callable_judge(fn: Callable[[str, DiffRecord], Judgement], name: str) -> Judge:
    """Wrap a user's judge (e.g. an LLM they run): its Judgement is stamped with ``name`` and checked
    against the record (:func:`check_judgement`)."""
    if not name.strip():
        raise ValueError("callable_judge: a judge needs a name for the scorecard")
    return _CallableJudge(fn, name)


# ---------------------------------------------------------------------------------- the rule-based judge
_SPLIT = re.compile(r";|\n+|(?<=[.!?])\s+|\s(?=\(?\d{1,2}\)\s)|\s(?=\d{1,2}\.\s)")
_ORDINAL = r"first|second|third|fourth|fifth|sixth|firstly|secondly|thirdly|lastly|finally"
_ENUM = re.compile(
    rf"^(?:[-*•·>]+|\(?\d{{1,2}}[.):]|\(?[a-h]\)|difference\s*\d*\s*:|"
    rf"(?:{_ORDINAL})(?:\s*[,:]|\b(?!\s+(?:image|picture|photo|one|pair|version)\b))|"
    rf"(?:also|additionally|moreover|furthermore|next|then|and)\s*[,:])\s*", re.IGNORECASE)
_OVERALL = re.compile(
    r"^(?:yes|no)\b|\bdifference|\b(?:images?|pictures?|photos?|they)\s+(?:are|is|look|looks|appear|"
    r"seem|differ)\b|\b(?:identical|the same|different)\b|^(?:sure|okay|ok|certainly|let me|here|i )|:$")
_SAME = re.compile(r"\b(?:identical|the same|unchanged|no (?:other )?(?:changes?|differences?))\b")
_REMOVE = (r"\b(?:removed|missing|gone|disappeared|deleted|erased|vanished|absent|"
           r"not (?:present|visible|there)|no longer(?!\s+(?:{col})\b))")
_POSITION = re.compile(r"\b(?:moved|moves|shifted|shifts|relocated|displaced|repositioned)\b|"
                       r"\b(?:position|location|place)\s+(?:has\s+|was\s+)?(?:changed|is different|differs)|"
                       r"\bchanged?\s+(?:its\s+)?(?:position|location|place)\b|"
                       r"\bdifferent\s+(?:position|location|place)\b")
_MOVE = r"\b(?:moved|moves|shifted|shifts|relocated|displaced|repositioned)\b"
_SECOND = r"\b(?:right|second|edited|modified|other|new)\s+(?:image|picture|photo|one|version)\b"
_SHADE = r"(?:(?:a|an)\s+)?(?:(?:bright|dark|light|pale|deep)\s+)?"


def _plurals(word: str) -> set[str]:
    head, _, last = word.rpartition(" ")
    forms = {last + "s"}
    if last.endswith(("s", "x", "z", "ch", "sh")):
        forms.add(last + "es")
    if len(last) > 1 and last.endswith("y") and last[-2] not in "aeiou":
        forms.add(last[:-1] + "ies")
    if last.endswith("fe"):
        forms.add(last[:-2] + "ves")
    elif last.endswith("f"):
        forms.add(last[:-1] + "ves")
    return {f"{head} {f}".strip() for f in forms}


def _surface_map(vocab: Iterable[str], aliases: Mapping[str, str], plural: bool) -> dict[str, str]:
    words = {w.strip().lower() for w in vocab}
    if not all(words):
        raise ValueError("a judge vocabulary word is empty")
    out: dict[str, str] = {}
    for alias, target in aliases.items():
        if target in words and alias not in words:
            out.update({f: target for f in ({alias} | (_plurals(alias) if plural else set()))})
    for w in words:  # the vocabulary's own words win over aliases ("grey" stays grey if both are in it)
        out.update({f: w for f in ({w} | (_plurals(w) if plural else set()))})
    return out


def _alternation(surfaces: Iterable[str]) -> str:
    return "|".join(re.escape(s) for s in sorted(surfaces, key=len, reverse=True))


class DeterministicJudge:
    """The rule-based judge of the module docstring, for one vocabulary: ``categories`` (world shapes or
    the COCO instances file's names), ``colours``, ``positions`` (the places a position edit's attribute
    names). ``aliases`` maps extra surface words to vocabulary words (plural forms are automatic)."""

    def __init__(self, categories: Iterable[str], colours: Iterable[str],
                 positions: Iterable[str] = POSITIONS, *, aliases: Mapping[str, str] = DEFAULT_ALIASES,
                 name: str = "deterministic-v1") -> None:
        if not name.strip():
            raise ValueError("DeterministicJudge: a judge needs a name for the scorecard")
        self.name = name
        cats, cols, places = tuple(categories), tuple(colours), tuple(positions)
        if not (cats and cols and places):
            raise ValueError("DeterministicJudge needs non-empty categories, colours and positions")
        self._cat = _surface_map(cats, aliases, plural=True)
        self._col = _surface_map(cols, aliases, plural=False)
        self._pos = _surface_map(places, aliases, plural=False)
        cat, col, pos = _alternation(self._cat), _alternation(self._col), _alternation(self._pos)
        self._cat_re = re.compile(rf"(?<![\w-])({cat})(?![\w-])('s)?")
        self._remove_re = re.compile(_REMOVE.format(col=col))
        # new colour: "turned blue", "from red to blue", "is now a dark blue" (not "next to a red car")
        self._to_col = re.compile(rf"(?<!next )(?<!close )\b(?:to|turned|turns|now|became|becomes|into|"
                                  rf"recolou?red(?:\s+(?:to|as|in))?|painted)\s+{_SHADE}({col})\b")
        self._instead = re.compile(rf"\b({col})\s+(?:instead of|rather than)\b")
        # a colour edit's cues: stricter than _to_col, where a bare "to" would read "next to a red car" as one
        self._col_cue = re.compile(
            rf"\bcolou?rs?\b|\brecolou?red\b|\bpainted\b|\bno longer\s+{_SHADE}(?:{col})\b|"
            rf"\b(?:turned|turns|became|becomes|now|changed to|changes to|changed into)\s+"
            rf"{_SHADE}(?:{col})\b|"
            rf"\bfrom\s+{_SHADE}(?:{col})\s+to\s+{_SHADE}(?:{col})\b|{self._instead.pattern}")
        self._col_re = re.compile(rf"\b({col})\b")
        self._from_col = re.compile(rf"\bfrom\s+{_SHADE}({col})\s+to\b")
        self._named_col = re.compile(rf"\b({col})\s+(?:{cat})(?![\w-])")
        self._second = re.compile(_SECOND)
        self._contrast = re.compile(rf"{_SECOND}|\b(?:while|whereas|instead of|rather than)\b")
        # new place: "moved to the top", "moved from the left to the right", "shifted left", "now at the top"
        self._to_pos = re.compile(
            rf"{_MOVE}(?:\s+[\w']+){{0,5}}?\s+(?:to|towards|into)\s+(?:the\s+)?(?:(?:far|upper|lower)\s+)?"
            rf"({pos})\b|"
            rf"{_MOVE}\s+(?:(?:further|slightly|over)\s+)?({pos})\b|\bnow\s+(?:at|on|in)\s+the\s+({pos})\b")

    # ------------------------------------------------------------------ parsing
    def parse(self, answer: str) -> tuple[tuple[JudgedClaim, ...], int]:
        """(claims, unparseable) of a free-text answer, no record needed."""
        claims: list[JudgedClaim] = []
        for raw in _SPLIT.split(answer.replace("\r", "\n")):
            text = re.sub(r"[*_#`]", "", raw).strip()
            while (m := _ENUM.match(text)) and m.end() > 0:
                text = text[m.end():].strip()
            text = text.strip(" \t.,!?")
            if not re.search(r"[A-Za-z]", text):
                continue
            low = " ".join(text.lower().replace("’", "'").replace("-", " ").split())
            category = self._category(low)
            if category is None and _OVERALL.search(low):
                continue  # an overall judgement or a lead-in, not a claim (App. B.2)
            kind = self._type(low)
            if kind is None and _SAME.search(low):
                continue  # "the person's clothing is identical": states no difference, so claims none
            claims.append(JudgedClaim(kind, category, self._attribute(kind, low), text,
                                      self._before(low) if category is not None else None))
        return tuple(claims), sum(not c.parsed for c in claims)

    def _category(self, low: str) -> str | None:
        hits = [(m.group(1), m.group(2) is not None) for m in self._cat_re.finditer(low)]
        owned = [w for w, possessive in hits if not possessive]
        # "the orange car": a word that is also a colour yields to another object noun
        nouns = [w for w in owned if w not in self._col] or owned
        pick = nouns[0] if nouns else (hits[0][0] if hits else None)
        return None if pick is None else self._cat[pick]

    def _type(self, low: str) -> str | None:
        cues = (("color", self._col_cue), ("remove", self._remove_re), ("position", _POSITION))
        found = {t for t, cue in cues if cue.search(low)}
        if not found and len(set(self._col_re.findall(low))) >= 2 and self._contrast.search(low):
            found = {"color"}  # Fig. 39: "the truck is blue [left], while ... the truck is red [right]"
        return found.pop() if len(found) == 1 else None

    def _attribute(self, kind: str | None, low: str) -> str | None:
        if kind == "color":
            if to := self._to_col.findall(low):
                return self._col[to[-1]]
            if inst := self._instead.search(low):
                return self._col[inst.group(1)]
            if (after := self._second.search(low)) and (col := self._col_re.search(low, after.end())):
                return self._col[col.group(1)]
        if kind == "position" and (moves := list(self._to_pos.finditer(low))):
            last = moves[-1]
            return self._pos[last.group(last.lastindex or 0)]
        return None

    def _before(self, low: str) -> str | None:
        """The colour the claim gives the object before the edit: "from red to ...", else the colour word
        right before the object noun ("the red circle", "the dark red car"); None if it names none."""
        if m := self._from_col.search(low):
            return self._col[m.group(1)]
        if m := self._named_col.search(low):
            return self._col[m.group(1)]
        return None

    # ------------------------------------------------------------------ matching
    def phi(self, claim: JudgedClaim, edit: EditTruth) -> bool:
        """Eq. 14: type and category agree, and so do the attributes and the object's colour before the
        edit where both are stated (a claim about the red circle is not grounded by the green one's edit)."""
        if claim.type is None or claim.category is None:
            return False
        if (claim.type, claim.category) != (edit.type, self._canonical(self._cat, edit.category)):
            return False
        if claim.before is not None and edit.before is not None and (
                claim.before != self._canonical(self._col, edit.before)):
            return False
        if claim.attribute is None or edit.attribute is None:
            return True
        table = self._col if edit.type == "color" else self._pos
        return claim.attribute == self._canonical(table, edit.attribute)

    @staticmethod
    def _canonical(table: Mapping[str, str], word: str) -> str:
        w = word.strip().lower()
        return table.get(w, w)

    def match(self, claims: Sequence[JudgedClaim], edits: Sequence[EditTruth]) -> tuple[int | None, ...]:
        """Per claim, the index of an edit it matches (an edit no earlier claim took, if any), or None."""
        taken: set[int] = set()
        out: list[int | None] = []
        for c in claims:
            ok = [j for j, e in enumerate(edits) if self.phi(c, e)]
            pick = next((j for j in ok if j not in taken), ok[0] if ok else None)
            if pick is not None:
                taken.add(pick)
            out.append(pick)
        return tuple(out)

    @classmethod
    def for_records(cls, records: Sequence[DiffRecord], name: str = "deterministic-v1") -> DeterministicJudge:
        """The judge for a dataset: :func:`world_judge` for world pairs, else :func:`coco_judge` on COCO's
        80 categories; either widened by every category and attribute the records name."""
        world = bool(records) and all(r.source == "world" for r in records)
        edits = [e for r in records for e in r.edits]
        said = {t: {e.attribute for e in edits if e.type == t and e.attribute} for t in ("color", "position")}
        return cls({*(SHAPES if world else COCO_CATEGORIES), *(e.category for e in edits)},
                   {*(COLOURS if world else COMMON_COLOURS), *said["color"]},
                   {*(POSITIONS if world else COCO_DIRECTIONS), *said["position"]},
                   aliases=DEFAULT_ALIASES if world else {**DEFAULT_ALIASES, **DIRECTION_ALIASES}, name=name)

    def _check_vocabulary(self, record: DiffRecord) -> None:
        """A record outside the vocabulary would be unmatched whatever the answer: a setup error."""
        for e in record.edits:
            table = {"color": self._col, "position": self._pos}.get(e.type)
            bad = ("category", e.category) if e.category.strip().lower() not in self._cat else (
                ("attribute", e.attribute) if table is not None and e.attribute is not None
                and e.attribute.strip().lower() not in table else None)
            if bad is not None:
                raise ValueError(f"{self.name}: {record.item_id} has an edit {bad[0]} {bad[1]!r} outside the "
                                 "judge's vocabulary; build the judge with the source's vocabulary")

    def __call__(self, answer: str, record: DiffRecord) -> Judgement:
        self._check_vocabulary(record)
        claims, unparseable = self.parse(answer)
        return Judgement(claims, self.match(claims, record.edits), unparseable, self.name)


def world_judge(name: str = "deterministic-v1") -> DeterministicJudge:
    """The deterministic judge on the reference world's vocabulary (shapes, colours, the five places)."""
    return DeterministicJudge(SHAPES, COLOURS, POSITIONS, name=name)


def coco_judge(
    categories: Iterable[str] = COCO_CATEGORIES, name: str = "deterministic-v1"
) -> DeterministicJudge:
    """The deterministic judge for COCO pairs: ``categories`` from the instances file, the common colour
    names, and position attributes as shift directions (left / right / up / down)."""
    return DeterministicJudge(categories, COMMON_COLOURS, COCO_DIRECTIONS,
                              aliases={**DEFAULT_ALIASES, **DIRECTION_ALIASES}, name=name)
