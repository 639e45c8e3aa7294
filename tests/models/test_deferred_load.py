"""Deferred loading on a warm ``--faith-cache``: an adapter whose checkpoint the store describes loads
nothing until a call needs a row the store lacks, and then gives exactly what the eager adapter gives;
a changed checkpoint, no store, or a store without the description loads at once (tiny real models)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from faithtests.models.cache import ImageKeys, image_key
from faithtests.models.checks import header_parameter_count
from faithtests.models.interfaces import Prompt
from faithtests.models.lens import lens_probs
from faithtests.models.prompting import option_token_ids
from faithtests.models.registry import load_model
from faithtests.models.store import OutputStore

TEXTS = ["a red circle", "two dog", "a blue square"]


def _load(spec: str, cache: Path) -> Any:
    store = OutputStore(cache)
    model: Any = load_model(spec, device="cpu", defer_to=store)
    model.use_store(store)
    return model


def _perturbed_copy(src: Path, dst: Path, weights: str) -> Path:
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    state = load_file(str(dst / weights))
    name = next(k for k, v in state.items() if v.is_floating_point())
    state[name] = state[name] + 1e-3
    save_file(state, str(dst / weights))
    return dst


def test_vlm_defers_until_a_miss_and_then_matches_the_eager_model(
    tiny_dir: Callable[[str], Path], images: list[Any], tmp_path: Path
) -> None:
    src, cache = tiny_dir("llava"), tmp_path / "cache"
    spec = f"hf:{src}"
    prompts = [Prompt(images=(im,), text=f"Which? {t}\nA. yes\nB. no") for im, t in zip(images, TEXTS,
                                                                                         strict=False)]
    cold = _load(spec, cache)
    assert cold.loaded  # nothing described yet: loaded at once
    d0 = cold.decide(prompts, ("A", "B"))
    lens0 = cold.lens_probs(d0.states, ("A", "B"))
    ids = option_token_ids(cold.processor.tokenizer, ("A", "B"))
    assert torch.allclose(lens0, lens_probs(cold.model, d0.states, ids), atol=0, rtol=0)  # the plain lens
    lengths0 = cold.caption_lengths(TEXTS)
    g0 = cold.generate(prompts[:2], max_new_tokens=3)

    warm = _load(spec, cache)
    assert not warm.loaded
    assert warm.fingerprint() == cold.fingerprint() and warm.num_layers == cold.num_layers
    assert warm.num_parameters() == cold.num_parameters() == sum(p.numel() for p in cold.model.parameters())
    d1 = warm.decide(prompts, ("A", "B"))
    assert torch.equal(d1.logits, d0.logits) and torch.equal(d1.states, d0.states)
    assert torch.equal(warm.lens_probs(d1.states, ("A", "B")), lens0)
    assert warm.caption_lengths(TEXTS) == lengths0
    assert warm.generate(prompts[:2], max_new_tokens=3) == g0
    assert not warm.loaded and warm.cache_stats() == {"prefix_calls": 0, "suffix_calls": 0, "full_calls": 0}

    # a row the store lacks loads the model, and it computes what an eager model without a store does
    new = [Prompt(images=(images[4],), text="Other?\nA. yes\nB. no")]
    fresh = warm.decide(new, ("A", "B"))
    assert warm.loaded
    eager: Any = load_model(spec, device="cpu")
    assert eager.loaded and torch.equal(fresh.logits, eager.decide(new, ("A", "B")).logits)

    # changed weights are another namespace with no description: loaded at once
    changed = _perturbed_copy(src, tmp_path / "changed", "model.safetensors")
    assert _load(f"hf:{changed}", cache).loaded


def test_open_clip_defers_until_a_miss_and_then_matches_the_eager_model(
    tiny_dir: Callable[[str], Path], images: list[Any], tmp_path: Path
) -> None:
    src, cache = tiny_dir("open_clip"), tmp_path / "cache"
    spec = f"open_clip:local-dir:{src}"
    long_text = " ".join(["word"] * 100)  # beyond the tiny context: counted as truncated
    cold = _load(spec, cache)
    assert cold.loaded
    s0 = cold.similarity(images[:3], [*TEXTS[:2], long_text])

    warm = _load(spec, cache)
    assert not warm.loaded
    assert torch.equal(warm.similarity(images[:3], [*TEXTS[:2], long_text]), s0)
    assert warm.fingerprint() == cold.fingerprint()  # truncation counts included
    assert warm.fingerprint()["truncated_inputs"]["caption"]["truncated"] == 1
    assert warm.num_parameters() == cold.num_parameters() == sum(p.numel() for p in cold.model.parameters())
    assert not warm.loaded
    miss = warm.encode_texts(["a green triangle"])  # not stored: loads, and gives the eager numbers
    assert warm.loaded
    eager: Any = load_model(spec, device="cpu")
    assert torch.equal(miss, eager.encode_texts(["a green triangle"]))

    changed = _perturbed_copy(src, tmp_path / "changed", "open_clip_model.safetensors")
    assert _load(f"open_clip:local-dir:{changed}", cache).loaded


def test_header_parameter_count_needs_safetensors_only(
    tmp_path: Path, tiny_dir: Callable[[str], Path]
) -> None:
    src = tiny_dir("open_clip")
    assert header_parameter_count([src]) is not None
    mixed = tmp_path / "mixed"
    shutil.copytree(src, mixed)
    (mixed / "extra.bin").write_bytes(b"\0")
    assert header_parameter_count([mixed]) is None  # a pickle checkpoint cannot be sized unread
    (tmp_path / "empty").mkdir()
    assert header_parameter_count([tmp_path / "empty"]) is None


@pytest.mark.parametrize("n_prompts", [1, 4])
def test_image_keys_hash_each_object_once(images: list[Any], n_prompts: int, monkeypatch: Any) -> None:
    import faithtests.models.cache as cache_module

    calls: list[int] = []

    def counted(image: Any) -> str:
        calls.append(id(image))
        return image_key(image)

    monkeypatch.setattr(cache_module, "image_key", counted)
    keys = ImageKeys()
    got = [keys(images[0]) for _ in range(n_prompts)] + [keys(images[1])]
    assert got == [image_key(images[0])] * n_prompts + [image_key(images[1])]
    assert len(calls) == 2


def test_a_deferred_open_clip_keeps_the_load_checks(tiny_dir: Callable[[str], Path], images: list[Any],
                                                     tmp_path: Path) -> None:
    """The checks a load makes hold for a deferred adapter: resized position embeddings without the
    user's consent fail at construction, and a model that turns out unlike its description fails on
    every call (it is never used)."""
    from faithtests.models.errors import CheckpointError

    src, cache = tiny_dir("open_clip"), tmp_path / "cache"
    spec = f"open_clip:local-dir:{src}"
    cold = _load(spec, cache)
    store, ns = OutputStore(cache), cold.store_namespace
    described = store.description(ns)
    assert described is not None and described["resized"] == []

    resized = ["positional_embedding: 77 -> 32"]
    store.describe(ns, {**described, "resized": resized})
    with pytest.raises(CheckpointError, match="FAITHTESTS_RESIZE_POS_EMBED"):
        load_model(spec, device="cpu", defer_to=store)
    allowed: Any = load_model(spec, device="cpu", defer_to=store, resize_pos_embed=True)
    assert not allowed.loaded and allowed.fingerprint()["pos_embed_resized"] == resized

    store.describe(ns, {**described, "family": "siglip"})  # a description this checkpoint does not fit
    wrong = _load(spec, cache)
    assert not wrong.loaded
    for _ in range(2):
        with pytest.raises(RuntimeError, match="not the one the output cache describes"):
            wrong.encode_texts(["never encoded before"])
    assert not wrong.loaded


def test_a_device_map_is_never_deferred(tiny_dir: Callable[[str], Path], tmp_path: Path) -> None:
    """Under a device map the input device is known only once accelerate has placed the layers."""
    from faithtests.models.hf_vlm import HFVisionLanguageModel

    src, cache = tiny_dir("llava"), tmp_path / "cache"
    _load(f"hf:{src}", cache)
    kwargs: dict[str, Any] = {"store": OutputStore(cache), "device": torch.device("cpu"),
                              "dtype": torch.float32}
    assert HFVisionLanguageModel.from_store(f"hf:{src}", str(src), **kwargs) is not None
    assert HFVisionLanguageModel.from_store(f"hf:{src}", str(src), device_map="cpu", **kwargs) is None


def test_an_unsupported_lens_is_known_without_loading(tiny_dir: Callable[[str], Path],
                                                      tmp_path: Path) -> None:
    """The description records whether the logit lens can read through the model: a deferred adapter of a
    model without a final norm raises the same LensUnsupported as a loaded one, and loads nothing; a
    description from before that was recorded is not trusted (the model loads and re-describes it)."""
    from faithtests.models.hf_vlm import HFVisionLanguageModel
    from faithtests.models.lens import LensUnsupported, lens_support

    src, cache = tiny_dir("llava"), tmp_path / "cache"
    cold = _load(f"hf:{src}", cache)
    assert lens_support(cold.model) == "" and cold.meta["lens"] == ""
    store, ns = OutputStore(cache), cold.store_namespace
    described = store.description(ns)
    assert described is not None

    why = "LlavaForConditionalGeneration: no final norm found on LlamaModel"
    store.describe(ns, {**described, "lens": why})
    unsupported = _load(f"hf:{src}", cache)
    with pytest.raises(LensUnsupported, match="no final norm"):
        unsupported.lens_probs(torch.zeros(2, 1, 8), ("A", "B"))
    assert not unsupported.loaded

    store.describe(ns, {k: v for k, v in described.items() if k != "lens"})
    kwargs: dict[str, Any] = {"store": store, "device": torch.device("cpu"), "dtype": torch.float32}
    assert HFVisionLanguageModel.from_store(f"hf:{src}", str(src), **kwargs) is None
    reloaded = _load(f"hf:{src}", cache)
    assert reloaded.loaded and store.description(ns) == described  # described afresh, lens included


def test_lens_support_names_what_is_missing() -> None:
    from torch import nn

    from faithtests.models.lens import lens_support

    class NoNorm(nn.Module):
        def get_output_embeddings(self) -> nn.Module:
            return nn.Linear(2, 2)

    class NoHead(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(2)

    class Unimplemented(NoHead):
        def get_output_embeddings(self) -> nn.Module:
            raise NotImplementedError

    assert lens_support(NoNorm()) == "NoNorm: no final norm found on NoNorm"
    assert lens_support(NoHead()) == "NoHead: no output embeddings (lm_head)"
    assert lens_support(Unimplemented()) == "NotImplementedError"  # described, the load goes on


def test_a_vlm_unlike_its_description_fails_on_its_first_miss(tiny_dir: Callable[[str], Path],
                                                              images: list[Any], tmp_path: Path) -> None:
    """The same check as open_clip's (store.check_described): the loaded HF model must match the record."""
    src, cache = tiny_dir("llava"), tmp_path / "cache"
    cold = _load(f"hf:{src}", cache)
    store, ns = OutputStore(cache), cold.store_namespace
    described = store.description(ns)
    assert described is not None
    store.describe(ns, {**described, "num_layers": described["num_layers"] + 1})
    wrong = _load(f"hf:{src}", cache)
    assert not wrong.loaded
    with pytest.raises(RuntimeError, match="not the one the output cache describes"):
        wrong.decide([Prompt(images=(images[0],), text="Which?\nA. yes\nB. no")], ("A", "B"))
    assert not wrong.loaded
