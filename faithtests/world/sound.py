"""Sound of the reference world: short soundtracks with exact ground truth (docs/architecture.md, "The
world's sound").

A :class:`Soundtrack` is :data:`CLIP_SECONDS` of 16 kHz mono audio made of

- sound events, one at a time (never overlapping), each with a type (timbre) and a loudness:
  ``beep`` (a steady 880 Hz sine), ``buzz`` (a 220 Hz tone with six harmonics), ``chirp`` (a sine
  sweeping 500 -> 1500 Hz) and ``knock`` (a damped 180 Hz resonance with a noise burst); ``loud``
  events peak at :data:`LEVEL` ``loud`` = 5x ``soft``;
- an ambient bed: ``none``, ``hum`` (100 Hz mains hum), ``hiss`` (white noise) or ``crackle`` (sparse
  clicks);
- background music: ``none`` or a four-note melody in its own high register (2-4 kHz, above every
  event's energy) that is ``rising``, ``falling`` or ``steady`` (one repeated note);
- at most one spoken word (:class:`Utterance`, a real synthesiser's recording from
  :mod:`faithtests.world.speech`), placed between the events like one of them.

Each shape of the scene has a voice (:data:`SHAPE_SOUND`): a circle beeps, a square buzzes, a triangle
chirps, a cross knocks, so "which object makes the sound" is answered by seeing and hearing together;
a sound whose shape is not in the scene comes from off screen.
Signals are built to be told apart by a tiny audio encoder: events last >= :data:`MIN_EVENT_S` with
gaps >= :data:`MIN_GAP_S`, and the ambient bed and music stay well below a soft event.

:func:`synthesise` is a pure function of the track (its noise comes from ``noise_seed``); samplers take
an explicit ``numpy.random.Generator``. This module makes stimuli; it decodes nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from faithtests.world import speech

SAMPLE_RATE = 16_000
CLIP_SECONDS = 2.0
N_SAMPLES = int(SAMPLE_RATE * CLIP_SECONDS)

SOUND_TYPES: tuple[str, ...] = ("beep", "buzz", "chirp", "knock")
LOUDNESS: tuple[str, ...] = ("soft", "loud")
AMBIENTS: tuple[str, ...] = ("none", "hum", "hiss", "crackle")
MUSIC: tuple[str, ...] = ("none", "rising", "falling", "steady")
#: The voice of each shape (faithtests.world.scene.SHAPES): sound source <-> timbre.
SHAPE_SOUND: dict[str, str] = {"circle": "beep", "square": "buzz", "triangle": "chirp", "cross": "knock"}

#: Peak amplitude of an event by loudness (ratio 5: "louder" is unmistakable).
LEVEL: dict[str, float] = {"soft": 0.1, "loud": 0.5}
AMBIENT_LEVEL = 0.015
MUSIC_LEVEL = 0.02
MIN_EVENT_S, MAX_EVENT_S = 0.15, 0.3
MIN_GAP_S = 0.1
MARGIN_S = 0.05  # silence kept at both ends of the clip
BEEP_HZ, BUZZ_HZ, CHIRP_HZ, KNOCK_HZ = 880.0, 220.0, (500.0, 1500.0), 180.0
HUM_HZ = 100.0
#: The melody's notes (Hz), low to high; each note lasts a quarter of the clip.
MELODY_HZ: tuple[float, ...] = (2093.0, 2637.0, 3136.0, 3951.0)
N_NOTES = 4
RAMP_S = 0.01  # attack/release of tonal events (no clicks)
#: Peak amplitude of a spoken word: between a soft and a loud event, whispered or voiced alike.
SPEECH_LEVEL = 0.3


@dataclass(frozen=True)
class SoundEvent:
    sound: str  # SOUND_TYPES
    loudness: str  # LOUDNESS
    start: float  # seconds
    duration: float  # seconds

    def __post_init__(self) -> None:
        if self.sound not in SOUND_TYPES:
            raise ValueError(f"SoundEvent.sound={self.sound!r} is not one of {SOUND_TYPES}")
        if self.loudness not in LOUDNESS:
            raise ValueError(f"SoundEvent.loudness={self.loudness!r} is not one of {LOUDNESS}")
        if self.duration < MIN_EVENT_S - 1e-9 or self.start < 0 or self.end > CLIP_SECONDS + 1e-9:
            raise ValueError(f"SoundEvent {self} must last >= {MIN_EVENT_S} s inside the clip")

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclass(frozen=True)
class Utterance:
    """One spoken word: what is said, by whom, how (:mod:`faithtests.world.speech`), and when."""

    word: str
    speaker: str
    tone: str
    take: int
    start: float  # seconds

    def __post_init__(self) -> None:
        for name, value, allowed in (("word", self.word, speech.WORDS), ("speaker", self.speaker,
                                     speech.SPEAKERS), ("tone", self.tone, speech.TONES)):
            if value not in allowed:
                raise ValueError(f"Utterance.{name}={value!r} is not one of {allowed}")
        if not 0 <= self.take < speech.TAKES or self.start < 0 or self.end > CLIP_SECONDS + 1e-9:
            raise ValueError(f"Utterance {self} must be a take in 0..{speech.TAKES - 1} inside the clip")

    @property
    def duration(self) -> float:
        return speech.duration(self.word, self.speaker, self.tone, self.take)

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclass(frozen=True)
class Soundtrack:
    """Ground truth of one clip's audio: ``events`` in time order, the ambient bed, the music, and at
    most one spoken word (``speech``)."""

    events: tuple[SoundEvent, ...]
    ambient: str = "none"
    music: str = "none"
    noise_seed: int = 0
    speech: Utterance | None = None

    def __post_init__(self) -> None:
        if self.ambient not in AMBIENTS:
            raise ValueError(f"Soundtrack.ambient={self.ambient!r} is not one of {AMBIENTS}")
        if self.music not in MUSIC:
            raise ValueError(f"Soundtrack.music={self.music!r} is not one of {MUSIC}")
        spans: list[SoundEvent | Utterance] = sorted([*self.events, *([self.speech] if self.speech else [])],
                                                     key=lambda x: x.start)
        for a, b in itertools.pairwise(spans):
            if b.start < a.end + MIN_GAP_S - 1e-9:
                raise ValueError(f"events and speech must not overlap, with gaps >= {MIN_GAP_S} s: {a}, {b}")
        if [s for s in spans if isinstance(s, SoundEvent)] != list(self.events):
            raise ValueError(f"events must be in time order: {self.events}")

    def sounds(self) -> tuple[str, ...]:
        """Event types in time order."""
        return tuple(e.sound for e in self.events)

    def count(self, sound: str | None = None, loudness: str | None = None) -> int:
        """Events matching ``sound`` and ``loudness`` (``None`` matches any)."""
        return sum(1 for e in self.events
                   if (sound is None or e.sound == sound) and (loudness is None or e.loudness == loudness))

    def notes(self) -> tuple[float, ...]:
        """The melody's note frequencies in time order (empty without music)."""
        if self.music == "none":
            return ()
        if self.music == "steady":
            return (MELODY_HZ[1],) * N_NOTES
        return MELODY_HZ if self.music == "rising" else MELODY_HZ[::-1]

    def frame_labels(self, hop_s: float) -> dict[str, npt.NDArray[np.int64]]:
        """Per-frame integer labels (frame k covers [k * hop_s, (k + 1) * hop_s), labelled at its centre):
        ``sound`` 0 = no event else 1 + SOUND_TYPES index; ``loudness`` 0 = none, 1 soft, 2 loud;
        ``ambient`` AMBIENTS index; ``music`` MUSIC index; ``note`` 0 = none else 1 + MELODY_HZ index;
        while the word is spoken, ``word``, ``speaker`` and ``tone``: 0 = no speech else 1 + the index in
        speech.WORDS / SPEAKERS / TONES."""
        if hop_s <= 0 or hop_s > CLIP_SECONDS:
            raise ValueError(f"hop_s must be in (0, {CLIP_SECONDS}], got {hop_s}")
        n = round(CLIP_SECONDS / hop_s)
        centres = (np.arange(n) + 0.5) * hop_s
        sound = np.zeros(n, np.int64)
        loud = np.zeros(n, np.int64)
        for e in self.events:
            on = (centres >= e.start) & (centres < e.end)
            sound[on] = 1 + SOUND_TYPES.index(e.sound)
            loud[on] = 1 + LOUDNESS.index(e.loudness)
        note = np.zeros(n, np.int64)
        notes = self.notes()
        if notes:
            k = np.minimum((centres / (CLIP_SECONDS / N_NOTES)).astype(np.int64), N_NOTES - 1)
            note = np.array([1 + MELODY_HZ.index(notes[int(i)]) for i in k], np.int64)
        ambient = np.full(n, AMBIENTS.index(self.ambient), np.int64)
        music = np.full(n, MUSIC.index(self.music), np.int64)
        said = {k: np.zeros(n, np.int64) for k in ("word", "speaker", "tone")}
        if self.speech is not None:
            u = self.speech
            on = (centres >= u.start) & (centres < u.end)
            said["word"][on] = 1 + speech.WORDS.index(u.word)
            said["speaker"][on] = 1 + speech.SPEAKERS.index(u.speaker)
            said["tone"][on] = 1 + speech.TONES.index(u.tone)
        return {"sound": sound, "loudness": loud, "ambient": ambient, "music": music, "note": note, **said}


