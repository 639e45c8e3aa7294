"""The omni adapter (:mod:`faithtests.models.hf_omni`) on tiny Qwen2.5-Omni and Qwen3-Omni-MoE thinkers and
a tiny Gemma 3n: prompts with audio, with video frames and their soundtrack, and with images only.

Reference values come from plain processor + forward calls on the same model, so the adapter is checked
against the library. A real MP4 with a sound track goes through the clip loader and the model.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from faithtests.data.av_clip import load_clip
from faithtests.models.hf_omni import HFOmniModel
from faithtests.models.interfaces import Audio, Hooks, Prompt, VisionLanguageModel
from faithtests.models.prompt_keys import prompt_key
from faithtests.models.prompting import PromptRenderError, _processor_kwargs, interleaves_audio, messages
from faithtests.models.store import digest
from faithtests.testing.tiny_omni import (
    BUILDERS,
    GEMMA3N_GRID,
    RELEASED_CONFIGS,
    save_as_released,
    write_clip,
)

OPTIONS = ["A", "B"]
QUESTION = "which is red ? Answer with the letter : A or B"


def tone(hz: float, seconds: float = 1.0, rate: int = 16_000) -> Audio:
    t = np.arange(int(seconds * rate)) / rate
    return Audio((0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32), rate)


def family_of(model: HFOmniModel) -> str:
    return str(model.meta["model_type"]).removesuffix("_thinker")


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def omni(request: pytest.FixtureRequest, load_tiny: Callable[..., Any]) -> HFOmniModel:
    model = load_tiny(request.param)
    assert isinstance(model, HFOmniModel)
    return model


@pytest.fixture(scope="module")
def frames() -> tuple[Any, ...]:
    from PIL import Image

    return tuple(Image.new("RGB", (64, 64), (5 * i, 40, 0)) for i in range(8))


@pytest.fixture(scope="module")
def prompts(images: list[Any], frames: tuple[Any, ...]) -> list[Prompt]:
    """Rows 0, 1 share image and audio (prefix sharing); row 2 other audio; row 3 video + soundtrack;
    row 4 image only; row 5 audio only, with a description."""
    a, b = images[2], images[5]
    low, high = tone(220.0), tone(880.0)
    return [
        Prompt((a,), QUESTION, audio=low),
        Prompt((a,), "which is blue ? A or B", audio=low),
        Prompt((a,), QUESTION, audio=high),
        Prompt((), QUESTION, video=frames, audio=tone(440.0, 2.0), video_fps=4.0),
        Prompt((b,), QUESTION),
        Prompt((), QUESTION, audio=high, description="a happy scene"),
    ]


def altup_index(vlm: HFOmniModel) -> int | None:
    """Gemma 3n's active AltUp stream (its layers output a stack of streams); None for other families."""
    index = getattr(vlm.model.config.get_text_config(), "altup_active_idx", None)
    return None if index is None else int(index)


def reference_forward(vlm: HFOmniModel, prompt: Prompt) -> Any:
    """One prompt through the family's processor and a plain forward (no adapter logic); a family without
    a video input (Gemma 3n) gets the frames as images, after the prompt's own, and its audio padded to
    its 30 s window (the adapter's batch-invariant choice: :class:`~.hf_omni.FixedAudioWindow`)."""
    proc = getattr(vlm.processor, "inner", vlm.processor)
    if prompt.video and getattr(proc, "video_processor", None) is None:
        prompt = dataclasses.replace(prompt, images=(*prompt.images, *prompt.video), video=(), video_fps=None)
    both = bool(prompt.video) and prompt.audio is not None and interleaves_audio(proc)
    text = proc.apply_chat_template(messages(prompt, audio_in_video=both), add_generation_prompt=True,
                                    tokenize=False)
    kwargs: dict[str, Any] = {"text": [text], "return_tensors": "pt"}
    if prompt.images:
        kwargs["images"] = list(prompt.images)
    if prompt.video:
        kwargs["videos"] = [np.stack([np.asarray(f) for f in prompt.video])]
        kwargs["fps"] = prompt.video_fps
    if prompt.audio is not None:
        kwargs["audio"] = [prompt.audio.samples]
        if family_of(vlm) == "gemma3n":
            kwargs["audio_kwargs"] = {"padding": "max_length", "max_length": 30 * 16_000}
    if both:
        kwargs.update(load_audio_from_video=True, audio_from_video_indices=[0])
    inputs = proc(**kwargs)
    extra = {"use_audio_in_video": both} if interleaves_audio(proc) else {}
    layers, outputs = vlm.model.get_decoder().layers, []
    handles = [layer.register_forward_hook(lambda _m, _i, out: outputs.append(out)) for layer in layers]
    try:
        with torch.inference_mode():
            out = vlm.model(**inputs, **extra)
    finally:
        for handle in handles:
            handle.remove()
    stream = altup_index(vlm)
    out.layer_outputs = [(o[0] if isinstance(o, tuple) else o) if stream is None else o[stream]
                         for o in outputs]  # [1, T, D] each
    return inputs, out


