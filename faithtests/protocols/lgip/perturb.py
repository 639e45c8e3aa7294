"""One call that builds every LGIP perturbation of a caption list with the paper's seed (App. A.3).

Random streams (all ``numpy.random.Generator(PCG64)``):
- main stream, ``np.random.default_rng(seed)`` with seed = 42: for each caption in the given order,
  the paraphrase cap draw, then one flip draw per matched type, then the flip cap draw — the public
  code's order (``make_perturb_with_fliptypes.py``), so the perturbations of a caption depend on the
  captions before it, exactly as there;
- combined stream, ``np.random.default_rng([seed, 1])``: the combined flips, kept separate so that
  switching them on or off never changes the paraphrases or flips.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Protocol

import numpy as np

from faithtests.protocols.lgip.flips import (
    K_DIFF,
    LGIP_VOCABULARIES,
    CombinedFlip,
    Flip,
    make_combined_flips,
    make_flips,
    validate_vocabularies,
)
from faithtests.protocols.lgip.paraphrase import (
    K_SAME,
    LGIP_SEED,
    LGIP_SIMPLE_MARKERS,
    MIN_CHARS,
    SIMPLE_TEMPLATES,
    Paraphrase,
    make_paraphrases,
    tag_paraphrase,
)
from faithtests.protocols.lgip.records import LGIPRecord
from faithtests.protocols.lgip.rewrite_rules import SYNONYM_TABLE


@dataclass(frozen=True)
class PerturbConfig:
    """Generation parameters; the defaults are LGIP's (App. A)."""

    vocabularies: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: LGIP_VOCABULARIES)
    k_same: int = K_SAME
    k_diff: int = K_DIFF
    k_combined: int = K_DIFF
    min_chars: int = MIN_CHARS
    ignore_case: bool = False
    advanced: bool = True
    combined: bool = True
    templates: tuple[str, ...] = SIMPLE_TEMPLATES
    synonyms: Mapping[str, str] = field(default_factory=lambda: SYNONYM_TABLE)

    def __post_init__(self) -> None:
        validate_vocabularies(self.vocabularies)
        object.__setattr__(self, "vocabularies",
                           MappingProxyType({k: tuple(v) for k, v in self.vocabularies.items()}))
        for name in ("k_same", "k_diff", "k_combined", "min_chars"):
            if getattr(self, name) < 0:
                raise ValueError(f"PerturbConfig.{name} must be >= 0")


@dataclass(frozen=True)
class CaptionPerturbations:
    """P(I, c), F(I, c) and the combined flips of one caption c."""

    caption: str
    paraphrases: tuple[Paraphrase, ...]
    flips: tuple[Flip, ...]
    combined: tuple[CombinedFlip, ...] = ()

    def flips_of_type(self, flip_type: str) -> tuple[Flip, ...]:
        return tuple(f for f in self.flips if f.flip_type == flip_type)


def perturb_caption(caption: str, rng: np.random.Generator, config: PerturbConfig,
                    combined_rng: np.random.Generator | None = None) -> CaptionPerturbations:
    """Paraphrases, then flips of c, from ``rng``; combined flips from ``combined_rng`` if given."""
    if not caption.strip():
        raise ValueError("perturb_caption: empty caption")
    paras = make_paraphrases(caption, rng, k_same=config.k_same, min_chars=config.min_chars,
                             templates=config.templates, advanced=config.advanced,
                             synonyms=config.synonyms, vocabularies=config.vocabularies)
    flips = make_flips(caption, rng, vocabularies=config.vocabularies, k_diff=config.k_diff,
                       min_chars=config.min_chars, ignore_case=config.ignore_case)
    comb: tuple[CombinedFlip, ...] = ()
    if config.combined and combined_rng is not None:
        comb = make_combined_flips(caption, paras, combined_rng, vocabularies=config.vocabularies,
                                   k_combined=config.k_combined, min_chars=config.min_chars,
                                   ignore_case=config.ignore_case)
    return CaptionPerturbations(caption.strip(), paras, flips, comb)


def perturb_captions(captions: Iterable[str], *, seed: int = LGIP_SEED, config: PerturbConfig | None = None
                     ) -> list[CaptionPerturbations]:
    """Perturbations of every caption, in order, from the seeded streams described in the module doc.

    Pass the captions of a dataset in its file order (image by image, caption by caption) to get the
    same result on every run. An empty caption raises ``ValueError`` naming its position.
    """
    cfg = config or PerturbConfig()
    rng = np.random.default_rng(seed)
    combined_rng = np.random.default_rng([seed, 1])
    out: list[CaptionPerturbations] = []
    for i, caption in enumerate(captions):
        if not caption.strip():
            raise ValueError(f"perturb_captions: caption #{i} is empty")
        out.append(perturb_caption(caption, rng, cfg, combined_rng))
    return out


