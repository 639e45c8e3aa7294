"""Reference-world clips with sound for IMAVB's audio splits (§2.3, App. H, Table 14).

A clip item is a vision premise item (:func:`.stimuli.premise_item`, bit for bit: the image-only
models' records do not change) whose scene is shown as :data:`CLIP_FRAMES` frames at
:data:`CLIP_FPS`, plus a synthesised soundtrack (:mod:`faithtests.world.sound`) drawn from its own item
stream (:data:`KIND`), and two audio questions: standard (premise true of the track, answer A-D) and
misleading (the same question with exactly one audio premise detail swapped to one false of the track,
answer F). The swapped value is drawn from the values false of the track the way the true value is drawn
from the world, so the question text alone does not tell the two apart. The query always asks about an
audible detail other than the premise's (App. I.3, "no answer in premise").

Question categories (IMAVB's eight, App. H): existence, time_order, cross_modality, scene_description
and temporal (counting events). ``emotional``, ``plot`` and ``causal`` are not asked: the world's sounds
carry no emotion, story or cause that could be stated honestly. A cross_modality item needs a group
whose shape is unique in the scene (its voice then names it); otherwise it asks an existence question.

Misleading subcategories (Table 14's audio names): sound_type, sound_intensity, ambient_sound,
background_music, sound_source, and the speech ones a real synthesiser makes honestly
(:mod:`faithtests.world.speech`: one spoken colour word, by a man or a woman, voiced or whispered):
speech_content (the word), speech_speaker (a man's or a woman's voice) and speech_tone (said or
whispered). A speech premise names all three ("After a woman whispers red"); its misleading twin
changes one. Not produced: speech_context (:data:`NOT_PRODUCED`), as the world has no dialogue.

``speech=False`` draws the clips without speech premises exactly as before speech existed (the reference
omni's recipe trained its first stages on those).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import cast

import numpy as np
from PIL import Image

from faithtests.models.interfaces import Audio
from faithtests.protocols.imavb.records import LETTERS, OPTION_E, OPTION_F, PremiseRecord, Split
from faithtests.protocols.imavb.records import SPEECH_SUBCATEGORIES as ALL_SPEECH
from faithtests.protocols.imavb.stimuli import PremiseItem, PremiseQuestion, premise_item
from faithtests.world.captions import NUMBER_WORDS
from faithtests.world.ids import item_rng
from faithtests.world.scene import COLOURS, SHAPES, Group, Scene
from faithtests.world.sound import (
    AMBIENTS,
    LOUDNESS,
    MUSIC,
    SAMPLE_RATE,
    SHAPE_SOUND,
    SOUND_TYPES,
    Soundtrack,
    sample_said,
    sample_soundtrack,
    synthesise,
)
from faithtests.world.speech import SPEAKERS, TONES
from faithtests.world.speech import WORDS as SPOKEN_WORDS

#: Item stream of the sound draws (the vision items keep theirs: ``stimuli.KIND``).
KIND = "premise_audio"
CLIP_FRAMES = 2
CLIP_FPS = 1.0

AUDIO_CATEGORIES: tuple[str, ...] = (
    "existence", "time_order", "cross_modality", "scene_description", "temporal",
)
#: Table 14's audio subcategories the world does not produce, and why.
NOT_PRODUCED: dict[str, str] = {
    "speech_context": "the world's speech is one word: there is no dialogue whose situation could be "
                      "described",
}
#: The speech subcategories the world produces: Table 14's (records.SPEECH_SUBCATEGORIES) but those above.
SPEECH_SUBCATEGORIES: tuple[str, ...] = tuple(s for s in ALL_SPEECH if s not in NOT_PRODUCED)
AUDIO_SUBCATEGORIES: tuple[str, ...] = (
    "sound_type", "sound_intensity", "ambient_sound", "background_music", "sound_source",
    *SPEECH_SUBCATEGORIES,
)
#: The premise subcategories each question category can carry (the query asks about another detail);
#: speech premises go with the categories whose clips have room for a word beside their events.
CATEGORY_SUBCATEGORIES: dict[str, tuple[str, ...]] = {
    "existence": ("ambient_sound", "background_music", *SPEECH_SUBCATEGORIES),
    "time_order": ("ambient_sound", "background_music"),
    "cross_modality": ("sound_intensity", "ambient_sound", "background_music"),
    "scene_description": ("sound_type", "sound_intensity", "sound_source", "background_music",
                          *SPEECH_SUBCATEGORIES),
    "temporal": ("sound_type", "sound_intensity", "sound_source"),
}

SOUND_NP = {s: f"a {s}" for s in SOUND_TYPES}
AMBIENT_NP = {"none": "none at all", "hum": "a low hum", "hiss": "a steady hiss",
              "crackle": "a faint crackle"}
AMBIENT_PREMISE = {"none": "In otherwise silent surroundings", "hum": "Over a low hum",
                   "hiss": "Over a steady hiss", "crackle": "Over a faint crackle"}
MUSIC_PREMISE = {"none": "With no music playing", "rising": "While a rising melody plays",
                 "falling": "While a falling melody plays", "steady": "While a one-note melody plays"}
#: How an event or source premise opens, by category.
EVENT_PREMISE = {"scene_description": "After {}", "temporal": "Listening for {}",
                 "cross_modality": "When {} plays"}


@dataclass(frozen=True)
class AudioClaim:
    """A structured audio premise: ``kind`` is "event" (``sound`` / ``loudness``, ``None`` = any),
    "source" (the ``source`` group sounds), "ambient" or "music" (``value``), or "speech" (``said``:
    word, speaker, tone)."""

    kind: str
    sound: str | None = None
    loudness: str | None = None
    source: Group | None = None
    value: str | None = None
    said: tuple[str, str, str] | None = None

    def holds(self, track: Soundtrack) -> bool:
        """Whether the track makes the claim true (a source claim: its shape's voice is heard; a speech
        claim: that word, in that voice and manner)."""
        if self.kind == "speech":
            u = track.speech
            return u is not None and (u.word, u.speaker, u.tone) == self.said
        if self.kind == "event":
            return track.count(self.sound, self.loudness) > 0
        if self.kind == "source":
            assert self.source is not None
            return SHAPE_SOUND[self.source.shape] in track.sounds()
        return (track.ambient if self.kind == "ambient" else track.music) == self.value

    def noun_phrase(self) -> str:
        if self.kind == "source":
            assert self.source is not None
            return f"the sound of the {self.source.colour} {self.source.shape}"
        return f"the {self.loudness} {self.sound or 'sound'}"

    def premise(self, category: str) -> str:
        if self.kind == "speech":
            assert self.said is not None
            word, speaker, tone = self.said
            return f"After a {speaker} {tone} {word}"
        if self.kind == "ambient":
            return AMBIENT_PREMISE[str(self.value)]
        if self.kind == "music":
            return MUSIC_PREMISE[str(self.value)]
        return EVENT_PREMISE[category].format(self.noun_phrase())


@dataclass(frozen=True)
class ClipItem:
    vision: PremiseItem
    track: Soundtrack
    standard_audio: PremiseQuestion
    misleading_audio: PremiseQuestion
    audio_claim: AudioClaim  # true of the track
    false_audio_claim: AudioClaim  # false of the track

    @property
    def stimulus_id(self) -> str:
        return self.vision.stimulus_id

    @cached_property
    def frames(self) -> tuple[Image.Image, ...]:
        """The scene shown for the clip's length (the time order lives in the soundtrack)."""
        return (self.vision.image(),) * CLIP_FRAMES

    @cached_property
    def audio(self) -> np.ndarray:
        return synthesise(self.track)


