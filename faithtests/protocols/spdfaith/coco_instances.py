"""COCO instances JSON for the SPD-Faith edit pairs: images with their objects (polygons, boxes, areas).

Only what :mod:`.coco_edits` needs: an image whose file is missing, a malformed image entry or
annotation, an annotation of an unknown image or category, or a malformed segmentation is counted into
the caller's :class:`~faithtests.data.invalid.CountsInvalid` by kind (``missing image``, ``bad image
entry``, ``duplicate image id``, ``bad annotation``, ``unknown image id``, ``unknown category``, ``bad
segmentation``); a malformed top level (not an object, a missing or non-list ``images`` /
``annotations`` / ``categories``, a bad category) is a :class:`~faithtests.data.load_errors.DataError`.
Crowd (RLE) annotations are kept without polygons: never edited, but their boxes count as occupied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from faithtests.data._validate import Where, get, integer, number, read_json, text
from faithtests.data.invalid import CountsInvalid
from faithtests.data.load_errors import DataError
from faithtests.protocols.spdfaith import coco_ops as ops

__all__ = ["MIN_AREA", "CocoImage", "CocoObject", "coco_layout", "load_instances"]

MIN_AREA: Final = 0.005  # smallest editable object, as a fraction of the image


@dataclass(frozen=True)
class CocoObject:
    ann_id: int
    category: str
    box: ops.Box  # from the COCO bbox [x, y, w, h], widened to whole pixels
    area: float  # fraction of the image
    polygons: tuple[tuple[float, ...], ...]  # empty for crowd / RLE annotations: occupied, never edited

    @property
    def editable(self) -> bool:  # crowd regions and specks are never edited
        return bool(self.polygons) and self.area >= MIN_AREA


@dataclass(frozen=True)
class CocoImage:
    image_id: int
    file: Path
    width: int
    height: int
    objects: tuple[CocoObject, ...]

    def obj(self, ann_id: int) -> CocoObject:
        return next(o for o in self.objects if o.ann_id == ann_id)

    def mask(self, ann_id: int) -> ops.Mask:
        return ops.polygon_mask(self.obj(ann_id).polygons, self.height, self.width)


def coco_layout(root: str | Path, split: str = "val2017") -> tuple[Path, Path]:
    """(``root/annotations/instances_<split>.json``, ``root/<split>``); FileNotFoundError naming them."""
    base = Path(root)
    instances, images = base / "annotations" / f"instances_{split}.json", base / split
    if not instances.is_file():
        raise FileNotFoundError(f"COCO instances file not found: {instances} (SPD-Faith COCO pairs need the "
                                f"COCO layout <root>/annotations/instances_{split}.json + <root>/{split}/)")
    if not images.is_dir():
        raise FileNotFoundError(f"COCO image folder not found: {images}")
    return instances, images


def _polygons(seg: Any, where: Where) -> tuple[tuple[float, ...], ...]:
    if isinstance(seg, dict):
        return ()  # RLE: only crowd regions use it in COCO; occupied, not edited
    if not isinstance(seg, list) or not seg:
        raise where.error("expected a list of polygons or an RLE object", "segmentation")
    out = []
    for poly in seg:
        if (not isinstance(poly, list) or len(poly) < 6 or len(poly) % 2
                or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                           for v in poly)):  # Python's JSON reads NaN / Infinity
            raise where.error("a polygon is a flat list of >= 3 (x, y) numbers", "segmentation")
        out.append(tuple(float(v) for v in poly))
    return tuple(out)


def _box(bbox: Any, where: Where) -> ops.Box:
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in bbox) or min(bbox[2:]) < 0:
        raise where.error(f"expected [x, y, w, h] with w, h >= 0, got {bbox!r}", "bbox")
    x, y, w, h = (float(v) for v in bbox)
    return int(np.floor(x)), int(np.floor(y)), int(np.ceil(x + w)), int(np.ceil(y + h))


#: image id -> (its file, width, height)
_Meta = dict[int, tuple[Path, int, int]]


def _top_lists(data: Any, annotations: Path) -> dict[str, list[Any]]:
    """The ``images``, ``annotations`` and ``categories`` lists; a malformed top level is a DataError."""
    top = Where(annotations)
    if not isinstance(data, dict):
        raise top.error("expected a JSON object with 'images', 'annotations' and 'categories'")
    lists = {k: get(data, k, top) for k in ("images", "annotations", "categories")}
    for k, v in lists.items():
        if not isinstance(v, list):
            raise top.error("expected a list", k)
    return lists


def _image_meta(images: list[Any], annotations: Path, image_dir: Path, out: CountsInvalid) -> _Meta:
    """The image entries whose file exists with a positive size; the others counted out of the image
    entries, not the pairs asked for."""
    meta: _Meta = {}
    for i, im in enumerate(images):
        where = Where(annotations, key=f"images[{i}]")
        try:
            image_id, name = integer(im, "id", where), text(im, "file_name", where)
            w, h = integer(im, "width", where), integer(im, "height", where)
        except DataError as e:
            out.reject("bad image entry", str(e), out_of=len(images))
            continue
        if image_id in meta:
            out.reject("duplicate image id", f"{where.key}: {image_id}", out_of=len(images))
        elif not (image_dir / name).is_file():
            out.reject("missing image", str(image_dir / name), out_of=len(images))
        elif w > 0 and h > 0:
            meta[image_id] = (image_dir / name, w, h)
        else:
            out.reject("bad image entry", f"{where.key}: size {w}x{h}", out_of=len(images))
    return meta


def _object(a: Any, where: Where, known_ids: set[Any], cats: dict[int, str],
            meta: _Meta) -> tuple[int, CocoObject] | None:
    """(image id, object) of one annotation; None when its image was counted already; a bad annotation
    raises _Bad with its kind."""
    try:
        ann_id, image_id, cat = (integer(a, k, where) for k in ("id", "image_id", "category_id"))
        box, area = _box(get(a, "bbox", where), where), number(a, "area", where)
    except DataError as e:
        raise _Bad("bad annotation", str(e)) from e
    if image_id not in known_ids:
        raise _Bad("unknown image id", f"{where.key}: {image_id}")
    if cat not in cats:
        raise _Bad("unknown category", f"{where.key}: {cat}")
    if image_id not in meta:
        return None  # its image was counted above
    try:
        polygons = () if a.get("iscrowd") else _polygons(a.get("segmentation"), where)
    except DataError as e:
        raise _Bad("bad segmentation", str(e)) from e
    _, w, h = meta[image_id]
    return image_id, CocoObject(ann_id, cats[cat], box, area / (w * h), polygons)


class _Bad(Exception):
    """An annotation counted as ``kind`` (``detail`` names it)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(kind)
        self.kind, self.detail = kind, detail


