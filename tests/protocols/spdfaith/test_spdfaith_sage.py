"""SAGE (SPD-Faith §5.1, App. E): each stage's pure pieces on hand-made tensors, arrays and images, and
the whole as hooks on the reference VLM (an identity configuration changes nothing)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from faithtests.models.interfaces import Attentions, Prompt, TokenSpans
from faithtests.protocols.spdfaith.sage import (
    FlowRectifier,
    KlMonitor,
    SageConfig,
    VisualRouting,
    adaptive_alpha,
    contrast_logits,
    key_masks,
    kl_divergence,
    modulate,
    oracle_aux_prompts,
    sage_hooks,
    visual_mean,
)
from faithtests.protocols.spdfaith.sage_mask import (
    PatchGridError,
    attention_grid,
    change_grid,
    discrepancy_mask,
    masked_pair,
    patch_grid,
    top_cells,
)


def spans(
    runs: list[list[tuple[int, int]]], length: list[int], offset: list[int] | None = None
) -> TokenSpans:
    image = [(r[0][0], r[-1][1]) if r else (0, 0) for r in runs]
    return TokenSpans(image=image, description=[(0, 0)] * len(runs), length=length, image_runs=runs,
                      offset=offset or [0] * len(runs))


def random_weights(b: int, h: int, q: int, k: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(b, h, q, k, generator=g), dim=-1)


# ------------------------------------------------------------------------------------------ stage 1
def test_key_masks_split_vis_sys_and_prompt() -> None:
    # row 0: template head 0-1, image 2-5 and 7-8, text after; row 1: two left pads, head 2, image 3-4;
    # row 2: text only
    s = spans([[(2, 6), (7, 9)], [(3, 5)], []], [10, 8, 10], [0, 2, 0])
    vis, head = key_masks(s, 10)
    assert vis[0].nonzero().flatten().tolist() == [2, 3, 4, 5, 7, 8]
    assert head[0].nonzero().flatten().tolist() == [0, 1]
    assert vis[1].nonzero().flatten().tolist() == [3, 4] and head[1].nonzero().flatten().tolist() == [2]
    assert not vis[2].any() and not head[2].any()


def test_shallow_modulation_is_eq3() -> None:
    s = spans([[(2, 6)], [(1, 3)]], [8, 8])
    w = random_weights(2, 3, 8, 8)
    cfg = SageConfig(alpha=0.25)
    out = VisualRouting(num_layers=4, cfg=cfg)(0, w, s)  # layer 0 < l_s = 2: the static α
    assert out.shape == w.shape and out.dtype == w.dtype
    vis, head = key_masks(s, 8)
    for b in range(2):
        v, h = vis[b], head[b]
        rest = ~(v | h)
        assert torch.allclose(out[b][..., v], 1.25 * w[b][..., v])
        assert torch.allclose(out[b][..., h], 0.75 * w[b][..., h])
        assert torch.equal(out[b][..., rest], w[b][..., rest])
        mass = 1 + 0.25 * (w[b][..., v].sum(-1) - w[b][..., h].sum(-1))  # not renormalised (Eq. 3)
        assert torch.allclose(out[b].sum(-1), mass, atol=1e-6)
    renorm = VisualRouting(4, SageConfig(alpha=0.25, renormalize=True))(0, w, s)
    assert torch.allclose(renorm.sum(-1), torch.ones(2, 3, 8), atol=1e-6)
    assert torch.allclose(renorm, out / out.sum(-1, keepdim=True), atol=1e-6)


def test_alpha_zero_is_the_identity() -> None:
    s = spans([[(2, 6)]], [8])
    w = random_weights(1, 2, 8, 8)
    routing = VisualRouting(4, SageConfig(alpha=0.0, alpha_max=0.0))
    assert all(torch.equal(routing(layer, w, s), w) for layer in range(4))


def hand_weights(mus: list[float], k: int = 6, vis: tuple[int, int] = (2, 4)) -> torch.Tensor:
    """[1, 2, Q, K]: query row t puts μ_t ∓ 0.05 on each visual key in heads 0 / 1 (mean μ_t) and the
    rest of its mass on key 0."""
    q = len(mus)
    w = torch.zeros(1, 2, q, k)
    for t, mu in enumerate(mus):
        for head, m in enumerate((mu - 0.05, mu + 0.05)):
            w[0, head, t, vis[0] : vis[1]] = m
            w[0, head, t, 0] = 1 - m * (vis[1] - vis[0])
    return w


def test_deep_layer_alpha_follows_the_decay_of_visual_attention() -> None:
    cfg = SageConfig(alpha=0.1, kappa=1.0, alpha_max=0.5)
    s = spans([[(2, 4)]], [6])
    w = hand_weights([0.2, 0.15, 0.3, 0.24, 0.24, 0.03])
    vis, _ = key_masks(s, 6)
    mu = visual_mean(w, vis)
    assert torch.allclose(mu, torch.tensor([[0.2, 0.15, 0.3, 0.24, 0.24, 0.03]]), atol=1e-6)
    routing = VisualRouting(2, cfg)  # layer 1 >= l_s = 1: adaptive
    alpha = routing.alpha_t(1, w, vis, s)
    # δ = -, -0.25, +1, -0.2, 0, -0.875 -> α0 + clip(max(0, -δ), 0, 0.5)
    assert torch.allclose(alpha, torch.tensor([[0.1, 0.35, 0.1, 0.3, 0.1, 0.6]]), atol=1e-6)
    out = routing(1, w, s)
    assert torch.allclose(out[0, :, 1, 2:4], 1.35 * w[0, :, 1, 2:4])
    assert torch.equal(out[0, :, 1, 4:], w[0, :, 1, 4:])
    assert torch.allclose(out[0, :, 1, :2], 0.65 * w[0, :, 1, :2])  # template head: × (1 − α_t)


def test_kv_cached_steps_continue_the_prefill_state() -> None:
    """α_t of a single-row call uses the previous call's last μ: the same as one multi-row call."""
    cfg = SageConfig()
    s = spans([[(2, 4)]], [6])
    full = hand_weights([0.2, 0.15, 0.3, 0.24, 0.12, 0.03])
    vis, _ = key_masks(s, 6)
    want = VisualRouting(2, cfg).alpha_t(1, full, vis, s)
    routing = VisualRouting(2, cfg)
    got = [routing.alpha_t(1, full[:, :, :3], vis, s)]
    got += [routing.alpha_t(1, full[:, :, t : t + 1], vis, s) for t in range(3, 6)]
    assert torch.allclose(torch.cat(got, dim=1), want)
    # a new multi-row call (a new prompt) restarts: its first row has no previous step
    again = routing.alpha_t(1, full[:, :, :2], vis, s)
    assert float(again[0, 0]) == pytest.approx(cfg.base_alpha)


