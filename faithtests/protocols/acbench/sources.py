"""AC-Bench records from the reference world, an AC-Bench-style JSONL, and EmoSet annotations (§3, App. C).

* :func:`world_records`: every mood item of :mod:`.stimuli` gives its aligned record and one record per
  conflict subset (six per image, App. C.3's six variants; the world's subset names map to the paper's
  through ``records.WORLD_SUBSETS``).
* :func:`load_acbench`: one JSONL file (or a folder of them), one instance per line. No public AC-Bench
  release exists, so the fields are what its annotation tool exports (Fig. 10–11: ``id, description,
  y_txt, type``) plus the image: ``image`` / ``image_path`` (absolute, or relative to the JSONL's
  folder), ``image_emotion`` / ``emotion`` / ``y_img``, ``description``, ``description_emotion`` /
  ``text_emotion`` / ``y_txt``, ``subset`` / ``type``. Subsets may be the paper's short names (S-Adj),
  its table names (Subj-Adj, Obj-Beha), the generation prompt's prefixes (SUBJ_ADJ, OBJ_BEHAVIOR) or the
  world's names (subjective_adjacent); an aligned row may omit y_txt (aligned means y_txt = y_img).
* :func:`load_emoset`: EmoSet annotation JSON (one file holding an object or a list of objects, or a
  folder searched recursively; an EmoSet root's ``annotation/`` folder is searched when present) →
  ``image-only`` records carrying the attributes (brightness, colorfulness, scene, object,
  facial_expression, human_action). The image is an explicit path field, or ``image_id`` (else the
  JSON file's stem) looked up as ``image/<emotion>/<id>.<ext>`` (EmoSet's layout) or beside the JSON.

Emotion labels match the eight labels case-insensitively after stripping; nothing else is guessed
("joy" is not "amusement"). Bad rows are counted by kind, never dropped silently (up to 5 examples
each): ``malformed line`` (bad JSON, not an object), ``missing field:<name>``, ``unknown emotion
label``, ``unknown subset``, ``empty description``, ``description on image-only``, ``subset/label
mismatch`` (an aligned row with y_txt ≠ y_img or a conflict row with y_txt = y_img), ``missing image``,
``duplicate id``. Image files are checked for existence here; decoding happens when a record's image is
loaded (``AcRecord.load_image`` raises ``ImageLoadError`` naming the path), so a corrupt file is the
runner's to count: opening every image at load time would decode the whole benchmark twice.
A missing top-level path (or a folder without data files) raises ``FileNotFoundError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from faithtests.data import invalid
from faithtests.data.invalid import jsonl_files
from faithtests.data.loaded import ImageRef
from faithtests.protocols.acbench.records import EMOTIONS, WORLD_SUBSETS, AcRecord, Subset
from faithtests.protocols.acbench.stimuli import mood_items

IMAGE_KEYS = ("image", "image_path", "img", "img_path", "path", "file_name", "filename")
IMAGE_EMOTION_KEYS = ("image_emotion", "emotion", "y_img", "true_emotion")
DESCRIPTION_KEYS = ("description", "desc", "text")
TEXT_EMOTION_KEYS = ("description_emotion", "text_emotion", "y_txt", "target_emotion")
SUBSET_KEYS = ("subset", "type", "setting")
ID_KEYS = ("id", "item_id", "sample_id")
STIMULUS_KEYS = ("image_id", "stimulus_id")
EMOSET_ATTRIBUTES = ("brightness", "colorfulness", "scene", "object", "facial_expression", "human_action")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp")

_SUBSET_ALIASES: dict[Subset, tuple[str, ...]] = {
    "aligned": ("aligned", "align", "aln", "ea", "emotionaligned", "emotionalignment"),
    "S-Adj": ("sadj", "subjadj", "subjectiveadjacent", "subjectadjacent"),
    "S-Opp": ("sopp", "subjopp", "subjectiveopposite", "subjectopposite"),
    "O-Obj": ("oobj", "objobj", "objobject", "objectiveobject", "objectobject"),
    "O-Attr": ("oattr", "oatt", "objattr", "objattribute", "objectiveattribute", "objectattribute"),
    "O-Beh": ("obeh", "objbeh", "objbeha", "objbehavior", "objectivebehavior", "objectbehavior"),
    "image-only": ("imageonly",),
}
_SUBSETS: dict[str, Subset] = {alias: s for s, aliases in _SUBSET_ALIASES.items() for alias in aliases}


#: What the AC-Bench loaders return (the shared loader result, of records).
Loaded = invalid.Loaded[AcRecord]


# ------------------------------------------------------------------------------------------ world
def world_records(n: int, seed: int) -> list[AcRecord]:
    """Six records per reference-world mood item (aligned + five conflicts), item by item."""
    out: list[AcRecord] = []
    for item in mood_items(n, seed):
        for d in item.descriptions:
            out.append(
                AcRecord(
                    item_id=f"{item.item_id}/{d.subset}",
                    stimulus_id=item.item_id,
                    subset=WORLD_SUBSETS[d.subset],
                    image_emotion=item.emotion,
                    text_emotion=d.emotion,
                    description=d.text,
                    image=item.item_id,
                    source="world",
                    loader=item.image,
                )
            )
    return out


# ------------------------------------------------------------------------------------------ fields
def normalize_emotion(value: object) -> str | None:
    """One of the eight labels, matched case-insensitively after stripping; anything else → None."""
    if not isinstance(value, str):
        return None
    v = value.strip().lower()
    return v if v in EMOTIONS else None


def normalize_subset(value: object) -> Subset | None:
    """The paper's subset name of an alias ("Subj-Adj", "SUBJ_ADJ", "subjective_adjacent" → "S-Adj";
    case, separators and the behaviour/behavior spelling do not matter), else None."""
    if not isinstance(value, str):
        return None
    return _SUBSETS.get(re.sub(r"[^a-z]", "", value.lower()).replace("behaviour", "behavior"))


def _get(row: Mapping[str, Any], keys: Iterable[str]) -> tuple[str | None, Any]:
    """(the first key of ``keys`` present in ``row`` with a non-null value, its value)."""
    for k in keys:
        if row.get(k) is not None:
            return k, row[k]
    return None, None


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


# ------------------------------------------------------------------------------------------ AC-Bench
def _jsonl_files(path: Path) -> list[Path]:
    return jsonl_files(path, "AC-Bench")


def _iter_lines(files: Iterable[Path]) -> Iterator[tuple[str, str]]:
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise OSError(f"cannot read AC-Bench file {f}: {e}") from e
        for i, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                yield f"{f.name}:{i}", line


def _resolve(value: str, base: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


class _Rejected(Exception):
    """A row is invalid: ``kind`` is what the loader counts, ``detail`` the example naming the row."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(kind)
        self.kind, self.detail = kind, detail