def load_instances(annotations: Path, image_dir: Path, out: CountsInvalid) -> list[CocoImage]:
    """Images of a COCO instances JSON whose file exists, with their valid annotations (file order);
    bad entries are counted into ``out`` (module doc), each out of its own total (image entries or
    annotations, ``out.out_of``), never out of the pairs asked for. A malformed top level is a
    DataError."""
    lists = _top_lists(read_json(annotations), annotations)
    cats: dict[int, str] = {}
    for i, c in enumerate(lists["categories"]):
        where = Where(annotations, key=f"categories[{i}]")
        cats[integer(c, "id", where)] = text(c, "name", where)
    meta = _image_meta(lists["images"], annotations, image_dir, out)
    objects: dict[int, list[CocoObject]] = {k: [] for k in meta}
    known_ids = {im["id"] for im in lists["images"] if isinstance(im, dict) and isinstance(im.get("id"), int)}
    for j, a in enumerate(lists["annotations"]):
        try:
            got = _object(a, Where(annotations, key=f"annotations[{j}]"), known_ids, cats, meta)
        except _Bad as e:  # out of the annotations
            out.reject(e.kind, e.detail, out_of=len(lists["annotations"]))
            continue
        if got is not None:
            objects[got[0]].append(got[1])
    return [CocoImage(k, f, w, h, tuple(objects[k])) for k, (f, w, h) in meta.items()]
