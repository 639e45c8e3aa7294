"""The soundtrack and video memo: a call's outputs bit-identical to the sub-processor's own batch, each
distinct array processed once, and whatever a concatenation cannot reproduce passed through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from faithtests.models.media_memo import ArrayProcessorMemo, memoise_media

transformers = pytest.importorskip("transformers")

OMNI = Path(__file__).resolve().parents[2] / "fixtures" / "omni"


def _tracks(n: int, seed: int = 0, samples: int = 8000) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(0.1 * rng.standard_normal(samples)).astype(np.float32) for _ in range(n)]


class Counting:
    """A Whisper feature extractor (the Qwen omni families') counting the soundtracks it was given."""

    def __init__(self) -> None:
        self.inner = transformers.WhisperFeatureExtractor(feature_size=16, chunk_length=1)
        self.seen = 0
        self.sampling_rate = self.inner.sampling_rate

    def __call__(self, audio: Any, **kwargs: Any) -> Any:
        self.seen += len(audio)
        return self.inner(audio, **kwargs)


KW: dict[str, Any] = {"sampling_rate": 16000, "padding": "max_length", "return_attention_mask": True,
                      "return_tensors": "pt"}


def test_features_equal_the_extractors_batch_and_each_track_is_processed_once() -> None:
    tracks = _tracks(3)
    counting = Counting()
    memo = ArrayProcessorMemo(counting)
    batch = [tracks[0], tracks[1], tracks[0], tracks[2]]  # a repeat
    want = counting.inner(batch, **KW)
    got = memo(batch, **KW)
    assert set(got) == {"input_features", "attention_mask"}
    assert all(torch.equal(got[k], want[k]) for k in want)
    assert counting.seen == 3 + 4  # each track once, then the batch once to check the concatenation
    again = memo([t.copy() for t in reversed(tracks)], **KW)  # equal content, new arrays
    want = counting.inner(list(reversed(tracks)), **KW)
    assert torch.equal(again["input_features"], want["input_features"])
    assert counting.seen == 7 and memo.hits == 1 + 3 and memo.misses == 3
    memo([tracks[0]], **{**KW, "padding": "longest"})  # other options: computed again
    assert counting.seen == 8
    assert memo.sampling_rate == 16000  # every other attribute is the extractor's


def test_video_patches_equal_the_video_processors_batch() -> None:
    """A Qwen video processor lays a batch out along the patch axis; concatenated per-video outputs
    are that layout exactly (checked against the batched call)."""
    processor = transformers.AutoProcessor.from_pretrained(OMNI, local_files_only=True)
    inner = processor.video_processor
    rng = np.random.default_rng(1)
    videos = [rng.integers(0, 256, (2, 56 + 28 * i, 84, 3), dtype=np.uint8) for i in range(3)]
    memo = ArrayProcessorMemo(inner)
    want = inner(videos, return_tensors="pt")
    got = memo(videos, return_tensors="pt")
    assert set(got) == set(want) and all(torch.equal(got[k], want[k]) for k in want)
    again = memo([videos[2], videos[0]], return_tensors="pt")
    ref = inner([videos[2], videos[0]], return_tensors="pt")
    assert all(torch.equal(again[k], ref[k]) for k in ref) and memo.hits == 2


def test_the_omni_processor_gives_the_same_inputs_with_its_memos() -> None:
    plain = transformers.AutoProcessor.from_pretrained(OMNI, local_files_only=True)
    memoised = memoise_media(transformers.AutoProcessor.from_pretrained(OMNI, local_files_only=True))
    assert isinstance(memoised.feature_extractor, ArrayProcessorMemo)
    assert isinstance(memoised.video_processor, ArrayProcessorMemo)
    rng = np.random.default_rng(2)
    videos = [rng.integers(0, 256, (2, 84, 84, 3), dtype=np.uint8) for _ in range(2)]
    tracks = _tracks(2, samples=32000)
    turn = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Which sound?"}]}]
    text = plain.apply_chat_template(turn, add_generation_prompt=True, tokenize=False)
    kw: dict[str, Any] = {"text": [text, text, text], "videos": [videos[0], videos[1], videos[0]],
                          "audio": [tracks[0], tracks[1], tracks[0]], "load_audio_from_video": True,
                          "audio_from_video_indices": [0, 1, 2], "return_tensors": "pt", "padding": True,
                          "videos_kwargs": {"fps": 1.0}}
    for _ in range(2):  # cold, then served from the memos
        want, got = plain(**kw), memoised(**kw)
        assert set(got) == set(want) and all(torch.equal(torch.as_tensor(got[k]), torch.as_tensor(want[k]))
                                             for k in want)
    assert memoised.feature_extractor.hits == 4 and memoised.feature_extractor.misses == 2


def test_a_batch_dependent_output_is_passed_through() -> None:
    """An extractor that normalises by the batch: the check against the batched call fails, and the
    memo serves those options unmemoised from then on."""
    calls: list[int] = []

    def by_batch(audio: Any, **_: Any) -> dict[str, torch.Tensor]:
        calls.append(len(audio))
        stacked = torch.tensor(np.stack(audio))
        return {"input_features": stacked / stacked.abs().max()}

    memo = ArrayProcessorMemo(by_batch)
    tracks = _tracks(2)
    tracks[1] = 3 * tracks[1]
    out = memo(tracks)
    assert torch.equal(out["input_features"], by_batch(tracks)["input_features"])
    memo(tracks)
    assert calls == [1, 1, 2, 2, 2] and memo.hits == 0  # two singles, the check, then straight through


def test_outputs_padded_to_the_longest_input_are_passed_through() -> None:
    calls: list[int] = []

    def longest(audio: Any, **_: Any) -> dict[str, torch.Tensor]:  # Gemma3n's default padding
        calls.append(len(audio))
        width = max(len(a) for a in audio)
        return {"input_features": torch.tensor(np.stack([np.pad(a, (0, width - len(a))) for a in audio]))}

    memo = ArrayProcessorMemo(longest)
    tracks = [_tracks(1, samples=100)[0], _tracks(1, samples=120)[0]]
    out = memo(tracks)
    assert torch.equal(out["input_features"], longest(tracks)["input_features"])
    memo(tracks)
    assert calls == [1, 1, 2, 2, 2] and memo.hits == 0  # two singles, the call, then straight through


def test_inputs_that_are_not_arrays_and_outputs_that_are_not_tensors_are_passed_through() -> None:
    seen: list[Any] = []

    def listing(audio: Any, **_: Any) -> dict[str, Any]:
        seen.append(audio)
        return {"input_features": [np.asarray(a) for a in audio]}

    memo = ArrayProcessorMemo(listing)
    memo([[0.0, 1.0]])  # a list, not an array
    memo(_tracks(1))  # not tensors: options passed through from then on
    memo(_tracks(1))
    assert len(seen) == 4 and memo.hits == 0 and memo.misses == 0
