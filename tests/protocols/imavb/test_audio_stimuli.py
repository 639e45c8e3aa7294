"""World clips with sound: vision part unchanged, audio premises true/false of the track, text alone
cannot tell standard from misleading."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from faithtests.models.interfaces import Audio
from faithtests.protocols.imavb import audio_stimuli
from faithtests.protocols.imavb.audio_stimuli import (
    AMBIENT_NP,
    AUDIO_CATEGORIES,
    AUDIO_SUBCATEGORIES,
    CATEGORY_SUBCATEGORIES,
    CLIP_FPS,
    CLIP_FRAMES,
    NOT_PRODUCED,
    AudioClaim,
    ClipItem,
    clip_item,
    clip_items,
    clip_records,
)
from faithtests.protocols.imavb.records import OPTION_E, OPTION_F, SPLITS
from faithtests.protocols.imavb.sources import world_records
from faithtests.protocols.imavb.stimuli import premise_item
from faithtests.world.sound import N_SAMPLES, SAMPLE_RATE, SHAPE_SOUND, Soundtrack

N = 150


@pytest.fixture(scope="module")
def items() -> list[ClipItem]:
    return clip_items(N, seed=3)


def test_vision_part_is_the_image_world_bit_for_bit(items: list[ClipItem]) -> None:
    for i, it in enumerate(items[:30]):
        ref = premise_item(3, i)
        assert it.vision == ref
        assert len(it.frames) == CLIP_FRAMES
        assert all(f.tobytes() == ref.image().tobytes() for f in it.frames)


def test_records_vision_rows_equal_world_records(items: list[ClipItem]) -> None:
    recs = clip_records(items[:20])
    world = world_records(20, 3)
    vision = [r for r in recs if r.split in SPLITS[:2]]
    # item ids, questions, options, answers, categories (loaders excluded; only fps is new)
    assert [replace(r, fps=None) for r in vision] == world
    assert [r.split for r in recs[:4]] == list(SPLITS)
    for r in recs:
        assert r.fps == CLIP_FPS and r.audio is not None and r.media is not None
    a, b = recs[0].audio(), recs[3].audio()  # type: ignore[misc]
    assert isinstance(a, Audio) and a is b
    assert a.sampling_rate == SAMPLE_RATE and a.samples.shape == (N_SAMPLES,)
    assert np.array_equal(a.samples, items[0].audio) and len(recs[2].load_media()) == CLIP_FRAMES
    assert len({r.stimulus_id for r in recs[:4]}) == 1 == len({r.audio for r in recs[:4]})


def test_answers_options_and_categories(items: list[ClipItem]) -> None:
    cats: Counter[str] = Counter()
    subs: Counter[str | None] = Counter()
    letters: Counter[str] = Counter()
    for it in items:
        std, mis = it.standard_audio, it.misleading_audio
        assert std.options == mis.options and std.options[4:] == (OPTION_E, OPTION_F)
        assert len(set(std.options)) == 6
        assert std.correct_answer in "ABCD" and mis.correct_answer == "F"
        assert std.variant == "standard_audio" and mis.variant == "misleading_audio"
        assert std.stimulus_id == mis.stimulus_id == it.vision.stimulus_id
        assert std.subcategory is None and mis.subcategory in CATEGORY_SUBCATEGORIES[std.category]
        cats[std.category] += 1
        subs[mis.subcategory] += 1
        letters[std.correct_answer] += 1
    assert set(cats) == set(AUDIO_CATEGORIES) and set(subs) == set(AUDIO_SUBCATEGORIES)
    assert min(letters.values()) > N / 4 * 0.6
    assert set(NOT_PRODUCED) == {"speech_context"}
    speech = sum(subs[k] for k in ("speech_content", "speech_speaker", "speech_tone"))
    assert 0.1 * N < speech < 0.35 * N  # two of five categories carry speech premises (3 of 5, 3 of 7)


def test_misleading_swaps_exactly_one_detail_false_of_the_track(items: list[ClipItem]) -> None:
    fields = ("kind", "sound", "loudness", "source", "value", "said")
    for it in items:
        t, c = it.audio_claim, it.false_audio_claim
        assert c.holds(it.track) is False and t.holds(it.track) is True
        assert sum(getattr(t, f) != getattr(c, f) for f in fields) == 1
        if t.kind == "speech":  # the word, the speaker or the manner: one of the three, as the subcategory
            assert t.said is not None and c.said is not None and it.track.speech is not None
            changed = [k for k, a, b in zip(("speech_content", "speech_speaker", "speech_tone"), t.said,
                                            c.said, strict=True) if a != b]
            assert changed == [it.misleading_audio.subcategory]
            assert (it.track.speech.word, it.track.speech.speaker, it.track.speech.tone) == t.said
            speaker, tone, word = t.said[1], t.said[2], t.said[0]
            assert it.standard_audio.question.startswith(f"After a {speaker} {tone} {word}, ")
        std_q, mis_q = it.standard_audio.question, it.misleading_audio.question
        query = std_q.split(", ", 1)[1]
        assert mis_q.split(", ", 1)[1] == query and std_q != mis_q  # query word for word, premise differs


def test_answer_is_true_of_the_track(items: list[ClipItem]) -> None:
    """Each category's answer re-derived from the track (and scene) by hand."""
    for it in items:
        q, t = it.standard_audio, it.track
        answer = q.options["ABCD".index(q.correct_answer)]
        if q.category == "existence":
            assert {f"a {s}" for s in t.sounds()} == {answer}
        elif q.category == "time_order":
            assert answer == f"a {t.sounds()[0]}"
        elif q.category == "temporal":
            claim = it.audio_claim
            n = t.count(claim.sound, claim.loudness) if claim.kind == "event" else t.count(
                SHAPE_SOUND[claim.source.shape])  # type: ignore[union-attr]
            assert answer == ("one", "two", "three", "four")[n - 1]
        elif q.category == "cross_modality":
            shape = answer.split()[-1]
            assert set(t.sounds()) == {SHAPE_SOUND[shape]}
            assert sum(g.shape == shape for g in it.vision.scene.groups()) == 1
        else:
            assert q.category == "scene_description"
            assert answer == AMBIENT_NP[t.ambient]


