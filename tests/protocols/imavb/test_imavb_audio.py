"""IMAVB's audio half in the suite: which records a model gets (by whether it hears), the prompts that
carry a clip's soundtrack, invalid counts for an undecodable track, the vision − audio gaps and the full
Bal against hand-computed values, A6/A7 on clips, the std_a / mis_a gates on both sides (stand-in
models), and the plugin adding the bundled omni reference to the audio suites alone."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from faithtests.models.interfaces import Audio, Decision, Hooks, Prompt
from faithtests.protocols import load_suite_thresholds
from faithtests.protocols.imavb.audio_stimuli import CLIP_FPS, CLIP_FRAMES, clip_items, clip_records
from faithtests.protocols.imavb.fixtures import AUDIO_NOT_APPLICABLE, NO_SOUNDTRACK, runnable
from faithtests.protocols.imavb.metrics import answers, correct, majority_share, modality_gap, split_scores
from faithtests.protocols.imavb.prompts import a1_text, make_prompt, trim_audio
from faithtests.protocols.imavb.records import OPTION_F, PremiseRecord, modality
from faithtests.protocols.imavb.results import mis_rejection, rejection_gap
from faithtests.protocols.imavb.run import (
    AUDIO_PAST_WINDOW,
    CLIP_NOT_APPLICABLE,
    UNREADABLE_AUDIO,
    ChoiceRun,
    hears,
    logit_lens,
    run_choice,
    run_variant,
)
from faithtests.protocols.imavb.shuffles import displayed, record_permutation
from faithtests.protocols.imavb.sources import world_records

ROOT = Path(__file__).resolve().parents[3]


def _clips(n: int = 3) -> list[PremiseRecord]:
    return clip_records(clip_items(n, seed=0))


class StandIn:
    """Answers from the records it was built with (found by question text): the gold option, except
    on audio questions when ``deaf`` (then the first content option: it cannot hear a false premise).
    Keeps every prompt it is given."""

    spec = "stand-in"
    num_layers = 2

    def __init__(self, records: Sequence[PremiseRecord], *, accepts_audio: bool, deaf: bool = False) -> None:
        self.by_question = {(r.question, frozenset(r.options)): r for r in records}
        self.accepts_audio, self.deaf = accepts_audio, deaf
        self.prompts: list[Prompt] = []

    def _pick(self, text: str) -> int:
        question = text.split("Question:\n", 1)[1].split("\nOptions:", 1)[0]
        shown = [ln[3:] for ln in text.split("\n") if ln[:1] in set("ABCDEF") and ln[1:3] == ". "]
        r = self.by_question[question, frozenset(shown)]
        want = r.options[0] if self.deaf and modality(r.split) == "audio" else r.options[r.correct_index]
        return shown.index(want)

    def decide(
        self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
    ) -> Decision:
        self.prompts += prompts
        rows = [[5.0 if i == self._pick(p.text) else 0.0 for i in range(6)] for p in prompts]
        return Decision(logits=torch.tensor(rows), states=torch.zeros(2, len(prompts), 4))


def test_a_model_that_hears_runs_all_four_splits_an_image_model_the_vision_half() -> None:
    recs = _clips(3)
    assert runnable(recs, hearing=True) == (recs, {}, "")
    todo, na, reason = runnable(recs, hearing=False)
    assert [r.split for r in todo] == [r.split for r in recs if modality(r.split) == "vision"]
    assert na == {"standard_audio": 3, "misleading_audio": 3} and reason == AUDIO_NOT_APPLICABLE
    assert "takes no audio" in reason
    silent = [dataclasses.replace(r, audio=None) if r.split == "misleading_audio" else r for r in recs]
    todo, na, reason = runnable(silent, hearing=True)
    assert len(todo) == 9 and na == {"misleading_audio": 3} and reason == NO_SOUNDTRACK


def test_a_model_that_hears_gets_the_clip_and_its_soundtrack_exactly_as_trained() -> None:
    """Prompt(images=(), text=a1_text(question, displayed options), video=frames, audio, video_fps) for
    every split (vision questions too hear the clip), the trainer's form."""
    recs = _clips(2)
    vlm = StandIn(recs, accepts_audio=True)
    run = run_choice(vlm, recs)  # type: ignore[arg-type]
    assert len(run.records) == 8 and len(vlm.prompts) == 8 * 4
    for j, p in enumerate(vlm.prompts):
        r, sid = recs[j // 4], run.orders[j % 4]
        opts = displayed(r.options, record_permutation(r.stimulus_id, r.correct_answer, sid))
        assert p.text == a1_text(r.question, opts) and p.images == ()
        assert len(p.video) == CLIP_FRAMES and p.video_fps == CLIP_FPS
        assert p.audio is not None and p.audio.sampling_rate == 16000
        assert r.audio is not None and p.audio.digest() == r.audio().digest()


def test_an_image_model_gets_the_prompts_it_always_got() -> None:
    recs = world_records(3, seed=0)
    vlm = StandIn(recs, accepts_audio=False)
    run_choice(vlm, recs)  # type: ignore[arg-type]
    first = vlm.prompts[0]
    assert first == make_prompt(recs[0].load_media(), a1_text(recs[0].question, recs[0].options))
    assert all(p.audio is None and p.video == () and p.images for p in vlm.prompts)


def test_an_undecodable_soundtrack_is_counted_never_replaced_by_silence() -> None:
    def broken() -> Audio:
        raise ValueError("no audio stream in clip.mp4")

    recs = _clips(1)
    bad = [dataclasses.replace(r, audio=broken) if r.split == "standard_audio" else r for r in recs]
    run = run_choice(StandIn(recs, accepts_audio=True), bad)  # type: ignore[arg-type]
    assert run.invalid == {UNREADABLE_AUDIO: 1} and len(run.records) == 3
    assert "standard_audio" not in {r.split for r in run.records}
    # a model that takes no audio never loads the track: nothing to count
    run = run_choice(StandIn(recs, accepts_audio=False), bad)  # type: ignore[arg-type]
    assert run.invalid == {} and len(run.records) == 4


def test_a_clip_longer_than_the_models_audio_window_is_left_out_and_counted() -> None:
    """A model that hears at most 1 s whole (its adapter's ``audio_window_s``, found at load) gets none of
    the world's 2-s clips: every record of them is counted by kind with the clip's length, none is sent
    (never heard in part, never an exception); a window of 2 s or none takes them all."""
    recs = _clips(2)
    short = StandIn(recs, accepts_audio=True)
    short.audio_window_s = 1.0  # type: ignore[attr-defined]
    run = run_choice(short, recs)  # type: ignore[arg-type]
    assert run.invalid == {AUDIO_PAST_WINDOW: 8} and run.records == [] and short.prompts == []
    assert "2.0 s of audio; the model hears 1 s whole" in run.examples[AUDIO_PAST_WINDOW][0]
    for window in (2.0, None):
        whole = StandIn(recs, accepts_audio=True)
        whole.audio_window_s = window  # type: ignore[attr-defined]
        assert len(run_choice(whole, recs).records) == 8  # type: ignore[arg-type]


def test_a6_a7_on_world_clips_are_not_applicable_with_the_reason() -> None:
    recs = _clips(2)
    vr = run_variant(StandIn(recs, accepts_audio=True), recs, "A6")  # type: ignore[arg-type]
    assert vr.not_applicable == {CLIP_NOT_APPLICABLE: 8} and not vr.records
    assert "answer timestamp" in CLIP_NOT_APPLICABLE


def test_a4_on_clips_carries_the_soundtrack() -> None:
    recs = _clips(2)
    vlm = StandIn(recs, accepts_audio=True)
    vr = run_variant(vlm, recs, "A4")  # type: ignore[arg-type]
    assert vr.correct.tolist() == [1.0] * 8
    assert all(p.audio is not None and p.text.startswith("Important: Check closely") for p in vlm.prompts)


def test_trim_audio_keeps_the_window_and_refuses_an_empty_cut() -> None:
    a = Audio((np.arange(32000) / 32000).astype(np.float32), 16000)
    cut = trim_audio(a, 0.5, 1.0)
    assert cut.samples.size == 8000 and cut.samples[0] == a.samples[8000]
    with pytest.raises(ValueError):
        trim_audio(a, 3.0, 4.0)  # past the end: no samples, never silence


def test_full_bal_eq1_by_hand() -> None:
    """Eq. 1: std_v 2/2, mis_v 1/2, std_a 1/2, mis_a 0/2 → Bal = ½((1 + 0.5)/2 + (0.5 + 0)/2) = 0.5."""
    splits = ["standard_vision", "misleading_vision", "standard_audio", "misleading_audio"] * 2
    c = [1, 1, 1, 0, 1, 0, 0, 0]
    ss = split_scores(c, splits, ["a"] * 4 + ["b"] * 4, n_resamples=50)
    assert ss.acc == {"standard_vision": 1.0, "misleading_vision": 0.5, "standard_audio": 0.5,
                      "misleading_audio": 0.0}
    assert ss.bal == pytest.approx(0.5) and not ss.vision_only


def test_modality_gap_by_hand() -> None:
    """vision hits (1, 1 | 0, 1) on stimuli a | b, audio hits (0 | 1): 0.75 − 0.5 = 0.25. Resampling
    stimuli: {a, a} gives 1 − 0 = 1, {b, b} 0.5 − 1 = −0.5, {a, b} 0.25: the CI spans [−0.5, 1]."""
    g = modality_gap([1, 1, 0, 1], list("aabb"), [0, 1], list("ab"), n_resamples=2000, seed=0)
    assert g.gap == pytest.approx(0.25) and (g.n_vision, g.n_audio) == (4, 2)
    assert g.ci[0] == pytest.approx(-0.5) and g.ci[1] == pytest.approx(1.0) and g.empty_resamples == 0
    same = modality_gap([1, 0], list("ab"), [1, 0], list("ab"), n_resamples=200)
    assert same.gap == 0.0
    with pytest.raises(ValueError, match="both sides"):
        modality_gap([1.0], ["a"], [], [])


def _passes(metric: str, value: float) -> bool:
    th = load_suite_thresholds(ROOT / "suites" / "thresholds.toml").lookup("premise_rejection", metric)
    assert th is not None and th.op == ">="
    return value >= th.value


@pytest.mark.parametrize("deaf", [False, True])
def test_audio_gates_pass_a_model_that_hears_and_fail_a_deaf_one(deaf: bool) -> None:
    """Both sides of std_a / mis_a / Bal on stand-ins: one answering every split right passes all; one
    that cannot hear (first content option on every audio question, never F) fails mis_a and still
    passes the vision gates."""
    recs = _clips(20)
    run = run_choice(StandIn(recs, accepts_audio=True, deaf=deaf), recs)  # type: ignore[arg-type]
    c = correct(answers(run.logits), np.array([r.correct_index for r in run.records]))[:, 1:].mean(axis=1)
    ss = split_scores(c, [r.split for r in run.records], [r.stimulus_id for r in run.records], n_resamples=50)
    assert _passes("std_v", ss.acc["standard_vision"]) and _passes("mis_v", ss.acc["misleading_vision"])
    assert _passes("mis_a", ss.acc["misleading_audio"]) != deaf
    # Bal alone does not catch it (perfect vision, deaf audio: ½((1 + 0.2)/2 + (1 + 0)/2) = 0.55 here):
    # the audio splits carry their own gates for that
    assert _passes("Bal", ss.bal)
    # (the hearing stand-in finds its record by text: two clips may ask the same question, hence > 0.9)
    assert ss.acc["misleading_audio"] == 0.0 if deaf else ss.acc["misleading_audio"] > 0.9
    assert all(r.options[5] == OPTION_F for r in recs)


SUITES = """
import pytest

pytestmark = pytest.mark.suite("{suite}")


def test_a(faith_vlm):
    pass
"""


def test_the_omni_reference_joins_a_default_run_in_audio_suites_only(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No model named: the audio suite (its manifest declares ``audio``) runs reference:vlm and
    reference:omni, another suite reference:vlm alone; untrained defaults skip with the reason."""
    (tmp_path / "fixtures").mkdir()
    monkeypatch.setenv("FAITHTESTS_FIXTURES", str(tmp_path / "fixtures"))
    pytester.makepyfile(test_heard=SUITES.format(suite="premise_rejection"),
                        test_other=SUITES.format(suite="flip_sensitivity"))
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "thresholds.toml").write_text("")
    result = pytester.runpytest_inprocess("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-v", "-rs",
                                          "-p", "no:randomly")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines_random([
        "*test_heard.py::test_a?reference:vlm?*SKIPPED*", "*test_heard.py::test_a?reference:omni?*SKIPPED*",
        "*test_other.py::test_a?reference:vlm?*SKIPPED*", "*default reference:omni is not trained yet*",
    ])
    assert "test_other.py::test_a[reference:omni]" not in result.stdout.str()


def test_a_tiny_qwen2_5_omni_runs_the_clips_with_their_soundtrack(tiny_dir: Any) -> None:
    """The plumbing on a real omni adapter (random weights): all four splits run through video + audio,
    finite letter logits under every order, the states of every layer, and the logit lens per split."""
    from faithtests.models.registry import load_model

    vlm: Any = load_model(f"hf:{tiny_dir('qwen2_5_omni')}", device="cpu", dtype="float32")
    assert hears(vlm)
    recs = _clips(2)
    run = run_choice(vlm, recs)
    assert [r.split for r in run.records] == [r.split for r in recs] and not run.invalid
    assert np.isfinite(run.logits).all() and run.states is not None
    assert run.states.shape[:2] == (vlm.num_layers, 8)
    lens, why = logit_lens(vlm, run.states)
    assert lens is not None and lens.shape == (vlm.num_layers, 8, 6), why


def test_rejection_gap_by_hand() -> None:
    """rejection_gap (suites/thresholds.toml, a floor over Table 1's splits): per stimulus, the share of
    shuffled answers rejecting (E or F) its misleading question minus that share on its standard one,
    averaged over stimuli; the fixed order (column 0) is left out, as the shuffled accuracies leave it.
    Clip 0: mis_a rejected in 3 of 3 shuffles, std_a in 1 of 3: 2/3. Clip 1: mis_a in 1 of 3, std_a in 1
    of 3: 0. Audio gap (2/3 + 0) / 2 = 1/3 over 2 stimuli. Vision: never rejected (the fixed order
    always rejects, ignored): 0."""
    recs = _clips(2)
    rejected = {(0, "misleading_audio"): 3, (0, "standard_audio"): 1, (1, "misleading_audio"): 1,
                (1, "standard_audio"): 1}
    stims = sorted({r.stimulus_id for r in recs})
    logits = np.zeros((len(recs), 4, 6))
    for i, r in enumerate(recs):
        logits[i, :, 0] = 1.0  # content answer A
        logits[i, 0, :] = [0, 0, 0, 0, 0, 1.0]  # the fixed order always answers F
        for k in range(rejected.get((stims.index(r.stimulus_id), r.split), 0)):
            logits[i, 1 + k] = [0, 0, 0, 0, 0, 1.0]
    run = ChoiceRun(recs, ("fixed", 0, 1, 2), logits, np.zeros((len(recs), 4, 6), np.int64), None)
    audio = rejection_gap(run, "audio", n_resamples=200, seed=0)
    assert audio is not None and audio.value == pytest.approx(1 / 3) and audio.n == 2
    assert audio.ci[0] <= audio.value <= audio.ci[1]
    vision = rejection_gap(run, "vision", n_resamples=200, seed=0)
    assert vision is not None and vision.value == 0.0 and vision.n == 2
    silent = ChoiceRun([r for r in recs if r.split != "misleading_audio"], run.orders,
                       logits[[r.split != "misleading_audio" for r in recs]], run.perms[:6], None)
    assert rejection_gap(silent, "audio", n_resamples=200, seed=0) is None  # no stimulus has both
    # speech premises only: the stimuli whose misleading audio question's subcategory is listed. Clip 0
    # labelled sound_type, clip 1 speech_tone: clip 1's gap alone, 0, over 1 stimulus; none about content
    labels = ("sound_type", "speech_tone")
    relabelled = [dataclasses.replace(r, subcategory=labels[stims.index(r.stimulus_id)])
                  if r.split == "misleading_audio" else r for r in recs]
    run = dataclasses.replace(run, records=relabelled)
    speech = rejection_gap(run, "audio", n_resamples=200, seed=0, subcategories=("speech_tone",))
    assert speech is not None and speech.value == 0.0 and speech.n == 1
    assert rejection_gap(run, "audio", n_resamples=200, seed=0, subcategories=("speech_content",)) is None


def test_mis_rejection_and_chance_by_hand() -> None:
    """behaviour_mis_rejection: the share of (misleading record, shuffled order) answers that pick the
    record's rejection option. Two clips, four misleading records (mis_v and mis_a each), shuffles 1-3:
    clip 0's mis_a answers F in 3 of 3, clip 1's in 1 of 3, the vision ones never answer E (A, then
    the fixed order's F is left out): (3 + 1 + 0 + 0) / 12 = 1/3. The standard records are not counted.
    Chance for a probe's labels [1, 0, 0, 1, 1] is the majority share, 3/5; [0, 1] gives 1/2."""
    recs = _clips(2)
    stims = sorted({r.stimulus_id for r in recs})
    rejected = {(0, "misleading_audio"): 3, (1, "misleading_audio"): 1, (0, "standard_audio"): 2}
    logits = np.zeros((len(recs), 4, 6))
    for i, r in enumerate(recs):
        logits[i, :, 0] = 1.0
        logits[i, 0, :] = [0, 0, 0, 0, 0, 1.0]
        for k in range(rejected.get((stims.index(r.stimulus_id), r.split), 0)):
            logits[i, 1 + k] = [0, 0, 0, 0, 0, 1.0]
    run = ChoiceRun(recs, ("fixed", 0, 1, 2), logits, np.zeros((len(recs), 4, 6), np.int64), None)
    assert sum(r.misleading for r in recs) == 4
    assert mis_rejection(run, np.arange(len(recs))) == pytest.approx(1 / 3)
    audio_only = np.array([i for i, r in enumerate(recs) if r.split == "misleading_audio"])
    assert mis_rejection(run, audio_only) == pytest.approx(4 / 6)
    assert majority_share([1, 0, 0, 1, 1]) == pytest.approx(0.6) and majority_share([0, 1]) == 0.5
    with pytest.raises(ValueError, match="no labels"):
        majority_share([])


def _at_length(recs: Sequence[PremiseRecord], seconds: int) -> list[PremiseRecord]:
    """The records of one world clip stretched to ``seconds``: its scene as ``seconds`` frames at 1 fps
    and the soundtracks of world clips end to end, cut at ``seconds`` (a pipeline input, not a premise
    item: its questions' answers are not those of this sound)."""
    from faithtests.world.sound import SAMPLE_RATE

    samples = np.concatenate([it.audio for it in clip_items(seconds // 2 + 1, seed=1)])
    sound = Audio(samples[: seconds * SAMPLE_RATE], SAMPLE_RATE)
    frames = recs[0].load_media()[:1] * seconds
    return [dataclasses.replace(r, media=lambda: frames, audio=lambda: sound, fps=1.0) for r in recs]


def test_the_reference_omni_takes_a_clip_at_real_length_and_counts_one_past_its_window() -> None:
    """IMAVB's clips run 40-280 s; the reference omni, a Qwen2.5-Omni thinker, hears 30 s whole (its
    ``audio_window_s``, found at load). A 24 s clip of 24 frames goes through the real processor: every
    question is answered and each prompt carries 600 audio tokens (25 per second) beside its 12 frame
    pairs; the same clip at 40 s is counted AUDIO_PAST_WINDOW with its length (its four questions: an
    omni model is asked every question of a clip with its sound), and nothing is sent."""
    import faithtests

    model = faithtests.load_model("reference:omni")
    assert model.audio_window_s == 30.0
    recs = _at_length(_clips(1), 24)
    run = run_choice(model, recs)
    assert run.invalid == {} and len(run.records) == 4
    assert np.isfinite(run.logits).all()
    audio = recs[2].audio
    assert audio is not None
    prompt = Prompt(images=(), text=a1_text(recs[2].question, recs[2].options), video=recs[2].load_media(),
                    audio=audio(), video_fps=1.0)
    enc = model.encode([prompt])
    config = json.loads((ROOT / "fixtures" / "omni" / "config.json").read_text())
    ids = enc.inputs["input_ids"][0]
    assert int((ids == config["audio_token_index"]).sum()) == 600
    assert int((ids == config["video_token_index"]).sum()) == 12 * 36
    long = run_choice(model, _at_length(_clips(1), 40))
    assert long.invalid == {AUDIO_PAST_WINDOW: 4} and long.records == []  # all four: asked with the sound
    assert "40.0 s of audio" in long.examples[AUDIO_PAST_WINDOW][0]
