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
``datasets`` Video/dict value with a ``path``. Bad rows are counted by kind and never silently dropped,
each example naming its file, line (or row) and field: ``missing field:<name>`` (an empty option counts
as missing), ``correct_answer not one letter A-F`` (exactly one of A–F after trimming whitespace: "a
blue screen", "(C)" or "b" are not read as letters), ``answer does not fit split`` (a standard answer
must be A–D, misleading vision E, misleading audio F), ``duplicate video_id in split``, ``missing
video``, ``unreadable video``, and for an audio question a clip without an audio stream ``no_audio``
(every record of a clip carries its soundtrack loader, :func:`.video.load_audio`, 16 kHz mono, and the
``fps`` of its sampled frames; a track that does not decode raises ``ClipLoadError`` when a prompt needs
it, which the runner counts, never replaced by silence). A row's optional ground-truth answer timestamp
(``answer_timestamp`` and the other :data:`TIMESTAMP_KEYS`; "[20s-30s]", "20-30", [20, 30] or
{"start", "end"}) is what A6/A7 trim to; one that cannot be read is counted (``answer_timestamp
unreadable``) and the row kept.

Errors that make the data set unusable are raised, naming the file and line: a JSONL line that is not
JSON or not an object, a JSON row that is not an object, a split file with no rows, and a split present
without its partner (standard without misleading, or the reverse) of the same modality.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

from faithtests.data import invalid
from faithtests.data.av_clip import NO_AUDIO
from faithtests.data.load_errors import read_utf8
from faithtests.protocols.imavb.records import LETTERS, SPLITS, AudioLoader, PremiseRecord, Split, modality
from faithtests.protocols.imavb.stimuli import premise_items
from faithtests.protocols.imavb.video import (
    DEFAULT_FRAMES,
    clip_seconds,
    load_audio,
    probe_audio,
    probe_video,
    sample_frames,
)

REQUIRED = ("video_id", "question", *(f"option_{x.lower()}" for x in LETTERS), "correct_answer", "video")
TIMESTAMP_KEYS = ("answer_timestamp", "gt_timestamp", "timestamp", "answer_time")
_SECONDS = r"(\d+(?:\.\d+)?|\d+:\d{2}(?::\d{2})?)\s*s?"
_SPAN = re.compile(rf"^\[?\s*{_SECONDS}\s*(?:-|–|to|,)\s*{_SECONDS}\s*\]?$")
CATEGORY_KEYS = ("question_type", "category", "question_category")
SUBCATEGORY_KEYS = ("misleading_category", "misleading_subcategory", "subcategory", "misleading_type")


@dataclass
class Loaded(invalid.Loaded[PremiseRecord]):
    """The shared loader result, with the rows read and rejected per split."""

    read_by_split: dict[str, int] = field(default_factory=dict)  # rows read per known split
    rejected_by_split: dict[str, dict[str, int]] = field(default_factory=dict)  # split -> kind -> rows

    def reject_row(self, split: str, kind: str, where: str) -> None:
        """Count an invalid ``kind`` on a row of a known split (coverage leaves out the splits a model
        does not run, and what was counted on their rows)."""
        self.reject(kind, where)
        per = self.rejected_by_split.setdefault(split, {})
        per[kind] = per.get(kind, 0) + 1


# ------------------------------------------------------------------------------------------ world
def world_records(n: int, seed: int) -> list[PremiseRecord]:
    """Standard and misleading vision variants of ``n`` reference-world stimuli (IMAVB §2.3 shape).

    The image world: the two vision splits only (``faithtests.protocols.imavb.stimuli``); the world's
    clips with sound and all four splits are ``audio_stimuli.clip_records``.
    """
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
    """Exactly one letter A–F (surrounding whitespace trimmed) → that letter; anything else → None.
    "a blue screen", "A. text", "(C)", "b", "G" and 3 are not answers: guessing a letter out of them
    would score a malformed row."""
    if not isinstance(value, str):
        return None
    v = value.strip()
    return v if len(v) == 1 and v in LETTERS else None


def _seconds(text: str) -> float:
    parts = [float(x) for x in text.split(":")]
    out = 0.0
    for x in parts:
        out = out * 60.0 + x
    return out


def parse_window(value: object) -> tuple[float, float] | None:
    """A ground-truth answer timestamp → (start, end) seconds: "[20s-30s]", "20-30", "0:20-0:30",
    [20, 30] or {"start": 20, "end": 30}; ``None`` when it cannot be read (or end < start)."""
    start: object
    end: object
    if isinstance(value, Mapping):
        start, end = value.get("start"), value.get("end")
    elif isinstance(value, list | tuple) and len(value) == 2:
        start, end = value
    elif isinstance(value, str):
        m = _SPAN.match(value.strip())
        if m is None:
            return None
        start, end = _seconds(m.group(1)), _seconds(m.group(2))
    else:
        return None
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (start, end)):
        return None
    s, e = float(start), float(end)  # type: ignore[arg-type]
    return (s, e) if 0.0 <= s <= e else None


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


