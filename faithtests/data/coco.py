"""COCO captions JSON (``captions_val2017.json``): images with their human captions.

Format: ``{"images": [{"id", "file_name", ...}], "annotations": [{"id", "image_id", "caption"}]}``.
Images keep file order, captions keep annotation order. An image without captions, a caption for an
unknown image, a duplicate image id, or an empty caption is a :class:`DataError` naming the key
(``images[3]``, ``annotations[17]``) and field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from faithtests.data._validate import Where, get, read_json, text
from faithtests.data.load_errors import DataError, MissingImage
from faithtests.data.loaded import CaptionedImage, ImageRef, LoadResult


def _id(obj: dict[str, Any], field: str, where: Where) -> str:
    value = get(obj, field, where)
    if isinstance(value, bool) or not isinstance(value, int | str) or value == "":
        raise where.error(f"expected an integer or string id, got {value!r}", field)
    return str(value)


def default_image_dir(annotations: Path) -> Path:
    """``root/annotations/captions_<split>.json`` -> ``root/<split>`` (the COCO layout)."""
    m = re.fullmatch(r"captions_(\w+)\.json", annotations.name)
    if m is None:
        raise DataError(annotations, "cannot infer the image folder from the file name; pass image_dir")
    return annotations.resolve().parent.parent / m.group(1)


def load_coco_captions(annotations: str | Path, image_dir: str | Path | None = None, *,
                       check_images: bool = True) -> LoadResult[CaptionedImage]:
    """Images with their captions; images absent from ``image_dir`` are listed in ``missing``.

    ``image_dir`` defaults to the COCO layout (:func:`default_image_dir`). With ``check_images=False``
    no file is looked at (caption-only use) and ``missing`` is empty.
    """
    path = Path(annotations)
    root = Path(image_dir) if image_dir is not None else default_image_dir(path)
    data = read_json(path)
    top = Where(path)
    if not isinstance(data, dict):
        raise top.error("expected a JSON object with 'images' and 'annotations'")
    images = get(data, "images", top)
    anns = get(data, "annotations", top)
    if not isinstance(images, list):
        raise top.error("expected a list", "images")
    if not isinstance(anns, list):
        raise top.error("expected a list", "annotations")

    order: list[str] = []
    files: dict[str, str] = {}
    for i, im in enumerate(images):
        where = Where(path, key=f"images[{i}]")
        image_id = _id(im, "id", where)
        if image_id in files:
            raise where.error(f"duplicate image id {image_id}", "id")
        files[image_id] = text(im, "file_name", where)
        order.append(image_id)

    caps: dict[str, list[tuple[str, str]]] = {i: [] for i in order}
    for j, ann in enumerate(anns):
        where = Where(path, key=f"annotations[{j}]")
        image_id = _id(ann, "image_id", where)
        if image_id not in caps:
            raise where.error(f"caption for unknown image id {image_id}", "image_id")
        caption = text(ann, "caption", where)
        caps[image_id].append((_id(ann, "id", where), caption.strip()))

    records: list[CaptionedImage] = []
    missing: list[MissingImage] = []
    for i, image_id in enumerate(order):
        if not caps[image_id]:
            raise Where(path, key=f"images[{i}]").error(f"image {image_id} has no caption", "id")
        ref = ImageRef(root / files[image_id])
        if check_images and not ref.exists():
            missing.append(MissingImage(ref.path, image_id))
            continue
        records.append(CaptionedImage(
            image_id=image_id,
            image=ref,
            captions=tuple(c for _, c in caps[image_id]),
            caption_ids=tuple(cid for cid, _ in caps[image_id]),
        ))
    return LoadResult(path, tuple(records), tuple(missing))


def load_coco_dir(root: str | Path, split: str = "val2017", *, check_images: bool = True
                  ) -> LoadResult[CaptionedImage]:
    """``root/annotations/captions_<split>.json`` with images in ``root/<split>`` (e.g. COCO-MINI)."""
    base = Path(root)
    return load_coco_captions(base / "annotations" / f"captions_{split}.json", base / split,
                              check_images=check_images)
