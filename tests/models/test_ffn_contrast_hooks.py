"""``Hooks.ffn`` (FFN-update modifiers) and ``Hooks.contrast`` (contrastive greedy decoding, SPD-Faith
Eq. 7) on tiny real VLMs and the reference VLM, and how both enter the output store's key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image

from faithtests.models.hf_vlm import HFVisionLanguageModel
from faithtests.models.hooks import residual_attention_module, residual_ffn_module
from faithtests.models.interfaces import Contrast, Hooks, Prompt, TokenSpans
from faithtests.models.registry import load_model
from faithtests.models.store import OutputStore, digest, hooks_key

OPTIONS = ("A", "B")


def tiny_prompts(images: list[Any]) -> list[Prompt]:
    """Different lengths and image sizes: left padding in generation, prefix sharing in decide."""
    return [
        Prompt((images[0],), "Are the two pictures the same ? Answer A or B ."),
        Prompt((images[0],), "Which caption better matches the image ? A or B ?"),
        Prompt((images[3],), "Describe the image ."),
    ]


def tiny_aux(images: list[Any]) -> list[Prompt]:
    """Other images and other lengths than :func:`tiny_prompts` (the joint batch pads differently)."""
    return [
        Prompt((images[2],), "Describe the image ."),
        Prompt((images[5],), "Are the two pictures different ? Answer yes or no , only one letter ."),
        Prompt((images[1],), "Describe the photo ."),
    ]


def copy_ffn(layer: int, delta_attn: torch.Tensor, delta_ffn: torch.Tensor) -> torch.Tensor:
    return delta_ffn.clone()  # a new tensor: the replacing path runs, with the same numbers


def zero_ffn(layer: int, delta_attn: torch.Tensor, delta_ffn: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(delta_ffn)


def gated_ffn(layer: int, delta_attn: torch.Tensor, delta_ffn: torch.Tensor) -> torch.Tensor:
    """Per position and data-dependent, like SAGE stage 2."""
    keep = delta_attn[..., :1] * delta_ffn[..., :1] > 0  # about half of the positions
    return torch.where(keep, delta_ffn, 10.0 * delta_ffn)


@pytest.fixture(scope="module")
def ref() -> HFVisionLanguageModel:
    model = load_model("reference:vlm", device="cpu", dtype="float32")
    assert isinstance(model, HFVisionLanguageModel)
    return model


def pair_prompts(n: int) -> tuple[list[Prompt], list[Prompt]]:
    """SPD-Faith naming prompts on world pairs, and the same prompts on blank (grey) pairs."""
    from faithtests.protocols.spdfaith.prompts import find_prompt
    from faithtests.protocols.spdfaith.stimuli import pair_item

    main, aux = [], []
    for i in range(n):
        item = pair_item(0, i)
        a, b = item.images()
        grey = Image.new("RGB", a.size, (128, 128, 128))
        main.append(find_prompt(a, b, max(1, len(item.edits))))
        aux.append(find_prompt(grey, grey, max(1, len(item.edits))))
    return main, aux


# ------------------------------------------------------------------------------------------------ ffn
@pytest.mark.parametrize("name", ["llava", "gemma3"])
def test_identity_ffn_modifier_changes_nothing(
    name: str, load_tiny: Callable[..., Any], images: list[Any]
) -> None:
    vlm = load_tiny(name)
    prompts = tiny_prompts(images)
    hooks = Hooks(ffn={i: copy_ffn for i in range(vlm.num_layers)})
    base, got = vlm.decide(prompts, OPTIONS), vlm.decide(prompts, OPTIONS, hooks)
    assert (got.logits - base.logits).abs().max() <= 1e-6 and (got.states - base.states).abs().max() <= 1e-6
    lp = vlm.answer_logprob(prompts, ["yes", "no"], hooks)
    assert (lp - vlm.answer_logprob(prompts, ["yes", "no"])).abs().max() <= 1e-6
    att, att0 = vlm.attentions(prompts, hooks), vlm.attentions(prompts)
    assert all(torch.equal(a, b) for a, b in zip(att.weights, att0.weights, strict=True))
    assert vlm.generate(prompts, 6, hooks) == vlm.generate(prompts, 6)


@pytest.mark.parametrize("name", ["llava", "gemma3"])
def test_zero_ffn_is_mlp_scale_zero(name: str, load_tiny: Callable[..., Any], images: list[Any]) -> None:
    vlm = load_tiny(name)
    prompts = tiny_prompts(images)
    zero, scale = Hooks(ffn={0: zero_ffn}), Hooks(mlp_scale={0: 0.0})
    a, b = vlm.decide(prompts, OPTIONS, zero), vlm.decide(prompts, OPTIONS, scale)
    assert (a.logits - b.logits).abs().max() <= 1e-6 and (a.states - b.states).abs().max() <= 1e-6
    assert (a.logits - vlm.decide(prompts, OPTIONS).logits).abs().max() > 1e-4  # it did change something
    nt = vlm.next_token_logits(prompts, zero) - vlm.next_token_logits(prompts, scale)
    assert nt.abs().max() <= 1e-6
    att_z, att_s = vlm.attentions(prompts, zero), vlm.attentions(prompts, scale)
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(att_z.weights, att_s.weights, strict=True))
    assert vlm.generate(prompts, 6, zero) == vlm.generate(prompts, 6, scale)


@pytest.mark.parametrize("name", ["llava", "gemma3"])
def test_modifier_sees_the_attention_and_ffn_updates(
    name: str, load_tiny: Callable[..., Any], images: list[Any]
) -> None:
    """Δ_attn computed by hand from ``self_attn``'s output (through ``post_attention_layernorm`` in
    Gemma 3), and the layer's output = input + Δ_attn + Δ_ffn."""
    vlm = load_tiny(name)
    layer = vlm.layers[1]
    seen: dict[str, torch.Tensor] = {}

    def record(index: int, delta_attn: torch.Tensor, delta_ffn: torch.Tensor) -> torch.Tensor:
        assert index == 1
        seen["attn"], seen["ffn"] = delta_attn.clone(), delta_ffn.clone()
        return delta_ffn

    def attn_out(_m: Any, _i: Any, out: Any) -> None:
        seen["o"] = out[0].clone()

    def layer_io(_m: Any, args: Any, kwargs: Any, out: Any) -> None:
        seen["in"] = (args[0] if args else kwargs["hidden_states"]).clone()
        seen["out"] = (out if isinstance(out, torch.Tensor) else out[0]).clone()

    handles = [layer.self_attn.register_forward_hook(attn_out),
               layer.register_forward_hook(layer_io, with_kwargs=True)]
    try:
        vlm.states(tiny_prompts(images)[2:], Hooks(ffn={1: record}))
    finally:
        for h in handles:
            h.remove()
    by_hand = seen["o"]
    if name == "gemma3":
        assert residual_attention_module(layer) is layer.post_attention_layernorm
        with torch.inference_mode():
            by_hand = layer.post_attention_layernorm(by_hand)
    else:
        assert residual_attention_module(layer) is layer.self_attn and residual_ffn_module(layer) is layer.mlp
    assert torch.allclose(seen["attn"], by_hand, atol=1e-6)
    assert torch.allclose(seen["in"] + seen["attn"] + seen["ffn"], seen["out"], atol=1e-5)


