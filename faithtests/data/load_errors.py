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


def read_utf8(path: str | Path) -> str:
    """The text of a data file; one that is not UTF-8 (a Latin-1 export) is a :class:`DataError` naming
    the file and the line of the first bad byte, never a bare ``UnicodeDecodeError``."""
    p = Path(path)
    raw = p.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(p, f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}); save it as "
                           "UTF-8", line=line) from None