def test_hf_spec_picks_the_omni_adapter(omni: HFOmniModel) -> None:
    assert isinstance(omni, VisionLanguageModel)
    fp = omni.fingerprint()
    if fp["family"] == "gemma3n":
        assert fp["architecture"] == "Gemma3nForConditionalGeneration"
    else:
        assert fp["family"].endswith("_thinker")
        assert fp["architecture"].endswith("ThinkerForConditionalGeneration")


def test_option_logits_and_states_match_plain_forward(omni: HFOmniModel, prompts: list[Prompt]) -> None:
    decision = omni.decide(prompts, OPTIONS)
    assert decision.logits.shape == (6, 2) and torch.isfinite(decision.logits).all()
    ids = [omni.processor.tokenizer.convert_tokens_to_ids(x) for x in OPTIONS]
    norm = omni.model.get_decoder().norm
    for row, prompt in enumerate(prompts):
        _, out = reference_forward(omni, prompt)
        assert torch.allclose(decision.logits[row], out.logits[0, -1, ids], atol=1e-4), row
        for layer, hidden in enumerate(out.layer_outputs):  # each layer's (active-stream) output
            assert torch.allclose(decision.states[layer, row], hidden[0, -1], atol=1e-4), (row, layer)
        if altup_index(omni) is None:  # else the head reads the mean of all AltUp streams, not this one
            with torch.inference_mode():
                final = omni.model.get_output_embeddings()(norm(decision.states[-1, row][None]))[0]
            assert torch.allclose(final, out.logits[0, -1], atol=1e-4)
    # the model hears: the same image and question with another tone gives other logits
    assert (decision.logits[0] - decision.logits[2]).abs().max() > 1e-5


def test_prefix_cache_and_batch_equal_single(omni: HFOmniModel, prompts: list[Prompt],
                                             load_tiny: Callable[..., Any]) -> None:
    family = family_of(omni)
    before = omni.cache_stats()["prefix_calls"]
    cached = omni.decide(prompts, OPTIONS)
    assert omni.cache_stats()["prefix_calls"] == before + 1  # rows 0 and 1 share image and audio
    full = load_tiny(family, prefix_cache=False).decide(prompts, OPTIONS)
    assert (cached.logits - full.logits).abs().max() < 1e-4
    assert (cached.states - full.states).abs().max() < 1e-4
    for row, prompt in enumerate(prompts):
        assert torch.allclose(omni.option_logits([prompt], OPTIONS)[0], cached.logits[row], atol=1e-5)


def test_spans_are_exact(omni: HFOmniModel, prompts: list[Prompt]) -> None:
    config = omni.model.config
    for prompt in prompts:
        inputs, _ = reference_forward(omni, prompt)
        ids = inputs["input_ids"][0].tolist()
        spans = omni.encode([prompt]).spans
        audio = [i for i, t in enumerate(ids) if t == config.audio_token_id]
        assert bool(audio) == (prompt.audio is not None)
        runs = spans.audio_runs[0] if spans.audio_runs else []
        assert [p for a, b in runs for p in range(a, b)] == audio
        visual = {config.image_token_id, getattr(config, "video_token_id", None)}  # Gemma 3n: none
        shown = [i for i, t in enumerate(ids) if t in visual]
        assert [p for a, b in spans.image_runs[0] for p in range(a, b)] == shown
        if prompt.description is not None:
            a, b = spans.description[0]
            words = omni.processor.tokenizer.decode(ids[a:b])
            assert words.strip() == prompt.description
    video_row = omni.encode([prompts[3]]).spans
    assert len(video_row.audio_runs[0]) >= 1 and video_row.audio_span(0)[0] > video_row.image[0][0]


