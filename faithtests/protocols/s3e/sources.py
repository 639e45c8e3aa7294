"""S3E role sources from the ``faithtests.data`` loaders (SugarCrepe, ARO, COCO-Order, Winoground).

Stress types (S3E §3.1, Table 2): SugarCrepe by split name — replace/swap/add_obj -> object, *_att ->
attribute, replace_rel -> relation; ARO VG-Relation -> relation, VG-Attribution -> attribute, COCO/
Flickr order -> compositional; Winoground -> compositional. Feed ``SourceSet.sources`` to
``faithtests.protocols.s3e.roles.build_s3e_records``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np

from faithtests.data.loaded import AROItem, ImageRef, OrderItem, SugarCrepeItem, WinogroundItem
from faithtests.protocols.s3e.records import StressType
from faithtests.protocols.s3e.roles import RoleSource

SUGARCREPE_STRESS_TYPES: Final[dict[str, StressType]] = {
    "replace_obj": "object",
    "swap_obj": "object",
    "add_obj": "object",
    "replace_att": "attribute",
    "swap_att": "attribute",
    "add_att": "attribute",
    "replace_rel": "relation",
}
ARO_STRESS_TYPES: Final[dict[str, StressType]] = {
    "relation": "relation",
    "vg_relation": "relation",
    "attribution": "attribute",
    "vg_attribution": "attribute",
    "order": "compositional",
    "coco_order": "compositional",
    "flickr30k_order": "compositional",
}


def stress_type_for(source: str, split: str = "") -> StressType:
    """Stress type of a source split: SugarCrepe by split name, ARO by dataset, Winoground compositional."""
    src, sp = source.lower(), split.lower().replace("-", "_")
    if src == "sugarcrepe" and sp in SUGARCREPE_STRESS_TYPES:
        return SUGARCREPE_STRESS_TYPES[sp]
    if src == "aro" and sp in ARO_STRESS_TYPES:
        return ARO_STRESS_TYPES[sp]
    if src == "winoground":
        return "compositional"
    raise ValueError(f"stress_type_for: unknown source/split {source!r}/{split!r}")


@dataclass(frozen=True)
class SourceSet:
    """RoleSources from one loader, and the image to show for each ``item_id``.

    ``RoleSource.image_ref`` is the image file path: the image's identity, so that no random negative
    comes from the same picture (two ARO crops of one photo count as the same image). The image the
    model sees — ARO's bbox crop included — is ``images[item_id].load()``.
    """

    sources: tuple[RoleSource, ...]
    images: Mapping[str, ImageRef]


def _source_set(pairs: Iterable[tuple[RoleSource, ImageRef]]) -> SourceSet:
    items = list(pairs)
    return SourceSet(tuple(s for s, _ in items), {s.item_id: ref for s, ref in items})


def from_sugarcrepe(items: Iterable[SugarCrepeItem]) -> SourceSet:
    """c+ = ``caption``, c_stress = ``negative_caption``, stress type from the split name."""
    return _source_set(
        (
            RoleSource(
                item_id=f"sugarcrepe/{it.record_id}",
                image_ref=str(it.image.path),
                c_pos=it.caption,
                c_stress=it.negative_caption,
                stress_type=stress_type_for("sugarcrepe", it.split),
                source="sugarcrepe",
            ),
            it.image,
        )
        for it in items
    )


def from_aro(items: Iterable[AROItem]) -> SourceSet:
    """VG-Relation / VG-Attribution: c+ = ``true_caption``, c_stress = ``false_caption``."""
    return _source_set(
        (
            RoleSource(
                item_id=f"aro/{it.subset}/{it.record_id}",
                image_ref=str(it.image.path),
                c_pos=it.true_caption,
                c_stress=it.false_caption,
                stress_type=stress_type_for("aro", it.subset),
                source="aro",
            ),
            it.image,
        )
        for it in items
    )


def from_coco_order(items: Iterable[OrderItem], *, seed: int) -> SourceSet:
    """COCO-Order: c+ = ``caption``, c_stress = one of its word-order negatives, drawn uniformly by
    ``default_rng(seed)`` in item order (compositional/order stress). Items without negatives get an
    empty c_stress, counted as ``missing_field:c_stress``."""
    rng = np.random.default_rng(seed)

    def pick(it: OrderItem) -> str:
        return it.negatives[int(rng.integers(len(it.negatives)))] if it.negatives else ""

    return _source_set(
        (
            RoleSource(
                item_id=f"aro/order/{it.record_id}",
                image_ref=str(it.image.path),
                c_pos=it.caption,
                c_stress=pick(it),
                stress_type="compositional",
                source="aro",
            ),
            it.image,
        )
        for it in items
    )


def from_winoground(items: Iterable[WinogroundItem]) -> SourceSet:
    """Two sources per example: image j with c+ = caption_j and c_stress = the other caption (same words,
    other composition)."""
    pairs = []
    for it in items:
        caps, refs = (it.caption_0, it.caption_1), (it.image_0, it.image_1)
        for j in (0, 1):
            src = RoleSource(
                item_id=f"winoground/{it.record_id}/{j}",
                image_ref=str(refs[j].path),
                c_pos=caps[j],
                c_stress=caps[1 - j],
                stress_type="compositional",
                source="winoground",
            )
            pairs.append((src, refs[j]))
    return _source_set(pairs)