def coverage(perturbed: Sequence[CaptionPerturbations]) -> dict[str, float]:
    """Mean counts per caption and the share of captions with each flip type (for reports)."""
    n = len(perturbed)
    if n == 0:
        raise ValueError("coverage: no captions")
    types = sorted({f.flip_type for p in perturbed for f in p.flips})
    out = {
        "captions": float(n),
        "paraphrases_per_caption": sum(len(p.paraphrases) for p in perturbed) / n,
        "simple_per_caption": sum(q.kind == "simple" for p in perturbed for q in p.paraphrases) / n,
        "advanced_per_caption": sum(q.kind == "advanced" for p in perturbed for q in p.paraphrases) / n,
        "flips_per_caption": sum(len(p.flips) for p in perturbed) / n,
        "combined_per_caption": sum(len(p.combined) for p in perturbed) / n,
    }
    for t in types:
        out[f"{t}_flips_per_caption"] = sum(len(p.flips_of_type(t)) for p in perturbed) / n
        out[f"share_with_{t}_flip"] = sum(bool(p.flips_of_type(t)) for p in perturbed) / n
    return out


PairFamily = Literal["paraphrase", "flip", "combined"]


@dataclass(frozen=True)
class PerturbationPair:
    """One (c, c') comparison for one image: what a suite scores and hands to the metrics.

    ``label`` is the paraphrase kind ("simple"/"advanced") or the flip type (None if the source file
    gives none); ``rule`` says how the perturbed caption c' was made (template, rule name, or "red->blue").
    """

    image_id: str
    caption_id: str
    caption: str
    perturbed: str  # c': the paraphrase or flip of ``caption``
    family: PairFamily
    label: str | None
    rule: str


class PairLike(Protocol):
    """What names a pair: a PerturbationPair, or separation's UnrelatedPair."""

    @property
    def image_id(self) -> str: ...
    @property
    def caption_id(self) -> str: ...
    @property
    def perturbed(self) -> str: ...


def pair_id(p: PairLike) -> str:
    """A pair's item id in the scorecard: ``image|caption id|perturbed text``."""
    return f"{p.image_id}|{p.caption_id}|{p.perturbed}"


def pair_keys(pairs: Sequence[PerturbationPair]) -> list[str]:
    """Item ids that match across runs (the paired regression gate): :func:`pair_id`, with ``#k``
    appended on the k-th repeat so that every pair keeps its own id."""
    seen: dict[str, int] = {}
    out = []
    for p in pairs:
        key = pair_id(p)
        out.append(key + (f"#{seen[key]}" if key in seen else ""))
        seen[key] = seen.get(key, 0) + 1
    return out


def perturbation_pairs(image_id: str, caption_id: str, p: CaptionPerturbations) -> list[PerturbationPair]:
    """Every paraphrase, flip and combined flip of one caption as pairs against the original c."""
    out = [PerturbationPair(image_id, caption_id, p.caption, q.text, "paraphrase", q.kind, q.rule)
           for q in p.paraphrases]
    out += [PerturbationPair(image_id, caption_id, p.caption, f.text, "flip", f.flip_type,
                             f"{f.original_word}->{f.new_word}") for f in p.flips]
    out += [PerturbationPair(image_id, caption_id, p.caption, c.text, "combined", c.flip_type,
                             f"{c.paraphrase.rule}+{c.flip.original_word}->{c.flip.new_word}")
            for c in p.combined]
    return out


def pairs_from_lgip_record(record: LGIPRecord, markers: Sequence[str] = LGIP_SIMPLE_MARKERS
                           ) -> list[PerturbationPair]:
    """Pairs of a loaded LGIP JSONL record; paraphrases are tagged by template markers (App. A.1)."""
    out: list[PerturbationPair] = []
    for cap in record.captions:
        cid = str(cap.index)
        out += [PerturbationPair(record.record_id, cid, cap.caption, t, "paraphrase",
                                 tag_paraphrase(t, markers), "file") for t in cap.paraphrases]
        out += [PerturbationPair(record.record_id, cid, cap.caption, f.text, "flip", f.flip_type, "file")
                for f in cap.flips]
        out += [PerturbationPair(record.record_id, cid, cap.caption, f.text, "combined", f.flip_type,
                                 "file") for f in cap.combined]
    return out
