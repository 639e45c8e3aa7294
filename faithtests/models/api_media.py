"""A prompt's video and audio as the content parts of an OpenAI-compatible chat request (issue 45).

The OpenAI API standardises only ``input_audio`` (base64 WAV); video is each server's extension. What is
sent here is lossless, so a served omni model sees the samples and pixels the in-process one sees:

- **audio**: ``input_audio`` with a float32 WAV at the prompt's own rate (the data layer already
  resampled to the model's rate; a server resamples only when the rates differ, and here they do not);
- **video**: ``video_url`` with a Matroska data URL, each frame coded losslessly (FFV1 in RGB), at the
  clip's frame rate (Qwen-Omni's temporal positions depend on it), with the per-request
  ``media_io_kwargs`` ``{"video": {"num_frames": -1}}`` so the server keeps every frame (vLLM samples
  32 by default);
- **a clip with its soundtrack**: the soundtrack rides in the same file (float32 PCM) and the request
  asks ``mm_processor_kwargs`` ``{"use_audio_in_video": true}``: vLLM then reads the audio from the
  video and interleaves it with the frames, as the in-process processor does (an audio part beside it
  would be a second audio item).

An endpoint that refuses these parts (``transformers serve`` rejects the extra request fields; a hosted
API may take no video) is found by the probe at load (:func:`probe_prompt`): its media prompts are then
*not applicable* with the server's reason, once per model.
"""

from __future__ import annotations

import base64
import io
from fractions import Fraction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from faithtests.models.interfaces import Audio, Prompt

#: The frame rate is stored as a fraction with at most this denominator (a clip trimmed to a span has
#: a rate such as 50/3.96 s); the rate read back differs from the prompt's by < 1e-6 relative.
FPS_DENOMINATOR = 100_000


def has_media(prompt: Prompt) -> bool:
    return bool(prompt.video) or prompt.audio is not None


def audio_part(audio: Audio) -> dict[str, Any]:
    """``input_audio``: the waveform as a float32 WAV (lossless), base64."""
    import numpy as np  # local: only prompts that carry audio need it
    from scipy.io import wavfile  # local: scikit-learn's dependency; writes IEEE-float WAV

    buf = io.BytesIO()
    wavfile.write(buf, int(audio.sampling_rate), np.asarray(audio.samples, dtype=np.float32))
    return {"type": "input_audio",
            "input_audio": {"data": base64.b64encode(buf.getvalue()).decode("ascii"), "format": "wav"}}


def video_part(prompt: Prompt) -> dict[str, Any]:
    """``video_url``: the frames, and the soundtrack if any, in one lossless Matroska (module doc)."""
    import av  # local: the imavb extra (PyAV); only prompts that carry a video need it
    import numpy as np  # local: as above

    buf = io.BytesIO()
    with av.open(buf, "w", format="matroska") as out:
        fps = Fraction(prompt.video_fps or 1.0).limit_denominator(FPS_DENOMINATOR)
        video = out.add_stream("ffv1", rate=fps)
        video.width, video.height = prompt.video[0].size
        video.pix_fmt = "bgr0"  # RGB planes, no chroma subsampling: decodes to the same pixels
        sound = None
        if prompt.audio is not None:
            sound = out.add_stream("pcm_f32le", rate=int(prompt.audio.sampling_rate), layout="mono")
        for frame in prompt.video:
            rgb = av.VideoFrame.from_ndarray(np.asarray(frame.convert("RGB")), format="rgb24")
            out.mux(video.encode(rgb.reformat(format="bgr0")))
        out.mux(video.encode())
        if sound is not None and prompt.audio is not None:
            samples = np.asarray(prompt.audio.samples, dtype=np.float32).reshape(1, -1)
            chunk = av.AudioFrame.from_ndarray(samples, format="flt", layout="mono")
            chunk.sample_rate = int(prompt.audio.sampling_rate)
            out.mux(sound.encode(chunk))
            out.mux(sound.encode())
    return {"type": "video_url",
            "video_url": {"url": "data:video/x-matroska;base64," + base64.b64encode(buf.getvalue()).decode()}}


def media_parts(prompt: Prompt) -> list[dict[str, Any]]:
    """The prompt's media as content parts: its video (with the soundtrack inside), or its audio."""
    if prompt.video:
        return [video_part(prompt)]
    return [audio_part(prompt.audio)] if prompt.audio is not None else []


def media_request(prompt: Prompt) -> dict[str, Any]:
    """The extra request fields a media prompt needs (module doc); {} for one without media."""
    extra: dict[str, Any] = {}
    if prompt.video:
        extra["media_io_kwargs"] = {"video": {"num_frames": -1}}
        if prompt.audio is not None:
            extra["mm_processor_kwargs"] = {"use_audio_in_video": True}
    return extra


def probe_prompt() -> Prompt:
    """A one-second clip of two frames with a soundtrack: what the probe at load sends once."""
    import numpy as np  # local: only at load
    from PIL import Image  # local: only at load

    from faithtests.models.interfaces import Audio, Prompt  # local: interfaces imports this module's users

    frames = (Image.new("RGB", (56, 56), "white"), Image.new("RGB", (56, 56), "black"))
    silence = Audio(np.zeros(16000, dtype=np.float32), 16000)
    return Prompt(images=(), text="Reply with the letter A.", video=frames, audio=silence, video_fps=2.0)
