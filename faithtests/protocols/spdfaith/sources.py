"""SPD-Faith records from the reference world, a local SPD-Faith-Bench copy and COCO photos (§3, App. A).

* :func:`world_records`: :func:`.stimuli.pair_item` ``(seed, i)`` for i < n, in its subset cycle
  (single easy / medium / hard, multi, identical). Each edit's ``attribute`` is the new colour or slot,
  ``before`` the colour before, ``box`` the object's pixel box (for a move: before ∪ after).
* :func:`load_spdfaith_bench`: the public bench as JSONL (a file, or every ``*.jsonl`` of a folder), one
  pair per line. Fields: ``qid`` (or ``id``); the images as ``images: [original, edited]``, a key pair
  (``image_a``/``image_b``, ``image_1``/``image_2``, ``image1``/``image2``, ``original_image`` or
  ``original`` with ``edited_image`` / ``modified_image`` / ``edited`` / ``modified``), ``image`` with
  one of those edited keys, or one side-by-side ``image`` (or a one-path ``images``);
  ``modifications`` (or ``differences``, Fig. 28's metadata) as ``[{type, category, ...}]``; optional
  ``question``, ``complexity`` (or ``difficulty``: easy / medium / hard), ``num_differences``,
  ``subset``, ``image_id`` (the stimulus; else the original's path) and ``n_objects``. A modification
  may carry ``target_color`` (the attribute), ``original_color`` (before), ``bbox`` as COCO
  [x, y, w, h] (Fig. 28), and for moves ``original_bbox`` / ``new_bbox`` (the box is their union, the
  attribute the dominant direction of the shift). Types: color / colour, remove / removal, position /
  move. Relative paths resolve against the JSONL's folder. The subset is the edit count: 0 identical,
  1 single, 2-5 multi.

  Side-by-side rule: a record with one image holds both, original first: split across the longer side
  (wider than tall: left | right; else top / bottom, the paper's figures show both), into equal halves;
  an odd middle row or column is dropped. ``layout`` ("horizontal" / "left-right" or "vertical" /
  "top-bottom") overrides the guess, which fails for stacked images wider than twice their height.

  Invalid rows are counted by kind (examples name file:line), never dropped silently: ``bad JSON
  line``, ``missing field:<name>``, ``bad field:<name>``, ``unknown edit type``, ``unknown
  complexity``, ``wrong subset size`` (more than 5 edits, or a count / subset that disagrees with the
  list), ``missing image``, ``corrupt image`` (PIL ``verify``), ``duplicate qid``. A file with no valid
  record is a DataError; a missing path is a FileNotFoundError.
* :func:`coco_records`: :mod:`.coco_edits` pairs of a COCO folder (``<root>/annotations/
  instances_<split>.json`` and ``<root>/<split>/``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from PIL import Image

from faithtests.data import invalid
from faithtests.data.invalid import jsonl_files
from faithtests.data.load_errors import DataError
from faithtests.data.loaded import ImageRef
from faithtests.protocols.spdfaith.coco_edits import CocoPairs, build_coco_pairs
from faithtests.protocols.spdfaith.coco_instances import coco_layout
from faithtests.protocols.spdfaith.coco_ops import direction
from faithtests.protocols.spdfaith.records import DIFFICULTIES, DiffRecord, EditTruth, Subset
from faithtests.protocols.spdfaith.stimuli import pair_item

__all__ = ["BenchData", "Loaded", "coco_records", "load_spdfaith_bench", "world_records"]

Box = tuple[int, int, int, int]
ID_KEYS: Final = ("qid", "id")
MOD_KEYS: Final = ("modifications", "differences")
EDITED_KEYS: Final = ("edited_image", "modified_image", "edited", "modified")
PAIR_KEYS: Final = (("image_a", "image_b"), ("image_1", "image_2"), ("image1", "image2"),
                    *((o, e) for o in ("original_image", "original", "image") for e in EDITED_KEYS))
TYPES: Final = {"color": "color", "colour": "color", "remove": "remove", "removal": "remove",
                "position": "position", "move": "position"}
LAYOUTS: Final = {"horizontal": "h", "left-right": "h", "vertical": "v", "top-bottom": "v"}
_SUBSETS: Final[dict[str, Subset]] = {"single": "single", "multi": "multi", "identical": "identical"}
_SIZES: Final = {"single": (1, 1), "multi": (2, 5), "identical": (0, 0)}


#: What the SPD-Faith loaders return (the shared loader result, of pairs).
Loaded = invalid.Loaded[DiffRecord]
BenchData = Loaded


# ------------------------------------------------------------------------------------------ world
def world_records(n: int, seed: int) -> list[DiffRecord]:
    """The first ``n`` reference-world pairs of ``seed`` (module doc)."""
    out = []
    for i in range(n):
        item = pair_item(seed, i)
        before = {o.oid: o for o in item.scene_a.objects}
        after = {o.oid: o for o in item.scene_b.objects}
        edits = []
        for e in item.edits:
            box: Box = before[e.oid].bbox
            if e.type == "position":
                b = after[e.oid].bbox
                box = (min(box[0], b[0]), min(box[1], b[1]), max(box[2], b[2]), max(box[3], b[3]))
            attribute = e.new_colour if e.type == "color" else e.new_position
            edits.append(EditTruth(e.type, e.category, attribute, e.colour, box))
        out.append(DiffRecord(item.item_id, item.item_id, _SUBSETS[item.subset], item.difficulty,
                              tuple(edits), "world", item.item_id, item.images, item.n_objects))
    return out


# ------------------------------------------------------------------------------------------ bench
class _Reject(Exception):
    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(kind)
        self.kind, self.detail = kind, detail


@dataclass(frozen=True)
class _Pair:
    """The lazy loader of one bench pair (picklable, unlike a closure)."""

    original: ImageRef
    edited: ImageRef

    def __call__(self) -> tuple[Image.Image, Image.Image]:
        return self.original.load(), self.edited.load()


def _first(row: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str | None, Any]:
    return next(((k, row[k]) for k in keys if row.get(k) is not None), (None, None))


def _xywh(value: Any, name: str) -> Box:
    # the types first: a null among the numbers was a TypeError of the size check (issue 46, fuzzing)
    if (not isinstance(value, list) or len(value) != 4 or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value)
            or min(value[2:]) < 0):
        raise _Reject(f"bad field:{name}", f"expected [x, y, w, h], got {value!r}")
    x, y, w, h = value
    return math.floor(x), math.floor(y), math.ceil(x + w), math.ceil(y + h)


def _edit(mod: Any) -> EditTruth:
    if not isinstance(mod, dict):
        raise _Reject("bad field:modifications", f"an edit is a JSON object, got {mod!r}")
    if mod.get("type") is None:
        raise _Reject("missing field:type")
    kind = TYPES.get(str(mod["type"]).strip().lower())
    if kind is None:
        raise _Reject("unknown edit type", repr(mod["type"]))
    category = mod.get("category")
    if not isinstance(category, str) or not category.strip():
        raise _Reject("missing field:category")
    attribute = _first(mod, ("target_color", "target_colour", "new_color"))[1]
    before = _first(mod, ("original_color", "original_colour"))[1]
    box = _xywh(mod["bbox"], "bbox") if mod.get("bbox") is not None else None
    if kind == "position" and mod.get("new_bbox") is not None:
        new = _xywh(mod["new_bbox"], "new_bbox")
        if mod.get("original_bbox") is not None:
            old = _xywh(mod["original_bbox"], "original_bbox")
            shift = ((new[0] + new[2] - old[0] - old[2]) // 2, (new[1] + new[3] - old[1] - old[3]) // 2)
            attribute = direction(shift) if shift != (0, 0) else None
            box = (min(old[0], new[0]), min(old[1], new[1]), max(old[2], new[2]), max(old[3], new[3]))
    return EditTruth(kind, category.strip(), None if attribute is None else str(attribute),
                     None if before is None else str(before), box)


def _subset(row: Mapping[str, Any], n: int) -> Subset:
    subset: Subset = "identical" if n == 0 else ("single" if n == 1 else "multi")
    declared = row.get("num_differences")
    if n > 5 or (declared is not None and declared != n):
        raise _Reject("wrong subset size", f"{n} edits, num_differences={declared!r}")
    named = row.get("subset")
    if named is not None:
        key = next((s for s in _SUBSETS if s in str(named).lower()), None)
        if key is None or not _SIZES[key][0] <= n <= _SIZES[key][1]:
            raise _Reject("wrong subset size", f"{n} edits in subset {named!r}")
    return subset


def _images(row: Mapping[str, Any], base: Path) -> tuple[list[Path], str | None]:
    """The image paths of a record (one = side-by-side) and the layout it names, if any."""
    paths: list[Any] | None = next(([row[a], row[b]] for a, b in PAIR_KEYS
                                    if row.get(a) is not None and row.get(b) is not None), None)
    if paths is None and row.get("images") is not None:
        paths = row["images"]
        if not isinstance(paths, list) or len(paths) not in (1, 2):
            raise _Reject("bad field:images", f"expected 1 or 2 paths, got {paths!r}")
    if paths is None and row.get("image") is not None:
        paths = [row["image"]]
    if paths is None:
        raise _Reject("missing field:image")
    if not all(isinstance(p, str) and p.strip() for p in paths):
        raise _Reject("bad field:image", f"expected path strings, got {paths!r}")
    layout = row.get("layout")
    if layout is not None and str(layout).lower() not in LAYOUTS:
        raise _Reject("bad field:layout", repr(layout))
    resolved = [Path(p.strip()).expanduser() for p in paths]
    return [p if p.is_absolute() else base / p for p in resolved], None if layout is None else str(layout)


class _Checked:
    """Image checks, once per path: the size of a file that exists and verifies, or a _Reject."""

    def __init__(self) -> None:
        self.sizes: dict[Path, tuple[int, int] | _Reject] = {}

    def size(self, path: Path) -> tuple[int, int]:
        if path not in self.sizes:
            if not path.is_file():
                self.sizes[path] = _Reject("missing image", str(path))
            else:
                try:
                    with Image.open(path) as im:
                        size = im.size
                        im.verify()
                    self.sizes[path] = size
                except Exception as e:  # PIL raises many types for a broken file
                    self.sizes[path] = _Reject("corrupt image", f"{path}: {type(e).__name__}: {e}")
        got = self.sizes[path]
        if isinstance(got, _Reject):
            raise got
        return got


def _split(path: Path, size: tuple[int, int], layout: str | None) -> tuple[ImageRef, ImageRef]:
    """The two halves of a side-by-side image (module doc)."""
    w, h = size
    horizontal = LAYOUTS[layout.lower()] == "h" if layout is not None else w >= h
    if horizontal:
        return ImageRef(path, (0, 0, w // 2, h)), ImageRef(path, (w - w // 2, 0, w, h))
    return ImageRef(path, (0, 0, w, h // 2)), ImageRef(path, (0, h - h // 2, w, h))


def _qid(row: Mapping[str, Any]) -> str:
    key, qid = _first(row, ID_KEYS)
    if key is None:
        raise _Reject("missing field:qid")
    if isinstance(qid, bool) or not isinstance(qid, str | int) or not str(qid).strip():
        raise _Reject("bad field:qid", repr(qid))
    return str(qid).strip()


def _edits(row: Mapping[str, Any]) -> tuple[EditTruth, ...]:
    key, mods = _first(row, MOD_KEYS)
    if key is None:
        raise _Reject("missing field:modifications")
    if not isinstance(mods, list):
        raise _Reject("bad field:modifications", f"expected a list, got {type(mods).__name__}")
    return tuple(_edit(m) for m in mods)


def _optional(row: Mapping[str, Any]) -> tuple[str | None, str | None, int | None]:
    """(difficulty, question, n_objects), each None when absent; a bad value raises _Reject."""
    complexity = _first(row, ("complexity", "difficulty"))[1]
    if complexity is not None and str(complexity).strip().lower() not in DIFFICULTIES:
        raise _Reject("unknown complexity", repr(complexity))
    question = row.get("question")
    if question is not None and not isinstance(question, str):
        raise _Reject("bad field:question", repr(question))
    n_objects = row.get("n_objects")
    if n_objects is not None and (isinstance(n_objects, bool) or not isinstance(n_objects, int)):
        raise _Reject("bad field:n_objects", repr(n_objects))
    return None if complexity is None else str(complexity).strip().lower(), question, n_objects


def _bench_record(row: Mapping[str, Any], base: Path, checked: _Checked) -> DiffRecord:
    """The pair of one JSONL object; the first failed check (in field order) raises _Reject."""
    qid = _qid(row)
    edits = _edits(row)
    subset = _subset(row, len(edits))
    difficulty, question, n_objects = _optional(row)
    paths, layout = _images(row, base)
    sizes = [checked.size(p) for p in paths]
    pair = _split(paths[0], sizes[0], layout) if len(paths) == 1 else (ImageRef(paths[0]), ImageRef(paths[1]))
    ref = "|".join(str(p.relative_to(base)) if p.is_relative_to(base) else str(p) for p in paths)
    stimulus = row.get("image_id")
    return DiffRecord(
        item_id=qid, stimulus_id=str(stimulus) if stimulus is not None else str(paths[0]),
        subset=subset, difficulty=difficulty, edits=edits, source="spdfaith", ref=ref, loader=_Pair(*pair),
        n_objects=n_objects, question=question)


def _bench_files(path: Path) -> list[Path]:
    return jsonl_files(path, "SPD-Faith-Bench")


def load_spdfaith_bench(path: str | Path, limit: int | None = None) -> Loaded:
    """Validated pairs of an SPD-Faith-Bench JSONL copy (module doc); with ``limit``, reading stops
    after that many valid records (``total`` counts the rows read)."""
    out, seen, checked = Loaded(), set[str](), _Checked()
    files = _bench_files(Path(path))
    for f in files:
        try:
            lines = f.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise DataError(f, f"cannot read: {e}") from e
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            if limit is not None and len(out.records) >= limit:
                return out
            out.total += 1
            where = f"{f.name}:{n}"
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise _Reject("bad JSON line", f"a JSON {type(row).__name__}, not an object")
                rec = _bench_record(row, f.parent, checked)
                if rec.item_id in seen:
                    raise _Reject("duplicate qid", rec.item_id)
            except json.JSONDecodeError as e:
                out.reject("bad JSON line", f"{where}: {e.msg}")
                continue
            except _Reject as r:
                out.reject(r.kind, f"{where}: {r.detail}" if r.detail else where)
                continue
            seen.add(rec.item_id)
            out.records.append(rec)
    if not out.records:
        summary = ", ".join(f"{k}: {v}" for k, v in sorted(out.invalid.items())) or "no rows"
        raise DataError(files[0] if len(files) == 1 else Path(path), f"no valid SPD-Faith record ({summary})")
    return out


# ------------------------------------------------------------------------------------------ coco
def coco_records(root: str | Path, n_single: int, n_multi: int, n_identical: int, seed: int,
                 cache_dir: str | Path | None = None, split: str = "val2017") -> CocoPairs:
    """Edited-photo pairs of a COCO folder (:func:`.coco_edits.build_coco_pairs`); a FileNotFoundError
    naming the expected layout when ``<root>/annotations/instances_<split>.json`` is missing."""
    coco_layout(root, split)
    return build_coco_pairs(root, n_single, n_multi, n_identical, seed, cache_dir, split=split)
