"""Every HF VLM adapter method on tiny LLaVA, Qwen2-VL, Idefics3, Gemma3 and InternVL models.

Reference values come from plain transformers calls on the same model (processor + forward), so the
adapter is checked against the library, not against itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from faithtests.models.hf_vlm import HFVisionLanguageModel
from faithtests.models.interfaces import Hooks, Prompt, TokenSpans, VisionLanguageModel
from faithtests.models.prompting import OptionTokenError


def question(a: str, b: str) -> str:
    return f'Which caption better matches the image? Answer only A or B.\nA: "{a}"\nB: "{b}"'


@pytest.fixture(scope="session")
def prompts(images: list[Any]) -> list[Prompt]:
    """Rows 0, 1, 3 share an image (prefix sharing applies); row 2 has its own; row 3 a description."""
    a, b = images[0], images[1]
    return [
        Prompt((a,), question("a red circle", "a blue square")),
        Prompt((a,), question("a blue square", "a red circle")),
        Prompt((b,), question("two dogs", "one cat")),
        Prompt((a,), question("a red circle", "a red circle"), description="this is a happy scene"),
    ]


@pytest.fixture(scope="session")
def vlm(family: str, load_tiny: Callable[..., Any]) -> HFVisionLanguageModel:
    model = load_tiny(family)
    assert isinstance(model, HFVisionLanguageModel)
    return model


def reference_forward(vlm: HFVisionLanguageModel, prompt: Prompt) -> Any:
    """One prompt through the processor's chat template and a plain model forward (no adapter logic)."""
    from faithtests.models.prompting import messages

    text = vlm.processor.apply_chat_template(messages(prompt), add_generation_prompt=True, tokenize=False)
    bos = vlm.processor.tokenizer.bos_token
    inputs = vlm.processor(
        text=[text], images=[list(prompt.images)], return_tensors="pt",
        add_special_tokens=not (bos is not None and text.startswith(bos)),
    )
    with torch.inference_mode():
        return inputs, vlm.model(**inputs, output_hidden_states=True)


def test_protocol_and_fingerprint(vlm: HFVisionLanguageModel, family: str) -> None:
    assert isinstance(vlm, VisionLanguageModel)
    assert vlm.num_layers == vlm.config.get_text_config().num_hidden_layers
    fp = vlm.fingerprint()
    assert fp["family"] == family and fp["dtype"] == "float32" and fp["device"] == "cpu"
    assert len(fp["checkpoint_sha256"]["model.safetensors"]) == 64


