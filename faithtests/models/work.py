"""Work counters: what a loaded Hugging Face model's forwards computed, counted where they are called.

Timings swing with the machine's load; these counts do not. They say how far a run is from its floor,
which is each distinct image encoded once and each position computed once. A forward pre-hook on the
model's top module counts every call: ``generate`` makes one call per decoding step, and the prefix
cache makes a prefix call and then a suffix call. Counted per call:

* ``forwards``: the calls.
* ``image_inputs``: image rows handed to the vision tower (``pixel_values``), as the processor makes
  them. A tiled image counts its tiles (LLaVA-NeXT's 5-D rows count ``B x tiles``); a Qwen-VL style
  flat patch list counts its ``image_grid_thw`` rows, i.e. its images.
* ``video_inputs``: clips handed to the vision tower (``pixel_values_videos``: its ``video_grid_thw``
  rows, else its first dimension).
* ``audio_inputs``: soundtrack rows handed to the audio tower (``input_features``).
* ``positions``: the sequence positions the call computed (``input_ids`` or ``inputs_embeds``, each
  row's new positions; a decoding step computes 1 per row).
* ``padding``: of those positions, the ones the attention mask marks as padding.

``images_encoded``, ``videos_encoded`` and ``audio_encoded`` are the items that went through each
tower (:mod:`.encode_once`: a distinct input once, while its memo holds it), present for the towers a
family runs through ``get_*_features``. ``*_inputs`` are what the forwards were handed, most of them
answered from that memo.

``distinct_images``, ``distinct_videos`` and ``distinct_audio`` come from the processor's memos
(``image_memo``, ``media_memo``): the different inputs the processor was asked for, by content, each
tower's floor (plus one image where the adapter's description at load preprocessed a probe image).
One is None where the processor's output cannot be memoised (patch grids, tiles).
``images_encoded / distinct_images`` is then how often each image went through the tower.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any
from weakref import WeakKeyDictionary

#: the counter of each hooked module (a weak key: an unloaded model takes its counter with it)
_COUNTERS: WeakKeyDictionary[Any, WorkCounter] = WeakKeyDictionary()
#: per model, what its encode_once memo counts (models.encode_once registers it: imports go that way)
_ENCODED: WeakKeyDictionary[Any, Callable[[], dict[str, int]]] = WeakKeyDictionary()
_DISTINCT = ("distinct_images", "distinct_videos", "distinct_audio")


@dataclass
class WorkCounter:
    """Running totals of one model's forwards (module doc); ``hook`` is the forward pre-hook."""

    forwards: int = 0
    image_inputs: int = 0
    video_inputs: int = 0
    audio_inputs: int = 0
    positions: int = 0
    padding: int = 0

    def hook(self, _module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.forwards += 1
        self.image_inputs += tower_inputs("image", kwargs)
        self.video_inputs += tower_inputs("video", kwargs)
        self.audio_inputs += tower_inputs("audio", kwargs)
        ids = kwargs.get("input_ids", args[0] if args else None)
        embeds = kwargs.get("inputs_embeds")
        shape = ids.shape if ids is not None else (embeds.shape[:2] if embeds is not None else None)
        if shape is None or len(shape) < 2:
            return
        rows, new = int(shape[0]), int(shape[1])
        self.positions += rows * new
        mask = kwargs.get("attention_mask")
        if mask is not None and getattr(mask, "ndim", 0) == 2:  # the new positions are the mask's last
            self.padding += int((mask[:, -new:] == 0).sum())

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


#: modality -> (pixel argument, grid argument) of a call (the grid: Qwen-VL's flat-patch layout)
GRID = {"image": ("pixel_values", "image_grid_thw"), "video": ("pixel_values_videos", "video_grid_thw")}


def tower_inputs(modality: str, kwargs: dict[str, Any]) -> int:
    """The image rows, clips or soundtracks in a call's arguments (module doc): a grid's rows (Qwen-VL's
    flat patches: one row per image or clip), a tiled image's tiles (5-D pixels), else the first axis.
    The same count for a model's forward and for a tower method that encode_once sends whole."""
    if modality == "audio":
        features = kwargs.get("input_features")
        return int(features.shape[0]) if features is not None else 0
    pixels_name, grid_name = GRID[modality]
    pixels, grid = kwargs.get(pixels_name), kwargs.get(grid_name)
    if pixels is None:
        return 0
    if grid is not None:
        return int(grid.shape[0])
    return int(pixels.shape[0] * pixels.shape[1]) if pixels.ndim == 5 and modality == "image" else int(
        pixels.shape[0])


def count_encoded(model: Any, counts: Callable[[], dict[str, int]] | None) -> None:
    """``counts`` gives ``model``'s ``*_encoded`` counters from now on (None: no longer)."""
    if counts is None:
        _ENCODED.pop(model, None)
    else:
        _ENCODED[model] = counts


def count_work(model: Any) -> WorkCounter:
    """A :class:`WorkCounter` hooked on ``model`` (its top module: every call passes there)."""
    counter = WorkCounter()
    model.register_forward_pre_hook(counter.hook, with_kwargs=True)
    _COUNTERS[model] = counter
    return counter


def work_of(vlm: Any) -> dict[str, int | None] | None:
    """What ``vlm``'s forwards computed in this process and the distinct inputs of its processor (module
    doc); all zero while it is not loaded (a warm run answered from the output cache); None for a
    model whose forwards are not counted (an adapter that is no HF VLM, a served or pooled one)."""
    if getattr(vlm, "counts_work", False) is not True:  # a class whose loader calls count_work
        return None
    if not vlm.loaded:
        return {**WorkCounter().as_dict(), **dict.fromkeys(_DISTINCT, 0)}
    counter = _COUNTERS.get(vlm.model)
    if counter is None:
        return None
    encoded = _ENCODED.get(vlm.model)
    return {**counter.as_dict(), **(encoded() if encoded else {}), **distinct_inputs(vlm.processor)}


def distinct_inputs(processor: Any) -> dict[str, int | None]:
    """The different inputs each of the processor's memos was asked for (module doc); None for a part
    without a memo, or whose memo some call bypassed."""
    return {f"distinct_{kind}": _distinct(getattr(processor, attr, None))
            for kind, attr in (("images", "image_processor"), ("videos", "video_processor"),
                               ("audio", "feature_extractor"))}


def _distinct(memo: Any) -> int | None:
    distinct = getattr(memo, "distinct", None)
    if not isinstance(distinct, int) or getattr(memo, "_passthrough", None):
        return None
    return distinct
