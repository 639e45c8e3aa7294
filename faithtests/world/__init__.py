"""The reference world: procedural scenes with exact ground truth (DESIGN.md, "The reference world").

Generators (each item depends only on (seed, index); see :mod:`faithtests.world.ids`):

- :func:`caption_items` -> :class:`CaptionItem` (image + five true captions; LGIP, SPEC §1/§2a)
- :func:`foil_scene` -> a scene, its claim and a verified-false flip (the S3E records of SPEC §2b are
  built on it in ``faithtests.protocols.s3e.world``)
- :func:`premise_items` -> :class:`PremiseItem` (standard + misleading :class:`PremiseQuestion`; SPEC §3)
- :func:`mood_items` -> :class:`MoodItem` (y_img + six :class:`Description` subsets; SPEC §4)
- :func:`pair_items` -> :class:`PairItem` (image pair + :class:`Edit` list; SPEC §5)

Scenes, captions and flips: :mod:`.scene`, :mod:`.captions` (grammar, templates, flip vocabularies),
:mod:`.flips`; image refs: :mod:`.refs`. Runtime generators only: training and evaluation of the reference
checkpoints live in ``faithtests.reference`` (imported by ``faithtests train-reference`` alone).
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
from faithtests.world.edits import Claim, Edit, PairItem, claims_text, pair_item, pair_items, parse_claims
from faithtests.world.flips import FLIP_KINDS, flip_spec
from faithtests.world.items import FOIL_KINDS, CaptionItem, caption_items, foil_scene
from faithtests.world.mood import (
    EMOTIONS,
    Description,
    MoodItem,
    adjacent,
    mood_item,
    mood_items,
    mood_of,
    opposite,
)
from faithtests.world.premise import (
    OPTION_E,
    OPTION_F,
    PremiseItem,
    PremiseQuestion,
    premise_item,
    premise_items,
)
from faithtests.world.refs import resolve_image_ref, resolve_pair_ref
from faithtests.world.render import render
from faithtests.world.scene import Background, Group, Scene, WorldObject, sample_dense_scene, sample_scene

__all__ = [
    "EMOTIONS",
    "FLIP_KINDS",
    "FLIP_VOCABULARIES",
    "FOIL_KINDS",
    "OPTION_E",
    "OPTION_F",
    "SYNONYMS",
    "Background",
    "CaptionItem",
    "CaptionSpec",
    "Claim",
    "Description",
    "Edit",
    "Group",
    "Mention",
    "MoodItem",
    "PairItem",
    "PremiseItem",
    "PremiseQuestion",
    "Scene",
    "WorldObject",
    "adjacent",
    "caption",
    "caption_items",
    "claims_text",
    "flip_spec",
    "foil_scene",
    "human_captions",
    "mood_item",
    "mood_items",
    "mood_of",
    "opposite",
    "pair_item",
    "pair_items",
    "parse_claims",
    "premise_item",
    "premise_items",
    "render",
    "render_caption",
    "resolve_image_ref",
    "resolve_pair_ref",
    "sample_dense_scene",
    "sample_scene",
    "satisfies",
    "scene_spec",
]
