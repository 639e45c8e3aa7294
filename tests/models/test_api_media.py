"""A prompt's clip and audio as request parts (faithtests.models.api_media), without a server: what is
sent decodes back to exactly the frames, samples and frame rate the in-process model gets (the served
tests in tests/served send them to vLLM's Qwen2.5-Omni)."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

av = pytest.importorskip("av")

from faithtests.models.api_media import media_parts, media_request, probe_prompt  # noqa: E402
from faithtests.models.errors import NotApplicable  # noqa: E402
from faithtests.models.interfaces import Audio, Prompt  # noqa: E402


def _clip(fps: float, with_audio: bool = True) -> Prompt:
    from PIL import Image

    rng = np.random.default_rng(3)
    frames = tuple(Image.fromarray(rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)) for _ in range(5))
    audio = Audio((rng.standard_normal(16000 * 3) * 0.3).astype(np.float32), 16000) if with_audio else None
    return Prompt(images=(), text="What is heard?", video=frames, audio=audio, video_fps=fps)


def _payload(url: str) -> bytes:
    head, _, data = url.partition(",")
    assert head == "data:video/x-matroska;base64"
    return base64.b64decode(data)


@pytest.mark.parametrize("fps", [1.0, 50 / 3.96])
def test_a_clip_decodes_to_the_same_frames_soundtrack_and_rate(fps: float) -> None:
    """Every frame bit for bit, every sample bit for bit, and the rate within 1e-6 relative (a trimmed
    clip's rate such as 50/3.96 s is stored as a fraction)."""
    prompt = _clip(fps)
    (part,) = media_parts(prompt)
    assert part["type"] == "video_url"
    with av.open(io.BytesIO(_payload(part["video_url"]["url"]))) as c:
        stream = c.streams.video[0]
        assert abs(float(stream.average_rate) - fps) / fps < 1e-6
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    assert len(frames) == len(prompt.video)
    for got, want in zip(frames, prompt.video, strict=True):
        assert np.array_equal(got, np.asarray(want))
    with av.open(io.BytesIO(_payload(part["video_url"]["url"]))) as c:
        assert c.streams.audio[0].rate == 16000
        samples = np.concatenate([f.to_ndarray() for f in c.decode(audio=0)], axis=1)[0]
    assert prompt.audio is not None and np.array_equal(samples, prompt.audio.samples)


def test_the_request_keeps_every_frame_and_interleaves_the_soundtrack() -> None:
    assert media_request(_clip(2.0)) == {"media_io_kwargs": {"video": {"num_frames": -1}},
                                         "mm_processor_kwargs": {"use_audio_in_video": True}}
    silent = _clip(2.0, with_audio=False)
    assert media_request(silent) == {"media_io_kwargs": {"video": {"num_frames": -1}}}
    with av.open(io.BytesIO(_payload(media_parts(silent)[0]["video_url"]["url"]))) as c:
        assert not c.streams.audio  # no soundtrack is invented
    assert media_request(Prompt(images=(), text="q")) == {}


def test_audio_alone_is_a_float32_wav_with_the_same_samples() -> None:
    from scipy.io import wavfile

    audio = Audio(np.linspace(-1, 1, 8000, dtype=np.float32), 16000)
    (part,) = media_parts(Prompt(images=(), text="q", audio=audio))
    assert part["type"] == "input_audio" and part["input_audio"]["format"] == "wav"
    rate, samples = wavfile.read(io.BytesIO(base64.b64decode(part["input_audio"]["data"])))
    assert rate == 16000 and samples.dtype == np.float32 and np.array_equal(samples, audio.samples)


def test_an_endpoint_that_refused_the_probe_clip_makes_media_prompts_not_applicable() -> None:
    """What the probe at load found (the server's words) is the reason, once per model; image prompts
    are still sent, and the premise suite sends such a model frames as images (accepts_audio False)."""
    from faithtests.models.openai_api import OpenAIModel

    api = OpenAIModel(spec="openai:m@http://127.0.0.1:9/v1", model="m", base_url="http://127.0.0.1:9/v1")
    api.capabilities["media_parts"] = "the endpoint refused a video with its soundtrack: 422 Unexpected"
    assert not api.accepts_audio
    with pytest.raises(NotApplicable, match="422 Unexpected"):
        api._sendable(probe_prompt())
    api._sendable(Prompt(images=(), text="q"))  # no media: sent
    api.capabilities["media_parts"] = "yes"
    assert api.accepts_audio
    api._sendable(probe_prompt())