# ------------------------------------------------------------------------------------------ builds
#: (track, true claim, query, four content options, answer text) of one category; None = redraw.
Build = tuple[Soundtrack, AudioClaim, str, list[str], str]


def _unique_shape_groups(scene: Scene) -> list[Group]:
    groups = scene.groups()
    return [g for g in groups if sum(1 for h in groups if h.shape == g.shape) == 1]


def _bed_claim(sub: str, track: Soundtrack) -> AudioClaim:
    if sub in SPEECH_SUBCATEGORIES:
        assert track.speech is not None
        return AudioClaim("speech", said=(track.speech.word, track.speech.speaker, track.speech.tone))
    return AudioClaim("ambient", value=track.ambient) if sub == "ambient_sound" else AudioClaim(
        "music", value=track.music)


def _said(rng: np.random.Generator, sub: str) -> tuple[str, str, str, int] | None:
    """The track's spoken word when the premise is about speech (drawn only then: other clips keep the
    draws they had before the world spoke)."""
    return sample_said(rng) if sub in SPEECH_SUBCATEGORIES else None


def _loudnesses(rng: np.random.Generator, n: int) -> list[str]:
    return [str(x) for x in rng.choice(LOUDNESS, size=n)]


def _existence(rng: np.random.Generator, scene: Scene, sub: str) -> Build | None:
    sound = str(rng.choice(SOUND_TYPES))
    specs = [(sound, v) for v in _loudnesses(rng, int(rng.integers(1, 4)))]
    track = sample_soundtrack(rng, specs, said=_said(rng, sub))
    return track, _bed_claim(sub, track), "which of these sounds can be heard", [
        SOUND_NP[s] for s in SOUND_TYPES], SOUND_NP[sound]


