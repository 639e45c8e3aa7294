"""Omni models (:mod:`faithtests.models.hf_omni`) under scale-out: a pool of workers (``--faith-ray``,
on pickled calls and on a local Ray instance), keys and the output store across processes (xdist workers
and shards share ``--faith-cache``), ``--faith-device-map``, and contrastive generation on Gemma 3n
with a clip in its auxiliary prompts.

Every check compares against the same tiny model called in process; prompts carry video frames with
their soundtrack, audio beside an image, and an image alone (so a chunk of a split call may hold no audio).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from faithtests.models.hf_omni import HFOmniModel
from faithtests.models.interfaces import Audio, Contrast, Hooks, Prompt
from faithtests.models.prompt_keys import prompt_key
from faithtests.models.ray_actors import ModelHost, RolePool, adapter
from faithtests.models.ray_pool import PooledVLM
from faithtests.testing.tiny_omni import save_as_released

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = ("A", "B")
QUESTION = "which is red ? Answer with the letter : A or B"


def tone(hz: float, seconds: float = 1.0, rate: int = 16_000) -> Audio:
    t = np.arange(int(seconds * rate)) / rate
    return Audio((0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32), rate)


def clip_prompts() -> list[Prompt]:
    """Deterministic prompts (a child process rebuilds the same): a clip with its soundtrack, audio beside
    an image (twice, other text: a shared prefix), another tone, and an image alone (last: a chunk of a
    call split over two workers holds no audio)."""
    from PIL import Image

    frames = tuple(Image.new("RGB", (64, 64), (5 * i, 40, 0)) for i in range(4))
    image = Image.new("RGB", (48, 40), (200, 30, 30))
    return [
        Prompt((), QUESTION, video=frames, audio=tone(440.0, 2.0), video_fps=4.0),
        Prompt((image,), QUESTION, audio=tone(220.0)),
        Prompt((image,), "which is blue ? A or B", audio=tone(220.0)),
        Prompt((image,), QUESTION, audio=tone(880.0)),
        Prompt((image,), QUESTION),
    ]


@pytest.fixture(scope="module")
def prompts() -> list[Prompt]:
    return clip_prompts()


# ------------------------------------------------------------------------------------- pooled (pickled)
class _Host(ModelHost):
    """A worker around an already loaded model; every call's arguments and result cross a pickle, as
    they cross to and from a Ray actor."""

    def __init__(self, model: Any) -> None:
        self.model, self._scorer = model, None

    def call(self, role: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        args, kwargs = pickle.loads(pickle.dumps((args, kwargs)))
        return pickle.loads(pickle.dumps(super().call(role, method, args, kwargs)))


@dataclasses.dataclass
class Reference:
    """The in-process model's answers to ``prompts`` (computed once for the pool tests)."""

    decision: Any
    states: torch.Tensor
    texts: list[str]
    attentions: Any


@pytest.fixture(scope="module")
def reference(load_tiny: Callable[..., Any], prompts: list[Prompt]) -> Reference:
    model = load_tiny("qwen2_5_omni")
    return Reference(model.decide(prompts, OPTIONS), model.states(prompts[:3]), model.generate(prompts, 3),
                     model.attentions(prompts))