#: What a track's spoken word is: (word, speaker, tone, take); see speech.WORDS / SPEAKERS / TONES.
Said = tuple[str, str, str, int]


def _place(rng: np.random.Generator, drawn: Sequence[float], durations: Sequence[float],
           n_events: int) -> list[float]:
    """Start times (on the sample grid) of spans of ``durations`` (``drawn`` before rounding to the grid:
    the slack is taken from them, as the recipe's tracks were drawn) in this order, random gaps."""
    n = len(durations)
    slack = CLIP_SECONDS - 2 * MARGIN_S - float(np.sum(drawn)) - MIN_GAP_S * (n - 1)
    if slack < 0:
        what = f"{n_events} events" + (" and a spoken word" if n > n_events else "")
        raise ValueError(f"{what} do not fit in {CLIP_SECONDS} s")
    spare = slack * rng.dirichlet(np.ones(n + 1))
    starts, t = [], MARGIN_S
    for d, s in zip(durations, spare[:-1], strict=True):
        t += float(s)
        start = round(t * SAMPLE_RATE) / SAMPLE_RATE  # the sample grid: ground truth and samples agree
        starts.append(start)
        t = start + d + MIN_GAP_S
    return starts


def place_events(rng: np.random.Generator, specs: Sequence[tuple[str, str]],
                 said: Said | None = None) -> tuple[tuple[SoundEvent, ...], Utterance | None]:
    """Events of the given (sound, loudness) in this order, with random durations and gaps that fit, and
    the spoken word ``said`` (if any) at a random place among them."""
    n = len(specs)
    drawn = [float(d) for d in rng.uniform(MIN_EVENT_S, MAX_EVENT_S, size=n)] if n else []
    durations = [round(d * SAMPLE_RATE) / SAMPLE_RATE for d in drawn]
    if said is None:
        if n == 0:
            return (), None
        starts = _place(rng, drawn, durations, n)
        return tuple(SoundEvent(*spec, start, d)
                     for spec, start, d in zip(specs, starts, durations, strict=True)), None
    at = int(rng.integers(0, n + 1))
    said_s = speech.duration(*said)
    starts = _place(rng, [*drawn[:at], said_s, *drawn[at:]], [*durations[:at], said_s, *durations[at:]], n)
    word = Utterance(*said, start=starts.pop(at))
    return tuple(SoundEvent(*spec, start, d)
                 for spec, start, d in zip(specs, starts, durations, strict=True)), word