def _clip_problem(path: Path | None, split: str, check_videos: bool) -> tuple[str, str] | None:
    """(invalid kind, reason) of a row's clip: its video (every split) and, for an audio question, its
    soundtrack (``no_audio`` where the file has no audio stream: never silence instead)."""
    if path is None:
        return "missing video", "missing video"
    if not check_videos:
        return None
    reason = probe_video(path)
    if reason is not None:
        return reason.split(":")[0], reason
    if modality(split) == "audio":
        kind = probe_audio(path)
        if kind is not None:
            return kind, f"audio track: {kind}"
    return None


def _fps(path: Path, n_frames: int) -> float | None:
    """Frames per second of the ``n_frames`` sampled uniformly over the clip (its audio spans the same
    time); ``None`` where the container does not give the duration."""
    seconds = clip_seconds(path)
    return n_frames / seconds if seconds else None


def _window_loader(path: Path, n_frames: int) -> Any:
    def load(start: float, end: float) -> tuple[Any, ...]:
        return sample_frames(path, n_frames, (start, end))

    return load


def _timestamp(row: Mapping[str, Any], split: str) -> tuple[str, object] | None:
    for k in (f"{split.split('_')[1]}_answer_timestamp", *TIMESTAMP_KEYS):
        if row.get(k) not in (None, ""):
            return k, row[k]
    return None


#: One row as read: (split, row, where it is: "FILE:LINE" or "FILE row I").
Row = tuple[str, Mapping[str, Any], str]


def _answer_or_problem(row: Mapping[str, Any], split: str, where: str) -> str | tuple[str, str]:
    """The row's answer letter, or (invalid kind, detail) when a field is missing or the answer unusable."""
    missing = [k for k in REQUIRED if not (isinstance(row.get(k), str | Mapping) and str(row.get(k)).strip())]
    if missing:
        return f"missing field:{missing[0]}", f"{where} field {missing[0]}: missing or empty"
    letter = normalize_answer(row["correct_answer"])
    if letter is None:
        return "correct_answer not one letter A-F", f"{where} field correct_answer: {row['correct_answer']!r}"
    if not _fits_split(split, letter):
        return "answer does not fit split", f"{where} field correct_answer: {letter}"
    return letter


def _soundtrack(path: Path, check_videos: bool) -> AudioLoader | None:
    """The clip's soundtrack loader; None for a clip without an audio stream (probed): it is seen as it
    is, frames only, never heard as silence (issue 46: every vision question of a silent clip was counted
    'unreadable audio' for an omni model before, leaving it no record)."""
    return None if check_videos and probe_audio(path) == NO_AUDIO else partial(load_audio, path)


def validate_rows(
    rows: Iterable[Row],
    root: Path,
    *,
    n_frames: int = DEFAULT_FRAMES,
    check_videos: bool = True,
) -> Loaded:
    """(split, row, origin) triples → records, counting every rejected row by kind (module doc); the
    records of a stimulus are kept next to each other (its video decodes once)."""
    out = Loaded()
    seen: set[tuple[str, str]] = set()
    for split, row, origin in rows:
        out.total += 1
        where = f"{origin} (split {split}, video_id {row.get('video_id')!r})"
        if split not in SPLITS:
            out.reject("unknown split", f"{where} field split: {split!r}")
            continue
        out.read_by_split[split] = out.read_by_split.get(split, 0) + 1
        letter = _answer_or_problem(row, split, where)
        if isinstance(letter, tuple):
            out.reject_row(split, *letter)
            continue
        vid = str(row["video_id"])
        if (split, vid) in seen:
            out.reject_row(split, "duplicate video_id in split", f"{where} field video_id")
            continue
        path = _video_path(row["video"], root, split)
        problem = _clip_problem(path, split, check_videos)
        if problem is not None:
            out.reject_row(split, problem[0], f"{where} field video: {problem[1]} ({path})")
            continue
        seen.add((split, vid))
        assert path is not None
        window = None
        ts = _timestamp(row, split)
        if ts is not None:
            window = parse_window(ts[1])
            if window is None:  # the row still runs A1-A5; A6/A7 count it as not run
                out.reject_row(split, "answer_timestamp unreadable (A6/A7 skip the row)",
                               f"{where} field {ts[0]}: {ts[1]!r}")
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
                answer_window=window,
                window_media=_window_loader(path, n_frames),
                audio=_soundtrack(path, check_videos),
                fps=_fps(path, n_frames) if check_videos else None,
            )
        )
    first = {sid: i for i, sid in reversed(list(enumerate(r.stimulus_id for r in out.records)))}
    out.records.sort(key=lambda r: (first[r.stimulus_id], SPLITS.index(r.split)))
    return out


