"""Word-order negatives of ARO's COCO-Order / Flickr30k-Order (Yuksekgonul et al. 2023).

Re-implemented from the public ARO code (``dataset_zoo/perturbations.py``): each caption gets four
negatives, ``shuffle_nouns_and_adj``, ``shuffle_allbut_nouns_and_adj``, ``shuffle_within_trigrams`` and
``shuffle_trigrams``, and every option goes through ARO's ``pre_caption`` (lower-case, drop
``.!"()*#:;~``, collapse spaces, truncate to ``max_words``).

Differences, stated: ARO tokenises with NLTK / spaCy, which are not dependencies here. The trigram
shuffles use a regex tokenizer (words with inner hyphens/apostrophes, and single punctuation marks);
the two noun/adjective shuffles need a part-of-speech tagger, passed in as ``pos_tagger(text) ->
[(token, PTB tag), ...]``; without one they are not produced (the item records which ones were).
Shuffles draw from a ``numpy.random.Generator`` instead of the global NumPy/``random`` state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

PosTagger = Callable[[str], Sequence[tuple[str, str]]]

_NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
_ADJ_TAGS = frozenset({"JJ", "JJR", "JJS"})
_TOKEN = re.compile(r"\w+(?:[-']\w+)*|[^\w\s]")


def pre_caption(caption: str, max_words: int = 30) -> str:
    """ARO/BLIP caption normalisation (``dataset_zoo/retrieval.py``)."""
    text = re.sub(r"([.!\"()*#:;~])", " ", caption.lower())
    text = re.sub(r"\s{2,}", " ", text).rstrip("\n").strip(" ")
    words = text.split(" ")
    return " ".join(words[:max_words]) if len(words) > max_words else text


def tokenize(caption: str) -> list[str]:
    return _TOKEN.findall(caption)


def _trigrams(tokens: Sequence[str]) -> list[list[str]]:
    return [list(tokens[i : i + 3]) for i in range(0, len(tokens), 3)]


def shuffle_within_trigrams(caption: str, rng: np.random.Generator) -> str:
    """Shuffle the words inside each consecutive trigram."""
    out = []
    for tri in _trigrams(tokenize(caption)):
        out.append(" ".join(tri[int(i)] for i in rng.permutation(len(tri))))
    return " ".join(out)


def shuffle_trigrams(caption: str, rng: np.random.Generator) -> str:
    """Shuffle the order of the trigrams."""
    tris = _trigrams(tokenize(caption))
    return " ".join(" ".join(tris[int(i)]) for i in rng.permutation(len(tris)))


def _shuffle_positions(tokens: list[str], positions: list[int], rng: np.random.Generator) -> None:
    perm = rng.permutation(len(positions))
    values = [tokens[p] for p in positions]
    for p, j in zip(positions, perm, strict=True):
        tokens[p] = values[int(j)]


def shuffle_nouns_and_adj(caption: str, rng: np.random.Generator, pos_tagger: PosTagger) -> str:
    """Permute the nouns among themselves, then the adjectives among themselves."""
    tagged = list(pos_tagger(caption))
    tokens = [t for t, _ in tagged]
    _shuffle_positions(tokens, [i for i, (_, tag) in enumerate(tagged) if tag in _NOUN_TAGS], rng)
    _shuffle_positions(tokens, [i for i, (_, tag) in enumerate(tagged) if tag in _ADJ_TAGS], rng)
    return " ".join(tokens)


def shuffle_allbut_nouns_and_adj(caption: str, rng: np.random.Generator, pos_tagger: PosTagger) -> str:
    """Permute every token that is neither a noun nor an adjective."""
    tagged = list(pos_tagger(caption))
    tokens = [t for t, _ in tagged]
    keep = _NOUN_TAGS | _ADJ_TAGS
    _shuffle_positions(tokens, [i for i, (_, tag) in enumerate(tagged) if tag not in keep], rng)
    return " ".join(tokens)


def order_negatives(caption: str, rng: np.random.Generator, *, pos_tagger: PosTagger | None = None,
                    max_words: int = 30) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(negatives, perturbation names), each negative passed through :func:`pre_caption`."""
    names: list[str] = []
    texts: list[str] = []
    if pos_tagger is not None:
        names += ["shuffle_nouns_and_adj", "shuffle_allbut_nouns_and_adj"]
        texts += [shuffle_nouns_and_adj(caption, rng, pos_tagger),
                  shuffle_allbut_nouns_and_adj(caption, rng, pos_tagger)]
    names += ["shuffle_within_trigrams", "shuffle_trigrams"]
    texts += [shuffle_within_trigrams(caption, rng), shuffle_trigrams(caption, rng)]
    return tuple(pre_caption(t, max_words) for t in texts), tuple(names)