def _time_order(rng: np.random.Generator, scene: Scene, sub: str) -> Build | None:
    sounds = [str(s) for s in rng.permutation(SOUND_TYPES)[: int(rng.integers(2, 4))]]
    track = sample_soundtrack(rng, list(zip(sounds, _loudnesses(rng, len(sounds)), strict=True)))
    return track, _bed_claim(sub, track), "which sound is heard first", [
        SOUND_NP[s] for s in SOUND_TYPES], SOUND_NP[sounds[0]]


def _group_text(colour: str, shape: str) -> str:
    return f"the {colour} {shape}"


def _cross_modality(rng: np.random.Generator, scene: Scene, sub: str) -> Build | None:
    unique = _unique_shape_groups(scene)
    if not unique:
        return None
    src = unique[int(rng.integers(len(unique)))]
    loud = str(rng.choice(LOUDNESS))
    track = sample_soundtrack(rng, [(SHAPE_SOUND[src.shape], loud)] * int(rng.integers(1, 3)))
    claim = AudioClaim("event", loudness=loud) if sub == "sound_intensity" else _bed_claim(sub, track)
    present = {(g.colour, g.shape) for g in scene.groups()}
    absent = [(c, s) for c in COLOURS for s in SHAPES if (c, s) not in present]
    fill = [absent[int(i)] for i in rng.permutation(len(absent))[: 4 - len(present)]]
    content = [_group_text(c, s) for c, s in sorted(present) + fill]
    return track, claim, "which object makes the sound", content, _group_text(src.colour, src.shape)


def _source_or_sound(rng: np.random.Generator, scene: Scene, sub: str) -> tuple[str, Group | None] | None:
    """The premise's sound type, and its source group for a sound_source premise (None: no group fits)."""
    if sub != "sound_source":
        return str(rng.choice(SOUND_TYPES)), None
    unique = _unique_shape_groups(scene)
    if not unique:
        return None
    src = unique[int(rng.integers(len(unique)))]
    return SHAPE_SOUND[src.shape], src


def _event_claim(sound: str, loud: str, src: Group | None) -> AudioClaim:
    return AudioClaim("source", source=src) if src is not None else AudioClaim("event", sound, loud)


def _scene_description(rng: np.random.Generator, scene: Scene, sub: str) -> Build | None:
    picked = _source_or_sound(rng, scene, sub)
    if picked is None:
        return None
    sound, src = picked
    others = [str(s) for s in rng.choice(SOUND_TYPES, size=int(rng.integers(0, 3)))]
    sounds = [sound, *others]
    order = [int(i) for i in rng.permutation(len(sounds))]
    specs = [(sounds[i], v) for i, v in zip(order, _loudnesses(rng, len(sounds)), strict=True)]
    track = sample_soundtrack(rng, specs, said=_said(rng, sub))
    ref = track.events[order.index(0)]
    claim = (AudioClaim("music", value=track.music) if sub == "background_music" else _bed_claim(sub, track)
             if sub in SPEECH_SUBCATEGORIES else _event_claim(ref.sound, ref.loudness, src))
    return track, claim, "what background noise can be heard", [
        AMBIENT_NP[a] for a in AMBIENTS], AMBIENT_NP[track.ambient]


def _temporal(rng: np.random.Generator, scene: Scene, sub: str) -> Build | None:
    picked = _source_or_sound(rng, scene, sub)
    if picked is None:
        return None
    sound, src = picked
    loud = str(rng.choice(LOUDNESS))
    count = int(rng.integers(1, 5))
    specs = [(sound, loud)] * count
    if count < 4 and rng.random() < 0.5:  # a distractor of another type, anywhere in the clip
        other = str(rng.choice([s for s in SOUND_TYPES if s != sound]))
        specs.insert(int(rng.integers(0, count + 1)), (other, str(rng.choice(LOUDNESS))))
    track = sample_soundtrack(rng, specs)
    return track, _event_claim(sound, loud, src), "how many times is it heard", [
        NUMBER_WORDS[n] for n in (1, 2, 3, 4)], NUMBER_WORDS[count]


_BUILDS: dict[str, Callable[[np.random.Generator, Scene, str], Build | None]] = {
    "existence": _existence, "time_order": _time_order, "cross_modality": _cross_modality,
    "scene_description": _scene_description, "temporal": _temporal,
}


def _speech_swaps(sub: str) -> Callable[[AudioClaim, Scene], list[AudioClaim]]:
    def swaps(claim: AudioClaim, _: Scene) -> list[AudioClaim]:
        assert claim.said is not None
        word, speaker, tone = claim.said
        said = ([(w, speaker, tone) for w in SPOKEN_WORDS] if sub == "speech_content" else
                [(word, p, tone) for p in SPEAKERS] if sub == "speech_speaker" else
                [(word, speaker, t) for t in TONES])
        return [replace(claim, said=x) for x in said]
    return swaps