def test_cache_keys_include_audio_and_keep_image_keys(images: list[Any], frames: tuple[Any, ...]) -> None:
    from faithtests.models.cache import image_key

    plain = Prompt((images[0],), QUESTION)
    assert prompt_key(plain) == digest([[image_key(images[0])], QUESTION, None])  # as before audio existed
    keys = {prompt_key(Prompt((images[0],), QUESTION, audio=tone(hz))) for hz in (220.0, 221.0)}
    assert len(keys) == 2 and prompt_key(plain) not in keys
    same = tone(220.0)
    assert prompt_key(Prompt((), QUESTION, audio=same)) == prompt_key(Prompt((), QUESTION, audio=tone(220.0)))
    with_video = Prompt((), QUESTION, video=frames, audio=same)
    assert prompt_key(with_video) != prompt_key(Prompt((), QUESTION, audio=same))
    assert prompt_key(with_video) != prompt_key(Prompt((), QUESTION, video=frames, audio=same, video_fps=4.0))


def test_attentions_carry_audio_spans(omni: HFOmniModel, prompts: list[Prompt]) -> None:
    att = omni.attentions(prompts)
    assert len(att.weights) == omni.num_layers
    for row, prompt in enumerate(prompts):
        n = att.spans.length[row]
        total = att.weights[0][row, :, :n].sum(dim=-1)
        assert torch.allclose(total, torch.ones_like(total), atol=1e-4)
        alone = omni.encode([prompt]).spans
        assert att.spans.audio_runs[row] == (alone.audio_runs[0] if alone.audio_runs else [])
        a, b = att.spans.audio_span(row)
        assert (b > a) == (prompt.audio is not None)
        if b > a:
            assert not any(att.spans.other_mask(row, n)[a:b])


def test_generation_hooks_and_lens(omni: HFOmniModel, prompts: list[Prompt]) -> None:
    texts = omni.generate(prompts, max_new_tokens=3)
    assert len(texts) == 6 and texts == omni.generate(prompts, max_new_tokens=3)  # greedy
    assert omni.generate(prompts[3:4], max_new_tokens=3) == texts[3:4]
    base = omni.option_logits(prompts[:3], OPTIONS)
    identity = Hooks(attention={0: lambda _l, w, _s: w}, tag="identity")
    assert torch.allclose(omni.option_logits(prompts[:3], OPTIONS, identity), base, atol=1e-5)
    scaled = omni.option_logits(prompts[:3], OPTIONS, Hooks(mlp_scale={0: 0.0}))
    assert (scaled - base).abs().max() > 1e-6
    states = omni.states(prompts[:2])
    probs = omni.lens_probs(states, OPTIONS)
    assert probs.shape == (omni.num_layers, 2, 2) and torch.isfinite(probs).all()


def test_image_only_model_refuses_audio(load_tiny: Callable[..., Any], images: list[Any]) -> None:
    llava = load_tiny("llava")
    with pytest.raises(PromptRenderError, match="takes no audio"):
        llava.option_logits([Prompt((images[0],), QUESTION, audio=tone(440.0))], OPTIONS)


def test_audio_at_the_wrong_rate_is_refused(omni: HFOmniModel, images: list[Any]) -> None:
    with pytest.raises(PromptRenderError, match="expects 16000 Hz"):
        omni.option_logits([Prompt((images[0],), QUESTION, audio=tone(440.0, rate=44_100))], OPTIONS)


def test_audio_rejects_bad_waveforms() -> None:
    with pytest.raises(ValueError, match="1-D"):
        Audio(np.zeros((2, 10), np.float32), 16_000)
    with pytest.raises(ValueError, match="float32"):
        Audio(np.zeros(10), 16_000)
    with pytest.raises(ValueError, match="NaN"):
        Audio(np.array([0.0, np.nan], np.float32), 16_000)


