"""Work counters (``faithtests.models.work``, issue 47): each count by hand on a module that records
nothing itself, then on the reference VLM, whose image prefix is shared by the prompts of one image."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image

from faithtests.models.interfaces import Prompt
from faithtests.models.registry import load_model
from faithtests.models.work import count_work, work_of


class _Forward(torch.nn.Module):
    def forward(self, input_ids: Any = None, **_: Any) -> None:
        return None


def test_every_count_by_hand() -> None:
    module = _Forward()
    work = count_work(module)
    mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])  # row 0 left-padded by one
    module(input_ids=torch.zeros(2, 4, dtype=torch.long), attention_mask=mask,
           pixel_values=torch.zeros(3, 3, 8, 8))  # a prefill of 2 rows x 4 positions, 3 images
    module(input_ids=torch.zeros(2, 1, dtype=torch.long),  # a decoding step: 1 new position per row
           attention_mask=torch.cat([mask, torch.tensor([[1], [0]])], dim=1))
    module(inputs_embeds=torch.zeros(1, 5, 2), pixel_values=torch.zeros(2, 4, 3, 8, 8))  # 2 x 4 tiles
    module(torch.zeros(1, 2, dtype=torch.long), pixel_values=torch.zeros(100, 6),
           image_grid_thw=torch.ones(2, 3), pixel_values_videos=torch.zeros(50, 6),
           video_grid_thw=torch.ones(1, 3), input_features=torch.zeros(1, 128, 30))
    assert work.as_dict() == {"forwards": 4, "image_inputs": 3 + 8 + 2, "video_inputs": 1,
                              "audio_inputs": 1, "positions": 8 + 2 + 5 + 2, "padding": 1 + 1}


def _image(seed: int) -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


def test_a_shared_image_prefix_encodes_each_image_once() -> None:
    """Three questions on each of two images, option-scored through the prefix cache: each image goes
    through the vision tower once, the floor (two distinct images)."""
    vlm = load_model("reference:vlm")
    images = [_image(0), _image(1)]
    prompts = [Prompt(images=(im,), text=f"Question {q}? Answer A or B.") for im in images for q in range(3)]
    before = work_of(vlm)
    assert before is not None
    vlm.option_logits(prompts, ["A", "B"])  # type: ignore[attr-defined]
    after = work_of(vlm)
    assert after is not None
    counted = ("image_inputs", "distinct_images", "forwards")
    done = {k: int(after[k] or 0) - int(before[k] or 0) for k in counted}
    assert done["image_inputs"] == 2 and done["distinct_images"] == 2, done
    assert done["forwards"] >= 2 and after["audio_inputs"] == 0