def test_left_padding_never_feeds_the_decay() -> None:
    """Row 0 has two left pads (offset 2): its first real query's δ is 0 whatever the pads attend to."""
    s = spans([[(3, 5)]], [5], [2])
    w = torch.zeros(1, 2, 7, 7)
    w[0, :, :2, 3:5] = 0.4  # pad queries: large "visual" weights
    w[0, :, :2, 0] = 0.2
    w[0, :, 2:, 3:5] = 0.1
    w[0, :, 2:, 2] = 0.8
    vis, _ = key_masks(s, 7)
    alpha = VisualRouting(2, SageConfig()).alpha_t(1, w, vis, s)
    assert float(alpha[0, 2]) == pytest.approx(0.1)  # not 0.1 + f(-0.75)


def test_adaptive_alpha_edges() -> None:
    cfg = SageConfig(alpha=0.1, kappa=2.0, alpha_max=0.3)
    mu = torch.tensor([[0.1, 0.1, 0.0, 0.05]])
    prev = torch.tensor([[math.nan, 0.0, 0.1, 0.1]])
    # missing / zero previous -> δ = 0; a drop to 0 -> f = clip(2·1) = 0.3; δ = -0.5 -> clip(1.0) = 0.3
    assert torch.allclose(adaptive_alpha(mu, prev, cfg), torch.tensor([[0.1, 0.1, 0.4, 0.4]]))
    rise = adaptive_alpha(torch.tensor([[0.2]]), torch.tensor([[0.1]]), cfg)
    assert torch.allclose(rise, torch.tensor([[0.1]]))  # a rise adds nothing


