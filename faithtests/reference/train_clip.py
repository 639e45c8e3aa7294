"""Train the reference dual encoders ``clip`` and ``clip-colorblind`` (an open_clip local-dir checkpoint).

Model: a tiny open_clip CLIP. Vision: ViT, 96 px input, 16 px patches (every world shape lies inside one
patch), 3 layers, width 96, mean-pooled tokens. Text: 2-layer transformer, width 64, context 40, a
word-level tokenizer over the world vocabulary that open_clip loads as an ``HFTokenizer`` from the
checkpoint directory. Embedding size 64.

Recipe (seeded; fresh world scenes every step, never the held-out streams):
1. dense warm-up of the vision trunk (``faithtests.reference.warmup``): each patch token predicts the colour,
   shape and size of the object in its patch (300 steps);
2. contrastive training (2500 steps, batch 32, AdamW, one-cycle lr 2e-3) on scenes whose group counts
   are uniform over 1-3: symmetric InfoNCE over the batch; each image's caption is a random true
   surface form (canonical / reordered / "there is" / synonyms / with or without background, in one of
   LGIP's nine simple templates half of the time); plus a hard-negative term (weight 2): each image
   against its own caption and a verified-false flip of every kind (NegCLIP-style), the count flip to
   another count in 1-3 (so foils name fewer objects as often as more); plus two auxiliary terms that keep the
   warm-up's attributes (the per-patch readout) and make both towers expose the scene's attribute
   summary through one shared linear "bag" head. Without them a contrastive start learns colour and
   size only: neither tower encodes shape while the other does not.

``clip-colorblind`` is the same recipe on captions with every colour word removed, no colour or
compositional flips and no colour features in the text tower's bag targets: colour never reaches its
text tower, so it should fail colour flips and keep the rest.

The checkpoint directory holds ``open_clip_config.json``, ``open_clip_model.safetensors`` and the
tokenizer files: ``open_clip.create_model_and_transforms("local-dir:DIR")`` and
``open_clip.get_tokenizer("local-dir:DIR")`` load it as they would a user's checkpoint.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import open_clip
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from faithtests.protocols.lgip.paraphrase import SIMPLE_TEMPLATES
from faithtests.reference.tokenizer import build_tokenizer
from faithtests.reference.warmup import BAG_SIZE, bag_targets, dense_loss, dense_warmup, make_heads
from faithtests.world.captions import CaptionSpec, render_caption, satisfies, scene_spec
from faithtests.world.foils import flip_spec
from faithtests.world.render import render
from faithtests.world.scene import CANVAS, Scene, sample_scene

MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)
CONTEXT_LENGTH = 40


#: ViT with 16 px patches: every world shape lies inside one patch (see faithtests.reference.warmup).
INPUT_SIZE = CANVAS
VISION_CFG: dict[str, Any] = {"image_size": CANVAS, "patch_size": 16, "layers": 3, "width": 96,
                              "head_width": 24, "mlp_ratio": 2.0, "pool_type": "avg"}


TEXT_CFG: dict[str, Any] = {"width": 64, "heads": 4, "layers": 2, "mlp_ratio": 2.0}


def clip_config(vocab_size: int, pad_id: int, eos_id: int, vision_cfg: dict[str, Any] | None = None,
                text_cfg: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "model_cfg": {
            "embed_dim": 64,
            "vision_cfg": vision_cfg if vision_cfg is not None else VISION_CFG,
            "text_cfg": {"context_length": CONTEXT_LENGTH, "vocab_size": vocab_size, "pad_id": pad_id,
                         "eos_id": eos_id, "pool_type": "eos", "hf_tokenizer_name": "faithtests-world",
                         **(text_cfg if text_cfg is not None else TEXT_CFG)},
        },
        "preprocess_cfg": {"size": INPUT_SIZE, "mean": list(MEAN), "std": list(STD),
                           "interpolation": "bicubic", "resize_mode": "shortest"},
    }


def true_caption(scene: Scene, rng: np.random.Generator, colour: bool) -> str:
    """A random true surface form of the scene's full description."""
    spec = scene_spec(scene, with_background=bool(rng.random() < 0.6), with_colour=colour)
    order = [int(i) for i in rng.permutation(len(spec.mentions))] if rng.random() < 0.4 else None
    text = render_caption(spec, order=order, synonyms=bool(rng.random() < 0.25))
    if rng.random() < 0.2:
        text = ("there is " if spec.mentions[0].count == 1 else "there are ") + text
    if rng.random() < 0.5:
        text = SIMPLE_TEMPLATES[int(rng.integers(len(SIMPLE_TEMPLATES)))].format(c=text)
    return text