def _subset(row: Mapping[str, Any], where: str) -> Subset:
    key, value = _get(row, SUBSET_KEYS)
    if key is None:
        raise _Rejected("missing field:subset", where)
    subset = normalize_subset(value)
    if subset is None:
        raise _Rejected("unknown subset", f"{where}: {key}={value!r}")
    return subset


def _image_emotion(row: Mapping[str, Any], where: str) -> tuple[str, str]:
    """(the image field's text, y_img)."""
    key, image_value = _get(row, IMAGE_KEYS)
    if key is None or not str(image_value).strip():
        raise _Rejected("missing field:image", where)
    if not isinstance(image_value, str):  # a path is text: an object or a list is no file name
        raise _Rejected("bad field:image", f"{where}: {key}={image_value!r:.60}")
    key, value = _get(row, IMAGE_EMOTION_KEYS)
    if key is None:
        raise _Rejected("missing field:image_emotion", where)
    y_img = normalize_emotion(value)
    if y_img is None:
        raise _Rejected("unknown emotion label", f"{where}: {key}={value!r}")
    return str(image_value).strip(), y_img


def _described(row: Mapping[str, Any], where: str, subset: Subset,
               y_img: str) -> tuple[str | None, str | None]:
    """(description, y_txt): both None on an image-only row; an aligned row's missing y_txt is y_img."""
    _, desc_value = _get(row, DESCRIPTION_KEYS)
    key, y_txt_value = _get(row, TEXT_EMOTION_KEYS)
    if subset == "image-only":
        if desc_value is not None and str(desc_value).strip():
            raise _Rejected("description on image-only", where)
        return None, None
    if desc_value is None:
        raise _Rejected("missing field:description", where)
    if not isinstance(desc_value, str) or not desc_value.strip():
        raise _Rejected("empty description", where)
    if key is None and subset != "aligned":
        raise _Rejected("missing field:description_emotion", where)
    y_txt = y_img if key is None else normalize_emotion(y_txt_value)
    if y_txt is None:
        raise _Rejected("unknown emotion label", f"{where}: {key}={y_txt_value!r}")
    if (subset == "aligned") != (y_txt == y_img):
        raise _Rejected("subset/label mismatch", f"{where}: {subset} with y_img={y_img}, y_txt={y_txt}")
    return desc_value.strip(), y_txt


def _acbench_record(row: Mapping[str, Any], where: str, base: Path, out: Loaded) -> AcRecord | None:
    """The record of one JSONL object, or None after counting why it is invalid (the first failed check,
    in the order subset, image, y_img, description, y_txt, image file)."""
    try:
        subset = _subset(row, where)
        image, y_img = _image_emotion(row, where)
        description, y_txt = _described(row, where, subset, y_img)
        path = _resolve(image, base)
        try:
            found = path.is_file()
        except OSError as exc:  # a name too long for the file system, say: no file there either
            raise _Rejected("missing image", f"{where}: {path} ({exc.strerror or exc})") from None
        if not found:
            raise _Rejected("missing image", f"{where}: {path}")
    except _Rejected as e:
        out.reject(e.kind, e.detail)
        return None
    _, item_id = _get(row, ID_KEYS)
    _, stimulus = _get(row, STIMULUS_KEYS)
    return AcRecord(
        item_id=str(item_id) if item_id is not None else where,
        stimulus_id=str(stimulus) if stimulus is not None else str(path),
        subset=subset,
        image_emotion=y_img,
        text_emotion=y_txt,
        description=description,
        image=str(path),
        source="acbench",
        loader=ImageRef(path).load,
    )


