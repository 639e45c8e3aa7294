"""SugarCrepe splits (Hsieh et al. 2023): ``{index: {filename, caption, negative_caption}}`` per split file.

The seven splits are ``add_att, add_obj, replace_att, replace_obj, replace_rel, swap_att, swap_obj``;
``filename`` is a COCO val2017 file name. Items whose image is absent from ``image_dir`` are listed in
``missing`` (COCO-MINI holds only some of them).
"""

from __future__ import annotations

from pathlib import Path

from faithtests.data._validate import Where, read_json, text
from faithtests.data.load_errors import DataError, MissingImage
from faithtests.data.loaded import ImageRef, LoadResult, SugarCrepeItem

SUGARCREPE_SPLITS: tuple[str, ...] = ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel",
                                      "swap_att", "swap_obj")


def load_sugarcrepe_split(path: str | Path, image_dir: str | Path, *, check_images: bool = True
                          ) -> LoadResult[SugarCrepeItem]:
    """One split file; the split name is the file stem; record ids are ``<split>/<index>``."""
    p = Path(path)
    split = p.stem
    data = read_json(p)
    if not isinstance(data, dict):
        raise DataError(p, f"expected an object keyed by item index, got {type(data).__name__}")
    records: list[SugarCrepeItem] = []
    missing: list[MissingImage] = []
    for key, item in data.items():
        where = Where(p, key=key)
        record_id = f"{split}/{key}"
        ref = ImageRef(Path(image_dir) / text(item, "filename", where))
        rec = SugarCrepeItem(record_id, split, ref, text(item, "caption", where),
                             text(item, "negative_caption", where))
        if check_images and not ref.exists():
            missing.append(MissingImage(ref.path, record_id))
        else:
            records.append(rec)
    return LoadResult(p, tuple(records), tuple(missing))


def load_sugarcrepe(root: str | Path, image_dir: str | Path, *, splits: tuple[str, ...] | None = None,
                    check_images: bool = True) -> LoadResult[SugarCrepeItem]:
    """Several splits from the folder ``root`` (default: every ``*.json`` there, sorted by name).

    A requested split whose file is absent is a :class:`DataError`.
    """
    base = Path(root)
    if splits is None:
        files = sorted(base.glob("*.json"))
        if not files:
            raise DataError(base, "no SugarCrepe split files (*.json)")
    else:
        files = [base / f"{s}.json" for s in splits]
    records: list[SugarCrepeItem] = []
    missing: list[MissingImage] = []
    for f in files:
        part = load_sugarcrepe_split(f, image_dir, check_images=check_images)
        records.extend(part.records)
        missing.extend(part.missing)
    return LoadResult(base, tuple(records), tuple(missing))