@pytest.mark.parametrize("family", ["qwen2_5_omni", "gemma3n"])
def test_real_clip_through_tiny_omni(tmp_path: Path, load_tiny: Callable[..., Any], family: str) -> None:
    """A real MP4 (H.264 + AAC 44.1 kHz stereo) -> 50 frames + 16 kHz mono -> tiny Qwen2.5-Omni (a video
    with its soundtrack interleaved) and tiny Gemma 3n (50 images, then the audio)."""
    clip = load_clip(write_clip(tmp_path / "tone.mp4"))
    assert len(clip.frames) == 50 and clip.sampling_rate == 16_000
    model = load_tiny(family)
    prompt = Prompt((), QUESTION, video=clip.frames, audio=Audio(clip.audio, clip.sampling_rate),
                    video_fps=clip.fps)
    logits = model.option_logits([prompt], ["A", "B", "C", "D", "E", "F"])
    assert logits.shape == (1, 6) and torch.isfinite(logits).all()
    assert len(model.generate([prompt], max_new_tokens=2)) == 1
    spans = model.encode([prompt]).spans
    a, b = spans.audio_span(0)
    if family == "gemma3n":
        assert b - a == model.config.audio_soft_tokens_per_image  # every waveform is one 30 s window
        assert len(spans.image_runs[0]) == 50  # one run per frame
        assert sum(e - s for s, e in spans.image_runs[0]) == 50 * GEMMA3N_GRID**2
    else:
        assert b - a >= 50  # 2 s at 25 audio tokens per second, interleaved with the frames


def test_output_store_keys_audio_and_serves_a_warm_run(
    omni: HFOmniModel, prompts: list[Prompt], tiny_dir: Callable[[str], Path], tmp_path: Path
) -> None:
    """A warm run answers audio prompts (logits, attentions with audio spans, generations) from the
    store without loading; a prompt that differs only in its audio is a miss that loads the model."""
    from faithtests.models.registry import load_model
    from faithtests.models.store import OutputStore

    spec, cache = f"hf:{tiny_dir(family_of(omni))}", tmp_path / "cache"

    def fresh() -> Any:
        store = OutputStore(cache)
        model: Any = load_model(spec, device="cpu", defer_to=store)
        model.use_store(store)
        return model

    cold = fresh()
    assert isinstance(cold, HFOmniModel)
    d0, a0 = cold.decide(prompts, OPTIONS), cold.attentions(prompts[:3])
    g0 = cold.generate(prompts[:2], max_new_tokens=2)
    warm = fresh()
    assert isinstance(warm, HFOmniModel) and not warm.loaded
    d1, a1 = warm.decide(prompts, OPTIONS), warm.attentions(prompts[:3])
    assert torch.equal(d1.logits, d0.logits) and torch.equal(d1.states, d0.states)
    assert a1.spans.audio_runs == a0.spans.audio_runs and all(r for r in a1.spans.audio_runs)
    assert warm.generate(prompts[:2], max_new_tokens=2) == g0 and not warm.loaded
    other = Prompt(prompts[0].images, prompts[0].text, audio=tone(330.0))  # same image and text
    assert torch.isfinite(warm.option_logits([other], OPTIONS)).all() and warm.loaded


