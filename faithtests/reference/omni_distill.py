"""Vision distillation for the reference omni model: its Qwen2.5-VL ViT learns the reference VLM's
projected patches.

The VLM turns a 96 px world image into 36 projected patch vectors (CLIP patches of 16 px, MLP projector);
the omni processor turns a pair of 96 px frames into the same 6 x 6 grid of merged tokens
(:mod:`.omni_init`). The ViT is trained (MSE, seeded) so that its 36 outputs for a frame pair match the
mean of the VLM's outputs for the two frames; a still image is a pair of equal frames, as the image
processor makes it. The decoder the VLM trained then reads the new tower's tokens from the first step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image

#: A source of frame pairs: rng -> (first frame, second frame) of one world clip or still.
FramePairs = Callable[[np.random.Generator], tuple[Image.Image, Image.Image]]


@torch.no_grad()
def teacher_tokens(llava: Any, vlm_processor: Any, frames: Sequence[Image.Image]) -> torch.Tensor:
    """The VLM's 36 projected patch vectors per frame: [len(frames), 36, text width]."""
    pixels = vlm_processor.image_processor(list(frames), return_tensors="pt")["pixel_values"]
    hidden = llava.model.vision_tower(pixels, output_hidden_states=True).hidden_states[-1][:, 1:]
    projected: torch.Tensor = llava.model.multi_modal_projector(hidden)
    return projected


def student_tokens(thinker: Any, processor: Any,
                   pairs: Sequence[tuple[Image.Image, Image.Image]]) -> torch.Tensor:
    """The omni ViT's merged tokens per frame pair, through the processor's video path:
    [pairs, 36, width]."""
    videos = [np.stack([np.asarray(a.convert("RGB")), np.asarray(b.convert("RGB"))]) for a, b in pairs]
    enc = processor.video_processor(videos=videos, return_tensors="pt")
    visual = thinker.model.visual
    out: torch.Tensor = visual(enc["pixel_values_videos"], grid_thw=enc["video_grid_thw"]).pooler_output
    return out.reshape(len(pairs), -1, out.shape[-1])


def distill_vision(thinker: Any, processor: Any, llava: Any, vlm_processor: Any, pairs: FramePairs,
                   rng: np.random.Generator, steps: int, batch: int = 24, lr: float = 2e-3,
                   log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train ``thinker.model.visual`` alone on ``steps`` batches of frame pairs; returns the record
    (final loss relative to the targets' variance, seconds)."""
    visual = thinker.model.visual
    visual.train()
    opt = torch.optim.AdamW(visual.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    t0, rel = time.time(), float("nan")
    history: list[float] = []
    for step in range(steps):
        drawn = [pairs(rng) for _ in range(batch)]
        flat = teacher_tokens(llava, vlm_processor, [f for pair in drawn for f in pair])
        target = flat.reshape(batch, 2, *flat.shape[1:]).mean(1)
        pred = student_tokens(thinker, processor, drawn)
        loss: Any = torch.nn.functional.mse_loss(pred, target)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(visual.parameters(), 1.0)
        opt.step()
        sched.step()
        rel = float(loss.detach() / target.var())
        history.append(rel)
        if step % 50 == 0 or step == steps - 1:
            log(f"distill {step}/{steps} rel_mse {np.mean(history[-50:]):.4f} {time.time() - t0:.0f}s")
    visual.eval()
    final = round(float(np.mean(history[-50:])), 4)
    return {"steps": steps, "batch": batch, "lr": lr, "final_rel_mse": final,
            "seconds": round(time.time() - t0, 1)}
