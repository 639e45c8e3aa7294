"""The run's per-item log: ``items.jsonl.gz`` beside ``scorecard.json``, one JSON row per scored item.

A suite hands the recorder what the model answered on each item (:meth:`Faith.outputs`); the rows ride
on the test's record to the controller (across xdist workers, like every other result) and are written
here, never into ``scorecard.json``. Columns (:data:`LOG_COLUMNS`): ``suite``, ``test`` (the test key),
``model``, ``variant``, ``metric`` and ``slice`` (the result whose ``n`` the rows make up), ``item``,
``inputs`` (by reference: an image ref or file path and the texts shown, never pixels), ``output`` (the
answer, chosen option, generated text or scores), ``outcome`` (bool, number or label) and ``invalid``
(the kind of an unusable output, else null).

Bounded: a string is cut at :data:`TEXT_CHARS` characters with a ``…[+N chars]`` marker, a dict keeps
its first :data:`MAX_FIELDS` keys and a list its first :data:`MAX_LIST` entries (a marker says how many
were left out), numbers keep 7 significant digits. Rows are never dropped, so the log of a run holds
every item it scored.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faithtests.scorecard.model import MetricResult, round7, test_key

if TYPE_CHECKING:
    import pandas as pd

ITEM_LOG = "items.jsonl.gz"
TEXT_CHARS = 600
MAX_FIELDS = 24
MAX_LIST = 16
LOG_COLUMNS = ("suite", "test", "model", "variant", "metric", "slice", "item", "inputs", "output",
               "outcome", "invalid")
#: The keys a suite may give per item (:meth:`Faith.outputs`).
PAYLOAD_KEYS = frozenset({"inputs", "output", "outcome", "invalid"})


def clip_text(text: str, limit: int = TEXT_CHARS) -> str:
    """``text`` cut at ``limit`` characters, with a marker counting what was cut."""
    return text if len(text) <= limit else f"{text[:limit]}…[+{len(text) - limit} chars]"


def bounded(value: Any, what: str) -> Any:
    """A JSON value of bounded size (see the module doc); NaN/inf become null, unknown types their str."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a numpy scalar: its Python value
        value = value.item()
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return round7(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return clip_text(value)
    if isinstance(value, Mapping):
        return bounded_fields(value, what)
    if isinstance(value, list | tuple) or hasattr(value, "tolist"):
        seq = list(value.tolist() if hasattr(value, "tolist") else value)
        out = [bounded(v, what) for v in seq[:MAX_LIST]]
        return out + ([f"…[+{len(seq) - MAX_LIST} more]"] if len(seq) > MAX_LIST else [])
    return clip_text(str(value))


def bounded_fields(d: Mapping[Any, Any], what: str) -> dict[str, Any]:
    """The first :data:`MAX_FIELDS` entries of ``d``, each :func:`bounded`; a ``…`` key counts the rest."""
    items = list(d.items())
    out = {str(k): bounded(v, f"{what}[{k!r}]") for k, v in items[:MAX_FIELDS]}
    if len(items) > MAX_FIELDS:
        out["…"] = f"+{len(items) - MAX_FIELDS} more fields"
    return out


def output_row(item: Any, payload: Mapping[str, Any], *, metric: str, slice: str | None, model: str,
               variant: str) -> dict[str, Any]:
    """One bounded log row (without ``suite``/``test``, added when the log is written)."""
    unknown = set(payload) - PAYLOAD_KEYS
    if unknown:
        raise ValueError(f"outputs({metric!r})[{item!r}]: unknown key(s) {sorted(unknown)} "
                         f"(allowed: {sorted(PAYLOAD_KEYS)})")
    outcome = payload.get("outcome")
    invalid = payload.get("invalid")
    return {"model": model, "variant": variant, "metric": metric, "slice": slice, "item": str(item),
            "inputs": bounded_fields(payload.get("inputs") or {}, "inputs"),
            "output": bounded_fields(payload.get("output") or {}, "output"),
            "outcome": bounded(outcome, "outcome") if not isinstance(outcome, Mapping) else str(outcome),
            "invalid": None if invalid is None else clip_text(str(invalid), 200)}


def log_rows(tests: Iterable[tuple[str, str, Iterable[Mapping[str, Any]]]]) -> Iterator[dict[str, Any]]:
    """Rows in :data:`LOG_COLUMNS` order from (suite, test key, the test's output rows)."""
    for suite, test, rows in tests:
        for r in rows:
            yield {"suite": suite, "test": test, **{c: r.get(c) for c in LOG_COLUMNS[2:]}}


def item_log_path(path: str | os.PathLike[str]) -> Path:
    """The item log of a report directory, or of the report holding ``scorecard.json`` / the log."""
    p = Path(path)
    if p.name.endswith(".jsonl.gz"):
        return p
    return p.parent / ITEM_LOG if p.suffix in (".json", ".html") and not p.is_dir() else p / ITEM_LOG


def log_beside(scorecard_file: str | os.PathLike[str]) -> Path:
    """The item log kept with a scorecard file: ``items.jsonl.gz`` beside a ``scorecard.json`` (a report
    folder), ``<name>.items.jsonl.gz`` beside a file of another name (a baseline kept as one file, as
    ``--faith-update-baseline`` writes it), so two such files in one folder never share a log."""
    p = Path(scorecard_file)
    return p.parent / ITEM_LOG if p.name == "scorecard.json" else p.with_name(f"{p.stem}.{ITEM_LOG}")


def write_item_log(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike[str]) -> int:
    """Write ``rows`` as gzipped JSON lines, atomically (a reader never sees half a log); the number of
    rows. Byte-identical for identical rows (no timestamp in the gzip header)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    umask = os.umask(0o22)  # mkstemp creates 0600; a report gets what any new file would (as the scorecard)
    os.umask(umask)
    n = 0
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
                io.TextIOWrapper(gz, encoding="utf-8") as out:
            os.fchmod(raw.fileno(), 0o666 & ~umask)
            for r in rows:
                out.write(json.dumps(r, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n")
                n += 1
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n


def iter_item_log(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The rows of an item log (a report directory, its ``scorecard.json`` or the log itself)."""
    p = item_log_path(path)
    lineno = 0
    try:
        with gzip.open(p, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{p}: line {lineno} is not JSON: {exc}") from None
                if not isinstance(row, dict):
                    raise ValueError(f"{p}: line {lineno} is not a JSON object")
                yield row
    except (EOFError, gzip.BadGzipFile, zlib.error, UnicodeDecodeError) as exc:
        # a truncated or damaged file is the log's fault, named with where it broke: never a raw EOFError,
        # nor an OSError a writer would blame on the output folder (BadGzipFile is one)
        raise ValueError(f"{p}: not a readable item log after line {lineno} ({type(exc).__name__}: {exc}); "
                         "it is truncated or damaged") from None


def read_item_log(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The item log as a DataFrame, one row per scored item, columns :data:`LOG_COLUMNS` (``inputs``
    and ``output`` hold dicts)."""
    import pandas as pd  # lazy: pandas, only when a table is built (never on import faithtests)

    return pd.DataFrame(list(iter_item_log(path)), columns=list(LOG_COLUMNS))


def merge_item_logs(sources: Iterable[str | os.PathLike[str]], dest: str | os.PathLike[str]) -> int:
    """One log holding every row of the ``sources`` that have one (the shards of a run, in order)
    written to ``dest``; the number of rows. A source without a log adds nothing."""
    paths = [item_log_path(s) for s in sources]
    return write_item_log((r for p in paths if p.exists() for r in iter_item_log(p)), item_log_path(dest))


def count_mismatches(results: Iterable[MetricResult], rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Where the log disagrees with the scorecard: each (test, model, variant, metric, slice) group of
    ``rows`` must name a result of ``results`` and hold exactly its ``n`` rows (one per scored item)."""
    n_of = {(test_key(r.test), r.model, r.variant, r.metric, r.slice or ""): r.n for r in results}
    counts: dict[tuple[str, str, str, str, str], int] = {}
    for row in rows:
        key = (test_key(str(row["test"])), str(row["model"]), str(row["variant"]), str(row["metric"]),
               str(row.get("slice") or ""))
        counts[key] = counts.get(key, 0) + 1
    out = []
    for key, got in sorted(counts.items()):
        where = f"{key[0]} {key[3]}" + (f"[{key[4]}]" if key[4] else "") + f" ({key[1] or '-'}, {key[2]})"
        if key not in n_of:
            out.append(f"{where}: {got} logged row(s) name no result of the scorecard")
        elif n_of[key] != got:
            out.append(f"{where}: {got} logged row(s), the scorecard's n is {n_of[key]}")
    return out
