"""Typed records and loaders for real benchmark files.

COCO captions, SugarCrepe, ARO (VG-Relation, VG-Attribution, COCO-Order), Winoground.

Every loader returns a :class:`LoadResult`: the records whose images exist plus a ``missing`` list of
:class:`MissingImage` (never a silent drop). Images are opened lazily by :meth:`ImageRef.load`, which
raises :class:`ImageLoadError` naming the path for a corrupt file. Malformed records raise
:class:`DataError` naming file, line or key, and field.
"""

from faithtests.data.aro import load_coco_order, load_vg, load_vg_attribution, load_vg_relation
from faithtests.data.coco import load_coco_captions, load_coco_dir
from faithtests.data.load_errors import DataError, ImageLoadError, MissingImage
from faithtests.data.loaded import (
    AROItem,
    CaptionedImage,
    ImageRef,
    LoadResult,
    OrderItem,
    SugarCrepeItem,
    WinogroundItem,
)
from faithtests.data.sugarcrepe import SUGARCREPE_SPLITS, load_sugarcrepe, load_sugarcrepe_split
from faithtests.data.winoground import load_winoground

__all__ = [
    "SUGARCREPE_SPLITS",
    "AROItem",
    "CaptionedImage",
    "DataError",
    "ImageLoadError",
    "ImageRef",
    "LoadResult",
    "MissingImage",
    "OrderItem",
    "SugarCrepeItem",
    "WinogroundItem",
    "load_coco_captions",
    "load_coco_dir",
    "load_coco_order",
    "load_sugarcrepe",
    "load_sugarcrepe_split",
    "load_vg",
    "load_vg_attribution",
    "load_vg_relation",
    "load_winoground",
]
