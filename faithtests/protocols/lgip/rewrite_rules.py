"""Advanced, meaning-preserving caption rewrites (LGIP App. A.1(ii)).

Four rule families, each yielding at most one candidate per caption so no family floods the pool
that K_same is sampled from:

- ``passive``: "A man holding a kite on a beach." -> "A kite being held by a man on a beach."
  Applied only when the verb is in a curated transitive table, the object is a determiner-led noun
  phrase, and whatever follows it is empty or a locative phrase, so no argument is dropped and no
  modifier changes attachment.
- ``synonym``: up to two adjectives/verbs swapped from :data:`SYNONYM_TABLE`. Entries whose key or
  value is a flip-vocabulary word are removed at call time (the paper's rule), so a paraphrase never
  touches a word a semantic flip could target.
- ``pp_front`` / ``clause_front``: a trailing locative prepositional phrase, or a trailing "while"
  clause, moves to the front ("In a room, a man standing in front of a mirror.").
- ``discourse``: a discourse marker is prefixed ("In the image, a man ...").

All rules are deterministic; randomness lives only in the sampling cap (paraphrase.py). The public
LGIP code (``rebuttal_enhanced_perturb_with_fliptypes.py``) differs: its synonym table contains flip
words (cat, dog, person, red, blue, green), contrary to App. A.1(ii); we implement the paper.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType

#: Curated synonyms for non-critical adjectives and verbs (same part of speech and inflection).
#: No colour, number, object-category, size-count or spatial word appears here.
SYNONYM_TABLE: Mapping[str, str] = MappingProxyType(
    {
        # adjectives
        "large": "big",
        "big": "large",
        "small": "little",
        "little": "small",
        "huge": "enormous",
        "cute": "adorable",
        "adorable": "cute",
        "delicious": "tasty",
        "tasty": "delicious",
        "beautiful": "lovely",
        "busy": "bustling",
        "empty": "vacant",
        "modern": "contemporary",
        "contemporary": "modern",
        "various": "assorted",
        "colorful": "multicolored",
        "fancy": "elegant",
        "messy": "untidy",
        "cloudy": "overcast",
        "grassy": "grass-covered",
        "snowy": "snow-covered",
        # verbs (same form on both sides)
        "sitting": "seated",
        "sits": "rests",
        "laying": "lying",
        "talking": "chatting",
        "resting": "relaxing",
        "smiling": "grinning",
        "traveling": "moving",
        "travels": "moves",
        "shown": "displayed",
        "shows": "displays",
    }
)

#: Transitive verbs for the passive rule: (3rd-person singular, -ing form, past participle).
_VERB_FORMS: tuple[tuple[str, str, str], ...] = (
    ("holds", "holding", "held"), ("rides", "riding", "ridden"), ("carries", "carrying", "carried"),
    ("throws", "throwing", "thrown"), ("catches", "catching", "caught"), ("eats", "eating", "eaten"),
    ("drives", "driving", "driven"), ("flies", "flying", "flown"), ("pulls", "pulling", "pulled"),
    ("pushes", "pushing", "pushed"), ("watches", "watching", "watched"), ("cuts", "cutting", "cut"),
    ("wears", "wearing", "worn"), ("uses", "using", "used"), ("swings", "swinging", "swung"),
    ("hits", "hitting", "hit"), ("kicks", "kicking", "kicked"), ("chases", "chasing", "chased"),
    ("feeds", "feeding", "fed"), ("pets", "petting", "petted"), ("hugs", "hugging", "hugged"),
    ("brushes", "brushing", "brushed"), ("washes", "washing", "washed"), ("reads", "reading", "read"),
    ("takes", "taking", "taken"), ("plays", "playing", "played"), ("bites", "biting", "bitten"),
    ("licks", "licking", "licked"), ("grabs", "grabbing", "grabbed"), ("serves", "serving", "served"),
    ("prepares", "preparing", "prepared"), ("paints", "painting", "painted"),
)
_PASSIVE_VERBS: Mapping[str, str] = MappingProxyType({s: pp for s, _, pp in _VERB_FORMS})
_ING_TO_PP: Mapping[str, str] = MappingProxyType({ing: pp for _, ing, pp in _VERB_FORMS})

_DETERMINERS = frozenset({"a", "an", "the", "his", "her", "their", "its", "some", "two", "three", "four",
                          "five", "several", "many", "these", "those"})
_PLURAL_DETERMINERS = frozenset({"some", "two", "three", "four", "five", "several", "many", "these",
                                 "those"})
_LOCATIVE_SINGLE = ("on", "in", "at", "near", "beside", "behind", "under", "underneath", "inside",
                    "outside", "across", "along", "above", "below", "over", "beneath", "through",
                    "around", "down")
_LOCATIVE_MULTI = (("in", "front", "of"), ("on", "top", "of"), ("next", "to"))
#: Words that end a noun phrase: prepositions (all, not just locative), conjunctions, relatives.
_BOUNDARY = frozenset({*_LOCATIVE_SINGLE, "of", "with", "by", "for", "from", "to", "into", "onto", "up",
                       "and", "or", "but", "while", "as", "that", "which", "who", "where", "next",
                       "is", "are", "was", "were", "be", "being", "has", "have"})
_BE = frozenset({"is", "are", "was", "were", "be", "being", "been"})
#: Common finite verbs of COCO captions: a subject containing one is a clause, not a noun phrase.
_FINITE = frozenset({"sits", "stands", "lies", "walks", "runs", "looks", "waits", "rests", "poses",
                     "smiles", "jumps", "goes", "leans", "stares", "grazes", "has", "have", "does",
                     *(s for s, _, _ in _VERB_FORMS)})
#: Only plain captions are restructured: letters, spaces, hyphens, apostrophes, one final period.
_PLAIN = re.compile(r"^[A-Za-z][A-Za-z' -]*[A-Za-z]\.?$")

DISCOURSE_MARKER = "In the image,"


def usable_synonyms(vocabularies: Iterable[Iterable[str]], table: Mapping[str, str] = SYNONYM_TABLE
                    ) -> dict[str, str]:
    """The synonym table minus every entry whose key or value is a flip word (case-insensitive)."""
    banned = {w.lower() for words in vocabularies for w in words}
    return {k: v for k, v in table.items() if k.lower() not in banned and v.lower() not in banned}


def _split(caption: str) -> tuple[list[str], str] | None:
    """Tokens and trailing period of a plain, not all-caps caption; None when rules must not apply."""
    if not _PLAIN.match(caption) or caption.isupper():
        return None
    period = "." if caption.endswith(".") else ""
    return caption.rstrip(".").split(), period


def _lower_first(token: str) -> str:
    return token[:1].lower() + token[1:] if not token.isupper() or len(token) == 1 else token


def _sentence(tokens: list[str], period: str) -> str:
    text = " ".join(tokens)
    return text[:1].upper() + text[1:] + period


def _np_end(tokens: list[str], start: int, max_len: int = 5) -> int | None:
    """End index of a determiner-led noun phrase at ``start`` (det + 1..4 words), else None."""
    if start >= len(tokens) or tokens[start].lower() not in _DETERMINERS:
        return None
    end = start + 1
    while end < len(tokens) and end - start < max_len and tokens[end].lower() not in _BOUNDARY:
        if tokens[end].endswith("ing"):
            return None  # a participle: a clause starts here, not a noun phrase
        end += 1
    return end if end > start + 1 else None


def _locative_at(tokens: list[str], i: int) -> int:
    """Length of the locative preposition starting at ``i`` (0 when there is none)."""
    low = [t.lower() for t in tokens]
    for multi in _LOCATIVE_MULTI:
        if tuple(low[i : i + len(multi)]) == multi:
            return len(multi)
    return 1 if low[i] in _LOCATIVE_SINGLE else 0


def _is_locative_tail(tokens: list[str], start: int) -> bool:
    """True when tokens[start:] is empty or exactly one locative PP (prep + noun phrase)."""
    if start == len(tokens):
        return True
    n = _locative_at(tokens, start)
    return n > 0 and _np_end(tokens, start + n) == len(tokens)


_SUBJECT_STOPS = frozenset({"and", "while", "that", "who", "which"})


def _passive_form(low: list[str], v: int) -> str | None:
    """How token ``v`` is a curated transitive verb: "aux" ("is holding"), "finite" ("holds"),
    "reduced" (the COCO fragment "holding"), or None."""
    if v >= 2 and low[v - 1] in ("is", "are") and low[v] in _ING_TO_PP:
        return "aux"
    if low[v] in _PASSIVE_VERBS:
        return "finite"
    return "reduced" if low[v] in _ING_TO_PP else None


def _is_noun_phrase_subject(subject: list[str]) -> bool:
    """1..5 words with no verb, conjunction, relative or participle after the first: a noun phrase."""
    return 1 <= len(subject) <= 5 and not any(
        t.lower() in _BE or t.lower() in _FINITE or t.lower() in _SUBJECT_STOPS or t.endswith("ing")
        for t in subject[1:]
    )


def _is_plural(obj: list[str]) -> bool:
    """A plural determiner, or a plural-looking head noun without "a"/"an"."""
    first, last = obj[0].lower(), obj[-1].lower()
    return first in _PLURAL_DETERMINERS or (
        last.endswith("s") and not last.endswith(("ss", "us", "is")) and first not in ("a", "an")
    )


def _passive_verb(form: str, verb: str, plural: bool) -> list[str]:
    """The passive verb group of ``verb`` (its -s or -ing form) in ``form``: "is being held" ..."""
    pp = _ING_TO_PP[verb] if verb in _ING_TO_PP else _PASSIVE_VERBS[verb]
    be = "are" if plural else "is"
    return {"aux": [be, "being", pp], "finite": [be, pp]}.get(form, ["being", pp])


def passive_voice(caption: str) -> str | None:
    """Active -> passive for a curated transitive verb with a determiner-led object (App. A.1(ii) 1).

    Forms: "S holds O R" -> "O is held by s R"; "S is holding O R" -> "O is being held by s R";
    "S holding O R" (the common COCO fragment) -> "O being held by s R". R must be empty or one
    locative phrase, so nothing is dropped and no modifier changes what it attaches to.
    """
    split = _split(caption)
    if split is None:
        return None
    tokens, period = split
    low = [t.lower() for t in tokens]
    v, form = next(((v, f) for v in range(1, min(len(tokens) - 1, 7))
                    if (f := _passive_form(low, v)) is not None), (0, None))
    if form is None:  # the first verb found decides: a bad subject or object is no passive
        return None
    subject = tokens[: v - 1 if form == "aux" else v]
    obj_end = _np_end(tokens, v + 1)
    if not _is_noun_phrase_subject(subject) or obj_end is None or not _is_locative_tail(tokens, obj_end):
        return None
    obj = tokens[v + 1 : obj_end]
    verb = _passive_verb(form, low[v], _is_plural(obj))
    subject = [_lower_first(subject[0]), *subject[1:]]
    return _sentence([*obj, *verb, "by", *subject, *tokens[obj_end:]], period)


def _fix_article(before: str, next_word: str) -> str:
    """Re-inflect a trailing "a"/"an" for the word that now follows it ("a cloudy" -> "an overcast")."""
    m = re.search(r"\b(a|an|A|An) $", before)
    if m is None:
        return before
    want = "an" if next_word[:1].lower() in "aeiou" else "a"
    if m.group(1)[0].isupper():
        want = want.capitalize()
    return before[: m.start()] + want + " "


def synonym_swap(caption: str, synonyms: Mapping[str, str]) -> str | None:
    """Swap up to two table words (first occurrences, left to right) (App. A.1(ii) 2).

    Lower-case words match anywhere; a capitalised word matches only at the caption start, so proper
    nouns mid-sentence are never replaced.
    """
    if not synonyms:
        return None
    pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in sorted(synonyms, key=len, reverse=True))
                         + r")\b", re.IGNORECASE)
    out: list[str] = []
    pos = 0
    seen: set[str] = set()
    for m in pattern.finditer(caption):
        word = m.group(1)
        key = word.lower()
        if key in seen or len(seen) == 2:
            continue
        if word != key and not (m.start() == 0 and word == key.capitalize()):
            continue  # capitalised mid-sentence: a proper noun or shouting; leave it
        repl = synonyms[key]
        out.append(_fix_article(caption[pos : m.start()], repl))
        out.append(repl.capitalize() if word != key else repl)
        pos = m.end()
        seen.add(key)
    if not seen:
        return None
    out.append(caption[pos:])
    return "".join(out)


def front_prepositional_phrase(caption: str) -> str | None:
    """Move a final locative PP to the front: "X on a bench." -> "On a bench, x." (App. A.1(ii) 3)."""
    split = _split(caption)
    if split is None:
        return None
    tokens, period = split
    for i in range(len(tokens) - 2, 1, -1):
        n = _locative_at(tokens, i)
        if n == 0 or _np_end(tokens, i + n) != len(tokens):
            continue
        main = tokens[:i]
        if len(main) < 2 or main[-1].lower() in _BE or main[-1].lower() in _BOUNDARY:
            return None  # "A man is in a kitchen" must not become "In a kitchen, a man is."
        pp = tokens[i:]
        return _sentence([*pp[:-1], pp[-1] + ",", _lower_first(main[0]), *main[1:]], period)
    return None


def front_while_clause(caption: str) -> str | None:
    """"X while Y." -> "While Y, x." for a single trailing while-clause (App. A.1(ii) 3)."""
    split = _split(caption)
    if split is None:
        return None
    tokens, period = split
    low = [t.lower() for t in tokens]
    if low.count("while") != 1:
        return None
    w = low.index("while")
    if w < 2 or len(tokens) - w < 2:
        return None
    clause, main = tokens[w + 1 :], tokens[:w]
    return _sentence(["While", *clause[:-1], clause[-1] + ",", _lower_first(main[0]), *main[1:]], period)


def discourse_marker(caption: str, marker: str = DISCOURSE_MARKER) -> str | None:
    """Prefix a discourse marker: "A man ..." -> "In the image, a man ..." (App. A.1(ii) 3)."""
    if not caption or caption.isupper():
        return None
    first, _, rest = caption.partition(" ")
    return f"{marker} {_lower_first(first)}" + (f" {rest}" if rest else "")


def advanced_candidates(caption: str, synonyms: Mapping[str, str]) -> list[tuple[str, str]]:
    """(text, rule) for every advanced rule that applies, in a fixed rule order."""
    out: list[tuple[str, str]] = []
    for rule, text in (
        ("passive", passive_voice(caption)),
        ("synonym", synonym_swap(caption, synonyms)),
        ("pp_front", front_prepositional_phrase(caption)),
        ("clause_front", front_while_clause(caption)),
        ("discourse", discourse_marker(caption)),
    ):
        if text is not None:
            out.append((text, rule))
    return out