def test_modulate_keeps_dtype() -> None:
    w = random_weights(1, 1, 4, 4).to(torch.bfloat16)
    vis = torch.tensor([[False, True, True, False]])
    head = torch.tensor([[True, False, False, False]])
    out = modulate(w, vis, head, torch.zeros(1, 4))
    assert out.dtype == torch.bfloat16 and torch.equal(out, w)


# ------------------------------------------------------------------------------------------ stage 2
def test_kl_divergence_by_hand() -> None:
    a = torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]])
    f = torch.tensor([[0.0, 1.0, 0.0], [2.0, -1.0, 0.0]])
    want = []
    for x, y in zip(a.tolist(), f.tolist(), strict=True):
        p = [math.exp(v) / sum(math.exp(u) for u in x) for v in x]
        q = [math.exp(v) / sum(math.exp(u) for u in y) for v in y]
        want.append(sum(pi * math.log(pi / qi) for pi, qi in zip(p, q, strict=True)))
    assert torch.allclose(kl_divergence(a, f), torch.tensor(want), atol=1e-6)
    assert float(kl_divergence(a, a + 3.0).abs().max()) < 1e-6  # softmax ignores a shift: KL 0


def test_flow_rectifier_fires_only_where_the_kl_is_high() -> None:
    attn = torch.tensor([[[1.0, 2.0, 3.0, 4.0], [8.0, 0.0, 0.0, 0.0], [0.0, 0.1, 0.0, 0.1]]])
    ffn = torch.tensor([[[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 8.0], [0.1, 0.0, 0.1, 0.0]]])
    kl = kl_divergence(attn, ffn)
    assert float(kl[0, 0]) == pytest.approx(0.0, abs=1e-6) and float(kl[0, 1]) > 5 and float(kl[0, 2]) < 0.01
    monitor = KlMonitor()
    out = FlowRectifier(0.9, 1.0, monitor)(3, attn, ffn)
    assert torch.equal(out[0, [0, 2]], ffn[0, [0, 2]]) and torch.allclose(out[0, 1], 0.9 * ffn[0, 1])
    assert (monitor.positions, monitor.fired) == (3, 1) and monitor.fraction == pytest.approx(1 / 3)
    assert FlowRectifier(1.0, 1.0)(3, attn, ffn) is ffn  # β = 1: identity
    assert FlowRectifier(0.9, math.inf)(3, attn, ffn) is ffn  # τ = ∞: never fires


def test_sage_hooks_cover_every_layer_with_a_tag() -> None:
    h = sage_hooks(6)
    assert sorted(h.attention) == sorted(h.ffn) == list(range(6)) and h.contrast is None
    assert h.tag is not None and "l_s=3" in h.tag and "beta=0.9" in h.tag
    assert sage_hooks(6, SageConfig(beta=0.8)).tag != h.tag
    see = sage_hooks(6, SageConfig(stages=("see",)))
    assert see.attention and not see.ffn and "analyze" not in str(see.tag)
    none = sage_hooks(6, SageConfig(stages=("generate",)))
    assert not none.attention and not none.ffn


def test_config_defaults_and_validation() -> None:
    cfg = SageConfig()
    assert (cfg.alpha, cfg.base_alpha, cfg.beta, cfg.eta, cfg.split(28)) == (0.1, 0.1, 0.9, 0.5, 14)
    assert SageConfig(alpha0=0.2).base_alpha == 0.2 and SageConfig(shallow_layers=3).split(28) == 3
    assert "top_k=6" in cfg.mask_tag() and cfg.mask_tag() != SageConfig(top_k=4).mask_tag()
    assert "tam" in cfg.mask_tag() and "pixel-change" in cfg.mask_tag(oracle=True)
    for bad in ({"alpha": 1.5}, {"alpha_max": 0.95}, {"beta": 1.1}, {"eta": -0.1}, {"top_k": 0},
                {"kl_threshold": -1.0}, {"stages": ("see", "think")}, {"fallback": "change"}):
        with pytest.raises(ValueError, match="SAGE"):
            SageConfig(**bad)


