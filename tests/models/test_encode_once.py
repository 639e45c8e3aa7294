"""Encode once (``faithtests.models.encode_once``, issue 47): each distinct image, clip and soundtrack
through its tower once per model, outputs equal to the unmemoised model's, counted in the work
counters; an LRU past its budget encodes again; a layout it does not split goes to the tower whole, with
the reason."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image

from faithtests.models.encode_once import EncoderMemo, encode_once, memo_of, unmemoise
from faithtests.models.interfaces import Audio, Prompt
from faithtests.models.registry import load_model
from faithtests.models.work import work_of


def _image(seed: int) -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


def _prompts() -> list[Prompt]:
    """Three questions of each of three images, interleaved: batches mix images, as the suites do."""
    images = [_image(s) for s in range(3)]
    return [Prompt(images=(images[i % 3],), text=f"Question {i}? Answer A or B.") for i in range(9)]


def test_each_image_once_and_the_same_answers_as_without_the_memo() -> None:
    vlm: Any = load_model("reference:vlm", batch_size=4)
    plain: Any = load_model("reference:vlm", batch_size=4)
    plain.option_logits(_prompts()[:1], ["A", "B"])  # loaded
    unmemoise(plain.model)
    assert memo_of(plain.model) is None and "get_image_features" not in plain.model.base_model.__dict__
    prompts = _prompts()
    ours = (vlm.option_logits(prompts, ["A", "B"]), vlm.generate(prompts, 6), vlm.states(prompts))
    theirs = (plain.option_logits(prompts, ["A", "B"]), plain.generate(prompts, 6), plain.states(prompts))
    assert torch.equal(ours[0], theirs[0]) and ours[1] == theirs[1] and torch.equal(ours[2], theirs[2])
    work = work_of(vlm)
    assert work is not None
    # 3 distinct images: encoded 3 times in all, whatever the batches, calls and paths (prefix, generate)
    assert work["images_encoded"] == 3
    assert work["distinct_images"] == 3 + 1  # + the probe image the description at load preprocessed
    assert int(work["image_inputs"] or 0) > 3  # handed to the forwards far more often
    memo = memo_of(vlm.model)
    assert memo is not None and memo.fallback == {} and memo.reused["image"] > 3


def test_an_image_encoded_alone_does_not_depend_on_its_batch() -> None:
    """The features a later call reads are the ones computed when the image was first seen, in a batch
    of one: the same logits whether the image came first alone or amid others."""
    prompts = _prompts()
    first: Any = load_model("reference:vlm", batch_size=9)
    later: Any = load_model("reference:vlm", batch_size=9)
    first.option_logits(prompts[:1], ["A", "B"])  # image 0 seen alone first
    later.option_logits(prompts[1:3], ["A", "B"])  # images 1, 2 first
    assert torch.equal(first.option_logits(prompts, ["A", "B"]), later.option_logits(prompts, ["A", "B"]))


def test_past_its_budget_the_least_recent_is_dropped_and_encoded_again() -> None:
    memo = EncoderMemo(budget=79)
    for key in ("a", "b", "c"):  # 40 bytes each: one fits
        memo.put(key, torch.zeros(10))
    assert list(memo.entries) == ["c"] and memo.size == 40
    memo = EncoderMemo(budget=100)
    memo.put("a", torch.zeros(10))
    memo.put("b", torch.zeros(10))
    assert memo.get("a") is not None  # "a" is now the most recent: "b" goes first
    memo.put("c", torch.zeros(10))
    assert list(memo.entries) == ["a", "c"]


class _Tower(torch.nn.Module):
    """A model whose image method counts its calls and returns one tensor per image row; its forward
    reads the features as transformers 5's do."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def forward(self, pixel_values: torch.Tensor) -> Any:
        mm_encoder_outputs = {"image": self.get_image_features(pixel_values)}
        return mm_encoder_outputs["image"].pooler_output

    def get_image_features(self, pixel_values: torch.Tensor, pixel_attention_mask: Any = None,
                           return_dict: bool = True, **kwargs: Any) -> Any:
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        self.calls.append(int(pixel_values.shape[0]))
        return BaseModelOutputWithPooling(pooler_output=list(pixel_values.sum(dim=(2, 3))))


def test_a_layout_it_does_not_split_goes_to_the_tower_whole_with_the_reason() -> None:
    model = _Tower()
    memo = encode_once(model)
    pixels = torch.arange(2 * 3 * 2 * 2, dtype=torch.float32).reshape(2, 3, 2, 2)
    twice = torch.cat([pixels, pixels])
    out = model.get_image_features(twice)
    assert model.calls == [1, 1] and memo.encoded == {"image": 2} and memo.reused == {"image": 2}
    assert all(torch.equal(a, b) for a, b in zip(out.pooler_output, list(twice.sum(dim=(2, 3))), strict=True))
    model.get_image_features(twice, pixel_attention_mask=torch.ones(4, 2, 2))  # per-tile masks: whole
    assert model.calls == [1, 1, 4] and memo.encoded["image"] == 6
    assert "pixel_attention_mask" in memo.fallback["image"]


class _Qformer(_Tower):
    def forward(self, pixel_values: torch.Tensor) -> Any:
        mm_encoder_outputs = {"image": self.get_image_features(pixel_values)}
        return mm_encoder_outputs["image"].qformer_outputs


def test_a_forward_reading_a_field_it_does_not_keep_is_counted_not_memoised() -> None:
    """Found once at load from the forward's source (BLIP-2 style ``qformer_outputs``): every call goes
    to the tower whole and is counted."""
    model = _Qformer()
    memo = encode_once(model)
    assert memo.fallback == {"image": "_Qformer.forward reads qformer_outputs of its image features"}
    model.get_image_features(torch.zeros(2, 3, 2, 2))
    model.get_image_features(torch.zeros(2, 3, 2, 2))
    assert model.calls == [2, 2] and memo.encoded == {"image": 4} and memo.reused == {"image": 0}


def _clip(seed: int) -> tuple[tuple[Image.Image, ...], Audio]:
    """Eight 64 px frames and a 1 s tone of their own (the world's clips are longer; the rule is the same)."""
    frames = tuple(Image.new("RGB", (64, 64), (30 * seed, 8 * i, 90)) for i in range(8))
    t = np.arange(16_000) / 16_000
    return frames, Audio((0.5 * np.sin(2 * np.pi * (300 + 200 * seed) * t)).astype(np.float32), 16_000)


def test_each_clip_and_soundtrack_once_on_the_omni_reference() -> None:
    """reference:omni (a Qwen2.5-Omni thinker): video as a patch grid, audio as padded soundtracks of
    different lengths in one batch; the same logits as without the memo."""
    clips = [_clip(s) for s in range(3)]
    prompts = [Prompt((), f"Question {q}? Answer A or B.", video=f, audio=a, video_fps=4.0)
               for q in range(2) for f, a in clips]
    omni: Any = load_model("reference:omni")
    plain: Any = load_model("reference:omni")
    plain.option_logits(prompts[:1], ["A", "B"])
    unmemoise(plain.model)
    assert torch.equal(omni.option_logits(prompts, ["A", "B"]), plain.option_logits(prompts, ["A", "B"]))
    work = work_of(omni)
    assert work is not None
    assert work["videos_encoded"] == 3 == work["distinct_videos"], work
    assert work["audio_encoded"] == 3, work
    assert work["distinct_audio"] == 3 + 2  # + the two probe waveforms of the audio-window check at load