def test_option_logits_match_plain_forward(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    logits = vlm.option_logits(prompts, ["A", "B"])
    assert logits.shape == (4, 2) and logits.dtype == torch.float32
    ids = [vlm.processor.tokenizer.convert_tokens_to_ids(x) for x in ("A", "B")]
    for row, prompt in enumerate(prompts):
        _, out = reference_forward(vlm, prompt)
        assert torch.allclose(logits[row], out.logits[0, -1, ids], atol=1e-4)


def test_option_letters_must_be_single_tokens(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    with pytest.raises(OptionTokenError, match="2 tokens"):
        vlm.option_logits(prompts[:1], ["A", "B C"])
    with pytest.raises(OptionTokenError, match="repeated"):
        vlm.option_logits(prompts[:1], ["A", "A"])


def test_states_are_decoder_layer_outputs(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    states = vlm.states(prompts)
    assert states.shape == (vlm.num_layers, 4, vlm.config.get_text_config().hidden_size)
    from faithtests.models.lens import final_norm

    norm = final_norm(vlm.model)
    for row, prompt in enumerate(prompts):
        _, out = reference_forward(vlm, prompt)
        hs = out.hidden_states  # (embeddings, layer 1, ..., final layer after the final norm)
        for layer in range(vlm.num_layers - 1):
            assert torch.allclose(states[layer, row], hs[layer + 1][0, -1], atol=1e-4)
        with torch.inference_mode():
            assert torch.allclose(norm(states[-1, row][None])[0], hs[-1][0, -1], atol=1e-4)


def test_decide_combines_logits_and_states(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    decision = vlm.decide(prompts, ["A", "B"])
    assert torch.allclose(decision.logits, vlm.option_logits(prompts, ["A", "B"]), atol=1e-6)
    assert torch.allclose(decision.states, vlm.states(prompts), atol=1e-6)


def test_prefix_cache_equals_full_forward(
    vlm: HFVisionLanguageModel, prompts: list[Prompt], family: str, load_tiny: Callable[..., Any]
) -> None:
    """Rows 0, 1, 3 share one prefix forward; its logits and states equal the full forward's within
    float32 noise (issue 43: Mllama's once moved by 1.2e-3, its cross-attention mask not passed on). A
    cache that cannot be forked exactly (linear-attention or convolution state) is never shared."""
    full_model = load_tiny(family, prefix_cache=False)
    before = vlm.cache_stats()
    cached = vlm.decide(prompts, ["A", "B"])
    after = vlm.cache_stats()
    if vlm.runner.unshared:  # found at the first prefix call: every row took the full forward
        assert "cannot be forked exactly" in vlm.runner.unshared
        assert after["suffix_calls"] == before["suffix_calls"] and after["full_calls"] > before["full_calls"]
    else:
        assert after["prefix_calls"] == before["prefix_calls"] + 1  # rows 0, 1, 3 share one prefix
    full = full_model.decide(prompts, ["A", "B"])
    assert full_model.cache_stats()["prefix_calls"] == 0
    assert (cached.logits - full.logits).abs().max() < 1e-6
    assert (cached.states - full.states).abs().max() < 1e-5


def test_batch_equals_single(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    batch = vlm.option_logits(prompts, ["A", "B"])
    for row, prompt in enumerate(prompts):
        assert torch.allclose(vlm.option_logits([prompt], ["A", "B"])[0], batch[row], atol=1e-5)


def test_token_spans(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    enc = vlm.encode(prompts)
    ids = enc.inputs["input_ids"]
    tok = vlm.processor.tokenizer
    for row in range(len(prompts)):
        image_positions = (ids[row] == vlm.image_token).nonzero().flatten().tolist()
        start, end = enc.spans.image[row]
        assert (start, end) == (image_positions[0], image_positions[-1] + 1)
        assert sum(b - a for a, b in enc.spans.image_runs[row]) == len(image_positions)
        assert enc.spans.length[row] == int(enc.inputs["attention_mask"][row].sum())
    a, b = enc.spans.description[3]
    assert tok.decode(ids[3, a:b]) == "this is a happy scene"
    assert enc.spans.description[0] == (0, 0)
    other = enc.spans.other_mask(3, ids.shape[1])
    image = [p for a, b in enc.spans.image_runs[3] for p in range(a, b)]
    assert not any(other[a:b]) and not any(other[p] for p in image)


def test_two_image_prompts(
    vlm: HFVisionLanguageModel, family: str, images: list[Any], load_tiny: Callable[..., Any]
) -> None:
    """Difference-suite prompts: two images per prompt, one image-token run per image, prefix exact."""
    pair = (images[3], images[4])
    texts = ["Are the two pictures the same? A or B", "Are the two pictures different? A or B", "A or B ?"]
    prompts = [Prompt(pair, t) for t in texts] + [Prompt((images[4], images[3]), texts[0])]
    enc = vlm.encode(prompts)
    ids = enc.inputs["input_ids"]
    for row, runs in enumerate(enc.spans.image_runs):
        # one run per image, or one in all when the template's separator between images is not a token
        # (the tiny LLaVA tokenizer drops the newline after <image>); tiled images (LLaVA-NeXT) may split
        # an image's tokens into several runs. Every image token is in a run, whatever the tiling.
        assert len(runs) >= 1 and sum(b - a for a, b in runs) == int((ids[row] == vlm.image_token).sum())
    got = vlm.decide(prompts, ["A", "B"])
    want = load_tiny(family, prefix_cache=False).decide(prompts, ["A", "B"])
    assert (got.logits - want.logits).abs().max() < 1e-4 and (got.states - want.states).abs().max() < 1e-4
    assert (got.logits[0] - got.logits[3]).abs().max() > 1e-6  # image order matters


def lacking(vlm: HFVisionLanguageModel, features: str, call: Callable[[], Any]) -> bool:
    """True when the model lacks one of ``features`` (space-separated, in the order calls check them;
    found at its load): then ``call`` must be refused as not applicable naming the first one and its
    reason, before any prompt runs (and the caller checks nothing else)."""
    from faithtests.models.errors import NotApplicable

    missing = [f for f in features.split() if vlm.lacks(f)]
    if missing:
        with pytest.raises(NotApplicable, match="not applicable") as info:
            call()
        assert info.value.feature == missing[0] and info.value.reason == vlm.lacks(missing[0])
    return bool(missing)


def test_attentions_rows_sum_to_one(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    if lacking(vlm, "attention", lambda: vlm.attentions(prompts)):
        return
    att = vlm.attentions(prompts)
    heads = vlm.config.get_text_config().num_attention_heads
    assert len(att.weights) == vlm.num_layers
    width = max(att.spans.length)
    for w in att.weights:
        assert w.shape == (4, heads, width)
        assert torch.allclose(w.sum(-1), torch.ones(4, heads), atol=1e-5)
        for row, n in enumerate(att.spans.length):
            assert float(w[row, :, n:].abs().sum()) == 0.0  # nothing beyond the real tokens
    for row in range(4):  # the image is read (by some layer: a sliding-window layer may not reach it)
        a, b = att.spans.image[row]
        assert sum(float(w[row, :, a:b].sum()) for w in att.weights) > 0.0


def zero_image_attention(layer: int, weights: torch.Tensor, spans: TokenSpans) -> torch.Tensor:
    """Move all attention mass off the image tokens (renormalised over the rest)."""
    out = weights.clone()
    for row, (a, b) in enumerate(spans.image):
        out[row, :, :, a:b] = 0.0
    # (a query whose window holds only image tokens, in a sliding-window layer, keeps no mass at all)
    return out / out.sum(-1, keepdim=True).clamp_min(1e-30)


def test_attention_hooks(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    base = vlm.option_logits(prompts, ["A", "B"])
    identity = Hooks(attention={i: (lambda layer, w, spans: w) for i in range(vlm.num_layers)})
    if lacking(vlm, "attention", lambda: vlm.option_logits(prompts, ["A", "B"], identity)):
        return
    assert (vlm.option_logits(prompts, ["A", "B"], identity) - base).abs().max() < 1e-5
    blind = Hooks(attention={i: zero_image_attention for i in range(vlm.num_layers)})
    moved = vlm.option_logits(prompts, ["A", "B"], blind)
    assert (moved - base).abs().max() > 1e-4
    att = vlm.attentions(prompts, blind)
    for w in att.weights:
        assert torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-5)
        for row, (a, b) in enumerate(att.spans.image):
            assert float(w[row, :, a:b].abs().sum()) == 0.0


def test_mlp_scale_and_logit_adjuster(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    base = vlm.decide(prompts, ["A", "B"])
    if lacking(vlm, "residual_hooks", lambda: vlm.decide(prompts, ["A", "B"], Hooks(mlp_scale={0: 0.5}))):
        return
    same = vlm.decide(prompts, ["A", "B"], Hooks(mlp_scale={i: 1.0 for i in range(vlm.num_layers)}))
    assert torch.equal(same.logits, base.logits) and torch.equal(same.states, base.states)
    scaled = vlm.decide(prompts, ["A", "B"], Hooks(mlp_scale={0: 0.5}))
    assert (scaled.logits - base.logits).abs().max() > 1e-4
    assert (scaled.states[0] - base.states[0]).abs().max() > 1e-5  # layer 0's own output changes

    def shift_b(logits: torch.Tensor, letters: Any) -> torch.Tensor:
        assert list(letters) == ["A", "B"]
        return logits + torch.tensor([0.0, 3.0])

    adjusted = vlm.option_logits(prompts, ["A", "B"], Hooks(logit_adjuster=shift_b))
    assert torch.allclose(adjusted, base.logits + torch.tensor([0.0, 3.0]))
    with pytest.raises(IndexError, match="out of range"):
        vlm.option_logits(prompts, ["A", "B"], Hooks(mlp_scale={vlm.num_layers: 0.5}))


def test_generate_is_greedy_and_deterministic(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    first = vlm.generate(prompts, max_new_tokens=4)
    assert len(first) == 4 and all(isinstance(t, str) for t in first)
    assert vlm.generate(prompts, max_new_tokens=4) == first
    # Row 2 alone (no left padding) produces the same greedy text as inside the batch.
    assert vlm.generate(prompts[2:3], max_new_tokens=4) == first[2:3]
    # Greedy: the first generated token is the argmax of the next-token logits, media placeholders
    # excluded (generation never emits one: the next forward would see more image tokens than features)
    from faithtests.models.prompting import placeholder_ids

    logits = vlm.next_token_logits(prompts[2:3])[0]
    logits[[i for i in placeholder_ids(vlm.config) if i < len(logits)]] = -torch.inf
    tok = vlm.processor.tokenizer
    shown = tok.decode([int(logits.argmax())], skip_special_tokens=True).strip()
    assert first[2].startswith(shown)


def test_generate_with_identity_hook_is_unchanged(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    identity = Hooks(attention={i: (lambda layer, w, spans: w) for i in range(vlm.num_layers)},
                     mlp_scale={0: 1.0})
    if lacking(vlm, "attention", lambda: vlm.generate(prompts, max_new_tokens=3, hooks=identity)):
        return
    assert vlm.generate(prompts, max_new_tokens=3, hooks=identity) == vlm.generate(prompts, max_new_tokens=3)


def test_bad_prompts_are_named(vlm: HFVisionLanguageModel, images: list[Any]) -> None:
    from faithtests.models.prompting import PromptRenderError

    with pytest.raises(PromptRenderError, match=r"Prompt\.text is empty"):
        vlm.option_logits([Prompt((images[0],), "  ")], ["A", "B"])
    with pytest.raises(PromptRenderError, match="description is empty"):
        vlm.option_logits([Prompt((images[0],), "A or B?", description="")], ["A", "B"])
    with pytest.raises(TypeError, match="prompt 0 is str"):
        vlm.option_logits(["A or B?"], ["A", "B"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="no prompts"):
        vlm.states([])


def test_caption_logprob_matches_manual(vlm: HFVisionLanguageModel, images: list[Any]) -> None:
    from faithtests.models.prompting import encode_with_answers

    caps = ["a red circle", "two dog on the red square", "a red circle"]
    imgs = [images[0], images[0], images[1]]
    scores = vlm.caption_logprob(imgs, caps)
    assert scores.shape == (3,) and bool((scores < 0).all())
    enc, spans = encode_with_answers(
        vlm.processor, vlm.config, [Prompt((imgs[1],), "Describe the image.")], [caps[1]]
    )
    a, b = spans[0]
    ids = enc.inputs["input_ids"][0]
    with torch.inference_mode():
        logp = torch.log_softmax(vlm.model(**enc.inputs).logits[0].float(), -1)
    manual = torch.stack([logp[p - 1, ids[p]] for p in range(a, b)]).mean()
    assert abs(float(scores[1]) - float(manual)) < 1e-4
    assert vlm.processor.tokenizer.decode(ids[a:b]) == caps[1]


def test_metrics_are_batch_invariant(family: str, load_tiny: Callable[..., Any], images: list[Any],
                                     prompts: list[Prompt]) -> None:
    """Batch size 1 vs 16 (padding side, attention masks, position ids): the scores a suite reads agree
    within 1e-5, and so do the metrics computed from them (LGIP Eqs. 2 and 5, S3E decisions)."""
    from faithtests.models.vlm_scorer import VLMScorer
    from faithtests.protocols.lgip.metrics import invariance_error, positive_rate

    one, sixteen = load_tiny(family, batch_size=1), load_tiny(family, batch_size=16)
    imgs = [images[i % 3] for i in range(6)]
    caps = ["a red circle", "two dog on the red square", "a blue square above a cat",
            "a red circle", "one cat", "three green triangle in a row"]
    flips = ["a blue circle", "two cat on the red square", "a red square above a cat",
             "a red square", "one dog", "three green circle in a row"]
    s1 = [VLMScorer(one).similarity(imgs, t).double().numpy() for t in (caps, flips)]
    s16 = [VLMScorer(sixteen).similarity(imgs, t).double().numpy() for t in (caps, flips)]
    for a, b in zip(s1, s16, strict=True):
        assert abs(a - b).max() < 1e-5
    assert abs(invariance_error(*s1) - invariance_error(*s16)) < 1e-5
    assert positive_rate(*s1) == positive_rate(*s16)
    d1, d16 = one.decide(prompts, ["A", "B"]), sixteen.decide(prompts, ["A", "B"])
    assert (d1.logits - d16.logits).abs().max() < 1e-5 and (d1.states - d16.states).abs().max() < 1e-5
    assert torch.equal(d1.logits.argmax(-1), d16.logits.argmax(-1))


def test_stepped_contrast_reads_every_step(vlm: HFVisionLanguageModel, prompts: list[Prompt]) -> None:
    """SAGE's stage 3 path (issue 43: it crashed on every M-RoPE family, on a generated image
    placeholder and on sliding-window layers): each step's reading holds every layer's attention over
    all positions so far and the image states, and the auxiliary stream (images greyed) runs on the
    tokens generated so far, with every sequence-aligned input extended."""
    from PIL import Image

    from faithtests.models.step_contrast import StepContrast, StepReading

    seen: list[StepReading] = []

    def grey(base: Prompt, reading: StepReading) -> Prompt:
        seen.append(reading)
        images = tuple(Image.new("RGB", im.size, (128, 128, 128)) for im in base.images)
        return Prompt(images, base.text, description=base.description)

    hooks = Hooks(contrast=StepContrast(tuple(prompts[:2]), 0.5, "test-grey", step=grey))
    if lacking(vlm, "attention logits_processors",
               lambda: vlm.generate(prompts[:2], max_new_tokens=3, hooks=hooks)):
        return
    texts = vlm.generate(prompts[:2], max_new_tokens=3, hooks=hooks)
    assert len(texts) == 2 and seen
    width = vlm.encode(prompts[:2], padding_side="left").inputs["input_ids"].shape[1]
    for r in seen:
        assert r.attention.shape[0] == vlm.num_layers and r.attention.shape[-1] == width + r.step
        assert torch.isfinite(r.attention).all() and len(r.image_positions) == r.image_states.shape[0] > 0


def test_a_family_without_chat_template_is_not_applicable(load_tiny: Callable[..., Any],
                                                         images: list[Any]) -> None:
    """PaliGemma is released without a chat template: the load says so once (``lacks``) and every call
    is refused as not applicable before any prompt is rendered, never an error per prompt."""
    from faithtests.models.errors import NotApplicable
    from faithtests.testing.families import FAMILIES

    for family in (f.model_type for f in FAMILIES if not f.chat_template):
        vlm = load_tiny(family)
        assert "has no chat template" in vlm.lacks("chat_template")
        prompt = Prompt((images[0],), question("a red circle", "a blue square"))
        calls: list[Callable[[], Any]] = [
            lambda m=vlm, p=prompt: m.option_logits([p], ["A", "B"]),
            lambda m=vlm, p=prompt: m.generate([p]),
            lambda m=vlm: m.caption_logprob([images[0]], ["a red circle"]),
            lambda m=vlm, p=prompt: m.attentions([p]),
            lambda m=vlm, p=prompt: m.encode([p]),
        ]
        for call in calls:
            with pytest.raises(NotApplicable, match=r"not applicable: .* lacks a chat template"):
                call()


#: families whose towers encode_once splits: every one the family table builds except where the
#: family's forward reads its features in a way the memo does not keep (asserted below, with the reason)
NOT_MEMOISED: dict[str, str] = {
    "llava_onevision": "batch_num_images",  # per-call image counts beside the pixels
    "idefics3": "pixel_attention_mask",  # per-tile masks
    "smolvlm": "pixel_attention_mask",
    "lfm2_vl": "spatial_shapes",  # per-image masks and shapes of its variable-size patch lists
    "gemma4": "image_position_ids",
    "mllama": "has no get_image_features",  # cross-attention: its forward runs the tower itself
}


#: families whose processor pads each image to the batch's largest: the padded rows are the memo's key
PADDED = {"llava_next": "tiles padded to the batch's most", "mistral3": "pixels padded to the largest image"}


def test_each_image_through_the_tower_once_with_the_towers_own_answers(
        family: str, load_tiny: Callable[..., Any], prompts: list[Prompt]) -> None:
    """encode_once (issue 47) on every family: the same option logits and greedy answers as the
    family's own tower methods (within 1e-5: an image encoded alone may differ in its last float32
    bits from one in a batch), and the two distinct images through the tower twice in all; or, found
    once at load, the reason the family's calls go whole."""
    from faithtests.models.encode_once import memo_of, unmemoise
    from faithtests.models.work import work_of

    ours, theirs = load_tiny(family, batch_size=3), load_tiny(family, batch_size=5)
    theirs.option_logits(prompts[:1], ["A", "B"])  # loaded: now back to the class's own methods
    unmemoise(theirs.model)
    a, b = ours.option_logits(prompts, ["A", "B"]), theirs.option_logits(prompts, ["A", "B"])
    assert (a - b).abs().max() < 1e-5 and torch.equal(a.argmax(-1), b.argmax(-1))
    assert ours.generate(prompts, 4) == theirs.generate(prompts, 4)
    memo, work = memo_of(ours.model), work_of(ours)
    assert memo is not None and work is not None
    if family in NOT_MEMOISED:
        assert NOT_MEMOISED[family] in memo.fallback.get("image", "")
    else:
        assert memo.fallback == {}, memo.fallback
        # 2 distinct images (aya_vision: its tiles, each encoded once); where a batch pads its images
        # (PADDED), an image is encoded once per padding it came with, and reused within it
        floor = 26 if family == "aya_vision" else 2
        if family in PADDED:
            assert memo.encoded["image"] >= floor and memo.reused["image"] >= 1, (memo.encoded, memo.reused)
        else:
            assert memo.encoded["image"] == floor, (memo.encoded, memo.reused)
