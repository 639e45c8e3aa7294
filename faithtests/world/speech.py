"""Speech of the reference world: single spoken words from a real synthesiser, bundled with the package.

An utterance is one of :data:`WORDS` spoken by a man or a woman (:data:`SPEAKERS`), voiced or whispered
(:data:`TONES`), in one of :data:`TAKES` takes. Its ground truth is exact because it is what the
synthesiser was asked to say, in the voice it was asked to use: eSpeak NG's English voice with one of its
male or female variants (``m2``/``m3``/``m5``, ``f2``/``f3``/``f4``) or its male or female whisper
variant (``whisper`` / ``whisperf``) at three speaking rates. No emotion or dialogue is made: eSpeak
has none whose truth could be stated (IMAVB's speech_context is not produced; speech_tone is the voiced /
whispered manner).

The recordings live in :data:`BANK_PATH` (16 kHz int16, silence trimmed) so that nothing at test time
needs the synthesiser; ``python -m faithtests.world.speech`` remakes the file from ``espeak-ng`` (the
Debian package, 1.51), and a library test checks the bundled file equals a fresh build.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import wave
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

SAMPLE_RATE = 16_000
WORDS: tuple[str, ...] = ("red", "green", "blue", "yellow")
SPEAKERS: tuple[str, ...] = ("man", "woman")
#: The verb a premise uses for each manner of speaking: voiced ("says") or whispered.
TONES: tuple[str, ...] = ("says", "whispers")
TAKES = 3
#: eSpeak NG variant and rate (words per minute) of each take, by (speaker, tone).
VOICES: dict[tuple[str, str], tuple[tuple[str, int], ...]] = {
    ("man", "says"): (("m2", 160), ("m3", 175), ("m5", 190)),
    ("woman", "says"): (("f2", 160), ("f3", 175), ("f4", 190)),
    ("man", "whispers"): (("whisper", 150), ("whisper", 175), ("whisper", 200)),
    ("woman", "whispers"): (("whisperf", 150), ("whisperf", 175), ("whisperf", 200)),
}
#: Words a speech premise adds to the world's vocabulary (the spoken words are colour words already).
PREMISE_WORDS: tuple[str, ...] = (*SPEAKERS, *TONES)
BANK_PATH = Path(__file__).with_name("speech_bank.npz")
#: Samples quieter than this share of the peak at either end are trimmed (eSpeak pads ~0.1 s).
TRIM_LEVEL = 0.02
PAD_S = 0.01


def key(word: str, speaker: str, tone: str, take: int) -> str:
    return f"{word}-{speaker}-{tone}-{take}"


def _espeak(text: str, variant: str, rate: int) -> tuple[npt.NDArray[np.int16], int]:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise FileNotFoundError("espeak-ng is not installed (Debian: apt-get install espeak-ng); it is "
                                "needed only to rebuild the speech bank")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "say.wav"
        subprocess.run([exe, "-v", f"en+{variant}", "-s", str(rate), "-w", str(path), text], check=True,
                       capture_output=True)
        with wave.open(str(path)) as w:
            rate_hz = w.getframerate()
            samples = np.frombuffer(w.readframes(w.getnframes()), np.int16)
    return samples, rate_hz


def _to_bank(samples: npt.NDArray[np.int16], rate_hz: int) -> npt.NDArray[np.int16]:
    """Resampled to 16 kHz (polyphase, scipy), silence trimmed to :data:`PAD_S` at each end."""
    from scipy.signal import resample_poly  # local: only a rebuild of the bank needs it

    # scikit-learn's dependency, so always installed
    x = np.asarray(resample_poly(samples.astype(np.float64), SAMPLE_RATE, rate_hz), np.float64)
    loud = np.flatnonzero(np.abs(x) > TRIM_LEVEL * np.abs(x).max())
    pad = round(PAD_S * SAMPLE_RATE)
    x = x[max(0, int(loud[0]) - pad): int(loud[-1]) + pad + 1]
    out: npt.NDArray[np.int16] = np.clip(np.round(x), -32768, 32767).astype(np.int16)
    return out


def build_bank() -> dict[str, npt.NDArray[np.int16]]:
    """Every utterance, freshly synthesised by ``espeak-ng``."""
    out = {}
    for (speaker, tone), takes in VOICES.items():
        for take, (variant, rate) in enumerate(takes):
            for word in WORDS:
                out[key(word, speaker, tone, take)] = _to_bank(*_espeak(word, variant, rate))
    return out


@cache
def _bank() -> dict[str, npt.NDArray[np.int16]]:
    if not BANK_PATH.is_file():
        raise FileNotFoundError(f"the speech bank {BANK_PATH} is missing from the package; rebuild it "
                                f"with `python -m faithtests.world.speech`")
    with np.load(BANK_PATH) as data:
        return {k: data[k] for k in data.files}


def utterance_samples(word: str, speaker: str, tone: str, take: int) -> npt.NDArray[np.float64]:
    """The take's samples in [-1, 1) at :data:`SAMPLE_RATE`."""
    return _bank()[key(word, speaker, tone, take)].astype(np.float64) / 32768.0


def duration(word: str, speaker: str, tone: str, take: int) -> float:
    """Seconds, on the sample grid."""
    return _bank()[key(word, speaker, tone, take)].size / SAMPLE_RATE


def main() -> None:
    bank = build_bank()
    np.savez_compressed(BANK_PATH, **bank)  # type: ignore[arg-type]  # numpy's stub wants one kwarg type
    longest = max(v.size for v in bank.values()) / SAMPLE_RATE
    print(f"wrote {len(bank)} utterances to {BANK_PATH} (longest {longest:.3f} s)")


if __name__ == "__main__":
    main()
