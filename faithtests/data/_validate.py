"""Field checks shared by the loaders; each failure is a DataError naming file, line/key and field."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faithtests.data.load_errors import DataError, read_utf8


@dataclass(frozen=True)
class Where:
    """Location of one record: the file and its JSONL line or JSON key."""

    path: Path
    line: int | None = None
    key: str | None = None

    def error(self, message: str, field: str | None = None) -> DataError:
        return DataError(self.path, message, line=self.line, key=self.key, field=field)


def read_json(path: Path) -> Any:
    if not path.is_file():
        raise DataError(path, "file not found")
    try:
        with path.open(encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise DataError(path, f"invalid JSON: {e.msg}", line=e.lineno) from e
    except UnicodeDecodeError as e:
        raise DataError(path, f"not UTF-8 text: {e}") from e


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line number, object) for every non-blank line; a bad line is a DataError."""
    if not path.is_file():
        raise DataError(path, "file not found")
    for n, line in enumerate(read_utf8(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(path, f"invalid JSON: {e.msg}", line=n) from e
        if not isinstance(obj, dict):
            raise DataError(path, f"expected a JSON object, got {type(obj).__name__}", line=n)
        yield n, obj


def get(obj: dict[str, Any], field: str, where: Where) -> Any:
    if not isinstance(obj, dict):
        raise where.error(f"expected a JSON object, got {type(obj).__name__}")
    if field not in obj:
        raise where.error("missing", field)
    return obj[field]


def text(obj: dict[str, Any], field: str, where: Where, *, allow_empty: bool = False) -> str:
    """A string field; empty (after strip) is an error unless ``allow_empty``."""
    value = get(obj, field, where)
    if not isinstance(value, str):
        raise where.error(f"expected a string, got {type(value).__name__}", field)
    if not allow_empty and not value.strip():
        raise where.error("empty text", field)
    return value


def integer(obj: dict[str, Any], field: str, where: Where) -> int:
    value = get(obj, field, where)
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(f"expected an integer, got {value!r}", field)
    return value


def number(obj: dict[str, Any], field: str, where: Where) -> float:
    value = get(obj, field, where)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise where.error(f"expected a finite number, got {value!r}", field)
    return float(value)


def text_list(value: Any, field: str, where: Where) -> tuple[str, ...]:
    """A list of non-empty strings."""
    if not isinstance(value, list):
        raise where.error(f"expected a list, got {type(value).__name__}", field)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise where.error(f"item {i}: expected a string, got {type(item).__name__}", field)
        if not item.strip():
            raise where.error(f"item {i}: empty text", field)
    return tuple(value)


def resolve(root: Path, relative: str) -> Path:
    p = Path(relative)
    return p if p.is_absolute() else root / p