def test_ffn_modifiers_apply_on_the_prefix_path(load_tiny: Callable[..., Any], images: list[Any]) -> None:
    """A per-position modifier gives the same numbers through the shared prefix and the full prompt."""
    shared = load_tiny("qwen2_vl")
    full = load_tiny("qwen2_vl", prefix_cache=False)
    prompts = tiny_prompts(images)
    hooks = Hooks(ffn={0: gated_ffn, 1: gated_ffn})
    before = shared.cache_stats()["prefix_calls"]
    a, b = shared.decide(prompts, OPTIONS, hooks), full.decide(prompts, OPTIONS, hooks)
    assert shared.cache_stats()["prefix_calls"] > before
    assert (a.logits - b.logits).abs().max() < 1e-4 and (a.states - b.states).abs().max() < 1e-4
    assert (a.states - full.decide(prompts, OPTIONS).states).abs().max() > 1e-3  # it acted


# ------------------------------------------------------------------------------------------- contrast
def test_contrast_is_refused_outside_generate(load_tiny: Callable[..., Any], images: list[Any]) -> None:
    vlm = load_tiny("llava")
    prompts = tiny_prompts(images)[:1]
    hooks = Hooks(contrast=Contrast(tuple(tiny_aux(images)[:1]), 0.5, "test"))
    calls: dict[str, Callable[[], Any]] = {
        "decide": lambda: vlm.decide(prompts, OPTIONS, hooks),
        "option_logits": lambda: vlm.option_logits(prompts, OPTIONS, hooks),
        "states": lambda: vlm.states(prompts, hooks),
        "answer_logprob": lambda: vlm.answer_logprob(prompts, ["yes"], hooks),
        "attentions": lambda: vlm.attentions(prompts, hooks),
        "next_token_logits": lambda: vlm.next_token_logits(prompts, hooks),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=rf"^{name}: Hooks.contrast applies to generate\(\) only"):
            call()
    with pytest.raises(ValueError, match="2 auxiliary prompts for 1 prompts"):
        vlm.generate(prompts, 3, Hooks(contrast=Contrast(tuple(tiny_aux(images)[:2]), 0.5, "t")))
    with pytest.raises(ValueError, match="eta"):
        vlm.generate(prompts, 3, Hooks(contrast=Contrast(tuple(tiny_aux(images)[:1]), -1.0, "t")))


