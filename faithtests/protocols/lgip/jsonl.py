"""LGIP's released perturbation JSONL (App. A.2 "Output fields"; ``make_perturb_with_fliptypes.py``).

One JSON object per line::

    {"image_path": "...", "orig_captions": [c0, c1, ...],
     "same_caps": {"0": [...], ...}, "diff_caps": {"0": [...], ...},
     "diff_caps_color": {"0": [...]}, "diff_caps_number": {...}, "diff_caps_object": {...},
     "combined_caps": {"0": [{"text", "combined_type": "para+color", "intermediate_para"}]}}

Dicts are keyed by the caption index as a string. ``diff_caps[i]`` holds strings or structured items
``{"text", "flip_type"}``; the ``diff_caps_<type>`` fields (any suffix) type the string form. Every flip
appears once, typed by its structured label or else by the first ``diff_caps_<type>`` list holding it
(color, number, object, then other suffixes alphabetically); an untyped flip has type None. The public
evaluation script reads both ``diff_caps`` and the typed lists and so counts each typed flip twice
(once as type "all"); we count it once.

A missing index key means no perturbations for that caption (as the public code's ``.get``); a key
that is not a caption index, a typed flip absent from ``diff_caps``, an empty string or a wrong type
is a :class:`DataError` naming file, line and field. Relative ``image_path``s resolve against
``image_root`` (default: the JSONL's folder). Blank lines are skipped, as in the public code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faithtests.data._validate import Where, read_jsonl, resolve, text, text_list
from faithtests.data.load_errors import MissingImage
from faithtests.data.loaded import ImageRef, LoadResult
from faithtests.protocols.lgip.records import LGIPCaption, LGIPFlip, LGIPRecord

_TYPE_ORDER = ("color", "number", "object")


def _by_index(obj: dict[str, Any], field: str, n: int, where: Where) -> dict[int, Any]:
    """The dict ``field`` keyed by caption index; absent field -> {}."""
    if field not in obj:
        return {}
    value = obj[field]
    if not isinstance(value, dict):
        raise where.error(f"expected an object keyed by caption index, got {type(value).__name__}", field)
    out: dict[int, Any] = {}
    for key, item in value.items():
        if not key.isdigit() or int(key) >= n:
            raise where.error(f"key {key!r} is not a caption index (0..{n - 1})", field)
        out[int(key)] = item
    return out


def _structured(items: list[Any], field: str, where: Where, type_key: str) -> list[LGIPFlip]:
    out = []
    for j, item in enumerate(items):
        if not isinstance(item, dict):
            raise where.error(f"item {j}: expected an object", field)
        txt = text(item, "text", Where(where.path, where.line, f"{field}[{j}]"))
        raw_type = item.get(type_key)
        if raw_type is not None and not isinstance(raw_type, str):
            raise where.error(f"item {j}: {type_key} must be a string", field)
        flip_type = raw_type.split("+", 1)[-1] if raw_type else None
        para = item.get("intermediate_para")
        if para is not None and not isinstance(para, str):
            raise where.error(f"item {j}: intermediate_para must be a string", field)
        out.append(LGIPFlip(txt, flip_type, para))
    return out


def _flips(obj: dict[str, Any], idx: int, n: int, where: Where) -> tuple[LGIPFlip, ...]:
    typed_fields = sorted((k for k in obj if k.startswith("diff_caps_")),
                          key=lambda k: (_TYPE_ORDER.index(k[10:]) if k[10:] in _TYPE_ORDER else 99, k))
    typed: list[tuple[str, tuple[str, ...]]] = []
    for field in typed_fields:
        items = _by_index(obj, field, n, where).get(idx, [])
        typed.append((field[10:], text_list(items, f"{field}[{idx}]", where)))
    raw = _by_index(obj, "diff_caps", n, where).get(idx, [])
    if not isinstance(raw, list):
        raise where.error("expected a list", f"diff_caps[{idx}]")
    if raw and all(isinstance(x, dict) for x in raw):
        return tuple(_structured(raw, f"diff_caps[{idx}]", where, "flip_type"))
    texts = text_list(raw, f"diff_caps[{idx}]", where)
    label: dict[str, str] = {}
    for flip_type, items in typed:
        for t in items:
            label.setdefault(t, flip_type)
            if "diff_caps" in obj and t not in texts:
                raise where.error(f"flip {t!r} is missing from diff_caps[{idx}]", f"diff_caps_{flip_type}")
    if "diff_caps" not in obj:  # only typed lists: their union, in type order
        texts = tuple(dict.fromkeys(t for _, items in typed for t in items))
    return tuple(LGIPFlip(t, label.get(t)) for t in texts)


def _record(obj: dict[str, Any], line: int, path: Path, root: Path) -> tuple[LGIPRecord, ImageRef]:
    where = Where(path, line=line)
    image_path = text(obj, "image_path", where)
    record_id = str(obj.get("image_id", obj.get("id", f"line{line}")))
    if "orig_captions" not in obj:
        raise where.error("missing", "orig_captions")
    captions = text_list(obj["orig_captions"], "orig_captions", where)
    if not captions:
        raise where.error("no captions", "orig_captions")
    n = len(captions)
    same = _by_index(obj, "same_caps", n, where)
    combined = _by_index(obj, "combined_caps", n, where)
    out = []
    for i, cap in enumerate(captions):
        paras = text_list(same.get(i, []), f"same_caps[{i}]", where)
        comb_raw = combined.get(i, [])
        if not isinstance(comb_raw, list):
            raise where.error("expected a list", f"combined_caps[{i}]")
        comb = _structured(comb_raw, f"combined_caps[{i}]", where, "combined_type")
        out.append(LGIPCaption(i, cap, paras, _flips(obj, i, n, where), tuple(comb)))
    ref = ImageRef(resolve(root, image_path))
    return LGIPRecord(record_id, ref, tuple(out)), ref


def load_lgip_jsonl(path: str | Path, image_root: str | Path | None = None, *, check_images: bool = True
                    ) -> LoadResult[LGIPRecord]:
    """All records of an LGIP JSONL; records whose image is absent go to ``missing``."""
    p = Path(path)
    root = Path(image_root) if image_root is not None else p.parent
    records: list[LGIPRecord] = []
    missing: list[MissingImage] = []
    for line, obj in read_jsonl(p):
        rec, ref = _record(obj, line, p, root)
        if check_images and not ref.exists():
            missing.append(MissingImage(ref.path, rec.record_id))
        else:
            records.append(rec)
    return LoadResult(p, tuple(records), tuple(missing))
