"""Reference-world stimuli of SPD-Faith (§3, App. A): image pairs with ground-truth atomic edits.

An edit is one of SPD-Faith's three types on one object: ``color`` (recoloured), ``remove`` (deleted),
``position`` (moved to another slot); its ``category`` is the shape name. Objects never overlap, so the
pixels that differ between the two renders are exactly the edited objects' pixels before and after
(a test checks this equality).

Subsets: ``single`` (one edit; easy / medium / hard), ``multi`` (2-5 edits), ``identical`` (no edit; a
control for same/different questions, not part of SPD-Faith). Difficulty follows SPD-Faith App. A's two
factors, object density and edit area (:func:`difficulty_of`): easy = at most 4 objects and a large
edited object; hard = at least 9 objects and a small edited object; medium otherwise.

Claims (the deterministic judge's structured answers) have one form per type::

    the red circle on the left turned blue
    the red circle on the left was removed
    the red circle on the left moved to the top

joined by "; ". :func:`parse_claims` reads them back strictly and raises on anything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np
from PIL import Image

from faithtests.world.captions import WHERE
from faithtests.world.ids import image_ref, item_rng
from faithtests.world.refs import register_pair_kind
from faithtests.world.render import render
from faithtests.world.scene import (
    COLOURS,
    POSITIONS,
    SHAPES,
    Scene,
    WorldObject,
    quadrant_centre,
    sample_dense_scene,
)

EDIT_TYPES: tuple[str, ...] = ("color", "remove", "position")
DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
SUBSETS: tuple[str, ...] = ("single", "multi", "identical")
#: Item-stream kind (``item_rng`` / ``image_ref``): changing it changes every item.
KIND = "pair"


@dataclass(frozen=True)
class Edit:
    type: str  # color | remove | position
    category: str  # the shape
    oid: int
    colour: str  # before the edit
    position: str  # before the edit
    new_colour: str | None = None  # color edits
    new_position: str | None = None  # position edits

    def claim(self) -> str:
        head = f"the {self.colour} {self.category} {WHERE[self.position]}"
        if self.type == "color":
            return f"{head} turned {self.new_colour}"
        if self.type == "remove":
            return f"{head} was removed"
        return f"{head} moved to the {self.new_position}"


@dataclass(frozen=True)
class PairItem:
    item_id: str
    scene_a: Scene  # original
    scene_b: Scene  # edited
    edits: tuple[Edit, ...]
    subset: str
    difficulty: str | None  # single-difference items only

    def images(self) -> tuple[Image.Image, Image.Image]:
        return render(self.scene_a), render(self.scene_b)

    @property
    def n_objects(self) -> int:
        return len(self.scene_a.objects)


def claims_text(edits: tuple[Edit, ...] | list[Edit]) -> str:
    return "; ".join(e.claim() for e in edits)


@dataclass(frozen=True)
class Claim:
    type: str
    category: str
    colour: str
    position: str
    new_colour: str | None = None
    new_position: str | None = None

    def matches(self, edit: Edit) -> bool:
        """Type + category + attributes (the deterministic judge of SPD-Faith §3's claims)."""
        return (self.type, self.category, self.colour, self.position, self.new_colour, self.new_position) == (
            edit.type, edit.category, edit.colour, edit.position, edit.new_colour, edit.new_position)


_C = "|".join(COLOURS)
_S = "|".join(SHAPES)
_W = "|".join(re.escape(w) for w in WHERE.values())
_P = "|".join(POSITIONS)
_CLAIM = re.compile(
    rf"the ({_C}) ({_S}) ({_W}) (?:turned ({_C})|was removed|moved to the ({_P}))"
)
_WHERE_TO_POS = {w: p for p, w in WHERE.items()}


def parse_claims(text: str) -> list[Claim]:
    """Strict parser for :func:`claims_text` output; raises ValueError naming the bad fragment."""
    out = []
    for k, frag in enumerate(p.strip().rstrip(".") for p in text.strip().split(";")):
        m = _CLAIM.fullmatch(frag)
        if m is None:
            raise ValueError(f"claim {k + 1} is not in the claim grammar: {frag!r}")
        colour, shape, where, new_colour, new_pos = m.groups()
        kind = "color" if new_colour else ("position" if new_pos else "remove")
        out.append(Claim(kind, shape, colour, _WHERE_TO_POS[where], new_colour, new_pos))
    return out


def difficulty_of(n_objects: int, edited_size: str) -> str:
    if n_objects <= 4 and edited_size == "large":
        return "easy"
    if n_objects >= 9 and edited_size == "small":
        return "hard"
    return "medium"


def _free_spot(scene: Scene, obj: WorldObject, position: str, rng: np.random.Generator) -> WorldObject | None:
    """``obj`` moved into a random free quadrant of ``position``'s cell (None if the slot is full)."""
    free = scene.free_quadrants(position)
    if not free:
        return None
    q = free[int(rng.integers(len(free)))]
    cx, cy = quadrant_centre(position, q, obj.size, rng)
    return replace(obj, position=position, cx=cx, cy=cy)


def _identifiable(scene: Scene, o: WorldObject) -> bool:
    key = (o.colour, o.shape, o.position)
    return sum(1 for p in scene.objects if (p.colour, p.shape, p.position) == key) == 1


def apply_edit(
    scene: Scene, o: WorldObject, kind: str, rng: np.random.Generator
) -> tuple[Scene, Edit] | None:
    """One edit of ``kind`` on object ``o``; None if it cannot keep every object identifiable."""
    if kind == "remove":
        return scene.without(o.oid), Edit("remove", o.shape, o.oid, o.colour, o.position)
    if kind == "color":
        for c in rng.permutation(list(COLOURS)):
            new = replace(o, colour=str(c))
            nxt = scene.with_object(new)
            if c != o.colour and _identifiable(nxt, new):
                return nxt, Edit("color", o.shape, o.oid, o.colour, o.position, new_colour=str(c))
        return None
    for p in rng.permutation(list(POSITIONS)):
        if p == o.position:
            continue
        moved = _free_spot(scene, o, str(p), rng)
        if moved is not None and _identifiable(scene.with_object(moved), moved):
            return scene.with_object(moved), Edit("position", o.shape, o.oid, o.colour, o.position,
                                                  new_position=str(p))
    return None


def _density(difficulty: str, rng: np.random.Generator) -> int:
    lo, hi = {"easy": (2, 4), "medium": (5, 8), "hard": (9, 14)}[difficulty]
    return int(rng.integers(lo, hi + 1))


#: The default pairs' subsets in turn (single easy, medium, hard, multi, identical): the first 5k pairs
#: hold k of each, so ``--faith-limit`` keeps whole turns (fixtures.world_pairs).
CYCLE: tuple[str, ...] = ("single", "single", "single", "multi", "identical")


def _plan(index: int, subset: str | None, n_edits: int | None,
          rng: np.random.Generator) -> tuple[str, str | None, int]:
    """(subset, difficulty, number of edits) of pair ``index`` (draws from ``rng`` in a fixed order)."""
    if subset is None:
        subset = CYCLE[index % len(CYCLE)]
    if subset not in SUBSETS:
        raise ValueError(f"unknown pair subset {subset!r}; expected one of {SUBSETS}")
    difficulty = DIFFICULTIES[index % 5] if subset == "single" and index % 5 < 3 else (
        str(rng.choice(DIFFICULTIES)) if subset == "single" else None)
    # the multi draw happens whatever the subset when n_edits is not given (the items depend on it)
    drawn = n_edits if n_edits is not None else int(rng.integers(2, 6))
    k = {"single": 1, "identical": 0}.get(subset, drawn)
    if subset == "multi" and not 2 <= k <= 5:
        raise ValueError(f"multi-difference pairs have 2..5 edits, got {k}")
    return subset, difficulty, k


def _edit_candidates(a: Scene, difficulty: str | None) -> list[WorldObject]:
    """Objects of ``a`` that may be edited: identifiable, and of the size the difficulty asks for."""
    cands = [o for o in a.objects if _identifiable(a, o)]
    if difficulty is not None:
        want = "large" if difficulty == "easy" else ("small" if difficulty == "hard" else None)
        cands = [o for o in cands if want is None or o.size == want]
    return cands


def _try_pair(difficulty: str | None, k: int,
              rng: np.random.Generator) -> tuple[Scene, Scene, list[Edit]] | None:
    """One attempt: a scene, ``k`` edits of it and the edited scene; None if this scene does not work."""
    n_obj = _density(difficulty, rng) if difficulty else int(rng.integers(max(3, k + 1), 10))
    a = sample_dense_scene(rng, n_obj)
    b, edits = a, []
    cands = _edit_candidates(a, difficulty)
    if len(cands) < k:
        return None
    for j in rng.permutation(len(cands))[:k]:
        o = next(x for x in b.objects if x.oid == cands[int(j)].oid)
        res = apply_edit(b, o, str(rng.choice(EDIT_TYPES)), rng)
        if res is None:
            break
        b, e = res
        edits.append(e)
    if len(edits) != k:
        return None
    if difficulty is not None and difficulty_of(len(a.objects), _edited_size(a, edits[0])) != difficulty:
        return None
    return a, b, edits


def pair_item(seed: int, index: int, subset: str | None = None, n_edits: int | None = None) -> PairItem:
    """Pair ``index``. By default subsets cycle single-easy, single-medium, single-hard, multi, identical;
    ``subset``/``n_edits`` force one (multi: 2-5 edits drawn uniformly unless given)."""
    rng = item_rng(KIND, seed, index)
    subset, difficulty, k = _plan(index, subset, n_edits, rng)
    for _ in range(200):
        found = _try_pair(difficulty, k, rng)
        if found is not None:
            a, b, edits = found
            return PairItem(image_ref(KIND, seed, index), a, b, tuple(edits), subset, difficulty)
    raise RuntimeError(f"no {subset} pair found in 200 scenes (seed={seed}, index={index})")


def _edited_size(scene: Scene, edit: Edit) -> str:
    return next(o.size for o in scene.objects if o.oid == edit.oid)


def pair_items(n: int, seed: int, start: int = 0) -> list[PairItem]:
    return [pair_item(seed, i) for i in range(start, start + n)]


register_pair_kind(KIND, lambda seed, index: pair_item(seed, index).images())
