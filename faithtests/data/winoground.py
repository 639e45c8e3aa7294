"""Winoground (Thrush et al. 2022): ``examples.jsonl`` with images in ``images/<image_k>.png``.

Each line: ``{id, image_0, image_1, caption_0, caption_1, tag, secondary_tag, num_main_preds,
collapsed_tag}``; caption_k describes image_k. ``secondary_tag`` may be empty. An example with either
image absent is listed in ``missing`` once per absent image.
"""

from __future__ import annotations

from pathlib import Path

from faithtests.data._validate import Where, integer, read_jsonl, text
from faithtests.data.load_errors import MissingImage
from faithtests.data.loaded import ImageRef, LoadResult, WinogroundItem


def load_winoground(
    root: str | Path,
    *,
    examples: str | Path | None = None,
    image_dir: str | Path | None = None,
    image_ext: str = ".png",
    check_images: bool = True,
) -> LoadResult[WinogroundItem]:
    """All examples of ``root/examples.jsonl``; record ids are the examples' ``id``."""
    base = Path(root)
    path = Path(examples) if examples is not None else base / "examples.jsonl"
    images = Path(image_dir) if image_dir is not None else base / "images"
    records: list[WinogroundItem] = []
    missing: list[MissingImage] = []
    for line, obj in read_jsonl(path):
        where = Where(path, line=line)
        record_id = str(integer(obj, "id", where))
        refs = [ImageRef(images / f"{text(obj, f'image_{k}', where)}{image_ext}") for k in (0, 1)]
        item = WinogroundItem(
            record_id=record_id,
            image_0=refs[0],
            image_1=refs[1],
            caption_0=text(obj, "caption_0", where),
            caption_1=text(obj, "caption_1", where),
            tag=text(obj, "tag", where),
            secondary_tag=text(obj, "secondary_tag", where, allow_empty=True),
            num_main_preds=integer(obj, "num_main_preds", where),
            collapsed_tag=text(obj, "collapsed_tag", where),
        )
        absent = [r for r in refs if check_images and not r.exists()]
        if absent:
            missing.extend(MissingImage(r.path, record_id) for r in absent)
        else:
            records.append(item)
    return LoadResult(path, tuple(records), tuple(missing))
