"""Each distinct image preprocessed once: a memo in front of a Hugging Face image processor.

A suite shows one image with many prompts (every caption, option order, hooked variant), and the
processor resized and normalised it again each time: 4.4% of the default run's profile
(``benchmarks/results/profile_default_run.md``). :class:`ImageProcessorMemo` keeps each image's
``pixel_values`` row, keyed by the image's content (:func:`faithtests.models.cache.image_key`) and the
call's options, and stacks the rows of a call. It only serves processors whose output is exactly one
``pixel_values`` row per image (CLIP-style: each image is processed on its own, so a stacked row is
bit-identical to a batch's); any other output (patch grids, image sizes, tiles) is passed through from
the processor itself, uncached, for that call's options from then on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from PIL import Image

from faithtests.models.cache import image_key
from faithtests.models.processor_memo import ProcessorMemo


def _flat_images(images: Any) -> list[Image.Image] | None:
    """The images of a call, flattened as the processor flattens them (a list, or a list of lists per
    prompt); None for anything else (arrays, tensors, deeper nesting): then nothing is memoised."""
    if not isinstance(images, Sequence) or isinstance(images, str | bytes):
        return None
    flat: list[Image.Image] = []
    for item in images:
        if isinstance(item, Image.Image):
            flat.append(item)
        elif isinstance(item, Sequence) and all(isinstance(im, Image.Image) for im in item):
            flat.extend(item)
        else:
            return None
    return flat or None


class ImageProcessorMemo(ProcessorMemo):
    """Callable in place of ``processor.image_processor``; every other attribute is the processor's."""

    def __call__(self, images: Any, **kwargs: Any) -> Any:
        inner = self.__dict__["_inner"]
        options = repr(sorted(kwargs.items()))
        flat = _flat_images(images)
        if flat is None or options in self._passthrough:
            return inner(images, **kwargs)
        keys = [(options, image_key(im)) for im in flat]
        held = self._held(keys)
        missing = {k: im for k, im in zip(keys, flat, strict=True) if k not in held}
        fresh: dict[tuple[str, str], torch.Tensor] = {}
        if missing:
            out = inner(list(missing.values()), **kwargs)
            rows = _rows(out, len(missing))
            if rows is None:  # not one pixel row per image: this processor's call is not memoised
                self._passthrough.add(options)
                return inner(images, **kwargs)
            fresh = dict(zip(missing, rows, strict=True))
            self._store(fresh)
        got = [held[k] if k in held else fresh[k] for k in keys]
        self._count(len(keys) - len(missing), len(missing))
        from transformers import BatchFeature  # lazy: only a loaded HF processor calls this

        return BatchFeature({"pixel_values": torch.stack(got)})


def _rows(out: Any, n: int) -> list[torch.Tensor] | None:
    """The ``n`` pixel rows of a processor output that holds exactly one tensor row per image, else None."""
    if not isinstance(out, Mapping) or set(out.keys()) != {"pixel_values"}:
        return None
    pixels = out["pixel_values"]
    if not isinstance(pixels, torch.Tensor) or pixels.ndim < 2 or pixels.shape[0] != n:
        return None
    return [pixels[i].clone() for i in range(n)]


def memoise_images(processor: Any) -> Any:
    """Put an :class:`ImageProcessorMemo` in front of ``processor.image_processor`` (once); the processor."""
    inner = getattr(processor, "image_processor", None)
    if inner is not None and not isinstance(inner, ImageProcessorMemo):
        processor.image_processor = ImageProcessorMemo(inner)
    return processor
