"""LGIP workloads: the (image, caption, perturbed caption) pairs one run of the invariance/flip suites scores.

A workload is built once per dataset (reference world, COCO captions, an LGIP JSONL, SugarCrepe) and
is model-free: images are lazy loaders keyed by id, pairs come from
:mod:`faithtests.protocols.lgip.perturb` (or the JSONL's stored pairs). Missing images are kept in ``missing``
so the suites can count them in the scorecard instead of dropping them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from faithtests.data.coco import load_coco_dir
from faithtests.data.load_errors import MissingImage
from faithtests.data.sugarcrepe import load_sugarcrepe
from faithtests.protocols.lgip.jsonl import load_lgip_jsonl
from faithtests.protocols.lgip.perturb import (
    PerturbationPair,
    PerturbConfig,
    pairs_from_lgip_record,
    perturb_captions,
    perturbation_pairs,
)
from faithtests.world import FLIP_VOCABULARIES, caption_items

if TYPE_CHECKING:
    from PIL import Image

ImageLoader = Callable[[], "Image.Image"]

#: The reference world's flip vocabularies under LGIP's type names, so slices read "color" everywhere.
WORLD_TYPE_NAMES: Mapping[str, str] = {"colour": "color", "number": "number", "object": "object"}


@dataclass(frozen=True)
class LGIPWorkload:
    """Every pair to score for one dataset; ``images`` maps an image id to a loader of its pixels."""

    name: str
    images: Mapping[str, ImageLoader]
    pairs: tuple[PerturbationPair, ...]
    missing: tuple[MissingImage, ...] = ()
    n_captions: int = 0

    def of_family(self, *families: str) -> tuple[PerturbationPair, ...]:
        return tuple(p for p in self.pairs if p.family in families)


def _perturbed_pairs(items: list[tuple[str, list[tuple[str, str]]]], config: PerturbConfig
                     ) -> tuple[PerturbationPair, ...]:
    """items: [(image_id, [(caption_id, caption)])] in a fixed order (LGIP's seeded stream depends on it)."""
    flat = [(img, cid, cap) for img, caps in items for cid, cap in caps]
    perturbed = perturb_captions([cap for _, _, cap in flat], config=config)
    pairs: list[PerturbationPair] = []
    for (img, cid, _), p in zip(flat, perturbed, strict=True):
        pairs += perturbation_pairs(img, cid, p)
    return tuple(pairs)


def world_workload(n_images: int, seed: int) -> LGIPWorkload:
    """Reference-world scenes with five true captions each, perturbed with the world's vocabularies."""
    vocab = {WORLD_TYPE_NAMES[k]: v for k, v in FLIP_VOCABULARIES.items()}
    items = caption_items(n_images, seed)
    config = PerturbConfig(vocabularies=vocab)
    pairs = _perturbed_pairs(
        [(it.item_id, [(f"{it.item_id}#{j}", c) for j, c in enumerate(it.captions)]) for it in items], config
    )
    images: dict[str, ImageLoader] = {it.item_id: it.image for it in items}
    return LGIPWorkload("world", images, pairs, n_captions=sum(len(it.captions) for it in items))


def coco_workload(root: str | Path, limit: int | None = None) -> LGIPWorkload:
    """COCO captions (e.g. ``../shared/data/coco-mini``) perturbed with LGIP's own vocabularies."""
    loaded = load_coco_dir(root)
    records = loaded.records[:limit] if limit else loaded.records
    pairs = _perturbed_pairs(
        [(r.image_id, list(zip(r.caption_ids, r.captions, strict=True))) for r in records], PerturbConfig()
    )
    images: dict[str, ImageLoader] = {r.image_id: r.image.load for r in records}
    return LGIPWorkload("coco", images, pairs, loaded.missing, sum(len(r.captions) for r in records))


def lgip_workload(path: str | Path, limit: int | None = None) -> LGIPWorkload:
    """An LGIP perturbation JSONL (:mod:`.jsonl`): its stored paraphrases, typed flips and combined flips,
    scored as they are (no perturbations are generated); images resolve against the file's folder."""
    loaded = load_lgip_jsonl(path)
    records = loaded.records[:limit] if limit else loaded.records
    pairs = tuple(p for r in records for p in pairs_from_lgip_record(r))
    images: dict[str, ImageLoader] = {r.record_id: r.image.load for r in records}
    return LGIPWorkload("lgip", images, pairs, loaded.missing, sum(len(r.captions) for r in records))


def sugarcrepe_workload(root: str | Path, image_dir: str | Path, limit: int | None = None) -> LGIPWorkload:
    """SugarCrepe (positive, hard negative) as flips typed by split; PR over them is text accuracy."""
    loaded = load_sugarcrepe(root, image_dir)
    records = loaded.records[:limit] if limit else loaded.records
    pairs = tuple(
        PerturbationPair(r.image.path.name, r.record_id, r.caption, r.negative_caption, "flip", r.split,
                         "sugarcrepe")
        for r in records
    )
    images: dict[str, ImageLoader] = {r.image.path.name: r.image.load for r in records}
    return LGIPWorkload("sugarcrepe", images, pairs, loaded.missing, len(records))
