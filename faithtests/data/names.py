"""What a ``--faith-data NAME=PATH`` name is: its kind of path and what that path must hold.

Each protocol's manifest declares the names it owns (:class:`DataName`); the names shared by several
protocols live here (:data:`SHARED`). The plugin collects them into one table at load time
(:func:`faithtests.manifest.data_table`) and checks every ``--faith-data`` entry against it at configure
time (:func:`check_data`): an unknown name (with a did-you-mean), a path that does not exist, a file where
a folder is expected or the reverse, a folder without the file its loader opens first, or a symlink loop
is a usage error before any model loads. A name in the table is read by the suites it lists; nothing is
accepted and then ignored. Importing this module is cheap (no numpy, no PIL).
"""

from __future__ import annotations

import difflib
import errno
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

Kind = Literal["dir", "file", "any"]


@dataclass(frozen=True)
class DataName:
    """One accepted ``--faith-data`` name.

    ``kind``: the path is a folder (``dir``), a file (``file``) or either (``any``: a file or a folder of
    files). ``contains``: for a folder, at least one of these entries must exist in it (what its loader
    reads first). ``needs``: another name that must be given with it, and why. ``suites``: the suites
    that read it, filled in from the manifests by :func:`faithtests.manifest.data_table` (a declaration
    leaves it empty).
    """

    kind: Kind
    what: str
    contains: tuple[str, ...] = ()
    needs: tuple[str, str] | None = None
    suites: tuple[str, ...] = ()


#: Names no single protocol owns: the manifests that read one list it in their ``reads``.
SHARED: Final[Mapping[str, DataName]] = {
    "coco": DataName("dir", "COCO folder with annotations/ and val2017/", contains=("annotations",)),
}


class DataNameError(ValueError):
    """A ``--faith-data`` entry the run cannot use; the message is the whole user-facing line."""


def did_you_mean(word: str, choices: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or ``""``."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _loop(path: Path) -> bool:
    """True when resolving ``path`` (or a folder above it) runs into a symlink loop."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def resolve_path(base: Path, text: str, label: str) -> Path:
    """``base / text`` made absolute with symlinks resolved; a symlink loop in it is a DataNameError
    (``Path.resolve`` raises RuntimeError for one on Python 3.11-3.12 and ignores it on 3.13)."""
    joined = base / text
    try:
        resolved = joined.resolve()
    except (RuntimeError, OSError):
        resolved = joined
    if _loop(resolved):
        raise DataNameError(f"{label}: {joined} is a symlink loop")
    return resolved


def _siblings(path: Path) -> str:
    try:
        names = [p.name for p in path.parent.iterdir()] if path.parent.is_dir() else []
    except OSError:
        names = []
    return did_you_mean(path.name, names)


def check_path(path: Path, kind: Kind, label: str) -> None:
    """``path`` exists and is of ``kind``; a DataNameError saying what is wrong otherwise."""
    if _loop(path):
        raise DataNameError(f"{label}: {path} is a symlink loop")
    if not path.exists():
        raise DataNameError(f"{label}: {path} does not exist{_siblings(path)}")
    if kind == "dir" and not path.is_dir():
        raise DataNameError(f"{label}: {path} is a file; expected a folder")
    if kind == "file" and not path.is_file():
        raise DataNameError(f"{label}: {path} is a folder; expected a file")


def check_data(data: Mapping[str, Path], table: Mapping[str, DataName]) -> None:
    """Every entry of ``--faith-data`` (name -> resolved path) against ``table`` (the plugin's, from the
    manifests)."""
    for name in data:
        if name not in table:
            known = ", ".join(sorted(table))
            hint = did_you_mean(name, list(table))
            raise DataNameError(f"--faith-data: unknown dataset {name!r}{hint}; known: {known}")
        needs = table[name].needs
        if needs is not None and needs[0] not in data:
            raise DataNameError(f"--faith-data {name}=... needs {needs[1]}")
    for name, path in data.items():
        spec, label = table[name], f"--faith-data {name}"
        check_path(path, spec.kind, label)
        if spec.contains and path.is_dir() and not any((path / c).exists() for c in spec.contains):
            wanted = " or ".join(spec.contains)
            raise DataNameError(f"{label}: {path} has no {wanted} (expected: {spec.what})")
