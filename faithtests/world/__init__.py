"""The reference world: procedural scenes with exact ground truth (docs/architecture.md, "The reference
world"). Shared primitives only; the protocols build their stimuli on them (each protocol's
``stimuli.py``, named by its manifest's ``world``).

- scenes and their pixels: :mod:`.scene`, :mod:`.render`; per-patch truth: :mod:`.patches`;
- captions (grammar, templates, flip vocabularies): :mod:`.captions`; verified-false flips: :mod:`.foils`;
- :func:`caption_items` -> :class:`CaptionItem` (image + five true captions);
- the emotion rule of a scene: :mod:`.emotion`;
- per-item random streams and image refs: :mod:`.ids`, :mod:`.refs` (each generator registers its kind);
- training examples and their truth annotations: :mod:`.examples`.

Runtime generators only: training and evaluation of the reference checkpoints live in
``faithtests.reference`` (imported by ``faithtests train-reference`` alone).
"""

from __future__ import annotations

from faithtests.world.captions import (
    FLIP_VOCABULARIES,
    SYNONYMS,
    CaptionSpec,
    Mention,
    caption,
    human_captions,
    render_caption,
    satisfies,
    scene_spec,
)
from faithtests.world.emotion import EMOTIONS, adjacent, emotion_of, opposite
from faithtests.world.foils import FLIP_KINDS, flip_spec
from faithtests.world.items import CaptionItem, caption_items
from faithtests.world.refs import register_image_kind, register_pair_kind, resolve_image_ref, resolve_pair_ref
from faithtests.world.render import render
from faithtests.world.scene import Background, Group, Scene, WorldObject, sample_dense_scene, sample_scene

__all__ = [
    "EMOTIONS",
    "FLIP_KINDS",
    "FLIP_VOCABULARIES",
    "SYNONYMS",
    "Background",
    "CaptionItem",
    "CaptionSpec",
    "Group",
    "Mention",
    "Scene",
    "WorldObject",
    "adjacent",
    "caption",
    "caption_items",
    "emotion_of",
    "flip_spec",
    "human_captions",
    "opposite",
    "register_image_kind",
    "register_pair_kind",
    "render",
    "render_caption",
    "resolve_image_ref",
    "resolve_pair_ref",
    "sample_dense_scene",
    "sample_scene",
    "satisfies",
    "scene_spec",
]