# ------------------------------------------------------------------------------------------ stage 3
def test_contrast_logits_by_hand() -> None:
    main = np.array([[2.0, 1.0, -1.0]])
    aux = np.array([[1.0, 3.0, -1.5]])
    assert np.allclose(contrast_logits(main, aux, 0.5), [[2.5, 1.0, -0.75]])
    assert np.array_equal(contrast_logits(main, aux, 0.0), main)
    t = contrast_logits(torch.tensor(main), torch.tensor(aux), 2.0)
    assert isinstance(t, torch.Tensor) and torch.allclose(t, torch.tensor([[4.0, 1.0, 0.0]], dtype=t.dtype))
    rng = np.random.default_rng(0)
    m, a = rng.normal(size=(50, 7)), rng.normal(size=(50, 7))
    assert (contrast_logits(m, a, 0.7) >= m).all()  # never lowers a logit
    with pytest.raises(ValueError, match="eta"):
        contrast_logits(m, a, -0.5)


def test_patch_grid() -> None:
    assert patch_grid(36) == (6, 6) and patch_grid(12, (3, 4)) == (3, 4)
    with pytest.raises(PatchGridError, match="not a square patch grid"):
        patch_grid(72)
    with pytest.raises(PatchGridError, match="does not hold"):
        patch_grid(12, (3, 3))


def test_attention_grid_splits_the_images_and_sums_them() -> None:
    # one row: 2 head keys, then two 2x2 images as one run (keys 2-9), then 2 text keys
    w = torch.zeros(1, 2, 12)
    w[0, :, 2:6] = torch.tensor([0.1, 0.0, 0.0, 0.2])  # image 1
    w[0, :, 6:10] = torch.tensor([0.0, 0.3, 0.0, 0.1])  # image 2
    w2 = w.clone()
    w2[0, 0, 2] = 0.3  # layer 2, head 0: cell (0, 0) of image 1 gets 0.3 instead of 0.1
    att = Attentions(weights=[w, w2], spans=spans([[(2, 10)]], [12]))
    grid = attention_grid(att, 0, 2)
    assert np.allclose(grid, [[0.1 + 0.05, 0.3], [0.0, 0.3]])  # mean over layers and heads, summed
    separate = Attentions(weights=[w], spans=spans([[(2, 6), (6, 10)]], [12]))
    assert np.allclose(attention_grid(separate, 0, 2), [[0.1, 0.3], [0.0, 0.3]])
    with pytest.raises(PatchGridError, match="cannot be split"):
        attention_grid(att, 0, 3)


def solid(colour: tuple[int, int, int], size: int = 8) -> Image.Image:
    return Image.new("RGB", (size, size), colour)


def test_change_grid_and_top_cells() -> None:
    a = solid((10, 10, 10))
    b = a.copy()
    b.paste((70, 10, 10), (4, 0, 8, 4))  # cell (0, 1) changes by 60 in one channel
    assert np.allclose(change_grid(a, b, (2, 2)), [[0.0, 20.0], [0.0, 0.0]])
    assert not change_grid(a, a, (2, 2)).any()
    scores = np.array([[0.5, 0.2], [0.5, 0.0]])
    assert top_cells(scores, 2).tolist() == [[True, False], [True, False]]  # tie: earlier cell first
    assert top_cells(scores, 4).tolist() == [[True, True], [True, False]]  # zero-score cells never count
    assert not top_cells(np.zeros((2, 2)), 2).any()


def test_discrepancy_mask_intersects_or_falls_back() -> None:
    att = np.array([[0.4, 0.3], [0.2, 0.1]])
    change = np.array([[0.0, 5.0], [1.0, 0.0]])
    pos = {"positive_activation": True}  # the oracle's pixel change: unchanged cells are never in Ω_T
    assert discrepancy_mask(att, change, 2, **pos).tolist() == [[False, True], [False, False]]  # Eq. 6
    far = np.array([[0.0, 0.0], [0.0, 9.0]])
    assert discrepancy_mask(att, far, 2, **pos).tolist() == [[True, True], [False, False]]  # empty ∩ -> Ω_A
    assert not discrepancy_mask(att, far, 2, "none", **pos).any()
    assert discrepancy_mask(att, np.zeros((2, 2)), 1, **pos).tolist() == [[True, False], [False, False]]
    # a TAM's raw logits (any sign): the top-k ranks them, negative cells included
    tam = np.array([[-3.0, -1.0], [-2.0, -4.0]])
    assert discrepancy_mask(att, tam, 2).tolist() == [[False, True], [False, False]]  # top-2: (0,1), (1,0)
    assert top_cells(tam, 1, positive=False).tolist() == [[False, True], [False, False]]