def sample_soundtrack(rng: np.random.Generator, specs: Sequence[tuple[str, str]], ambient: str | None = None,
                      music: str | None = None, said: Said | None = None) -> Soundtrack:
    """A track of ``specs`` events (and the word ``said``) placed at random; ambient bed and music uniform
    unless given."""
    events, word = place_events(rng, specs, said)
    amb = ambient if ambient is not None else str(rng.choice(AMBIENTS))
    mus = music if music is not None else str(rng.choice(MUSIC))
    return Soundtrack(events, amb, mus, int(rng.integers(0, 2**31 - 1)), word)


def sample_said(rng: np.random.Generator) -> Said:
    """A spoken word, its speaker, its tone and its take, each uniform."""
    return (str(rng.choice(speech.WORDS)), str(rng.choice(speech.SPEAKERS)), str(rng.choice(speech.TONES)),
            int(rng.integers(speech.TAKES)))


def _event_wave(e: SoundEvent, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    n = round(e.duration * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    if e.sound == "beep":
        w = np.sin(2 * np.pi * BEEP_HZ * t)
    elif e.sound == "buzz":
        w = np.zeros(n)
        for k in range(1, 7):
            w += np.sin(2 * np.pi * BUZZ_HZ * k * t) / k
    elif e.sound == "chirp":
        lo, hi = CHIRP_HZ
        w = np.sin(2 * np.pi * (lo * t + (hi - lo) * t**2 / (2 * e.duration)))
    else:  # knock: a damped low resonance with a low-passed (8-sample boxcar) noise burst
        noise = np.convolve(rng.standard_normal(n), np.ones(8) / 8, mode="same")
        w = (np.sin(2 * np.pi * KNOCK_HZ * t) + 0.5 * noise) * np.exp(-t / (e.duration / 2))
    if e.sound != "knock":
        ramp = np.minimum(1.0, np.minimum(t, t[-1] - t) / RAMP_S)
        w = w * ramp
    peak = float(np.abs(w).max())
    return w * (LEVEL[e.loudness] / peak if peak > 0 else 0.0)


def _ambient_wave(ambient: str, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    t = np.arange(N_SAMPLES) / SAMPLE_RATE
    if ambient == "hum":
        return AMBIENT_LEVEL * (np.sin(2 * np.pi * HUM_HZ * t) + 0.5 * np.sin(4 * np.pi * HUM_HZ * t)) / 1.5
    if ambient == "hiss":
        return AMBIENT_LEVEL / 2 * rng.standard_normal(N_SAMPLES)
    if ambient == "crackle":  # ~40 clicks a second, each a 2 ms decaying pulse
        w = np.zeros(N_SAMPLES)
        pulse = np.exp(-np.arange(32) / 6.0) * rng.choice([-1.0, 1.0], size=32)
        for i in np.flatnonzero(rng.random(N_SAMPLES) < 40 / SAMPLE_RATE):
            seg = w[i:i + 32]
            seg += 3 * AMBIENT_LEVEL * pulse[: seg.size]
        return w
    return np.zeros(N_SAMPLES)


def _music_wave(track: Soundtrack) -> npt.NDArray[np.float64]:
    w = np.zeros(N_SAMPLES)
    span = N_SAMPLES // N_NOTES
    t = np.arange(span) / SAMPLE_RATE
    env = np.minimum(1.0, np.minimum(t, t[-1] - t) / 0.03)  # 30 ms ramps: notes are heard apart
    for k, hz in enumerate(track.notes()):
        w[k * span:(k + 1) * span] = MUSIC_LEVEL * env * np.sin(2 * np.pi * hz * t)
    return w


def synthesise(track: Soundtrack) -> npt.NDArray[np.float32]:
    """The track's waveform: :data:`N_SAMPLES` float32 samples at :data:`SAMPLE_RATE` Hz, in [-1, 1];
    the same track always gives the same samples."""
    rng = np.random.default_rng(track.noise_seed)
    w = _ambient_wave(track.ambient, rng) + _music_wave(track)
    for e in track.events:
        seg = _event_wave(e, rng)
        i = round(e.start * SAMPLE_RATE)
        w[i:i + seg.size] += seg[: N_SAMPLES - i]
    if track.speech is not None:
        u = track.speech
        seg = speech.utterance_samples(u.word, u.speaker, u.tone, u.take)
        i = round(u.start * SAMPLE_RATE)
        w[i:i + seg.size] += SPEECH_LEVEL / float(np.abs(seg).max()) * seg[: N_SAMPLES - i]
    return np.clip(w, -1.0, 1.0).astype(np.float32)
