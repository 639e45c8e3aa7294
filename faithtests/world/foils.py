"""Ground-truth flips: meaning-changing edits of a caption spec, each verified false against the scene.

Unlike a string substitution, these keep grammatical agreement and are *checked*: a returned foil
never describes the scene. Kinds:

- ``colour`` / ``number`` / ``object``: one mention's colour, count or shape changed;
- ``relation``: two mentions at different positions swap positions;
- ``compositional``: two mentions swap colours, so every word still occurs but the binding is wrong
  (attribute binding, as in Winoground/ARO).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from faithtests.world.captions import FLIP_VOCABULARIES, CaptionSpec, Mention, satisfies
from faithtests.world.scene import COLOURS, SHAPES, Scene

FLIP_KINDS: tuple[str, ...] = ("colour", "number", "object", "relation", "compositional")
MAX_FLIP_COUNT = len(FLIP_VOCABULARIES["number"])


def _with_mention(spec: CaptionSpec, i: int, m: Mention) -> CaptionSpec:
    ms = list(spec.mentions)
    ms[i] = m
    return replace(spec, mentions=tuple(ms))


def _single(spec: CaptionSpec, scene: Scene, kind: str, rng: np.random.Generator) -> CaptionSpec | None:
    order = [int(i) for i in rng.permutation(len(spec.mentions))]
    for i in order:
        m = spec.mentions[i]
        if kind == "colour":
            if m.colour is None:
                continue
            values = [c for c in COLOURS if c != m.colour]
            cands = [replace(m, colour=str(c)) for c in rng.permutation(values)]
        elif kind == "number":
            values_n = [n for n in range(1, MAX_FLIP_COUNT + 1) if n != m.count]
            cands = [replace(m, count=int(n)) for n in rng.permutation(values_n)]
        else:  # object
            values = [s for s in SHAPES if s != m.shape]
            cands = [replace(m, shape=str(s)) for s in rng.permutation(values)]
        for cand in cands:
            flipped = _with_mention(spec, i, cand)
            if not satisfies(scene, flipped):
                return flipped
    return None


def _pairwise(spec: CaptionSpec, scene: Scene, kind: str, rng: np.random.Generator) -> CaptionSpec | None:
    n = len(spec.mentions)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    for k in rng.permutation(len(pairs)):
        i, j = pairs[int(k)]
        a, b = spec.mentions[i], spec.mentions[j]
        if kind == "relation":
            if a.position == b.position:
                continue
            na, nb = replace(a, position=b.position), replace(b, position=a.position)
        else:  # compositional
            if a.colour is None or b.colour is None or a.colour == b.colour or a.shape == b.shape:
                continue
            na, nb = replace(a, colour=b.colour), replace(b, colour=a.colour)
        flipped = _with_mention(_with_mention(spec, i, na), j, nb)
        if not satisfies(scene, flipped):
            return flipped
    return None


def flip_spec(scene: Scene, spec: CaptionSpec, kind: str, rng: np.random.Generator) -> CaptionSpec | None:
    """A foil of ``kind`` for a true ``spec``, or None when the scene admits none (e.g. a relation
    flip of a one-group caption). The result is guaranteed false in ``scene``."""
    if kind not in FLIP_KINDS:
        raise ValueError(f"unknown flip kind {kind!r}; expected one of {FLIP_KINDS}")
    if not satisfies(scene, spec):
        raise ValueError("flip_spec needs a spec that is true of the scene")
    if kind in ("relation", "compositional"):
        return _pairwise(spec, scene, kind, rng)
    return _single(spec, scene, kind, rng)
