"""The persistent output store (``--faith-cache``): exact round trips, and a miss whenever anything that
decides a model's numbers changes (weights, dtype, hooks), on tiny real models."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from faithtests.models.interfaces import Hooks, Prompt
from faithtests.models.registry import load_model
from faithtests.models.store import (
    ARRAY_CODEC,
    TEXT_CODEC,
    OutputStore,
    decode_array,
    encode_array,
    hooks_key,
)

TEXTS = ["a red circle", "two dog", "a blue square"]


def test_rows_compute_only_what_is_missing(tmp_path: Path) -> None:
    store = OutputStore(tmp_path)
    calls: list[list[int]] = []

    def compute(rows: list[int]) -> list[torch.Tensor]:
        calls.append(rows)
        return [torch.tensor([float(r), 1 / 3]) for r in rows]

    keys = ["a", "b", "a", "c"]
    first = store.rows("m", "m|kind", keys, compute, ARRAY_CODEC)
    assert calls == [[0, 1, 3]]  # duplicates computed once, first-seen order
    assert store.stats("m").as_dict() == {"hits": 0, "writes": 3, "uncacheable": 0}
    again = OutputStore(tmp_path).rows("m", "m|kind", ["c", "a", "d"], compute, ARRAY_CODEC)
    assert calls[-1] == [2]  # only "d" is new
    assert torch.equal(again[0], first[3]) and torch.equal(again[1], first[0])  # bit-exact round trip
    assert again[0].dtype == torch.float32
    text = store.rows("m", "m|gen", ["p"], lambda rows: ["ünïcode answer"], TEXT_CODEC)
    assert store.rows("m", "m|gen", ["p"], lambda rows: ["other"], TEXT_CODEC) == text
    assert len(store) == 5


def test_a_session_store_keeps_rows_for_its_session_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``OutputStore(None)``: the session store of a run without ``--faith-cache``: rows served again
    bit for bit, nothing written where the run is, and a second one starts empty."""
    monkeypatch.chdir(tmp_path)
    store = OutputStore(None)
    calls: list[list[int]] = []

    def compute(rows: list[int]) -> list[torch.Tensor]:
        calls.append(rows)
        return [torch.tensor([float(r), 1 / 3]) for r in rows]

    first = store.rows("m", "m|kind", ["a", "b"], compute, ARRAY_CODEC)
    again = store.rows("m", "m|kind", ["b", "a"], compute, ARRAY_CODEC)
    assert calls == [[0, 1]] and torch.equal(again[1], first[0]) and not store.persistent
    assert store.stats("m").as_dict() == {"hits": 2, "writes": 2, "uncacheable": 0}
    assert not list(tmp_path.iterdir()) and len(OutputStore(None)) == 0
    store.close()


@pytest.mark.parametrize("value", [
    torch.randn(3, 4), torch.tensor(1.5), np.zeros((0, 3), np.float32), np.arange(5, dtype=np.int64),
    torch.randn(2, 3, dtype=torch.float64)[:, ::2],  # not contiguous
    np.arange(6, dtype=">f4").reshape(2, 3).T,  # big-endian, transposed
    np.array([True, False]),
])
def test_array_codec_round_trips_exactly(value: Any) -> None:
    expected = value.numpy() if isinstance(value, torch.Tensor) else value
    back = decode_array(encode_array(value))
    assert tuple(back.shape) == expected.shape and np.array_equal(back.numpy(), expected)
    assert back.numpy().flags.writeable  # torch warns on read-only numpy memory


def test_array_codec_refuses_what_it_cannot_encode_or_read() -> None:
    with pytest.raises(TypeError, match="cannot encode"):
        encode_array(np.array(["text"]))
    with pytest.raises(ValueError, match="bad magic"):
        decode_array(b"\x93NUMPY old format")


def test_unkeyable_calls_are_computed_and_counted(tmp_path: Path) -> None:
    store = OutputStore(tmp_path)
    out = store.rows("m", None, ["a", "b"], lambda rows: [torch.zeros(1) for _ in rows], ARRAY_CODEC)
    assert len(out) == 2 and len(store) == 0 and store.stats("m").uncacheable == 2


