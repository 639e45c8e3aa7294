"""The one registry of ``--faith-data NAME=PATH`` names: what each path must be and which suites read it.

The plugin checks every ``--faith-data`` entry against :data:`DATASETS` at configure time
(:func:`check_data`): an unknown name (with a did-you-mean), a path that does not exist, a file where a
folder is expected or the reverse, a folder without the file its loader opens first, or a symlink loop
is a usage error before any model loads. A name here is read by the suites it lists; nothing is accepted
and then ignored. Importing this module is cheap (no numpy, no PIL).
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
    reads first). ``needs``: another name that must be given with it, and why.
    """

    kind: Kind
    suites: tuple[str, ...]
    what: str
    contains: tuple[str, ...] = ()
    needs: tuple[str, str] | None = None


DATASETS: Final[Mapping[str, DataName]] = {
    "coco": DataName("dir", ("invariance", "flip_sensitivity", "difference_consistency"),
                     "COCO folder with annotations/ and val2017/", contains=("annotations",)),
    "sugarcrepe": DataName("dir", ("flip_sensitivity",), "SugarCrepe folder of split JSONs",
                           needs=("coco", "the COCO images too: add --faith-data coco=DIR (its val2017/ "
                                          "holds the SugarCrepe images)")),
    "lgip": DataName("file", ("invariance", "flip_sensitivity"),
                     "LGIP perturbation JSONL (image paths relative to its folder)"),
    "aro": DataName("dir", ("flip_sensitivity",),
                    "ARO folder: visual_genome_relation.json and/or visual_genome_attribution.json, images/",
                    contains=("visual_genome_relation.json", "visual_genome_attribution.json")),
    "winoground": DataName("dir", ("flip_sensitivity",), "Winoground folder: examples.jsonl, images/",
                           contains=("examples.jsonl",)),
    "imavb": DataName("any", ("premise_rejection",), "IMAVB file or folder"),
    "acbench": DataName("any", ("affective_conflict",), "AC-Bench JSONL file or folder of JSONL files"),
    "emoset": DataName("any", ("affective_conflict",), "EmoSet annotation JSON file or folder"),
    "spdfaith": DataName("any", ("difference_consistency",), "SPD-Faith-Bench JSONL file or folder"),
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


def check_data(data: Mapping[str, Path]) -> None:
    """Every entry of ``--faith-data`` (name -> resolved path) against :data:`DATASETS`."""
    for name in data:
        if name not in DATASETS:
            known = ", ".join(sorted(DATASETS))
            hint = did_you_mean(name, list(DATASETS))
            raise DataNameError(f"--faith-data: unknown dataset {name!r}{hint}; known: {known}")
        needs = DATASETS[name].needs
        if needs is not None and needs[0] not in data:
            raise DataNameError(f"--faith-data {name}=... needs {needs[1]}")
    for name, path in data.items():
        spec, label = DATASETS[name], f"--faith-data {name}"
        check_path(path, spec.kind, label)
        if spec.contains and path.is_dir() and not any((path / c).exists() for c in spec.contains):
            wanted = " or ".join(spec.contains)
            raise DataNameError(f"{label}: {path} has no {wanted} (expected: {spec.what})")
