"""IMAVB records from the reference world and from a local copy of the public dataset.

Public format (``ngqtrung/IMAVB``): four splits ``standard_vision``, ``misleading_vision``,
``standard_audio``, ``misleading_audio``; rows ``video_id, question, option_a … option_f,
correct_answer, video`` (optional: ``question_type`` / ``category``, ``misleading_category`` /
``subcategory``). :func:`load_imavb` accepts what a user would download or save:

* a folder with one file per split: ``{split}.jsonl``, ``{split}.json``, ``{split}.parquet``, or any of
  these under ``{split}/`` or as ``data/{split}-*.parquet`` (the hub's layout);
* a ``datasets`` ``save_to_disk`` folder (``dataset_dict.json`` and ``{split}/data-*.arrow`` beside the
  metadata ``{split}/state.json`` and ``{split}/dataset_info.json``, which are not rows and are skipped);
* one JSON / JSONL / parquet file whose rows carry a ``split`` field, or a JSON object keyed by split.

``video`` is a path (absolute, or relative to the folder, its ``videos/`` or the split's folder) or a
``datasets`` Video/dict value with a ``path``. Bad rows are counted by kind and never silently dropped:
``missing field:<name>`` (an empty option counts as missing), ``correct_answer outside A-F``,
``answer does not fit split`` (a standard answer must be A–D, misleading vision E, misleading audio F),
``duplicate video_id in split``, ``missing video``, ``unreadable video``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

from faithtests.data.invalid import CountsInvalid
from faithtests.protocols.imavb.records import LETTERS, SPLITS, PremiseRecord, Split
from faithtests.protocols.imavb.video import DEFAULT_FRAMES, probe_video, sample_frames

REQUIRED = ("video_id", "question", *(f"option_{x.lower()}" for x in LETTERS), "correct_answer", "video")
_ANSWER = re.compile(r"^\(?([A-Fa-f])\)?(?:[.:)\s].*)?$", re.DOTALL)
CATEGORY_KEYS = ("question_type", "category", "question_category")
SUBCATEGORY_KEYS = ("misleading_category", "misleading_subcategory", "subcategory", "misleading_type")


@dataclass
class Loaded(CountsInvalid):
    """Records that passed validation, and what did not, by kind (``examples`` name the rows)."""

    records: list[PremiseRecord] = field(default_factory=list)
    invalid: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    total: int = 0


# ------------------------------------------------------------------------------------------ world
def world_records(n: int, seed: int) -> list[PremiseRecord]:
    """Standard and misleading vision variants of ``n`` reference-world stimuli (IMAVB §2.3 shape).

    The world has no audio: its items are the two vision splits only (``faithtests.world.premise``).
    """
    from faithtests.world.premise import premise_items

    out: list[PremiseRecord] = []
    for item in premise_items(n, seed):
        media = _world_media(item)
        for q in (item.standard, item.misleading):
            out.append(
                PremiseRecord(
                    item_id=q.question_id,
                    stimulus_id=q.stimulus_id,
                    split=cast(Split, q.variant),
                    question=q.question,
                    options=tuple(q.options),
                    correct_answer=q.correct_answer,
                    category=q.category,
                    subcategory=q.subcategory,
                    source="world",
                    media=media,
                )
            )
    return out


def _world_media(item: Any) -> Any:
    def load() -> tuple[Any, ...]:
        return (item.image(),)

    return load


# ------------------------------------------------------------------------------------------ public
def normalize_answer(value: object) -> str | None:
    """ "A", "a", "(A)", "A." or "A. text" → "A"; anything else (e.g. "G", "Apple", 3) → None."""
    if not isinstance(value, str):
        return None
    m = _ANSWER.match(value.strip())
    return m.group(1).upper() if m else None


def _fits_split(split: str, letter: str) -> bool:
    if split.startswith("standard"):
        return letter in LETTERS[:4]
    return letter == ("E" if split == "misleading_vision" else "F")


def _video_path(value: object, root: Path, split: str) -> Path | None:
    if isinstance(value, Mapping):
        value = value.get("path") or value.get("filename")
    if not isinstance(value, str) or not value.strip():
        return None
    p = Path(value)
    if p.is_absolute():
        return p
    for base in (root, root / "videos", root / "video", root / split):
        if (base / p).is_file():
            return base / p
    return root / p


def _first(row: Mapping[str, Any], keys: Iterable[str]) -> str | None:
    for k in keys:
        v = row.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


def validate_rows(
    rows: Iterable[tuple[str, Mapping[str, Any]]],
    root: Path,
    *,
    n_frames: int = DEFAULT_FRAMES,
    check_videos: bool = True,
) -> Loaded:
    """(split, row) pairs → records, counting every rejected row by kind (module doc)."""
    out = Loaded()
    seen: set[tuple[str, str]] = set()
    for i, (split, row) in enumerate(rows):
        out.total += 1
        where = f"{split}[{i}] video_id={row.get('video_id')!r}"
        if split not in SPLITS:
            out.reject("unknown split", f"{where}: split {split!r}")
            continue
        missing = [
            k for k in REQUIRED if not (isinstance(row.get(k), str | Mapping) and str(row.get(k)).strip())
        ]
        if missing:
            out.reject(f"missing field:{missing[0]}", where)
            continue
        letter = normalize_answer(row["correct_answer"])
        if letter is None:
            out.reject("correct_answer outside A-F", f"{where}: {row['correct_answer']!r}")
            continue
        if not _fits_split(split, letter):
            out.reject("answer does not fit split", f"{where}: {letter}")
            continue
        vid = str(row["video_id"])
        if (split, vid) in seen:
            out.reject("duplicate video_id in split", where)
            continue
        path = _video_path(row["video"], root, split)
        reason = "missing video" if path is None else (probe_video(path) if check_videos else None)
        if reason is not None:
            out.reject(reason.split(":")[0], f"{where}: {reason} ({path})")
            continue
        seen.add((split, vid))
        assert path is not None
        out.records.append(
            PremiseRecord(
                item_id=f"{vid}/{split}",
                stimulus_id=vid,
                split=split,
                question=str(row["question"]),
                options=tuple(str(row[f"option_{x.lower()}"]) for x in LETTERS),
                correct_answer=letter,
                category=_first(row, CATEGORY_KEYS),
                subcategory=_first(row, SUBCATEGORY_KEYS) if split.startswith("misleading") else None,
                source="imavb",
                media=partial(sample_frames, path, n_frames),
            )
        )
    return out


def _read_table(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if suffix == ".json":
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "data" in data and isinstance(data["data"], list):
            data = data["data"]
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of rows (or an object keyed by split)")
        return [dict(r) for r in data]
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return cast(list[dict[str, Any]], pq.read_table(path).to_pylist())
    if suffix == ".arrow":
        import pyarrow as pa

        with pa.memory_map(str(path)) as src:
            try:
                table = pa.ipc.open_stream(src).read_all()
            except pa.ArrowInvalid:
                table = pa.ipc.open_file(src).read_all()
        return cast(list[dict[str, Any]], table.to_pylist())
    raise ValueError(f"{path}: unsupported IMAVB file type {suffix!r} (json, jsonl, parquet, arrow)")


#: ``datasets`` metadata files that sit beside the data files of a save_to_disk folder (not rows).
DATASETS_METADATA = frozenset({"state.json", "dataset_info.json", "dataset_dict.json"})


def _is_data_file(p: Path) -> bool:
    """A rows file inside a split folder: ``data-*.arrow`` (save_to_disk), parquet, jsonl, or a JSON file
    that is not ``datasets`` metadata."""
    if not p.is_file() or p.name in DATASETS_METADATA:
        return False
    if p.suffix == ".arrow":
        return p.name.startswith("data-")
    return p.suffix in (".parquet", ".jsonl", ".json")


def _split_files(root: Path, split: str) -> list[Path]:
    found: list[Path] = []
    for ext in (".jsonl", ".json", ".parquet"):
        if (root / f"{split}{ext}").is_file():
            found.append(root / f"{split}{ext}")
    sub = root / split
    if sub.is_dir():
        found += sorted(p for p in sub.iterdir() if _is_data_file(p))
    if (root / "data").is_dir():
        found += sorted((root / "data").glob(f"{split}-*.parquet")) + sorted(
            (root / "data").glob(f"{split}.*")
        )
    return found


def iter_rows(path: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(split, row) of every row under ``path`` in any supported layout (module doc)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"IMAVB data not found: {p}")
    if p.is_file():
        if p.suffix == ".json":
            data = json.loads(p.read_text())
            if isinstance(data, dict) and set(data) & set(SPLITS):
                for split, rows in data.items():
                    for r in rows:
                        yield str(split), dict(r)
                return
        for r in _read_table(p):
            yield str(r.get("split", "")), r
        return
    files = {s: _split_files(p, s) for s in SPLITS}
    if not any(files.values()):
        raise FileNotFoundError(
            f"{p}: no IMAVB split files found (expected {SPLITS[0]}.jsonl/.json/.parquet, "
            f"data/{SPLITS[0]}-*.parquet or a datasets save_to_disk folder with dataset_dict.json)"
        )
    for split in SPLITS:
        for f in files[split]:
            for r in _read_table(f):
                yield split, r


def load_imavb(path: str | Path, *, n_frames: int = DEFAULT_FRAMES, check_videos: bool = True) -> Loaded:
    """Validated IMAVB records from a local copy (module doc); video roots resolve against ``path``'s
    folder."""
    p = Path(path)
    root = p if p.is_dir() else p.parent
    return validate_rows(iter_rows(p), root, n_frames=n_frames, check_videos=check_videos)
