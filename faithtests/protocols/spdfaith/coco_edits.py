"""Real photo pairs with known atomic edits, made from COCO instance masks (SPD-Faith §3, App. A).

The paper edits COCO 2017 photos with an LLM planner, LaMa inpainting and human checks; this module
makes the same three edit types deterministically from the instance masks (pixel work in
:mod:`.coco_ops`, OpenCV Telea inpainting in place of LaMa, and no human check, so a removal of a large
or occluding object can leave a visible smear):

* ``color``: the object's mask recoloured to a palette colour; ``attribute`` = the colour's name,
  ``before`` = the object's dominant colour name when it has one; ``box`` = the mask's box.
* ``remove``: the mask (dilated 4 px) inpainted; ``box`` = the dilated mask's box.
* ``position``: the object cut out, its hole inpainted, its pixels pasted at a seeded offset where the
  shifted mask overlaps no other annotation's box, no earlier moved object and not its own hole;
  ``attribute`` = the shift's dominant direction (left / right / up / down); ``box`` = union of the
  hole's box and the new place's box. An object with no such place is counted (``no free place``) and
  another object is tried.

Boxes are half-open pixel boxes (x0, y0, x1, y1) of the original image and contain every changed pixel.
Only non-crowd polygon annotations covering at least 0.5% of the image are edited; crowd (RLE)
annotations are never edited but their boxes count as occupied. Objects above 8% of the image are
only recoloured: Telea fills large holes with visible smears (the paper's planner prompt also prefers
colour for large objects), so easy pairs (objects >= 5%) are mostly colour edits here. Multi pairs
apply colours, then removals, then moves, so pasted objects stay whole.

Difficulty (single pairs) from App. A's two factors, object density n (annotations in the image, crowd
included) and edit area a (COCO ``area`` / image area): easy = n <= 6 and a >= 5%; hard = n >= 12 or
a < 1%; medium otherwise. The paper's "hard" starts at 17 objects; COCO-MINI (79 images) has only 7
images that dense, so the cut is 12 there, which gives 65 easy, 128 medium and 120 hard candidate
objects on COCO-MINI. Single pairs follow App. A's split (easy 10%, medium 50%, hard 40%; largest
remainder, so 3 pairs are 0 / 2 / 1); multi pairs have 2-5 edits (uniform) on distinct objects of one
photo; identical pairs are a photo and its copy.

Records: ``item_id`` = ``coco/<seed>/<subset>/<i>``, ``stimulus_id`` = the COCO image id (pairs of one
photo share it), ``ref`` = ``coco:<file>+edit`` (``+copy`` for identical pairs), ``source`` = ``coco``;
no object is edited by two single pairs. Images load lazily from the cache's PNGs.

Caching (default folder :func:`default_cache_dir`: ``$XDG_CACHE_HOME/faithtests/spdfaith-coco``): the
decoded photo is stored once as PNG (``source/``), so original and edit come from the same decode;
each edited photo is a PNG plus a JSON of its ground truth (``pairs/``), keyed by (the photo file's
SHA-256, the edit plan with the edited objects' polygons, the seed, ``CODE_VERSION``). Plans need only
the annotations, so a second call with the same arguments decodes and edits nothing. Bump
``CODE_VERSION`` when pixels change.

Counted, never dropped (``invalid`` by kind, with examples), each out of what it counts (``out_of``):
``bad image entry``, ``duplicate image id``, ``missing image`` out of the image entries; ``bad
annotation``, ``unknown image id``, ``unknown category``, ``bad segmentation`` out of the annotations;
``empty mask`` and ``no free place`` once per annotation however often it was tried, out of the loaded
images' annotations; ``not enough objects:<level>`` out of the pairs asked for.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
from PIL import Image

from faithtests.data.invalid import CountsInvalid
from faithtests.data.loaded import ImageRef
from faithtests.protocols.spdfaith import coco_ops as ops
from faithtests.protocols.spdfaith.coco_instances import CocoImage, CocoObject, coco_layout, load_instances
from faithtests.protocols.spdfaith.records import EDIT_TYPES, DiffRecord, EditTruth, Subset

__all__ = ["CODE_VERSION", "CocoPairs", "PairPlan", "PlannedEdit", "build_coco_pairs", "default_cache_dir",
           "difficulty_of"]

CODE_VERSION: Final = "1"
MAX_HOLE_AREA: Final = 0.08
EASY_MAX_OBJECTS, EASY_MIN_AREA, HARD_MIN_OBJECTS, HARD_MAX_AREA = 6, 0.05, 12, 0.01
SINGLE_SHARES: Final = (("easy", 0.1), ("medium", 0.5), ("hard", 0.4))
MULTI_TRIES: Final = 20
_RENDER_ORDER: Final = {"color": 0, "remove": 1, "position": 2}


@dataclass(frozen=True)
class PlannedEdit:
    """One edit as planned from the annotations: ``colours`` is the seeded preference order of a colour
    edit (the first far enough from the object's colour wins), ``offset`` the (dx, dy) of a move."""

    ann_id: int
    type: str
    colours: tuple[str, ...] = ()
    offset: tuple[int, int] | None = None


@dataclass(frozen=True)
class PairPlan:
    item_id: str
    subset: Subset
    difficulty: str | None
    image: CocoImage
    edits: tuple[PlannedEdit, ...]


@dataclass
class CocoPairs(CountsInvalid):
    """Records with their plans and (original PNG, edited PNG) files, index-aligned; what was skipped,
    by kind; ``total`` = the pairs asked for; how many pairs this call rendered and found cached."""

    records: list[DiffRecord] = field(default_factory=list)
    plans: list[PairPlan] = field(default_factory=list)
    files: list[tuple[Path, Path]] = field(default_factory=list)
    invalid: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    total: int = 0
    rendered: int = 0
    out_of: dict[str, int] = field(default_factory=dict)  # image-entry / annotation kinds: their own total
    cached: int = 0


def difficulty_of(n_objects: int, area: float) -> str:
    """App. A's level from object density and edit area (module doc for the cut points)."""
    if n_objects <= EASY_MAX_OBJECTS and area >= EASY_MIN_AREA:
        return "easy"
    if n_objects >= HARD_MIN_OBJECTS or area < HARD_MAX_AREA:
        return "hard"
    return "medium"


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "faithtests" / "spdfaith-coco"


# ------------------------------------------------------------------------------------------ planning
class _Planner:
    """Every pair's objects, types, colours and offsets from the annotations alone (no pixels), so a
    plan is known before anything is decoded and can key the cache."""

    def __init__(self, images: list[CocoImage], types: tuple[str, ...], seed: int, out: CocoPairs) -> None:
        self.images, self.types, self.seed, self.out = images, types, seed, out
        self.annotations = sum(len(im.objects) for im in images)
        self.refused: set[tuple[str, int]] = set()  # (kind, annotation): counted once, however often tried
        # A stream of its own: other generators seeded with the same seed must not draw the same numbers.
        self.rng = np.random.default_rng([seed, 0x5BDF, 0xC0C0])

    def allowed(self, obj: CocoObject) -> list[str]:
        if not obj.editable:
            return []
        return [t for t in self.types if t == "color" or obj.area <= MAX_HOLE_AREA]

    def edit(self, img: CocoImage, obj: CocoObject, blocked: list[ops.Box]
             ) -> tuple[PlannedEdit, ops.Box] | None:
        """A planned edit of a seeded allowed type and the box it lands in, or None (counted)."""
        kind = str(self.rng.choice(self.allowed(obj)))
        where = f"{img.file.name} annotation {obj.ann_id}"
        mask = img.mask(obj.ann_id)
        if not mask.any():
            self._refuse("empty mask", obj.ann_id, where)  # polygons that cover no pixel
            return None
        if kind == "color":
            return PlannedEdit(obj.ann_id, kind, colours=tuple(str(c) for c in self.rng.permutation(
                list(ops.PALETTE)))), ops.box_of(mask)
        if kind == "remove":
            return PlannedEdit(obj.ann_id, kind), ops.box_of(mask)
        occupied = ops.dilate(mask)
        for x0, y0, x1, y1 in [o.box for o in img.objects if o.ann_id != obj.ann_id] + blocked:
            occupied[max(y0, 0):y1, max(x0, 0):x1] = True
        offset = ops.free_offset(mask, occupied, self.rng)
        if offset is None:
            self._refuse("no free place", obj.ann_id, where)
            return None
        x0, y0, x1, y1 = ops.box_of(mask)
        dx, dy = offset
        return PlannedEdit(obj.ann_id, kind, offset=offset), (x0 + dx, y0 + dy, x1 + dx, y1 + dy)

    def _refuse(self, kind: str, ann_id: int, where: str) -> None:
        """An annotation the planner could not edit: counted once per annotation, out of the annotations of
        the loaded images (a multi-edit pair tries an object many times; counting tries against the pairs
        overflowed their total)."""
        if (kind, ann_id) not in self.refused:
            self.refused.add((kind, ann_id))
            self.out.reject(kind, where, out_of=self.annotations)

    def single(self, n: int) -> list[PairPlan]:
        exact = [(level, share * n) for level, share in SINGLE_SHARES]
        counts = {level: int(x) for level, x in exact}
        for level, _ in sorted(exact, key=lambda e: int(e[1]) - e[1])[: n - sum(counts.values())]:
            counts[level] += 1
        levels = [lv for lv, _ in SINGLE_SHARES for _ in range(counts[lv])]
        levels = [levels[int(k)] for k in self.rng.permutation(n)]
        pools: dict[str, list[tuple[CocoImage, CocoObject]]] = {lv: [] for lv, _ in SINGLE_SHARES}
        for img in self.images:
            for o in img.objects:
                if self.allowed(o):
                    pools[difficulty_of(len(img.objects), o.area)].append((img, o))
        for lv, pool in pools.items():
            pools[lv] = [pool[int(k)] for k in self.rng.permutation(len(pool))]
        plans = []
        for i, level in enumerate(levels):
            item_id = f"coco/{self.seed}/single/{i}"
            while pools[level]:
                img, obj = pools[level].pop()
                got = self.edit(img, obj, [])
                if got is not None:
                    plans.append(PairPlan(item_id, "single", level, img, (got[0],)))
                    break
            else:
                self.out.reject(f"not enough objects:{level}", item_id)
        return plans

    def multi(self, n: int) -> list[PairPlan]:
        plans = []
        for i in range(n):
            item_id, k = f"coco/{self.seed}/multi/{i}", int(self.rng.integers(2, 6))
            fits = [im for im in self.images if sum(bool(self.allowed(o)) for o in im.objects) >= k]
            for _ in range(MULTI_TRIES if fits else 0):
                img = fits[int(self.rng.integers(len(fits)))]
                cands = [o for o in img.objects if self.allowed(o)]
                edits: list[PlannedEdit] = []
                landed: list[ops.Box] = []
                for j in self.rng.permutation(len(cands)):
                    got = self.edit(img, cands[int(j)], landed)
                    if got is not None:
                        edits.append(got[0])
                        if got[0].type == "position":
                            landed.append(got[1])
                    if len(edits) == k:
                        order = sorted(edits, key=lambda e: _RENDER_ORDER[e.type])
                        plans.append(PairPlan(item_id, "multi", None, img, tuple(order)))
                        break
                if len(edits) == k:
                    break
            else:
                self.out.reject("not enough objects:multi", f"{item_id}: {k} edits")
        return plans

    def identical(self, n: int) -> list[PairPlan]:
        if not self.images:
            return []
        picks = self.rng.choice(len(self.images), size=n, replace=n > len(self.images))
        return [PairPlan(f"coco/{self.seed}/identical/{i}", "identical", None, self.images[int(k)], ())
                for i, k in enumerate(picks)]


# ------------------------------------------------------------------------------------------ rendering
@dataclass(frozen=True)
class _PairFiles:
    """The lazy loader of one pair (a class, not a closure, so records pickle)."""

    original: Path
    edited: Path

    def __call__(self) -> tuple[Image.Image, Image.Image]:
        return ImageRef(self.original).load(), ImageRef(self.edited).load()


def _write_atomic(path: Path, data: bytes | Image.Image) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        data.save(tmp, format="PNG")
    os.replace(tmp, path)


def _write_source(img: CocoImage, path: Path) -> None:
    _write_atomic(path, ImageRef(img.file).load())


def _render(plan: PairPlan, source: Path) -> tuple[ops.RGB, list[EditTruth]]:
    """The edited photo and its ground truth, edits applied in plan order."""
    base = np.ascontiguousarray(np.asarray(ImageRef(source).load(), np.uint8))
    cur, truths = base.copy(), []
    for e in plan.edits:
        obj, mask = plan.image.obj(e.ann_id), plan.image.mask(e.ann_id)
        before = ops.colour_name(base[mask])
        if e.type == "color":
            target = ops.pick_target(before, e.colours)
            cur = ops.recolour(cur, mask, target)
            truths.append(EditTruth("color", obj.category, target, before, ops.box_of(mask)))
        elif e.type == "remove":
            cur, region = ops.remove(cur, mask)
            truths.append(EditTruth("remove", obj.category, None, before, ops.box_of(region)))
        else:
            assert e.offset is not None
            cur, hole, new = ops.move(cur, mask, e.offset)
            box = ops.union_box(ops.box_of(hole), ops.box_of(new))
            truths.append(EditTruth("position", obj.category, ops.direction(e.offset), before, box))
    return cur, truths


def _pair_key(digest: str, plan: PairPlan, seed: int) -> str:
    # The polygons belong to the plan: an annotation file that redraws an object must not hit the cache.
    payload = {"version": CODE_VERSION, "image": digest, "seed": seed,
               "plan": [{**asdict(e), "polygons": plan.image.obj(e.ann_id).polygons} for e in plan.edits]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def _as_box(value: Any) -> ops.Box | None:
    if value is None:
        return None
    x0, y0, x1, y1 = (int(v) for v in value)
    return x0, y0, x1, y1


def _cached_truths(meta: Path) -> list[EditTruth] | None:
    try:
        rows = json.loads(meta.read_text(encoding="utf-8"))["edits"]
        return [EditTruth(r["type"], r["category"], r["attribute"], r["before"], _as_box(r["box"]))
                for r in rows]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or unreadable: render again


def build_coco_pairs(coco_root: str | Path, n_single: int, n_multi: int, n_identical: int, seed: int,
                     cache_dir: str | Path | None = None, *, split: str = "val2017",
                     types: Sequence[str] = EDIT_TYPES) -> CocoPairs:
    """Seeded SPD-Faith pairs from a COCO folder (``coco_layout``), cached under ``cache_dir`` (default
    :func:`default_cache_dir`). ``types`` restricts the edit types drawn. Module doc for the rules."""
    if min(n_single, n_multi, n_identical, seed) < 0:
        raise ValueError("counts and seed must be >= 0")
    bad = [t for t in types if t not in EDIT_TYPES]
    if bad or not types:
        raise ValueError(f"types must be a non-empty subset of {EDIT_TYPES}, got {list(types)}")
    ops.cv2_module()  # fail before any work when OpenCV is missing
    instances, image_dir = coco_layout(coco_root, split)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    out = CocoPairs(total=n_single + n_multi + n_identical)
    planner = _Planner(load_instances(instances, image_dir, out), tuple(types), seed, out)
    plans = planner.single(n_single) + planner.multi(n_multi) + planner.identical(n_identical)
    digests: dict[Path, str] = {}
    for plan in plans:
        img = plan.image
        if img.file not in digests:
            digests[img.file] = hashlib.sha256(img.file.read_bytes()).hexdigest()
        digest = digests[img.file]
        source = cache / "source" / f"{digest[:32]}-v{CODE_VERSION}.png"
        if not source.is_file():
            _write_source(img, source)
        edited = source
        truths: list[EditTruth] = []
        if plan.edits:
            edited = cache / "pairs" / f"{_pair_key(digest, plan, seed)}.png"
            cached = _cached_truths(edited.with_suffix(".json")) if edited.is_file() else None
            if cached is None:
                pixels, truths = _render(plan, source)
                _write_atomic(edited, Image.fromarray(pixels))
                rows = [asdict(t) for t in truths]
                _write_atomic(edited.with_suffix(".json"), json.dumps({"edits": rows}, indent=1).encode())
                out.rendered += 1
            else:
                truths = cached
                out.cached += 1
        out.plans.append(plan)
        out.files.append((source, edited))
        out.records.append(DiffRecord(
            item_id=plan.item_id, stimulus_id=str(img.image_id), subset=plan.subset,
            difficulty=plan.difficulty, edits=tuple(truths), source="coco",
            ref=f"coco:{img.file.name}+{'edit' if plan.edits else 'copy'}",
            loader=_PairFiles(source, edited), n_objects=len(img.objects)))
    return out