def _premises(items: list[ClipItem]) -> list[tuple[str, int]]:
    """(premise phrase, 1 if misleading) of both audio questions of every item."""
    return [(it.standard_audio.question.split(", ")[0], 0) for it in items] + [
        (it.misleading_audio.question.split(", ")[0], 1) for it in items]


def held_out_text_accuracy(train: list[ClipItem], test: list[ClipItem]) -> float:
    """Accuracy on ``test`` of the best text-only rule fitted on ``train``: the majority label of each
    premise phrase (ties and unseen phrases score 1/2)."""
    counts: list[Counter[str]] = [Counter(), Counter()]
    for phrase, y in _premises(train):
        counts[y][phrase] += 1
    score = 0.0
    for phrase, y in _premises(test):
        mis, std = counts[1][phrase], counts[0][phrase]
        score += 0.5 if mis == std else float((mis > std) == (y == 1))
    return score / (2 * len(test))


def test_text_alone_cannot_tell_standard_from_misleading(monkeypatch: pytest.MonkeyPatch) -> None:
    """The swapped values are drawn like the true ones: a text-only rule fitted on one seed is at chance
    on another (measured 0.50 at 1,500 + 1,500 items). Swapping always to the first false value instead
    (a skewed swap distribution) is caught."""
    train, test = clip_items(500, seed=7), clip_items(500, seed=8)
    assert abs(held_out_text_accuracy(train, test) - 0.5) < 0.05
    real = audio_stimuli.swap_candidates
    monkeypatch.setattr(audio_stimuli, "swap_candidates", lambda *a: real(*a)[:1])
    skewed = held_out_text_accuracy(clip_items(500, seed=7), clip_items(500, seed=8))
    assert skewed > 0.6


def test_a_premise_detector_beats_text() -> None:
    """The track tells the two apart exactly: a claim checker on the soundtrack scores 100%, so the
    split is answerable by hearing (the check a deaf model fails)."""
    for it in clip_items(40, seed=1):
        assert it.audio_claim.holds(it.track) and not it.false_audio_claim.holds(it.track)


def test_deterministic_and_independent_of_n() -> None:
    a = clip_items(5, seed=9)
    b = clip_items(3, seed=9, start=2)
    assert a[2:] == b
    assert clip_item(9, 4) == a[4] and np.array_equal(clip_item(9, 4).audio, a[4].audio)
    assert clip_item(10, 4).track != a[4].track


def test_claim_truth_checks() -> None:
    t = Soundtrack((), ambient="hum", music="rising")
    assert AudioClaim("ambient", value="hum").holds(t) and not AudioClaim("ambient", value="hiss").holds(t)
    assert AudioClaim("music", value="rising").holds(t) and not AudioClaim("event", "beep", "loud").holds(t)


def test_clips_without_speech_are_the_recipes_first_clips() -> None:
    """``speech=False`` (the reference omni's stages 1-8) draws no speech premise and no spoken word; the
    categories that never carry speech premises (time_order, cross_modality, temporal) draw the same
    clips either way."""
    plain, spoken = clip_items(60, 0, speech=False), clip_items(60, 0)
    assert all(it.track.speech is None and it.audio_claim.kind != "speech" for it in plain)
    assert any(it.audio_claim.kind == "speech" for it in spoken)
    same = [(a, b) for a, b in zip(plain, spoken, strict=True)
            if a.standard_audio.category in ("time_order", "cross_modality", "temporal")]
    assert len(same) >= 30
    assert all(a.track == b.track and a.misleading_audio == b.misleading_audio for a, b in same)
