"""The world's speech: the bundled recordings are the synthesiser's, and what a track says is in its
waveform where its ground truth puts it."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from faithtests.world import speech
from faithtests.world.sound import (
    SAMPLE_RATE,
    SPEECH_LEVEL,
    Soundtrack,
    Utterance,
    sample_soundtrack,
    synthesise,
)


def _pitch_hz(x: np.ndarray) -> tuple[float, float]:
    """(F0 from the autocorrelation peak in 70-400 Hz, the peak's height as a share of lag 0) of the
    utterance's loudest 100 ms (a voiced sound is periodic there, a whisper is not)."""
    win = round(0.1 * SAMPLE_RATE)
    energy = np.convolve(x**2, np.ones(win), mode="valid")
    i = int(np.argmax(energy))
    seg = x[i:i + win] - x[i:i + win].mean()
    ac = np.correlate(seg, seg, mode="full")[win - 1:]
    lo, hi = SAMPLE_RATE // 400, SAMPLE_RATE // 70
    lag = lo + int(np.argmax(ac[lo:hi]))
    return SAMPLE_RATE / lag, float(ac[lag] / ac[0])


def test_bank_is_the_synthesisers_output() -> None:
    """A fresh espeak-ng build equals the bundled bank sample for sample (CI installs espeak-ng; a
    machine without it skips, CI fails)."""
    if shutil.which("espeak-ng") is None:
        why = "espeak-ng is not installed (apt-get install espeak-ng): the bundled bank cannot be rebuilt"
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail(f"CI=true and {why}")
        pytest.skip(why)
    fresh = speech.build_bank()
    bundled = {k: speech._bank()[k] for k in fresh}
    assert set(fresh) == set(speech._bank())
    assert all(np.array_equal(fresh[k], bundled[k]) for k in fresh)


def test_every_utterance_fits_and_is_speech() -> None:
    n = len(speech.WORDS) * len(speech.SPEAKERS) * len(speech.TONES) * speech.TAKES
    assert len(speech._bank()) == n == 48
    for key, x in speech._bank().items():
        assert 0.2 <= x.size / SAMPLE_RATE <= 0.6, key  # a single word, room for three events beside it
        assert np.abs(x).max() > 3000, key  # not silence


def test_voiced_speech_has_the_speakers_pitch_and_whispers_have_none() -> None:
    """Voiced takes are periodic with the man's F0 below the woman's; whispered takes are aperiodic."""
    f0: dict[str, list[float]] = {"man": [], "woman": []}
    for word in speech.WORDS:
        for take in range(speech.TAKES):
            for speaker in speech.SPEAKERS:
                hz, periodic = _pitch_hz(speech.utterance_samples(word, speaker, "says", take))
                assert periodic > 0.35, (word, speaker, take)  # measured 0.44-0.85
                f0[speaker].append(hz)
                _, noisy = _pitch_hz(speech.utterance_samples(word, speaker, "whispers", take))
                assert noisy < 0.35, (word, speaker, take)  # measured 0.10-0.27
    assert max(f0["man"]) < min(f0["woman"]), f0


def test_the_track_speaks_where_its_truth_says() -> None:
    """Without events, bed or music the waveform is the take, scaled to SPEECH_LEVEL, at its start, and
    the frame labels mark exactly its span."""
    u = Utterance("blue", "woman", "whispers", 1, 0.5)
    w = synthesise(Soundtrack((), speech=u))
    x = speech.utterance_samples("blue", "woman", "whispers", 1)
    i = round(0.5 * SAMPLE_RATE)
    np.testing.assert_allclose(w[i:i + x.size], SPEECH_LEVEL * x / np.abs(x).max(), atol=1e-7)
    assert not w[:i].any() and not w[i + x.size:].any()
    labels = Soundtrack((), speech=u).frame_labels(0.04)
    on = np.flatnonzero(labels["word"])
    assert labels["word"][on[0]] == 1 + speech.WORDS.index("blue")
    assert set(labels["speaker"][on]) == {2} and set(labels["tone"][on]) == {2}
    assert on[0] * 0.04 + 0.02 >= 0.5 and (on[-1] + 0.5) * 0.04 < u.end
    assert not labels["sound"][on].any()


def test_tracks_without_speech_draw_as_before() -> None:
    """A track drawn without a word leaves speech out of the draws entirely (same events)."""
    a = sample_soundtrack(np.random.default_rng(4), [("beep", "soft"), ("knock", "loud")])
    assert a.speech is None
    b = sample_soundtrack(np.random.default_rng(4), [("beep", "soft")], said=("red", "man", "says", 0))
    assert b.speech is not None and b.speech.word == "red"