@pytest.mark.parametrize("family", sorted(t.removesuffix("_thinker") for t in RELEASED_CONFIGS))
def test_a_released_checkpoint_loads_its_thinker(
    family: str, prompts: list[Prompt], tiny_dir: Callable[[str], Path], load_tiny: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """``model_type`` qwen2_5_omni / qwen3_omni_moe (thinker + talker, weights under ``thinker.``) loads
    the thinker through the same ``hf:`` path, and it computes what the thinker alone does. (Gemma 3n
    has no talker: its released checkpoint is the model itself.)"""
    from faithtests.models.registry import load_model

    omni = load_tiny(family)
    released = save_as_released(tiny_dir(family), tmp_path / "released")
    model = load_model(f"hf:{released}", device="cpu")
    assert isinstance(model, HFOmniModel) and model.meta["model_type"] == f"{family}_thinker"
    mine, alone = model.decide(prompts[:3], OPTIONS), omni.decide(prompts[:3], OPTIONS)
    assert (mine.logits - alone.logits).abs().max() < 1e-5 and (mine.states - alone.states).abs().max() < 1e-5


def test_a_batch_mixes_video_with_sound_and_standalone_audio(
    omni: HFOmniModel, prompts: list[Prompt]
) -> None:
    """Generation and attentions batch consecutive prompts without images together: a clip with its
    soundtrack and a prompt with audio alone go through one processor call and match their single runs
    (Gemma 3n: the clip's frames are images, so the two go in separate calls and still match)."""
    pair = [prompts[3], prompts[5]]
    if family_of(omni) == "gemma3n":  # frames are images there: one processor call cannot mix the two
        with pytest.raises(ValueError, match="all have images or all be text-only"):
            omni.encode(pair)
    else:
        enc = omni.encode(pair)
        for row, prompt in enumerate(pair):
            alone = omni.encode([prompt]).spans
            n = alone.length[0]
            single_ids = omni.encode([prompt]).inputs["input_ids"][0].tolist()
            assert enc.inputs["input_ids"][row, :n].tolist() == single_ids
            assert enc.spans.audio_runs[row] == alone.audio_runs[0]
    texts = omni.generate(pair, max_new_tokens=3)
    assert texts == [omni.generate([p], max_new_tokens=3)[0] for p in pair]
    both = omni.attentions(pair)
    for row, prompt in enumerate(pair):
        single = omni.attentions([prompt])
        n = single.spans.length[0]
        assert torch.allclose(both.weights[1][row, :, :n], single.weights[1][0, :, :n], atol=1e-5)


@pytest.mark.parametrize(("family", "window"), [("gemma3n", 30.0), ("qwen2_5_omni", 30.0),
                                                ("qwen3_omni_moe", None)])
def test_the_audio_window_is_found_at_load_and_longer_audio_refused(
    load_tiny: Callable[..., Any], images: list[Any], family: str, window: float | None
) -> None:
    """Gemma 3n's feature extractor and Qwen2.5-Omni's processor cut audio at 30 s (the logits of 40 s of
    audio equal those of its first 30 s there), Qwen3-Omni's does not: found once at load
    (``audio_window_s``, :mod:`faithtests.models.audio_window`). A longer clip is refused, not heard in
    part; the suites leave it out and count it."""
    model = load_tiny(family)
    assert model.audio_window_s == window
    long = Prompt((images[0],), QUESTION, audio=tone(440.0, seconds=30.5))
    if window is None:
        assert torch.isfinite(model.option_logits([long], OPTIONS)).all()
        return
    with pytest.raises(PromptRenderError, match="at most 30 s"):
        model.option_logits([long], OPTIONS)
    assert torch.isfinite(model.option_logits([Prompt((images[0],), QUESTION, audio=tone(440.0, 29.0))],
                                              OPTIONS)).all()


def test_gemma3n_states_are_the_active_altup_stream(
    load_tiny: Callable[..., Any], prompts: list[Prompt]
) -> None:
    """Gemma 3n's layers output a [streams, B, T, D] stack; the adapter's states are its active stream
    ([B, T, D] to every hook), equal to the stack's slice in a plain forward."""
    model = load_tiny("gemma3n")
    _, out = reference_forward(model, prompts[4])
    assert len(model.layers) == model.num_layers
    states = model.states(prompts[4:5])
    width = model.model.config.get_text_config().hidden_size
    assert states.shape == (model.num_layers, 1, width)
    for layer, hidden in enumerate(out.layer_outputs):
        assert hidden.shape[-1] == width and torch.allclose(states[layer, 0], hidden[0, -1], atol=1e-4)


@pytest.mark.parametrize("family", ["qwen2_5_omni", "qwen3_omni_moe"])
def test_numpys_copy_warning_from_the_processor_is_not_passed_on(load_tiny: Callable[..., Any], family: str,
                                                                 prompts: list[Prompt]) -> None:
    """The Qwen omni processors hand torch token counts to ``np.arange`` when a clip carries its
    soundtrack (NumPy 2 warns once per clip: 10,000 lines on the default run): ``encode_batch`` drops
    that warning and no other."""
    from faithtests.models.prompting import NUMPY_COPY_WARNING, encode_batch

    omni = load_tiny(family)

    with warnings.catch_warnings(record=True) as raw:
        warnings.simplefilter("always")
        omni.processor(**_processor_kwargs(omni.processor, prompts[3:4], "left", None))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        encode_batch(omni.processor, omni.model.config, prompts[3:4], "left")  # a clip with its soundtrack
        warnings.warn("another warning", DeprecationWarning, stacklevel=1)
    assert [w for w in raw if re.search(NUMPY_COPY_WARNING, str(w.message))]  # the processor warns
    assert not [w for w in seen if re.search(NUMPY_COPY_WARNING, str(w.message))]
    assert [str(w.message) for w in seen] == ["another warning"]
