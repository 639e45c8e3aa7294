"""ARO (Yuksekgonul et al., "When and why vision-language models behave like bags-of-words", 2023).

- VG-Relation ``visual_genome_relation.json`` and VG-Attribution ``visual_genome_attribution.json``:
  a JSON list of ``{image_path, bbox_x, bbox_y, bbox_w, bbox_h, true_caption, false_caption}`` plus
  ``relation_name`` (relation) or ``attributes`` (two strings, attribution); images live in
  ``<root>/images``. As in ARO's ``dataset_zoo/aro_datasets.py`` the image is cropped to
  (x, y, x + w, y + h); the crop happens when the image is loaded.
- COCO-Order: the Karpathy-split JSON (``[{image, caption: [...]}, ...]``, images relative to the COCO
  root) or a COCO captions JSON; each caption becomes one item with ARO's word-order negatives
  (:mod:`faithtests.data.aro_order`, which states where it differs from ARO's NLTK/spaCy code).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from faithtests.data._validate import Where, get, number, read_json, resolve, text
from faithtests.data.aro_order import PosTagger, order_negatives, pre_caption
from faithtests.data.coco import load_coco_captions
from faithtests.data.load_errors import DataError, MissingImage
from faithtests.data.loaded import AROItem, ImageRef, LoadResult, OrderItem

VGSubset = Literal["relation", "attribution"]
VG_FILES = {"relation": "visual_genome_relation.json", "attribution": "visual_genome_attribution.json"}


def _vg_item(item: Any, i: int, subset: VGSubset, path: Path, image_dir: Path) -> AROItem:
    where = Where(path, key=str(i))
    x, y = number(item, "bbox_x", where), number(item, "bbox_y", where)
    w, h = number(item, "bbox_w", where), number(item, "bbox_h", where)
    if w <= 0 or h <= 0:
        raise where.error(f"empty box {w} x {h}", "bbox_w" if w <= 0 else "bbox_h")
    if subset == "relation":
        label = text(item, "relation_name", where)
    else:
        attrs = get(item, "attributes", where)
        if not (isinstance(attrs, list) and len(attrs) == 2 and all(isinstance(a, str) and a for a in attrs)):
            raise where.error(f"expected two attribute strings, got {attrs!r}", "attributes")
        label = f"{attrs[0]}_{attrs[1]}"
    ref = ImageRef(resolve(image_dir, text(item, "image_path", where)), box=(x, y, x + w, y + h))
    return AROItem(f"vg_{subset}/{i}", subset, ref, text(item, "true_caption", where),
                   text(item, "false_caption", where), label)


def load_vg(subset: VGSubset, root: str | Path, *, annotation: str | Path | None = None,
            image_dir: str | Path | None = None, check_images: bool = True) -> LoadResult[AROItem]:
    """VG-Relation or VG-Attribution from ARO's folder layout (``root/<file>.json``, ``root/images``)."""
    if subset not in VG_FILES:
        raise ValueError(f"subset must be 'relation' or 'attribution', got {subset!r}")
    base = Path(root)
    path = Path(annotation) if annotation is not None else base / VG_FILES[subset]
    images = Path(image_dir) if image_dir is not None else base / "images"
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError(path, f"expected a JSON list of items, got {type(data).__name__}")
    records: list[AROItem] = []
    missing: list[MissingImage] = []
    for i, item in enumerate(data):
        rec = _vg_item(item, i, subset, path, images)
        if check_images and not rec.image.exists():
            missing.append(MissingImage(rec.image.path, rec.record_id))
        else:
            records.append(rec)
    return LoadResult(path, tuple(records), tuple(missing))


def load_vg_relation(root: str | Path, **kwargs: Any) -> LoadResult[AROItem]:
    return load_vg("relation", root, **kwargs)


def load_vg_attribution(root: str | Path, **kwargs: Any) -> LoadResult[AROItem]:
    return load_vg("attribution", root, **kwargs)


def _karpathy(data: list[Any], path: Path, image_root: Path) -> list[tuple[str, ImageRef, Sequence[str]]]:
    out: list[tuple[str, ImageRef, Sequence[str]]] = []
    for i, ann in enumerate(data):
        where = Where(path, key=str(i))
        image = text(ann, "image", where)
        caps = get(ann, "caption", where)
        caps = [caps] if isinstance(caps, str) else caps
        if not isinstance(caps, list) or not caps:
            raise where.error("expected a caption string or a non-empty list", "caption")
        for j, c in enumerate(caps):
            if not isinstance(c, str) or not c.strip():
                raise where.error(f"caption {j} is empty or not a string", "caption")
        out.append((str(ann.get("image_id", image)), ImageRef(resolve(image_root, image)), caps))
    return out


def load_coco_order(annotation: str | Path, image_root: str | Path, *, seed: int = 0, max_words: int = 30,
                    pos_tagger: PosTagger | None = None, check_images: bool = True
                    ) -> LoadResult[OrderItem]:
    """COCO-Order items, one per caption, negatives drawn from ``default_rng(seed)`` in file order.

    ``annotation`` is a Karpathy-split list or a COCO captions JSON (then ``image_root`` is the image
    folder itself). Record ids are ``<image id>/<caption index>``.
    """
    path = Path(annotation)
    root = Path(image_root)
    data = read_json(path)
    if isinstance(data, dict) and "annotations" in data:
        coco = load_coco_captions(path, root, check_images=False)
        entries: list[tuple[str, ImageRef, Sequence[str]]] = [
            (r.image_id, r.image, r.captions) for r in coco.records]
    elif isinstance(data, list):
        entries = _karpathy(data, path, root)
    else:
        raise DataError(path, "expected a Karpathy-split list or a COCO captions object")
    rng = np.random.default_rng(seed)
    records: list[OrderItem] = []
    missing: list[MissingImage] = []
    for image_id, ref, caps in entries:
        present = not check_images or ref.exists()
        for j, cap in enumerate(caps):
            record_id = f"{image_id}/{j}"
            if not present:
                missing.append(MissingImage(ref.path, record_id))
                continue
            negs, names = order_negatives(cap, rng, pos_tagger=pos_tagger, max_words=max_words)
            records.append(OrderItem(record_id, ref, pre_caption(cap, max_words), negs, names))
    return LoadResult(path, tuple(records), tuple(missing))