def assert_pool_equals(pooled: Any, want: Reference, prompts: list[Prompt]) -> None:
    """Equal to 1e-5 (as the image pools' tests): a split may part rows that share a prefix in process
    (rows 1, 2 of ``prompts[:3]``: 2 + 1), and a prefix-cached row differs from its full forward in
    float32 rounding only (observed <= 1e-7)."""
    got = pooled.decide(prompts, OPTIONS)
    torch.testing.assert_close(got.logits, want.decision.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(got.states, want.decision.states, atol=1e-5, rtol=0)
    torch.testing.assert_close(pooled.states(prompts[:3]), want.states, atol=1e-5, rtol=0)
    assert pooled.generate(prompts, 3) == want.texts
    att = pooled.attentions(prompts)
    assert att.spans == want.attentions.spans
    assert [bool(r) for r in att.spans.audio_runs] == [True] * 4 + [False]
    for x, y in zip(att.weights, want.attentions.weights, strict=True):
        torch.testing.assert_close(x, y, atol=1e-6, rtol=0)


def pickled_pool(model: Any) -> PooledVLM:
    hosts = [_Host(model) for _ in range(2)]
    pool = RolePool(hosts, "model", lambda h, *a: h.call(*a), list, pickle.dumps)
    pooled = adapter(pool, {"address": "pickled"}, None, hosts[0].meta)
    assert isinstance(pooled, PooledVLM)
    return pooled


def test_pool_of_pickled_workers_equals_the_model(load_tiny: Callable[..., Any], prompts: list[Prompt],
                                                  reference: Reference) -> None:
    """Qwen2.5-Omni: the pool says it hears (suites send audio only then; an image-only model's pool
    does not); calls split over two workers (chunks of 3 and 2 rows, the second with an audio-less row)
    give the in-process logits, states, generations and attentions with their audio spans; a chunk
    that hears nothing still has its rows' (empty) audio runs."""
    model = load_tiny("qwen2_5_omni")
    pooled = pickled_pool(model)
    assert pooled.accepts_audio and not pickled_pool(load_tiny("llava")).accepts_audio
    assert_pool_equals(pooled, reference, prompts)
    mixed = [prompts[4], prompts[4], prompts[0], prompts[1]]  # the first chunk hears nothing
    assert pooled.attentions(mixed).spans == model.attentions(mixed).spans


def test_gemma3n_pool_of_pickled_workers(load_tiny: Callable[..., Any],
                                         prompts: list[Prompt]) -> None:
    """Gemma 3n (its clip frames become images in the worker): option logits and states over two
    workers equal the in-process ones (a clip, and audio beside an image; few rows: every audio row
    is a 30 s window)."""
    model = load_tiny("gemma3n")
    rows = [prompts[0], prompts[1]]
    got, want = pickled_pool(model).decide(rows, OPTIONS), model.decide(rows, OPTIONS)
    torch.testing.assert_close(got.logits, want.logits, atol=1e-5, rtol=0)  # 1 + 1 rows against 2
    torch.testing.assert_close(got.states, want.states, atol=1e-5, rtol=0)


def test_audio_survives_pickling_with_its_key(prompts: list[Prompt]) -> None:
    again = pickle.loads(pickle.dumps(prompts))
    assert [prompt_key(p) for p in again] == [prompt_key(p) for p in prompts]
    audio = again[0].audio
    assert audio is not None and audio.samples.dtype == np.float32 and audio.sampling_rate == 16_000


def test_on_a_local_ray_actor(tiny_dir: Callable[[str], Path], prompts: list[Prompt],
                              reference: Reference) -> None:
    """A local Ray instance (as ``--faith-ray local``) with a CPU actor loading the tiny Qwen2.5-Omni
    from its ``hf:`` spec; prompts with their audio and frames, and the results, cross through Ray's
    cloudpickle. (One actor keeps the test small: the split over two workers is the pickled pool's.)"""
    if importlib.util.find_spec("ray") is None:
        why = 'ray is not installed (pip install -e ".[ray]")'
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail(f"CI=true and {why}")
        pytest.skip(why)
    import ray

    from faithtests.models.ray_actors import RaySettings, connect, start_pool, stop

    if ray.is_initialized():
        pytest.fail("a Ray instance is already up in this process: this test starts and stops its own")
    started = connect("local")
    hosts: list[Any] = []
    try:
        pooled, hosts = start_pool(f"hf:{tiny_dir('qwen2_5_omni')}", RaySettings("local", actors=1),
                                   device="cpu", dtype="float32", batch_size=16, options={}, local=None)
        assert isinstance(pooled, PooledVLM)
        assert_pool_equals(pooled, reference, prompts)
        assert pooled.accepts_audio and pooled.fingerprint()["ray"]["actors"] == 1
    finally:
        stop(hosts, started)
    assert not ray.is_initialized()


# ------------------------------------------------------------------------------ across processes (store)
CHILD = """
import pickle, sys
import torch
from faithtests.models.prompt_keys import prompt_key
from faithtests.models.registry import load_model
from faithtests.models.store import OutputStore
sys.path.insert(0, {tests!r})
from test_omni_scale import clip_prompts

prompts = clip_prompts()
store = OutputStore({cache!r})
model = load_model({spec!r}, device="cpu", defer_to=store)
model.use_store(store)
decision = model.decide(prompts, ("A", "B"))
texts = model.generate(prompts, max_new_tokens=3)
with open({out!r}, "wb") as f:
    pickle.dump({{"keys": [prompt_key(p) for p in prompts], "logits": decision.logits,
                 "states": decision.states, "texts": texts}}, f)
"""


def test_another_process_keys_audio_alike_and_fills_the_store(
    tiny_dir: Callable[[str], Path], prompts: list[Prompt], tmp_path: Path
) -> None:
    """A process with another hash seed (an xdist worker, a shard) keys the same audio prompts alike,
    and what it stores under ``--faith-cache`` serves this process without loading the model."""
    from faithtests.models.registry import load_model
    from faithtests.models.store import OutputStore

    spec, cache, out = f"hf:{tiny_dir('qwen2_5_omni')}", tmp_path / "cache", tmp_path / "child.pkl"
    code = CHILD.format(tests=str(Path(__file__).parent), cache=str(cache), spec=spec, out=str(out))
    env = {**os.environ, "PYTHONHASHSEED": "12345", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    child = pickle.loads(out.read_bytes())
    assert child["keys"] == [prompt_key(p) for p in prompts]
    store = OutputStore(cache)
    warm: Any = load_model(spec, device="cpu", defer_to=store)
    warm.use_store(store)
    assert isinstance(warm, HFOmniModel) and not warm.loaded
    decision = warm.decide(prompts, OPTIONS)
    assert torch.equal(decision.logits, child["logits"]) and torch.equal(decision.states, child["states"])
    assert warm.generate(prompts, max_new_tokens=3) == child["texts"] and not warm.loaded


def test_audio_key_is_its_content() -> None:
    """The key reads the waveform's values and rate, not the array object: a strided view, a copy and
    a numpy-integer rate key alike; one changed sample keys apart."""
    base = tone(300.0)
    doubled = np.repeat(base.samples, 2)[::2]  # a non-contiguous view with the same values
    assert not doubled.flags.c_contiguous
    same = [Audio(doubled, 16_000), Audio(base.samples.copy(), int(np.int64(16_000))),
            Audio(base.samples, np.int32(16_000))]  # type: ignore[arg-type]
    keys = {prompt_key(Prompt((), QUESTION, audio=a)) for a in [base, *same]}
    assert len(keys) == 1
    nudged = base.samples.copy()
    nudged[100] += 1e-6
    assert prompt_key(Prompt((), QUESTION, audio=Audio(nudged, 16_000))) not in keys
    assert prompt_key(Prompt((), QUESTION, audio=Audio(base.samples, 8_000))) not in keys


# --------------------------------------------------------------------------------------- --faith-device-map
@pytest.mark.parametrize("family", ["qwen2_5_omni", "gemma3n", "qwen3_omni_moe released"])
def test_device_map_loads_the_omni_families(family: str, tiny_dir: Callable[[str], Path],
                                            load_tiny: Callable[..., Any], prompts: list[Prompt],
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``device_map`` (``--faith-device-map``) reaches ``from_pretrained`` of the model each family loads
    (a released thinker + talker checkpoint: of its thinker class) and the placed model computes what the
    plain load does. With accelerate installed the map is real (one process, CPU only: all on the CPU);
    without it the spy drops the map after recording it, as the scale-out tests do."""
    import transformers

    from faithtests.models.omni_loading import THINKERS
    from faithtests.models.registry import load_model

    name, _, released = family.partition(" ")
    path = tiny_dir(name)
    if released:
        path = save_as_released(path, tmp_path / "released")
    placed = importlib.util.find_spec("accelerate") is not None
    assert placed or not os.environ.get("CI"), "CI installs the dev extra, which brings accelerate"
    cls: Any = getattr(transformers, THINKERS[name]) if released else transformers.AutoModelForImageTextToText
    seen: list[dict[str, Any]] = []
    original = cls.from_pretrained

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(dict(kwargs))
        if not placed:
            kwargs.pop("device_map", None)
        return original(*args, **kwargs)

    plain: Any = load_model(f"hf:{path}", device="cpu") if released else load_tiny(name)
    monkeypatch.setattr(cls, "from_pretrained", spy)
    mapped = load_model(f"hf:{path}", device="cpu", device_map="auto")
    assert [s.get("device_map") for s in seen] == ["auto"]
    assert isinstance(mapped, HFOmniModel) and mapped.device == torch.device("cpu")
    rows = [prompts[0], prompts[1], prompts[4]]  # a clip, audio beside an image, an image alone
    a, b = mapped.decide(rows, OPTIONS), plain.decide(rows, OPTIONS)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.states, b.states)
    assert mapped.generate(rows[:1], 3) == plain.generate(rows[:1], 3)


# ---------------------------------------------------------------------------- contrast prompts (Gemma 3n)
def test_gemma3n_contrast_prompts_with_a_clip(load_tiny: Callable[..., Any],
                                              prompts: list[Prompt]) -> None:
    """Gemma 3n takes a clip's frames as images: a contrastive generation's auxiliary prompts carrying a
    clip are converted as the main rows are (before: refused as a prompt with images paired with one
    without), and decode exactly as the same prompts given as images."""
    model = load_tiny("gemma3n")
    clip = prompts[0]
    main = [clip, clip]
    aux = (dataclasses.replace(clip, text="Describe the sound."),
           dataclasses.replace(clip, audio=tone(660.0)))
    as_images = tuple(dataclasses.replace(a, images=(*a.images, *a.video), video=(), video_fps=None)
                      for a in aux)
    got = model.generate(main, 4, Hooks(contrast=Contrast(aux=aux, eta=1.0, tag="clip")))
    assert got == model.generate(main, 4, Hooks(contrast=Contrast(aux=as_images, eta=1.0, tag="clip")))
    plain = model.generate(main, 4)
    assert model.generate(main, 4, Hooks(contrast=Contrast(aux=aux, eta=0.0, tag="clip"))) == plain


# ------------------------------------------------------------------ one prompt object in several rows
def test_one_clip_prompt_scored_against_several_answers(load_tiny: Callable[..., Any],
                                                        prompts: list[Prompt]) -> None:
    """``answer_logprob`` puts the same Prompt object in one row per answer: each row's soundtrack must
    ride in its own row's video (before: matched by object identity, so every slot named the last row's
    video and row 0 had no audio tokens: "the processor wrote no audio tokens")."""
    model = load_tiny("qwen2_5_omni")
    clip = prompts[0]
    assert clip.video and clip.audio is not None
    both = model.answer_logprob([clip], ["yes", "no"])
    alone = torch.cat([model.answer_logprob([clip], [a]) for a in ("yes", "no")], dim=1)
    assert both.shape == (1, 2) and torch.allclose(both, alone, atol=1e-5)
