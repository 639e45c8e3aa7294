"""Train the reference VLMs (``vlm`` and its degraded twins) as Hugging Face LLaVA checkpoints.

Architecture: ``LlavaForConditionalGeneration`` with a tiny CLIP vision tower (96 px, patch 16 -> 36
image tokens, 3 layers, width 96) and a tiny Llama (4 layers, width 128, tied embeddings), a word-level
``PreTrainedTokenizerFast`` over the world vocabulary (case kept; ``<image>`` special) and a
``LlavaProcessor`` whose chat template renders ``USER: <image> ... text ASSISTANT:``. Everything loads
with ``AutoModelForImageTextToText`` / ``AutoProcessor`` from the directory, like a user's checkpoint.

Recipe of ``vlm`` (seeded):
1. vision warm-up (500 steps): each patch token of the tower predicts the colour, shape, size of the
   object in its patch and the patch's position slot (:mod:`faithtests.world.warmup`);
2. the projector starts as that readout (:func:`seed_projector`), the tower is then frozen (as in
   LLaVA's stages);
3. 3,000 steps of next-token cross-entropy on the answer tokens (+ end of sequence), batch 24 in two
   length-sorted micro-batches, AdamW, one-cycle lr 1.5e-3. The first 25% draw only grounding tasks
   (one-hop "What is on the left?", captioning, single-caption verification, A/B); then the full
   mixture of :mod:`faithtests.world.vlm_tasks`: A/B caption choice in both orders, verification,
   slot questions, captioning (the auxiliary loss), premise questions with rejection, mood,
   same/different, difference counting and difference naming.
Twins are fine-tuned from ``vlm`` for ``TWIN_STEPS`` steps on the same mixture with another answer
policy (``textbiased``, ``positionbiased``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithtests.world.local_models import render_prompt
from faithtests.world.scene import CANVAS
from faithtests.world.tokenizer import build_tokenizer
from faithtests.world.vlm_tasks import Example, sample_example
from faithtests.world.warmup import PATCH, dense_warmup, make_heads

IMAGE_TOKENS = (CANVAS // PATCH) ** 2
TWIN_STEPS = 300  # fine-tuning steps of a degraded twin from the vlm checkpoint
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}USER:"
    "{%- elif message['role'] == 'assistant' -%}ASSISTANT:"
    "{%- else -%}SYSTEM:{%- endif -%}"
    "{%- if message['content'] is string %} {{ message['content'] }}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' %} <image>"
    "{%- elif item['type'] == 'text' %} {{ item['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- if message['role'] == 'assistant' %}</s>{%- endif %}\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}ASSISTANT:{%- endif -%}"
)
IMAGE_MEAN = [0.5, 0.5, 0.5]
IMAGE_STD = [0.25, 0.25, 0.25]


def build_processor() -> Any:
    from transformers import CLIPImageProcessor, LlavaProcessor

    tok = build_tokenizer(lowercase=False, add_bos_eos=False)
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": CANVAS}, crop_size={"height": CANVAS, "width": CANVAS},
        image_mean=IMAGE_MEAN, image_std=IMAGE_STD, do_convert_rgb=True,
    )
    return LlavaProcessor(  # type: ignore[no-untyped-call]
        image_processor=image_processor, tokenizer=tok, patch_size=PATCH,
        vision_feature_select_strategy="default", chat_template=CHAT_TEMPLATE, image_token="<image>",
        num_additional_image_tokens=1,
    )


def build_model(processor: Any, seed: int) -> Any:
    import torch
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    tok = processor.tokenizer
    vision = CLIPVisionConfig(
        hidden_size=96, intermediate_size=192, num_hidden_layers=3, num_attention_heads=4,
        image_size=CANVAS, patch_size=PATCH, hidden_act="gelu", projection_dim=96,
    )
    text = LlamaConfig(
        vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id,
        tie_word_embeddings=True,
    )
    cfg = LlavaConfig(
        vision_config=vision, text_config=text, image_token_index=processor.image_token_id,
        image_seq_length=IMAGE_TOKENS, vision_feature_layer=-1, vision_feature_select_strategy="default",
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model


def seed_projector(model: Any, heads: Any) -> None:
    """Start the projector as the warm-up's attribute readout: image token = GELU(attribute logits).

    The tower's tokens hold shape in low-variance directions; with a randomly initialised projector the
    LM learnt size, colour and position but never shape (per-token loss on shape words stayed at ln 4
    after 2,500 steps). Here the projector's first layer is the warm-up's linear readouts (colour,
    shape, size, slot logits), its other units start at zero, and the second layer passes the readouts
    through unchanged: image tokens start as clean attribute codes, and everything stays trainable.
    """
    import torch

    lin1 = model.model.multi_modal_projector.linear_1
    lin2 = model.model.multi_modal_projector.linear_2
    w = torch.cat([h.weight for h in heads])
    b = torch.cat([h.bias for h in heads])
    k = w.shape[0]
    if k > min(lin1.out_features, lin2.out_features):
        raise ValueError(f"projector has {lin1.out_features} units, the readout needs {k}")
    with torch.no_grad():
        lin1.weight.zero_()
        lin1.bias.zero_()
        lin1.weight[:k] = w
        lin1.bias[:k] = b
        lin2.weight.zero_()
        lin2.bias.zero_()
        lin2.weight[:k, :k] = torch.eye(k)


def _approx_len(ex: Example) -> int:
    return IMAGE_TOKENS * len(ex.prompt.images) + len((ex.prompt.description or "").split()) + len(
        ex.prompt.text.split()) + len(ex.answer.split())


def _find(seq: list[int], sub: list[int]) -> int:
    """Start of the last occurrence of ``sub`` in ``seq`` (-1 if absent)."""
    for i in range(len(seq) - len(sub), -1, -1):
        if seq[i:i + len(sub)] == sub:
            return i
    return -1


def encode(processor: Any, examples: Sequence[Example]) -> dict[str, Any]:
    """Right-padded input ids; ``labels`` on the answer tokens and the end-of-sequence token only;
    ``context_labels`` on the tokens of an example's ``context_caption`` inside the prompt (-100
    elsewhere)."""
    import torch

    tok = processor.tokenizer
    texts = [render_prompt(processor, ex.prompt) for ex in examples]
    images = [im for ex in examples for im in ex.prompt.images]
    enc = processor(text=texts, images=images or None, padding=False)
    rows, labels, context = [], [], []
    for ids, ex in zip(enc["input_ids"], examples, strict=True):
        ids = list(ids)
        ans = [*tok.encode(" " + ex.answer, add_special_tokens=False), tok.eos_token_id]
        rows.append(ids + ans)
        labels.append([-100] * len(ids) + ans)
        ctx = [-100] * (len(ids) + len(ans))
        if ex.context_caption is not None:
            sub = tok.encode(ex.context_caption, add_special_tokens=False)
            at = _find(ids, sub)
            if at < 0:
                raise ValueError(f"context caption not found in its prompt: {ex.context_caption!r}")
            ctx[at:at + len(sub)] = sub
        context.append(ctx)
    width = max(len(r) for r in rows)
    pad = tok.pad_token_id
    out: dict[str, Any] = {
        "input_ids": torch.tensor([r + [pad] * (width - len(r)) for r in rows]),
        "attention_mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]),
        "labels": torch.tensor([lab + [-100] * (width - len(lab)) for lab in labels]),
        "context_labels": torch.tensor([c + [-100] * (width - len(c)) for c in context]),
    }
    if images:
        out["pixel_values"] = torch.as_tensor(np.asarray(enc["pixel_values"]), dtype=torch.float32)
    return out


def _token_losses(logits: Any, labels: Any) -> tuple[Any, Any]:
    """Per-example mean next-token loss over labelled positions, and whether a row has any label."""
    import torch

    tgt = labels[:, 1:]
    per_tok = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none", ignore_index=-100
    ).view(tgt.shape)
    mask = (tgt != -100).float()
    count = mask.sum(1)
    return (per_tok * mask).sum(1) / count.clamp(min=1), count > 0


def train_vlm(out_dir: Path, seed: int, policy: str = "faithful", steps: int = 3000, batch: int = 24,
              lr: float = 1.5e-3, init_from: Path | None = None, vision_steps: int = 500,
              grounding_frac: float = 0.25, context_weight: float = 0.5,
              log: bool = True) -> dict[str, Any]:
    """Train (or fine-tune ``init_from``) and save a checkpoint directory; returns training metadata."""
    import torch
    from transformers import LlavaForConditionalGeneration

    t0 = time.time()
    torch.manual_seed(seed)
    rng = np.random.default_rng([seed, 11])
    processor = build_processor()
    model: Any
    if init_from is not None:
        model = LlavaForConditionalGeneration.from_pretrained(str(init_from), local_files_only=True)
    else:
        model = build_model(processor, seed)
        t_v = time.time()
        tower = model.model.vision_tower
        heads = make_heads(tower.config.hidden_size, slots=True)
        v_losses = dense_warmup(
            lambda pix: tower(pixel_values=pix).last_hidden_state[:, 1:],  # LLaVA "default" drops CLS
            lambda ims: processor.image_processor(ims, return_tensors="pt")["pixel_values"],
            heads, list(tower.parameters()), rng, vision_steps,
        )
        seed_projector(model, heads)
        if log:
            print(f"vision pretraining {vision_steps} steps {time.time() - t_v:.0f}s "
                  f"loss {np.mean(v_losses[:10]):.2f} -> {np.mean(v_losses[-10:]):.3f}", flush=True)
    # Like LLaVA, the (warmed-up) vision tower stays frozen while the projector and LM learn.
    for p in model.model.vision_tower.parameters():
        p.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.05)
    model.train()
    losses: dict[str, list[float]] = {}
    for step in range(steps):
        stage = "grounding" if init_from is None and step < grounding_frac * steps else "full"
        examples = [sample_example(rng, policy, stage) for _ in range(batch)]
        # Two length-sorted micro-batches: prompts range from ~60 to ~200 tokens, so padding a mixed
        # batch to its longest row would waste about a third of the compute.
        order = sorted(range(batch), key=lambda i: _approx_len(examples[i]))
        opt.zero_grad()
        for chunk in (order[: batch // 2], order[batch // 2:]):
            part = [examples[i] for i in chunk]
            inputs = encode(processor, part)
            labels = inputs.pop("labels")
            context_labels = inputs.pop("context_labels")
            logits = model(**inputs).logits[:, :-1]
            per_ex, _ = _token_losses(logits, labels)  # every example weighs the same, long or short
            loss = per_ex.sum() / batch
            if context_weight > 0:
                ctx, has = _token_losses(logits, context_labels)
                loss = loss + context_weight * (ctx * has).sum() / batch
            loss.backward()
            for ex, v in zip(part, per_ex.detach().tolist(), strict=True):
                losses.setdefault(ex.task, []).append(float(v))
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        sched.step()
        if log and (step % 50 == 0 or step == steps - 1):
            summary = " ".join(f"{k}={np.mean(v[-100:]):.2f}" for k, v in sorted(losses.items()))
            print(f"step {step:4d} {time.time() - t0:5.0f}s {summary}", flush=True)
    model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    processor.save_pretrained(str(out_dir))
    meta = {
        "policy": policy, "seed": seed, "steps": steps, "batch": batch, "lr": lr,
        "init_from": init_from.name if init_from is not None else None,
        "vision_pretrain_steps": vision_steps if init_from is None else 0,
        "grounding_frac": grounding_frac if init_from is None else 0.0, "context_weight": context_weight,
        "train_seconds": round(time.time() - t0, 1), "torch_threads": torch.get_num_threads(),
        "params": int(sum(p.numel() for p in model.parameters())),
        "final_loss_per_task": {k: round(float(np.mean(v[-100:])), 4) for k, v in losses.items()},
    }
    (out_dir / "training.json").write_text(json.dumps(meta, indent=2))
    return meta