def test_masked_pair_fills_masked_cells_with_each_images_mean_colour() -> None:
    a = solid((0, 0, 0))
    a.paste((200, 100, 40), (0, 0, 4, 4))  # mean colour (50, 25, 10)
    b = solid((30, 60, 90))
    mask = np.array([[False, True], [False, False]])
    ma, mb = masked_pair(a, b, mask)
    xa, xb = np.asarray(ma), np.asarray(mb)
    assert (xa[:4, 4:] == (50, 25, 10)).all() and (xb[:4, 4:] == (30, 60, 90)).all()
    assert np.array_equal(xa[:4, :4], np.asarray(a)[:4, :4]) and np.array_equal(xa[4:], np.asarray(a)[4:])
    assert np.array_equal(np.asarray(masked_pair(a, b, np.zeros((2, 2), dtype=bool))[0]), np.asarray(a))


class FakeVLM:
    """Only ``attentions``: the answer query reads cell (1, 1) of a 2x2 grid in both images."""

    spec = "fake"
    num_layers = 1

    def attentions(self, prompts: Any, hooks: Any = None) -> Attentions:
        w = torch.zeros(len(prompts), 1, 12)
        w[:, 0, [5, 9]] = 0.3
        w[:, 0, [2, 6]] = 0.1
        return Attentions(weights=[w], spans=spans([[(2, 10)]] * len(prompts), [12] * len(prompts)))


def test_oracle_aux_prompts_mask_the_attended_changed_cells() -> None:
    a = solid((0, 0, 0))
    b = a.copy()
    b.paste((255, 255, 255), (4, 4, 8, 8))  # the edit: cell (1, 1)
    b.paste((255, 0, 0), (0, 4, 4, 8))  # another change, not attended: cell (1, 0)
    prompts = [Prompt((a, b), "There is one difference in the picture. Can you find it?")]
    aux = oracle_aux_prompts(FakeVLM(), prompts, [(a, b)], SageConfig(top_k=2))  # type: ignore[arg-type]
    assert aux[0].text == prompts[0].text and len(aux[0].images) == 2
    xb = np.asarray(aux[0].images[1])
    mean_b = np.rint(np.asarray(b).reshape(-1, 3).mean(0))
    assert (xb[4:, 4:] == mean_b).all()  # Ω_A ∩ Ω_T = {(1, 1)}: occluded in both images
    assert (xb[4:, :4] == (255, 0, 0)).all() and (np.asarray(aux[0].images[0]) == 0).all()
    with pytest.raises(ValueError, match="2 pairs for 1 prompts"):
        oracle_aux_prompts(FakeVLM(), prompts, [(a, b), (a, b)])  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ on the model
@pytest.fixture(scope="module")
def ref() -> Any:
    from faithtests.models.registry import load_model

    return load_model("reference:vlm", device="cpu", dtype="float32")


def test_identity_configuration_changes_nothing_and_sage_does(ref: Any) -> None:
    from faithtests.protocols.spdfaith.prompts import YES_NO, find_prompt, same_prompt
    from faithtests.protocols.spdfaith.stimuli import pair_item

    pairs = [pair_item(2, i).images() for i in range(4)]
    same = [same_prompt(a, b) for a, b in pairs]
    find = [find_prompt(a, b, 1) for a, b in pairs]
    identity = sage_hooks(ref.num_layers, SageConfig(alpha=0.0, alpha_max=0.0, beta=1.0))
    base = ref.decide(same, YES_NO)
    assert torch.allclose(ref.decide(same, YES_NO, identity).logits, base.logits, atol=1e-5)
    assert ref.generate(find, 24, identity) == ref.generate(find, 24)
    monitor = KlMonitor()
    full = ref.decide(same, YES_NO, sage_hooks(ref.num_layers, SageConfig(), monitor))
    assert (full.logits - base.logits).abs().max() > 1e-3 and 0 < monitor.fraction < 0.5
