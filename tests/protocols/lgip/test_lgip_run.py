"""score_pairs: each unique image/text encoded once, and the same similarities as a per-pair loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from faithtests.protocols.lgip.run import score_pairs


@dataclass(frozen=True)
class P:
    image_id: str
    caption: str
    perturbed: str


def test_score_pairs_encodes_unique_inputs_once(load_tiny: Callable[..., Any], images: list[Any]) -> None:
    scorer = load_tiny("open_clip", batch_size=4)
    scorer.image_cache.clear()
    scorer.text_cache.clear()
    loaders = {f"im{i}": (lambda im=im: im) for i, im in enumerate(images[:3])}
    pairs = [P(f"im{i % 3}", f"a caption {i % 2}", f"a perturbed caption {i}") for i in range(12)]
    out = score_pairs(scorer, loaders, pairs)
    stats = scorer.cache_stats()
    assert stats["images_encoded"] == 3
    assert stats["texts_encoded"] == 2 + 12
    ref = [scorer.similarity([loaders[p.image_id]()] * 2, [p.caption, p.perturbed]).numpy() for p in pairs]
    np.testing.assert_allclose(out.base, [r[0] for r in ref], atol=1e-6)
    np.testing.assert_allclose(out.perturbed, [r[1] for r in ref], atol=1e-6)


def test_score_pairs_errors_name_the_problem(load_tiny: Callable[..., Any], images: list[Any]) -> None:
    scorer = load_tiny("open_clip")
    with pytest.raises(ValueError, match="no pairs"):
        score_pairs(scorer, {}, [])
    with pytest.raises(KeyError, match="no image for ids"):
        score_pairs(scorer, {}, [P("gone", "a cat", "a dog")])


def test_score_pairs_uses_similarity_for_vlm_scorers(load_tiny: Callable[..., Any],
                                                     images: list[Any]) -> None:
    """A caption-log-likelihood scorer is not a dot product of embeddings: scores must be its own."""
    from faithtests.models.vlm_scorer import VLMScorer

    scorer = VLMScorer(load_tiny("llava"))
    loaders = {"a": lambda: images[0], "b": lambda: images[1]}
    pairs = [P("a", "red circle", "blue circle"), P("b", "two squares", "one square")]
    out = score_pairs(scorer, loaders, pairs)
    direct = scorer.similarity([images[0], images[1]], ["red circle", "two squares"]).numpy()
    np.testing.assert_allclose(out.base, direct, atol=1e-5)