TRAIN_COUNTS = (1, 2, 3)
#: P(count) of each group in training scenes: uniform, so that number foils go up as often as down. With
#: the world's default mix (60% singles) almost every number foil named a larger count than the truth,
#: and the first recipe learnt "the smaller count is true" (PR 3->2 0.02, 2->1 0.30; issue 19).
TRAIN_COUNT_P = (1.0, 1.0, 1.0)


def number_negative(scene: Scene, spec: CaptionSpec, rng: np.random.Generator,
                    counts: tuple[int, ...] = TRAIN_COUNTS) -> str | None:
    """A verified-false count flip of one mention to another count that training scenes show (1-3), so
    the foil is larger or smaller than the truth with equal odds over uniform counts (four and five
    never occur in an image and would always be "more")."""
    for i in rng.permutation(len(spec.mentions)):
        m = spec.mentions[int(i)]
        for other in rng.permutation([c for c in counts if c != m.count]):
            ms = list(spec.mentions)
            ms[int(i)] = replace(m, count=int(other))
            foil = replace(spec, mentions=tuple(ms))
            if not satisfies(scene, foil):
                return render_caption(foil)
    return None


def hard_negatives(scene: Scene, rng: np.random.Generator, colour: bool, k: int = 2,
                   foil_counts: tuple[int, ...] = TRAIN_COUNTS) -> list[str]:
    """A count flip within 1-3 (always, when the scene admits one) and verified-false flips of other,
    distinct kinds (random order) up to ``k`` foils."""
    kinds = ["colour", "object", "relation", "compositional"] if colour else ["object", "relation"]
    spec = scene_spec(scene, with_background=False, with_colour=colour)
    number = number_negative(scene, spec, rng, foil_counts)
    out: list[str] = [number] if number is not None else []
    for i in rng.permutation(len(kinds)):
        if len(out) >= k:
            break
        foil: CaptionSpec | None = flip_spec(scene, spec, kinds[int(i)], rng)
        if foil is not None:
            out.append(render_caption(foil))
    return out


