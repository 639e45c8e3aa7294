"""The image-processor memo: rows bit-identical to the processor's own batch, each image processed once,
and any output that is not one row per image passed through unmemoised."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from faithtests.models.image_memo import ImageProcessorMemo, memoise_images

transformers = pytest.importorskip("transformers")


def _images(n: int, seed: int = 0) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (40 + 8 * i, 48, 3), dtype=np.uint8)) for i in range(n)]


class Counting:
    """A CLIP image processor that counts the images it was given."""

    def __init__(self) -> None:
        self.inner = transformers.CLIPImageProcessor(size={"shortest_edge": 32},
                                                     crop_size={"height": 32, "width": 32})
        self.seen = 0
        self.crop_size = self.inner.crop_size

    def __call__(self, images: Any, **kwargs: Any) -> Any:
        flat = [im for row in images for im in (row if isinstance(row, list) else [row])]
        self.seen += len(flat)
        return self.inner(images, **kwargs)


def test_rows_equal_the_processors_batch_and_each_image_is_processed_once() -> None:
    ims = _images(4)
    counting = Counting()
    memo = ImageProcessorMemo(counting)
    nested = [[ims[0]], [ims[1], ims[2]], [ims[0]], [ims[3]]]  # one prompt with two images, a repeat
    want = counting.inner(nested, return_tensors="pt")["pixel_values"]
    got = memo(nested, return_tensors="pt")["pixel_values"]
    assert torch.equal(got, want) and counting.seen == 4  # the repeated image once
    again = memo([[im.copy()] for im in reversed(ims)], return_tensors="pt")["pixel_values"]  # equal pixels
    assert torch.equal(again, counting.inner(list(reversed(ims)), return_tensors="pt")["pixel_values"])
    assert counting.seen == 4 and memo.hits == 1 + 4 and memo.misses == 4
    other = memo([ims[0]], return_tensors="pt", do_normalize=False)["pixel_values"]  # other options: new row
    plain = counting.inner([ims[0]], return_tensors="pt", do_normalize=False)["pixel_values"]
    assert counting.seen == 5 and torch.equal(other, plain) and not torch.equal(other, want[:1])
    assert memo.crop_size == counting.crop_size  # every other attribute is the processor's


def test_output_that_is_not_one_row_per_image_is_passed_through() -> None:
    calls: list[int] = []

    def grid(images: Any, **_: Any) -> dict[str, Any]:
        calls.append(len(images))
        return {"pixel_values": torch.zeros(2 * len(images), 3), "image_grid_thw": torch.ones(len(images), 3)}

    memo = ImageProcessorMemo(grid)
    ims = _images(2)
    out = memo(ims)
    assert set(out) == {"pixel_values", "image_grid_thw"} and out["pixel_values"].shape[0] == 4
    memo(ims)
    assert calls == [2, 2, 2] and memo.hits == 0  # probed once, then straight through


def test_memory_bound_drops_the_least_recently_used_rows() -> None:
    counting = Counting()
    row_bytes = 3 * 32 * 32 * 4
    memo = ImageProcessorMemo(counting, memo_bytes=2 * row_bytes)
    a, b, c = _images(3)
    memo([a, b], return_tensors="pt")
    memo([c], return_tensors="pt")  # a is dropped
    memo([b, c], return_tensors="pt")
    assert counting.seen == 3
    memo([a], return_tensors="pt")
    assert counting.seen == 4


def test_memoise_images_wraps_once() -> None:
    class Proc:
        image_processor = Counting()

    proc = Proc()
    memoise_images(proc)
    first = proc.image_processor
    memoise_images(proc)
    assert isinstance(first, ImageProcessorMemo) and proc.image_processor is first


def test_a_call_larger_than_the_memory_bound_still_gets_every_row() -> None:
    """Rows evicted while a call stores its new rows are still that call's rows (the bound is smaller
    than one call here: every row is dropped, and the call is still answered in full)."""
    counting = Counting()
    memo = ImageProcessorMemo(counting, memo_bytes=3 * 32 * 32 * 4)  # one row
    ims = _images(3)
    memo(ims[:2], return_tensors="pt")
    got = memo([ims[1], ims[2], ims[0]], return_tensors="pt")["pixel_values"]  # a hit, a miss, an evicted
    assert torch.equal(got, counting.inner([ims[1], ims[2], ims[0]], return_tensors="pt")["pixel_values"])

