"""The world's sound: ground truth is recoverable from the waveform by simple checks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from faithtests.world.sound import (
    AMBIENTS,
    BEEP_HZ,
    CLIP_SECONDS,
    LEVEL,
    MELODY_HZ,
    MIN_EVENT_S,
    MUSIC,
    N_SAMPLES,
    SAMPLE_RATE,
    SOUND_TYPES,
    SoundEvent,
    Soundtrack,
    Utterance,
    place_events,
    sample_soundtrack,
    synthesise,
)

WIN = 320  # 20 ms envelope windows


def envelope(w: np.ndarray) -> np.ndarray:
    frames = w[: w.size // WIN * WIN].reshape(-1, WIN).astype(np.float64)
    return np.asarray(np.sqrt((frames**2).mean(axis=1)))


def count_bursts(w: np.ndarray, threshold: float = 0.035) -> int:
    """Runs of loud windows, runs closer than 60 ms merged (events are >= 100 ms apart; a knock's
    decaying tail may dip across the threshold)."""
    on = np.flatnonzero(envelope(w) > threshold)
    return 0 if on.size == 0 else 1 + int(np.sum(np.diff(on) > 3))


def peak_hz(w: np.ndarray, lo: float, hi: float) -> float:
    spec = np.abs(np.fft.rfft(w * np.hanning(w.size)))
    hz = np.fft.rfftfreq(w.size, 1 / SAMPLE_RATE)
    band = (hz >= lo) & (hz <= hi)
    return float(hz[band][np.argmax(spec[band])])


def melody_band(w: np.ndarray) -> float:
    """Largest FFT magnitude in 2-4 kHz (0.5 Hz bins over the 2 s clip)."""
    return float(np.abs(np.fft.rfft(w))[2 * 2000:2 * 4000].max())


def track(rng_seed: int, specs: list[tuple[str, str]], ambient: str = "none",
          music: str = "none") -> Soundtrack:
    return sample_soundtrack(np.random.default_rng(rng_seed), specs, ambient=ambient, music=music)


def test_duration_rate_dtype_and_range() -> None:
    for seed in range(5):
        w = synthesise(track(seed, [("buzz", "loud"), ("knock", "loud")], "hiss", "rising"))
        assert w.dtype == np.float32 and w.shape == (N_SAMPLES,) == (int(CLIP_SECONDS * SAMPLE_RATE),)
        assert np.isfinite(w).all() and np.abs(w).max() <= 1.0


@pytest.mark.parametrize("ambient", AMBIENTS)
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_event_count_by_envelope(n: int, ambient: str) -> None:
    rng = np.random.default_rng(n)
    specs = [(str(rng.choice(SOUND_TYPES)), "soft") for _ in range(n)]
    for seed in range(3):
        t = track(seed, specs, ambient, "falling")
        assert count_bursts(synthesise(t)) == n == len(t.events), t


def test_events_are_long_enough_and_apart() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        ev, word = place_events(rng, [("beep", "soft")] * 4)
        assert word is None and all(e.duration >= MIN_EVENT_S for e in ev)
        assert all(b.start > a.end for a, b in itertools.pairwise(ev))
        ev, word = place_events(rng, [("beep", "soft")] * 3, ("red", "woman", "whispers", 2))
        assert word is not None
        spans = sorted([*ev, word], key=lambda x: x.start)
        assert all(b.start >= a.end + 0.1 - 1e-9 for a, b in itertools.pairwise(spans))


@pytest.mark.parametrize("sound", SOUND_TYPES)
def test_louder_is_louder(sound: str) -> None:
    """Same event at both loudness levels: the peak envelope ratio is the level ratio (>= 4x)."""
    soft = synthesise(track(3, [(sound, "soft")]))
    loud = synthesise(track(3, [(sound, "loud")]))
    ratio = envelope(loud).max() / envelope(soft).max()
    assert ratio == pytest.approx(LEVEL["loud"] / LEVEL["soft"], rel=0.05) and ratio >= 4


def test_melody_direction_by_fft_peak() -> None:
    """The melody band's FFT peak moves up in a rising melody, down in a falling one, stays in a steady
    one, and there is none without music (events included: the melody has its own register)."""
    q = N_SAMPLES // 4
    for seed in range(3):
        specs = [("buzz", "loud"), ("chirp", "loud"), ("knock", "loud")]
        peaks = {}
        for music in MUSIC[1:]:
            w = synthesise(track(seed, specs, "hiss", music))
            peaks[music] = [peak_hz(w[k * q:(k + 1) * q], 1900, 4200) for k in range(4)]
        assert peaks["rising"] == pytest.approx(list(MELODY_HZ), abs=4)
        assert peaks["falling"] == pytest.approx(list(MELODY_HZ[::-1]), abs=4)
        assert max(peaks["steady"]) - min(peaks["steady"]) < 4
        silent = synthesise(track(seed, specs, "none", "none"))
        music_w = synthesise(track(seed, specs, "none", "rising"))
        assert melody_band(music_w) > 10 * melody_band(silent)


def test_sound_type_by_spectrum() -> None:
    """A beep's energy sits at BEEP_HZ; a chirp's peak frequency rises over the event."""
    t = track(5, [("beep", "loud"), ("chirp", "loud")])
    w = synthesise(t)
    beep, chirp = t.events
    seg = w[int(beep.start * SAMPLE_RATE):int(beep.end * SAMPLE_RATE)]
    assert peak_hz(seg, 100, 1900) == pytest.approx(BEEP_HZ, abs=8)
    a, b = int(chirp.start * SAMPLE_RATE), int(chirp.end * SAMPLE_RATE)
    half = (a + b) // 2
    assert peak_hz(w[half:b], 100, 1900) > peak_hz(w[a:half], 100, 1900) + 200


def test_order_in_time() -> None:
    t = track(2, [("knock", "loud"), ("beep", "soft")])
    w = synthesise(t)
    first, second = t.events
    assert t.sounds() == ("knock", "beep") and first.end < second.start
    env = envelope(w)
    into_first, into_second = (int(e.start * SAMPLE_RATE) // WIN + 1 for e in (first, second))
    assert env[into_first] > 0.1 > env[into_second + 1]


def test_deterministic_per_seed() -> None:
    a = track(11, [("knock", "loud")], "crackle", "steady")
    b = track(11, [("knock", "loud")], "crackle", "steady")
    c = track(12, [("knock", "loud")], "crackle", "steady")
    assert a == b and np.array_equal(synthesise(a), synthesise(b))
    assert not np.array_equal(synthesise(a), synthesise(c))


def test_frame_labels_match_events() -> None:
    t = track(4, [("chirp", "loud"), ("knock", "soft")], "hum", "rising")
    lab = t.frame_labels(0.02)
    assert all(v.shape == (100,) for v in lab.values())
    env = envelope(synthesise(t))
    # the labelled frames of the loud chirp are where the envelope is high
    on = lab["sound"] == 1 + SOUND_TYPES.index("chirp")
    quiet = (lab["sound"] == 0) & (np.roll(lab["sound"], 1) == 0) & (np.roll(lab["sound"], -1) == 0)
    assert on.sum() >= MIN_EVENT_S / 0.02 - 1 and env[on].min() > 0.1 > 0.03 > env[quiet].max()
    assert set(lab["loudness"][on]) == {2} and set(lab["ambient"]) == {AMBIENTS.index("hum")}
    assert list(lab["note"][::25]) == [1, 2, 3, 4]


def test_invalid_tracks_refused() -> None:
    with pytest.raises(ValueError, match="sound"):
        SoundEvent("moo", "loud", 0.1, 0.2)
    with pytest.raises(ValueError, match=r">= 0\.15"):
        SoundEvent("beep", "loud", 0.1, 0.05)
    with pytest.raises(ValueError, match="gaps"):
        Soundtrack((SoundEvent("beep", "loud", 0.1, 0.2), SoundEvent("buzz", "loud", 0.25, 0.2)))
    with pytest.raises(ValueError, match="gaps"):  # a word spoken over an event
        Soundtrack((SoundEvent("beep", "loud", 0.1, 0.2),), speech=Utterance("red", "man", "says", 0, 0.2))
    with pytest.raises(ValueError, match="speaker"):
        Utterance("red", "child", "says", 0, 0.2)
    with pytest.raises(ValueError, match="ambient"):
        Soundtrack((), ambient="rain")
    with pytest.raises(ValueError, match="do not fit"):
        place_events(np.random.default_rng(0), [("beep", "soft")] * 8)
    with pytest.raises(ValueError, match="spoken word do not fit"):
        place_events(np.random.default_rng(0), [("beep", "soft")] * 5, ("yellow", "man", "says", 0))
