"""The reference world: procedural scenes with exact ground truth (DESIGN.md, "The reference world").

Generators (each item depends only on (seed, index); see :mod:`faithtests.world.ids`):

- :func:`caption_items` -> :class:`CaptionItem` (image + five true captions; LGIP, SPEC §1/§2a)
- :func:`s3e_records` -> :class:`WorldS3E` (``faithtests.data.s3e_records.S3ERecord`` + scene; SPEC §2b)
- :func:`premise_items` -> :class:`PremiseItem` (standard + misleading :class:`PremiseQuestion`; SPEC §3)
- :func:`mood_items` -> :class:`MoodItem` (y_img + six :class:`Description` subsets; SPEC §4)
- :func:`pair_items` -> :class:`PairItem` (image pair + :class:`Edit` list; SPEC §5)

Scenes, captions and flips: :mod:`.scene`, :mod:`.captions` (grammar, templates, flip vocabularies),
:mod:`.flips`; prompts the reference VLMs were trained on: :mod:`.prompts`; image refs: :mod:`.refs`.
Training of the reference checkpoints lives in :mod:`.train` (imports torch lazily).
"""

from __future__ import annotations

from faithtests.world.captions import (
    FLIP_VOCABULARIES,
    SIMPLE_TEMPLATES,
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
from faithtests.world.items import CaptionItem, WorldS3E, caption_items, s3e_record, s3e_records
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
    "EMOTIONS", "FLIP_KINDS", "FLIP_VOCABULARIES", "OPTION_E", "OPTION_F", "SIMPLE_TEMPLATES", "SYNONYMS",
    "Background", "CaptionItem", "CaptionSpec", "Claim", "Description", "Edit", "Group", "Mention",
    "MoodItem", "PairItem", "PremiseItem", "PremiseQuestion", "Scene", "WorldObject", "WorldS3E",
    "adjacent", "caption", "caption_items", "claims_text", "flip_spec", "human_captions", "mood_item",
    "mood_items", "mood_of", "opposite", "pair_item", "pair_items", "parse_claims", "premise_item",
    "premise_items", "render", "render_caption", "resolve_image_ref", "resolve_pair_ref", "s3e_record",
    "s3e_records", "sample_dense_scene", "sample_scene", "satisfies", "scene_spec",
]