def test_contrast_at_eta_zero_is_greedy_generate(family: str, load_tiny: Callable[..., Any],
                                                 images: list[Any]) -> None:
    from faithtests.models.errors import NotApplicable

    vlm = load_tiny(family)
    prompts, aux = tiny_prompts(images), tiny_aux(images)
    hooks = Hooks(contrast=Contrast(tuple(aux), 0.0, "other-images"))
    if why := vlm.lacks("logits_processors"):  # (Janus's generate drops them: found at load)
        with pytest.raises(NotApplicable, match="logits processors") as info:
            vlm.generate(prompts, 8, hooks)
        assert info.value.reason == why
        return
    assert vlm.generate(prompts, 8, hooks) == vlm.generate(prompts, 8)


def test_reference_contrast_at_eta_zero_is_greedy_generate(ref: HFVisionLanguageModel) -> None:
    main, aux = pair_prompts(6)
    plain = ref.generate(main, 32)
    assert ref.generate(main, 32, Hooks(contrast=Contrast(tuple(aux), 0.0, "grey"))) == plain
    assert ref.generate(main, 32, Hooks(contrast=Contrast(tuple(aux), 2.0, "grey"))) != plain  # eta acts


def manual_contrast(vlm: HFVisionLanguageModel, main: Prompt, aux: Prompt, eta: float, steps: int) -> str:
    """Eq. 7 decoded by hand: full forwards (no cache, no padding) of both prompts plus the tokens so far."""
    enc_m, enc_a = vlm.encode([main]), vlm.encode([aux])
    chosen: list[int] = []
    eos = vlm.processor.tokenizer.eos_token_id
    with torch.inference_mode():
        for _ in range(steps):
            lg = []
            for enc in (enc_m, enc_a):
                inputs = dict(enc.inputs)
                extra = torch.tensor([chosen], dtype=torch.long)
                inputs["input_ids"] = torch.cat([inputs["input_ids"], extra], dim=1)
                inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
                lg.append(vlm.model(**inputs).logits[0, -1].float())
            token = int((lg[0] + eta * torch.relu(lg[0] - lg[1])).argmax())
            chosen.append(token)
            if token == eos:
                break
    return str(vlm.processor.tokenizer.decode(chosen, skip_special_tokens=True)).strip()


