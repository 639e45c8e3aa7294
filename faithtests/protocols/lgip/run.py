"""Scoring (image, caption, perturbed caption) pairs with any :class:`ImageTextScorer`, each input
encoded once.

An LGIP workload repeats every image ~60 times and every caption ~12 times; a per-pair loop would encode
them that often. Here each unique image is decoded and encoded once and each unique text encoded once
(the scorer's content-hash cache also dedupes across tests), and similarities are row-wise dot products.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    import torch
    from PIL import Image

    from faithtests.models.interfaces import ImageTextScorer


class _Pair(Protocol):
    @property
    def image_id(self) -> str: ...
    @property
    def caption(self) -> str: ...
    @property
    def perturbed(self) -> str: ...


@dataclass(frozen=True)
class PairScores:
    """s(I, c) and s(I, c') per pair, float64 (LGIP §3)."""

    base: NDArray[np.float64]
    perturbed: NDArray[np.float64]


def _rowwise(a: torch.Tensor, b: torch.Tensor) -> NDArray[np.float64]:
    return (a * b).sum(dim=-1).double().numpy()


def score_pairs(
    scorer: ImageTextScorer,
    images: Mapping[str, Callable[[], Image.Image]],
    pairs: Sequence[_Pair],
) -> PairScores:
    """Similarities of every pair's original caption and perturbed caption with its image."""
    if not pairs:
        raise ValueError("score_pairs: no pairs to score")
    image_ids = sorted({p.image_id for p in pairs})
    missing = [i for i in image_ids if i not in images]
    if missing:
        raise KeyError(f"score_pairs: no image for ids {missing[:5]} ({len(missing)} in all)")
    # by length, so each encoder batch holds texts of similar token counts (less padding to compute)
    texts = sorted({t for p in pairs for t in (p.caption, p.perturbed)}, key=lambda t: (len(t), t))
    img_row = {k: n for n, k in enumerate(image_ids)}
    txt_row = {t: n for n, t in enumerate(texts)}
    if getattr(scorer, "score_kind", "cosine") != "cosine":
        # A VLM scorer's s(I, c) is a caption log-likelihood, not a dot product of embeddings: score
        # each (image, text) pair; images are still decoded once each.
        pil = {i: images[i]() for i in image_ids}
        ims = [pil[p.image_id] for p in pairs]
        return PairScores(
            scorer.similarity(ims, [p.caption for p in pairs]).double().numpy(),
            scorer.similarity(ims, [p.perturbed for p in pairs]).double().numpy(),
        )
    img_emb = scorer.encode_images([images[i]() for i in image_ids])
    txt_emb = scorer.encode_texts(texts)
    rows = [img_row[p.image_id] for p in pairs]
    img = img_emb[rows]
    base = _rowwise(img, txt_emb[[txt_row[p.caption] for p in pairs]])
    perturbed = _rowwise(img, txt_emb[[txt_row[p.perturbed] for p in pairs]])
    return PairScores(base, perturbed)

