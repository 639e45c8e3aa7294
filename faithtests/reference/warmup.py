"""Dense warm-up of a vision tower: read each 16 px patch's object (colour, shape, size) off its token.

The world puts every shape inside one 16 px patch (``scene.QUADRANT``), so this is a per-token
attribute readout with exact labels. It plays the role of a pretrained vision encoder (LLaVA starts
from CLIP): a few hundred cheap steps give the tower the world's visual vocabulary, so the contrastive
or language stage spends its steps on language, binding and relations. Labels never name a caption
word, so a colour-blind text tower stays colour-blind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from faithtests.world.patches import patch_targets
from faithtests.world.render import render
from faithtests.world.scene import COLOURS, POSITIONS, SHAPES, SIZES, Background, Scene, sample_dense_scene

#: The readout heads, in order: each predicts one attribute of a patch, class 0 = empty / unused cell.
READOUTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("colour", COLOURS), ("shape", SHAPES), ("size", SIZES), ("slot", POSITIONS),
)


def readout_unit(attribute: str, value: str) -> int:
    """Index of ``value``'s class among the concatenated logits of all four heads (``attribute`` one of
    colour, shape, size, slot): where a projector seeded with the heads puts that attribute value."""
    offset = 0
    for name, values in READOUTS:
        if name == attribute:
            return offset + 1 + values.index(value)
        offset += len(values) + 1
    raise ValueError(f"unknown readout {attribute!r}; expected one of {[n for n, _ in READOUTS]}")


def make_heads(width: int, slots: bool = False) -> Any:
    sizes = [len(values) + 1 for _, values in (READOUTS if slots else READOUTS[:3])]
    return torch.nn.ModuleList([torch.nn.Linear(width, k) for k in sizes])


def dense_loss(heads: Any, tokens: Any, scenes: list[Scene]) -> Any:
    """Sum over the three attributes of the per-patch cross-entropy; ``tokens`` is [B, 36, width]."""
    slots = len(heads) == 4
    targets = [torch.tensor(t) for t in zip(*(patch_targets(s, slots) for s in scenes), strict=True)]
    return sum(
        (F.cross_entropy(h(tokens).flatten(0, 1), t.flatten()) for h, t in zip(heads, targets, strict=True)),
        torch.zeros(()),
    )


def dense_warmup(
    patch_tokens: Callable[[Any], Any], pixels: Callable[[list[Any]], Any], heads: Any, params: list[Any],
    rng: np.random.Generator, steps: int, batch: int = 48, lr: float = 3e-3,
) -> list[float]:
    """Train ``params`` so that ``patch_tokens(pixels(images))`` ([B, 36, width]) carry the patch labels."""
    opt = torch.optim.AdamW(list(params) + list(heads.parameters()), lr=lr, weight_decay=0.01)
    losses = []
    for _ in range(steps):
        scenes = [sample_dense_scene(rng, int(rng.integers(1, 15))) for _ in range(batch)]
        loss = dense_loss(heads, patch_tokens(pixels([render(s) for s in scenes])), scenes)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def bag_targets(scene: Scene, colour: bool = True) -> tuple[list[float], list[float]]:
    """Multi-hot scene summary (shapes, colours, shape x colour, slot x shape, slot x colour, slot
    counts) and a mask that hides the colour features (for a text tower that never sees colour)."""
    feats: list[float] = []
    mask: list[float] = []

    def add(values: list[bool], is_colour: bool) -> None:
        feats.extend(float(v) for v in values)
        mask.extend([0.0 if (is_colour and not colour) else 1.0] * len(values))

    objs = scene.objects
    add([any(o.shape == s for o in objs) for s in SHAPES], False)
    add([any(o.colour == c for o in objs) for c in COLOURS], True)
    add([any((o.shape, o.colour) == (s, c) for o in objs) for s in SHAPES for c in COLOURS], True)
    add([any((o.position, o.shape) == (p, s) for o in objs) for p in POSITIONS for s in SHAPES], False)
    add([any((o.position, o.colour) == (p, c) for o in objs) for p in POSITIONS for c in COLOURS], True)
    add([len(scene.objects_at(p)) == n for p in POSITIONS for n in range(5)], False)
    return feats, mask


BAG_SIZE = len(bag_targets(Scene((), Background("dark", "warm")))[0])