def test_reference_contrast_matches_decoding_by_hand(ref: HFVisionLanguageModel) -> None:
    main, aux = pair_prompts(3)
    got = ref.generate(main, 12, Hooks(contrast=Contrast(tuple(aux), 2.0, "grey")))
    assert got == [manual_contrast(ref, m, a, 2.0, 12) for m, a in zip(main, aux, strict=True)]


def test_hooks_apply_to_both_streams(load_tiny: Callable[..., Any], images: list[Any]) -> None:
    vlm = load_tiny("llava")
    prompts, aux = tiny_prompts(images)[:2], tiny_aux(images)[:2]
    rows: list[int] = []
    ffn_rows: list[int] = []

    def attention(layer: int, w: torch.Tensor, spans: TokenSpans) -> torch.Tensor:
        rows.append(w.shape[0])
        return w

    def ffn(layer: int, da: torch.Tensor, df: torch.Tensor) -> torch.Tensor:
        ffn_rows.append(df.shape[0])
        return df

    hooks = Hooks(attention={0: attention}, ffn={1: ffn},
                  contrast=Contrast(tuple(aux), 0.0, "t"))
    assert vlm.generate(prompts, 4, hooks) == vlm.generate(prompts, 4)
    assert rows and set(rows) == {4} and set(ffn_rows) == {4}  # 2 main + 2 auxiliary rows


# --------------------------------------------------------------------------------------------- store
def test_hooks_key_covers_ffn_and_contrast(images: list[Any]) -> None:
    def modifier(layer: int, weights: torch.Tensor, spans: Any) -> torch.Tensor:
        return weights

    aux = (Prompt((), "Describe the image ."),)
    assert hooks_key(Hooks(ffn={0: copy_ffn})) is None  # code without a name
    tagged = hooks_key(Hooks(ffn={0: copy_ffn}, tag="x"))
    assert tagged is not None and tagged != hooks_key(Hooks(ffn={1: copy_ffn}, tag="x"))
    assert tagged != hooks_key(Hooks(attention={0: modifier}, tag="x"))
    assert hooks_key(Hooks(contrast=Contrast(aux, 0.5, ""))) is None
    c5 = hooks_key(Hooks(contrast=Contrast(aux, 0.5, "m")))
    c6 = hooks_key(Hooks(contrast=Contrast(aux, 0.6, "m")))
    assert None not in (c5, c6) and len({c5, c6, hooks_key(Hooks(contrast=Contrast(aux, 0.5, "n")))}) == 3
    assert c5 != hooks_key(None)
    # keys of hooks without ffn / contrast are the ones rows were stored under before they existed
    assert hooks_key(Hooks(attention={0: modifier}, mlp_scale={1: 0.5}, tag="t")) == digest(
        {"tag": "t", "attention_layers": [0], "mlp_scale": [(1, 0.5)]})


def test_contrastive_generations_are_stored_per_aux_prompt(
    tiny_dir: Callable[[str], Path], images: list[Any], tmp_path: Path
) -> None:
    def fresh() -> Any:
        model: Any = load_model(f"hf:{tiny_dir('llava')}", device="cpu")
        model.use_store(OutputStore(tmp_path))
        return model

    prompts, aux = tiny_prompts(images), tiny_aux(images)
    hooks = Hooks(contrast=Contrast(tuple(aux), 3.0, "t"))
    first = fresh().generate(prompts, 6, hooks)
    warm = fresh()
    stats = warm.store.stats(warm.store_namespace)
    assert warm.generate(prompts, 6, hooks) == first and stats.hits == 3 and stats.writes == 0
    swapped = (aux[1], aux[0], aux[2])  # same prompts, other auxiliary prompts in rows 0 and 1
    warm.generate(prompts, 6, Hooks(contrast=Contrast(swapped, 3.0, "t")))
    assert stats.hits == 4 and stats.writes == 2
    warm.generate(prompts, 6)  # no contrast: its own rows
    assert stats.writes == 5