class DataError(ValueError):
    """IMAVB data that cannot be read as rows; the message names the file and line."""


def _objects(path: Path, rows: Iterable[object], where: Any) -> list[tuple[dict[str, Any], str]]:
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise DataError(f"{where(i)}: expected a JSON object (one row), got {type(r).__name__}")
        out.append((r, where(i)))
    return out


def _read_jsonl(path: Path) -> list[tuple[dict[str, Any], str]]:
    out = []
    for n, line in enumerate(read_utf8(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{n}: not JSON ({e.msg} at column {e.colno})") from e
        if not isinstance(row, dict):
            raise DataError(f"{path}:{n}: expected a JSON object (one row), got {type(row).__name__}")
        out.append((row, f"{path}:{n}"))
    return out


def _read_table(path: Path) -> list[tuple[dict[str, Any], str]]:
    """(row, origin) of every row of one file; origin is ``FILE:LINE`` for JSONL, ``FILE row I`` else."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _read_jsonl(path)
    if suffix == ".json":
        data = json.loads(read_utf8(path))
        if isinstance(data, dict) and "data" in data and isinstance(data["data"], list):
            data = data["data"]
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a JSON list of rows (or an object keyed by split)")
        return _objects(path, data, lambda i: f"{path} row {i}")
    if suffix == ".parquet":
        import pyarrow.parquet as pq  # lazy: optional extra (faithtests[imavb])

        rows = cast(list[dict[str, Any]], pq.read_table(path).to_pylist())
        return [(r, f"{path} row {i}") for i, r in enumerate(rows)]
    if suffix == ".arrow":
        import pyarrow as pa  # lazy: optional extra (faithtests[imavb])

        with pa.memory_map(str(path)) as src:
            try:
                table = pa.ipc.open_stream(src).read_all()
            except pa.ArrowInvalid:
                table = pa.ipc.open_file(src).read_all()
        rows = cast(list[dict[str, Any]], table.to_pylist())
        return [(r, f"{path} row {i}") for i, r in enumerate(rows)]
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


def iter_rows(path: str | Path) -> Iterator[Row]:
    """(split, row, origin) of every row under ``path`` in any supported layout (module doc); a split
    file with no rows, and a split without its partner of the same modality, raise :class:`DataError`."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"IMAVB data not found: {p}")
    rows: list[Row] = []
    if p.is_file():
        data = json.loads(read_utf8(p)) if p.suffix == ".json" else None
        if isinstance(data, dict) and set(data) & set(SPLITS):
            for split, items in data.items():
                if not isinstance(items, list) or not items:
                    raise DataError(f"{p} field {split}: split has no rows (expected a non-empty list)")
                rows += [(str(split), r, w)
                         for r, w in _objects(p, items, lambda i, s=split: f"{p} {s} row {i}")]
        else:
            rows = [(str(r.get("split", "")), r, w) for r, w in _read_table(p)]
    else:
        files = {s: _split_files(p, s) for s in SPLITS}
        if not any(files.values()):
            raise FileNotFoundError(
                f"{p}: no IMAVB split files found (expected {SPLITS[0]}.jsonl/.json/.parquet, "
                f"data/{SPLITS[0]}-*.parquet or a datasets save_to_disk folder with dataset_dict.json)"
            )
        for split in SPLITS:
            got = [(split, r, w) for f in files[split] for r, w in _read_table(f)]
            if files[split] and not got:
                raise DataError(f"{', '.join(map(str, files[split]))}: split {split} has no rows")
            rows += got
    _check_pairs(p, {s for s, _, _ in rows})
    yield from rows


def _check_pairs(path: Path, present: set[str]) -> None:
    """Each modality needs both its standard and misleading split (Bal pairs them, Eq. 1)."""
    for std, mis in (("standard_vision", "misleading_vision"), ("standard_audio", "misleading_audio")):
        if (std in present) != (mis in present):
            have, lack = (std, mis) if std in present else (mis, std)
            raise DataError(f"{path}: split {lack} is missing (split {have} is present; Bal needs both)")
    if not present & {"standard_vision", "misleading_vision"}:
        raise DataError(f"{path}: no vision split rows (expected standard_vision and misleading_vision)")


def load_imavb(path: str | Path, *, n_frames: int = DEFAULT_FRAMES, check_videos: bool = True) -> Loaded:
    """Validated IMAVB records from a local copy (module doc); video roots resolve against ``path``'s
    folder."""
    p = Path(path)
    root = p if p.is_dir() else p.parent
    return validate_rows(iter_rows(p), root, n_frames=n_frames, check_videos=check_videos)
