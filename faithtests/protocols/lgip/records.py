"""LGIP's stored perturbations: one record per JSONL line of its released format (App. A.2 "Output
fields"), read by :mod:`.jsonl`."""

from __future__ import annotations

from dataclasses import dataclass

from faithtests.data.loaded import ImageRef


@dataclass(frozen=True)
class LGIPFlip:
    """A flipped caption from an LGIP JSONL; ``flip_type`` is None when the file gives no type."""

    text: str
    flip_type: str | None
    paraphrase: str | None = None  # the intermediate paraphrase of a combined flip


@dataclass(frozen=True)
class LGIPCaption:
    """One original caption (index ``index`` in ``orig_captions``) with its stored perturbations."""

    index: int
    caption: str
    paraphrases: tuple[str, ...]
    flips: tuple[LGIPFlip, ...]
    combined: tuple[LGIPFlip, ...] = ()


@dataclass(frozen=True)
class LGIPRecord:
    """One JSONL line of LGIP's released format (App. A.2 "Output fields")."""

    record_id: str
    image: ImageRef
    captions: tuple[LGIPCaption, ...]