def test_hooks_key() -> None:
    def modifier(layer: int, weights: torch.Tensor, spans: Any) -> torch.Tensor:
        return weights

    assert hooks_key(None) == "none"
    assert hooks_key(Hooks(attention={1: modifier})) is None  # code without a name: never stored
    tagged = hooks_key(Hooks(attention={1: modifier}, tag="cecs(a=0.5)"))
    assert tagged is not None and tagged != hooks_key(Hooks(attention={1: modifier}, tag="cecs(a=0.6)"))
    assert tagged != hooks_key(Hooks(attention={2: modifier}, tag="cecs(a=0.5)"))
    assert hooks_key(Hooks(mlp_scale={0: 0.5})) != hooks_key(Hooks(mlp_scale={0: 0.6}))
    # the logit adjuster is applied after the stored logits: it does not change the key
    assert hooks_key(Hooks(logit_adjuster=lambda lg, letters: lg)) == hooks_key(Hooks()) == hooks_key(None)


def test_a_corrupt_cache_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "outputs.sqlite3").write_bytes(b"not a database" * 100)
    with pytest.raises(sqlite3.DatabaseError, match="delete it to start afresh"):
        OutputStore(tmp_path)


def _scorer(path: Path, store: OutputStore, dtype: str = "float32") -> Any:
    model = load_model(f"open_clip:local-dir:{path}", device="cpu", dtype=dtype)
    model.use_store(store)
    return model


def test_dual_encoder_warm_run_encodes_nothing_and_matches(
    tiny_dir: Callable[[str], Path], images: list[Any], tmp_path: Path
) -> None:
    src = tiny_dir("open_clip")
    cold = _scorer(src, OutputStore(tmp_path / "cache"))
    expected = cold.similarity(images[:3], TEXTS)
    warm = _scorer(src, OutputStore(tmp_path / "cache"))
    assert torch.equal(warm.similarity(images[:3], TEXTS), expected)
    assert warm.cache_stats()["images_encoded"] == 0 and warm.cache_stats()["texts_encoded"] == 0

    # changed dtype -> a different namespace: encoded afresh
    half = _scorer(src, OutputStore(tmp_path / "cache"), dtype="bfloat16")
    half.similarity(images[:3], TEXTS)
    assert half.cache_stats()["images_encoded"] == 3

    # changed weights (same path layout, one tensor perturbed) -> miss
    from safetensors.torch import load_file, save_file

    changed = tmp_path / "changed"
    shutil.copytree(src, changed)
    weights = changed / "open_clip_model.safetensors"
    state = load_file(str(weights))
    name = next(k for k, v in state.items() if v.is_floating_point())
    state[name] = state[name] + 1e-3
    save_file(state, str(weights))
    other = _scorer(changed, OutputStore(tmp_path / "cache"))
    other.similarity(images[:3], TEXTS)
    assert other.cache_stats()["images_encoded"] == 3 and other.cache_stats()["texts_encoded"] == 3

    # the same files copied elsewhere are the same model: a hit
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    same = _scorer(copy, OutputStore(tmp_path / "cache"))
    assert torch.equal(same.similarity(images[:3], TEXTS), expected)
    assert same.cache_stats()["images_encoded"] == 0


def _vlm(path: Path, store: OutputStore) -> Any:
    model = load_model(f"hf:{path}", device="cpu")
    model.use_store(store)
    return model


def _forwards(vlm: Any) -> int:
    stats: dict[str, int] = vlm.cache_stats()
    return stats["prefix_calls"] + stats["full_calls"]


