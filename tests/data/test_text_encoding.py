"""Issue 46: a data file that is not UTF-8 (a Latin-1 export) is an error naming the file and the line
of the first bad byte, in every reader: never a bare ``UnicodeDecodeError`` without the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithtests.data._validate import read_jsonl
from faithtests.data.load_errors import DataError, read_utf8
from faithtests.protocols.imavb.sources import load_imavb

LATIN1 = '{"id": 1}\n{"question": "caf\xe9?"}\n'.encode("latin-1")


def test_read_utf8_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(LATIN1)
    with pytest.raises(DataError) as e:
        read_utf8(path)
    assert str(e.value) == f"{path}:2: not UTF-8 text (byte 0xe9 at offset 27); save it as UTF-8"
    with pytest.raises(DataError, match=rf"^{path}:2: not UTF-8 text"):
        list(read_jsonl(path))
    path.write_text('{"question": "café?"}\n', encoding="utf-8")
    assert read_utf8(path) == '{"question": "café?"}\n'


def test_an_imavb_file_in_latin1_is_named(tmp_path: Path) -> None:
    (tmp_path / "standard_vision.jsonl").write_bytes(LATIN1)
    with pytest.raises(DataError, match=rf"^{tmp_path / 'standard_vision.jsonl'}:2: not UTF-8 text"):
        load_imavb(tmp_path)
