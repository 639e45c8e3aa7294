"""The longest audio a model hears whole, found once at load (a capability, docs/models.md).

Some families' processors pad or cut every waveform to their feature extractor's window (Whisper-style
``n_samples``: Qwen2.5-Omni cuts at 30 s, the logits of a 10-minute clip equal those of its first 30 s);
others take longer audio (Qwen3-Omni). Rather than a table of families, the processor is asked: the same
signal, one second past the window and cut at it, is encoded both ways; equal inputs mean the processor
cut the longer one. A suite then leaves out (and counts) a clip longer than the window instead of letting
the model hear part of it, and the adapter refuses such a prompt instead of cutting it silently.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from faithtests.models.interfaces import Audio, Prompt
from faithtests.models.prompting import encode_batch


def _signal(samples: int, rate: int) -> np.ndarray:
    """A tone whose loudness keeps changing: its last second differs from silence and from its start."""
    t = np.arange(samples) / rate
    tone = 0.1 * np.sin(2 * np.pi * 440.0 * t) * (1.0 + 0.5 * np.sin(2 * np.pi * 0.7 * t))
    return tone.astype(np.float32)


def audio_window_s(processor: Any, config: Any) -> float | None:
    """Seconds of audio ``processor`` keeps of a longer waveform, or None when it keeps it all (or takes
    no audio). A probe that fails to encode counts as a cut: never assume a model hears what it may not."""
    fe = getattr(processor, "feature_extractor", None)
    n, rate = getattr(fe, "n_samples", None), getattr(fe, "sampling_rate", None)
    if not isinstance(n, int) or not isinstance(rate, int) or n <= 0 or rate <= 0:
        return None
    x = _signal(n + rate, rate)
    try:
        whole, cut = (encode_batch(processor, config, [Prompt((), "Listen.", audio=Audio(a, rate))], "right")
                      for a in (x, x[:n].copy()))
    except Exception:  # the probe's own failure: the prompts will say what is wrong; assume the cut
        return n / rate
    same = whole.inputs.keys() == cut.inputs.keys() and all(
        torch.equal(whole.inputs[k], cut.inputs[k]) for k in whole.inputs)
    return n / rate if same else None