def test_vlm_outputs_are_stored_per_hooks(
    tiny_dir: Callable[[str], Path], images: list[Any], tmp_path: Path
) -> None:
    src = tiny_dir("llava")
    prompts = [Prompt(images=(im,), text=f"Which? {t}\nA. yes\nB. no") for im, t in zip(images, TEXTS,
                                                                                         strict=False)]
    cold = _vlm(src, OutputStore(tmp_path))
    d0 = cold.decide(prompts, ("A", "B"))
    g0 = cold.generate(prompts[:2], max_new_tokens=3)
    c0 = cold.caption_logprob(images[:2], TEXTS[:2])
    scaled = Hooks(mlp_scale={0: 0.5})
    s0 = cold.decide(prompts, ("A", "B"), scaled)

    warm = _vlm(src, OutputStore(tmp_path))
    d1 = warm.decide(prompts, ("A", "B"))
    assert torch.equal(d1.logits, d0.logits) and torch.equal(d1.states, d0.states)
    assert warm.generate(prompts[:2], max_new_tokens=3) == g0
    assert torch.equal(warm.caption_logprob(images[:2], TEXTS[:2]), c0)
    assert torch.equal(warm.decide(prompts, ("A", "B"), scaled).logits, s0.logits)
    assert _forwards(warm) == 0 and warm.store.stats(warm.store_namespace).writes == 0
    assert not torch.equal(s0.logits, d0.logits)  # the hooks really changed the numbers

    # a logit adjuster runs on the stored logits: no forward, and exactly adjuster(base)
    shift = Hooks(logit_adjuster=lambda lg, letters: lg + torch.tensor([1.0, -1.0]))
    assert torch.equal(warm.decide(prompts, ("A", "B"), shift).logits, d0.logits + torch.tensor([1.0, -1.0]))
    assert _forwards(warm) == 0

    # other hooks, other options, other generation length: computed
    warm.decide(prompts, ("A", "B"), Hooks(mlp_scale={0: 0.25}))
    n = _forwards(warm)
    assert n > 0
    warm.generate(prompts[:2], max_new_tokens=4)

    # attention modifiers without a tag are never stored (counted), with a tag they are
    def identity(layer: int, weights: torch.Tensor, spans: Any) -> torch.Tensor:
        return weights

    before = len(warm.store)
    warm.decide(prompts, ("A", "B"), Hooks(attention={0: identity}))
    assert len(warm.store) == before and warm.store.stats(warm.store_namespace).uncacheable == len(prompts)
    warm.decide(prompts, ("A", "B"), Hooks(attention={0: identity}, tag="identity"))
    assert len(warm.store) == before + len(prompts)


def test_vlm_attentions_are_stored_per_row(
    tiny_dir: Callable[[str], Path], images: list[Any], tmp_path: Path
) -> None:
    """Attentions go through the store: a warm call returns exactly the cold weights and spans with no
    forward, for a request that mixes stored and new rows of different lengths; a tagged modifier is
    another key."""
    src = tiny_dir("llava")
    prompts = [Prompt(images=(im,), text=t * (1 + i)) for i, (im, t) in enumerate(zip(images, TEXTS,
                                                                                       strict=False))]
    plain = load_model(f"hf:{src}", device="cpu").attentions(prompts)  # no store at all
    cold = _vlm(src, OutputStore(tmp_path))
    first = cold.attentions(prompts[:2])
    both = cold.attentions(prompts)  # rows 0-1 stored, row 2 computed
    # `both` came from batches of 2 and 1, `plain` from one batch of 3: padding and batch size change
    # the float32 reduction order on some CPUs' kernels, so across compositions equality is within
    # float32 rounding (1e-6 on weights in [0, 1]); the store round trip itself is checked bit-exact.
    for a, b in zip(both.weights, plain.weights, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert both.spans == plain.spans and first.weights[0].shape[-1] < both.weights[0].shape[-1]

    warm = _vlm(src, OutputStore(tmp_path))
    again = warm.attentions(prompts)  # every row from the store: exactly what the cold run stored
    assert all(torch.equal(a, b) for a, b in zip(again.weights, both.weights, strict=True))
    assert again.spans == plain.spans
    assert warm.store.stats(warm.store_namespace).as_dict() == {"hits": 3, "writes": 0, "uncacheable": 0}

    def halve(layer: int, weights: torch.Tensor, spans: Any) -> torch.Tensor:
        return weights * 0.5

    changed = warm.attentions(prompts, Hooks(attention={0: halve}, tag="halve"))
    assert warm.store.stats(warm.store_namespace).writes == 3
    # one batch of 3 like `plain`: the same composition, so the halving is exact
    assert torch.equal(changed.weights[0], plain.weights[0] * 0.5)


def test_vlm_without_store_is_unchanged(load_tiny: Callable[..., Any], images: list[Any]) -> None:
    """No --faith-cache: decide() still returns [N, K] logits and [L, N, D] states in prompt order."""
    vlm = load_tiny("llava")
    prompts = [Prompt(images=(im,), text=t) for im, t in zip(images, TEXTS, strict=False)]
    d = vlm.decide(prompts, ("A", "B"))
    assert d.logits.shape == (3, 2) and d.states.shape[:2] == (vlm.num_layers, 3)
    single = vlm.decide(prompts[1:2], ("A", "B"))
    torch.testing.assert_close(single.states[:, 0], d.states[:, 1], atol=1e-5, rtol=0)