def _build(out_dir: Path, vision_cfg: dict[str, Any] | None,
           text_cfg: dict[str, Any] | None) -> tuple[Any, Any, Any, dict[str, Any]]:
    """A fresh model in ``out_dir`` (tokenizer and config written first, as open_clip loads them):
    (model, preprocess, tokenizer, config)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(lowercase=True, add_bos_eos=True)
    tok.save_pretrained(str(out_dir))
    cfg = clip_config(len(tok), int(tok.pad_token_id), int(tok.eos_token_id), vision_cfg, text_cfg)
    (out_dir / "open_clip_config.json").write_text(json.dumps(cfg, indent=2))
    for stale in out_dir.glob("*.safetensors"):
        stale.unlink()
    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{out_dir}")
    return model, preprocess, open_clip.get_tokenizer(f"local-dir:{out_dir}"), cfg


def _hard_loss(im_f: Any, tx_f: Any, negs: list[list[str]], scale: Any) -> Any:
    """Each image against its own caption and its own verified-false flips (None without any flip)."""
    batch = len(negs)
    target = torch.arange(batch)
    start = batch
    hard_terms = []
    for i, ns in enumerate(negs):
        if ns:
            cand = torch.cat([tx_f[i:i + 1], tx_f[start:start + len(ns)]])
            hard_terms.append(F.cross_entropy((scale * cand @ im_f[i]).unsqueeze(0), target[:1]))
        start += len(ns)
    return torch.stack(hard_terms).mean() if hard_terms else None


def _bag_loss(bag_head: Any, im_f: Any, tx_f: Any, scenes: list[Scene], colourblind: bool) -> Any:
    """Both towers expose the scene's attribute summary through the shared bag head (the text side
    masked to what its captions say)."""
    bags = [bag_targets(s, colour=not colourblind) for s in scenes]
    y = torch.tensor([b[0] for b in bags])
    txt_mask = torch.tensor([b[1] for b in bags])
    img_bag = F.binary_cross_entropy_with_logits(bag_head(im_f * 8), y)
    txt_bag = (F.binary_cross_entropy_with_logits(bag_head(tx_f[:len(scenes)] * 8), y, reduction="none")
               * txt_mask).sum() / txt_mask.sum()
    return img_bag + txt_bag


def _step_loss(model: Any, parts: dict[str, Any], rng: np.random.Generator, batch: int, colourblind: bool,
               weights: dict[str, float], n_hard: int, foil_counts: tuple[int, ...]) -> Any:
    """One batch of fresh scenes: symmetric InfoNCE + hard negatives + bag + dense terms."""
    scenes = [sample_scene(rng, n_groups=(1, 3), count_p=TRAIN_COUNT_P) for _ in range(batch)]
    pos = [true_caption(s, rng, not colourblind) for s in scenes]
    negs = [hard_negatives(s, rng, not colourblind, k=n_hard, foil_counts=foil_counts) for s in scenes]
    img = torch.stack([parts["preprocess"](render(s)) for s in scenes])  # the eval preprocess: train == test
    flat = [n for ns in negs for n in ns]
    im_f = F.normalize(model.encode_image(img), dim=-1)
    tx_f = F.normalize(model.encode_text(parts["tokenizer"](pos + flat)), dim=-1)
    scale = model.logit_scale.exp()
    logits = scale * im_f @ tx_f[:batch].T
    target = torch.arange(batch)
    loss: Any = 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))
    hard = _hard_loss(im_f, tx_f, negs, scale)
    if hard is not None:
        loss = loss + weights["hard"] * hard
    if weights["bag"] > 0:
        loss = loss + weights["bag"] * _bag_loss(parts["bag_head"], im_f, tx_f, scenes, colourblind)
    if weights["dense"] > 0:  # keep the patch tokens' attributes while the pooling learns to use them
        loss = loss + weights["dense"] * dense_loss(parts["heads"], parts["patch_tokens"](img), scenes)
    return loss


def train_clip(out_dir: Path, seed: int, colourblind: bool = False, steps: int = 2500,
               batch: int = 32, lr: float = 2e-3, log: bool = True, n_hard: int = 5, warmup_steps: int = 300,
               hard_weight: float = 2.0, dense_weight: float = 1.0, bag_weight: float = 1.0,
               vision_cfg: dict[str, Any] | None = None, text_cfg: dict[str, Any] | None = None,
               foil_counts: tuple[int, ...] = TRAIN_COUNTS) -> dict[str, Any]:
    """Train and save a checkpoint directory; returns the training metadata (also in training.json)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng([seed, 7])
    model, preprocess, tokenizer, cfg = _build(out_dir, vision_cfg, text_cfg)
    visual = model.visual
    t0 = time.time()
    heads = make_heads(int(visual.class_embedding.shape[0]))

    def patch_tokens(x: Any) -> Any:
        return visual.transformer(visual._embeds(x))[:, 1:]  # CLS dropped

    w_losses = dense_warmup(patch_tokens, lambda ims: torch.stack([preprocess(im) for im in ims]), heads,
                            list(visual.parameters()), rng, warmup_steps)
    if log:
        print(f"dense warm-up {warmup_steps} steps {time.time() - t0:.0f}s "
              f"loss {np.mean(w_losses[:10]):.2f} -> {np.mean(w_losses[-10:]):.3f}", flush=True)
    trainable = list(model.parameters())
    if dense_weight > 0:
        trainable += list(heads.parameters())
    # One linear "bag" head shared by both towers: each embedding must expose the scene's attribute
    # summary in the same directions, which breaks the symmetric start in which neither tower encodes
    # shape because the other does not (contrastive loss alone learnt colour and size only).
    bag_head = torch.nn.Linear(int(cfg["model_cfg"]["embed_dim"]), BAG_SIZE)
    trainable += list(bag_head.parameters())
    opt = torch.optim.AdamW(trainable, lr=lr, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    parts = {"preprocess": preprocess, "tokenizer": tokenizer, "bag_head": bag_head, "heads": heads,
             "patch_tokens": patch_tokens}
    weights = {"hard": hard_weight, "bag": bag_weight, "dense": dense_weight}
    model.train()
    losses: list[float] = []
    for step in range(steps):
        loss = _step_loss(model, parts, rng, batch, colourblind, weights, n_hard, foil_counts)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, 4.6052)
        losses.append(float(loss.detach()))
        if log and (step % 50 == 0 or step == steps - 1):
            print(f"step {step:4d} loss {np.mean(losses[-50:]):.3f} {time.time() - t0:.0f}s", flush=True)
    model.eval()
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out_dir / "open_clip_model.safetensors"))
    meta = {
        "name": "clip-colorblind" if colourblind else "clip", "seed": seed, "steps": steps, "batch": batch,
        "lr": lr, "train_seconds": round(time.time() - t0, 1), "final_loss": float(np.mean(losses[-50:])),
        "params": int(sum(p.numel() for p in model.parameters())), "torch_threads": torch.get_num_threads(),
        "warmup_steps": warmup_steps, "n_hard": n_hard, "hard_weight": hard_weight,
        "dense_weight": dense_weight, "bag_weight": bag_weight, "count_p": list(TRAIN_COUNT_P),
        "number_negative": f"always, to another count in {list(foil_counts)}",
    }
    (out_dir / "training.json").write_text(json.dumps(meta, indent=2))
    return meta