#: Subcategory -> the claims of the same shape with that detail set to each of its values.
_SWAPS: dict[str, Callable[[AudioClaim, Scene], list[AudioClaim]]] = {
    "ambient_sound": lambda c, _: [replace(c, value=a) for a in AMBIENTS],
    "background_music": lambda c, _: [replace(c, value=m) for m in MUSIC],
    "sound_type": lambda c, _: [replace(c, sound=s) for s in SOUND_TYPES],
    "sound_intensity": lambda c, _: [replace(c, loudness=v) for v in LOUDNESS],
    "sound_source": lambda c, scene: [replace(c, source=g) for g in scene.groups()],
    **{sub: _speech_swaps(sub) for sub in SPEECH_SUBCATEGORIES},
}


def swap_candidates(claim: AudioClaim, sub: str, track: Soundtrack, scene: Scene) -> list[AudioClaim]:
    """Claims of the same shape as ``claim`` with the ``sub`` detail changed, each false of ``track``."""
    if sub not in _SWAPS:
        raise ValueError(f"unknown audio subcategory {sub!r}; expected one of {AUDIO_SUBCATEGORIES}")
    return [c for c in _SWAPS[sub](claim, scene) if c != claim and not c.holds(track)]


def _question(sid: str, variant: str, text: str, opts: tuple[str, ...], letter: str, category: str,
              sub: str | None) -> PremiseQuestion:
    return PremiseQuestion(f"{sid}/{variant}", sid, variant, text, opts, letter, category, sub)


def _subcategories(category: str, speech: bool) -> tuple[str, ...]:
    subs = CATEGORY_SUBCATEGORIES[category]
    return subs if speech else tuple(s for s in subs if s not in SPEECH_SUBCATEGORIES)


def clip_item(seed: int, index: int, *, speech: bool = True) -> ClipItem:
    """Clip ``index``: the vision item ``premise_item(seed, index)`` with a soundtrack and its audio
    questions; the category cycles through AUDIO_CATEGORIES, the premise subcategory is drawn uniformly
    among the category's (CATEGORY_SUBCATEGORIES; ``speech=False``: the non-speech ones, module doc)."""
    vision = premise_item(seed, index)
    rng = item_rng(KIND, seed, index)
    sid = vision.stimulus_id
    category = AUDIO_CATEGORIES[index % len(AUDIO_CATEGORIES)]
    if category == "cross_modality" and not _unique_shape_groups(vision.scene):
        category = "existence"  # no object has a voice of its own (module doc)
    for _ in range(100):
        sub = str(rng.choice(_subcategories(category, speech)))
        built = _BUILDS[category](rng, vision.scene, sub)
        if built is None:
            continue
        track, claim, query, content, answer = built
        cands = swap_candidates(claim, sub, track, vision.scene)
        if not claim.holds(track) or not cands:
            continue
        false_claim = cands[int(rng.integers(len(cands)))]
        order = [int(i) for i in rng.permutation(4)]
        opts = tuple([content[i] for i in order] + [OPTION_E, OPTION_F])
        letter = LETTERS[opts.index(answer)]
        std = _question(sid, "standard_audio", f"{claim.premise(category)}, {query}?", opts, letter,
                        category, None)
        mis = _question(sid, "misleading_audio", f"{false_claim.premise(category)}, {query}?", opts, "F",
                        category, sub)
        return ClipItem(vision, track, std, mis, claim, false_claim)
    raise RuntimeError(f"no audio question found in 100 draws (seed={seed}, index={index})")


def clip_items(n: int, seed: int, start: int = 0, *, speech: bool = True) -> list[ClipItem]:
    return [clip_item(seed, i, speech=speech) for i in range(start, start + n)]


# ------------------------------------------------------------------------------------------ records
def _loaders(item: ClipItem) -> tuple[Callable[[], tuple[Image.Image, ...]], Callable[[], Audio]]:
    held: list[Audio] = []

    def frames() -> tuple[Image.Image, ...]:
        return item.frames

    def audio() -> Audio:
        if not held:  # synthesised once per clip, on first use
            held.append(Audio(item.audio, SAMPLE_RATE))
        return held[0]

    return frames, audio


def clip_records(items: Sequence[ClipItem]) -> list[PremiseRecord]:
    """Records of all four splits per clip (vision questions exactly as the image world's), each carrying
    the clip's frames, its soundtrack and ``fps``; a clip's records are next to each other."""
    out: list[PremiseRecord] = []
    for item in items:
        frames, audio = _loaders(item)
        qs = (item.vision.standard, item.vision.misleading, item.standard_audio, item.misleading_audio)
        for q in qs:
            out.append(PremiseRecord(
                item_id=q.question_id, stimulus_id=q.stimulus_id, split=cast(Split, q.variant),
                question=q.question, options=tuple(q.options), correct_answer=q.correct_answer,
                category=q.category, subcategory=q.subcategory, source="world", media=frames,
                audio=audio, fps=CLIP_FPS,
            ))
    return out
