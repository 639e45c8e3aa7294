"""Errors of the data loaders: every message names the file, the line or key, and the field."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class DataError(ValueError):
    """A malformed record: ``path:line`` (JSONL) or ``path[key]`` (JSON), the field, and what is wrong."""

    def __init__(self, path: str | Path, message: str, *, line: int | None = None, key: str | None = None,
                 field: str | None = None) -> None:
        self.path = Path(path)
        self.line = line
        self.key = key
        self.field = field
        where = str(self.path)
        if line is not None:
            where += f":{line}"
        if key is not None:
            where += f" [{key}]"
        if field is not None:
            where += f" field {field!r}"
        super().__init__(f"{where}: {message}")


class ImageLoadError(OSError):
    """An image file that is missing at load time or cannot be decoded; names the path."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = Path(path)
        super().__init__(f"cannot load image {self.path}: {reason}")


@dataclass(frozen=True)
class MissingImage:
    """An image a record points to that does not exist; the record is reported here, not loaded."""

    path: Path
    record_id: str