def load_acbench(path: str | Path) -> Loaded:
    """Validated records of an AC-Bench-style JSONL file, or of every ``*.jsonl`` in a folder (module
    doc); relative image paths resolve against the folder of the JSONL file they appear in."""
    out = Loaded()
    seen: set[str] = set()
    for f in _jsonl_files(Path(path)):
        for where, line in _iter_lines([f]):
            out.total += 1
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                out.reject("malformed line", f"{where}: {e.msg}")
                continue
            if not isinstance(row, dict):
                out.reject("malformed line", f"{where}: a JSON {type(row).__name__}, not an object")
                continue
            rec = _acbench_record(row, where, f.parent, out)
            if rec is None:
                continue
            if rec.item_id in seen:
                out.reject("duplicate id", f"{where}: {rec.item_id}")
                continue
            seen.add(rec.item_id)
            out.records.append(rec)
    return out


# ------------------------------------------------------------------------------------------ EmoSet
def _emoset_files(path: Path) -> list[Path]:
    if not path.exists():
        raise FileNotFoundError(f"EmoSet annotations not found: {path}")
    if path.is_file():
        return [path]
    folder = path / "annotation" if (path / "annotation").is_dir() else path
    files = sorted(folder.rglob("*.json"))
    if not files:
        raise FileNotFoundError(f"{path}: no EmoSet annotation *.json files under {folder}")
    return files


def _emoset_image(row: Mapping[str, Any], image_id: str, emotion: str, json_dir: Path) -> Path:
    """The image of one annotation: an explicit path field, else ``image_id`` in EmoSet's layout
    (``<root>/image/<emotion>/<id>.<ext>``) or beside the JSON; returns the first candidate if none
    exists (so the example names a path that was looked for). Relative paths are tried against the
    JSON's folder and its two parents (EmoSet's root sits above ``annotation/<emotion>/``)."""
    bases = [json_dir, *json_dir.parents[:2]]
    key, value = _get(row, IMAGE_KEYS)
    if key is not None and str(value).strip():
        p = Path(str(value).strip()).expanduser()
        candidates = [p] if p.is_absolute() else [b / p for b in bases]
    else:
        candidates = [
            b / sub / f"{image_id}{ext}"
            for b in bases
            for sub in (Path("image") / emotion, Path("images") / emotion, Path())
            for ext in IMAGE_SUFFIXES
        ]
    return next((c for c in candidates if c.is_file()), candidates[0])


def load_emoset(path: str | Path) -> Loaded:
    """``image-only`` records from EmoSet annotation JSON (module doc)."""
    p = Path(path)
    out = Loaded()
    seen: set[str] = set()
    for f in _emoset_files(p):
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            out.total += 1
            out.reject("malformed line", f"{f.name}: {e.msg}")
            continue
        except (OSError, UnicodeDecodeError) as e:
            raise OSError(f"cannot read EmoSet file {f}: {e}") from e
        rows = data if isinstance(data, list) else [data]
        for i, row in enumerate(rows):
            out.total += 1
            where = f"{f.name}[{i}]" if isinstance(data, list) else f.name
            if not isinstance(row, dict):
                out.reject("malformed line", f"{where}: a JSON {type(row).__name__}, not an object")
                continue
            if row.get("emotion") is None:
                out.reject("missing field:emotion", where)
                continue
            emotion = normalize_emotion(row["emotion"])
            if emotion is None:
                out.reject("unknown emotion label", f"{where}: emotion={row['emotion']!r}")
                continue
            _, raw_id = _get(row, ("image_id", "id"))
            image_id = str(raw_id) if raw_id is not None else f.stem
            image = _emoset_image(row, image_id, emotion, f.parent)
            if not image.is_file():
                out.reject("missing image", f"{where}: {image}")
                continue
            if image_id in seen:
                out.reject("duplicate id", f"{where}: {image_id}")
                continue
            seen.add(image_id)
            out.records.append(
                AcRecord(
                    item_id=image_id,
                    stimulus_id=image_id,
                    subset="image-only",
                    image_emotion=emotion,
                    text_emotion=None,
                    description=None,
                    image=str(image),
                    source="emoset",
                    attributes=tuple(
                        (k, _text(row[k])) for k in EMOSET_ATTRIBUTES if row.get(k) not in (None, "", [])
                    ),
                    loader=ImageRef(image).load,
                )
            )
    return out
