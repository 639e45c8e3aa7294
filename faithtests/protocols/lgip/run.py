"""Scoring (image, caption, perturbed caption) pairs with any :class:`ImageTextScorer`, each input
encoded once.

An LGIP workload repeats every image ~60 times and every caption ~12 times; a per-pair loop would encode
them that often. Here each unique image is decoded and encoded once and each unique text encoded once
(the scorer's content-hash cache also dedupes across tests), and similarities are row-wise dot products.

Progress (inputs encoded / total) goes to :func:`faithtests.progress.stage`, silent unless a sink is
installed. For it a dual encoder gets the inputs in chunks of a whole number of its encoder batches, in
the order one call would batch them, so every encoder batch holds the same inputs as one call's and the
scores are bit-identical. The exception: inputs an earlier call cached already (SugarCrepe's COCO images
and captions after COCO's) are skipped inside a chunk, which shifts the later batch boundaries; each
score then differs from one call's at most by the adapters' batch invariance (tested at 1e-5).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from faithtests.progress import stage

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


T = TypeVar("T")

#: Encoder batches per chunk: each chunk is one progress step.
BATCHES_PER_CHUNK = 4
#: Images per progress step when a VLM scores (image, caption) pairs.
IMAGES_PER_STEP = 8


def _chunks(items: Sequence[T], scorer: object) -> list[Sequence[T]]:
    """Consecutive chunks of ``BATCHES_PER_CHUNK`` encoder batches (the scorer's ``batch_size``); one
    chunk when the scorer does not say."""
    batch = getattr(scorer, "batch_size", None)
    if not isinstance(batch, int) or batch < 1:
        return [items]
    size = batch * BATCHES_PER_CHUNK
    return [items[i:i + size] for i in range(0, len(items), size)]


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
        return _score_each_pair(scorer, images, image_ids, pairs)
    with stage("LGIP encode", total=len(image_ids) + len(texts), model=_spec(scorer)) as progress:
        img_parts: list[torch.Tensor] = []
        for ids in _chunks(image_ids, scorer):
            img_parts.append(scorer.encode_images([images[i]() for i in ids]))
            progress.advance(len(ids))
        txt_parts: list[torch.Tensor] = []
        for chunk in _chunks(texts, scorer):
            txt_parts.append(scorer.encode_texts(chunk))
            progress.advance(len(chunk))
    import torch  # lazy: torch (the plugin imports no torch at load)

    img_emb, txt_emb = torch.cat(img_parts), torch.cat(txt_parts)
    rows = [img_row[p.image_id] for p in pairs]
    img = img_emb[rows]
    base = _rowwise(img, txt_emb[[txt_row[p.caption] for p in pairs]])
    perturbed = _rowwise(img, txt_emb[[txt_row[p.perturbed] for p in pairs]])
    return PairScores(base, perturbed)


def _spec(scorer: object) -> str | None:
    spec = getattr(scorer, "spec", None)
    return spec if isinstance(spec, str) else None


def _score_each_pair(scorer: ImageTextScorer, images: Mapping[str, Callable[[], Image.Image]],
                     image_ids: list[str], pairs: Sequence[_Pair]) -> PairScores:
    """A VLM scorer's s(I, c) is a caption log-likelihood, not a dot product of embeddings: score each
    (image, text) pair; images are still decoded once each.

    The pairs go in chunks of ``IMAGES_PER_STEP`` images (one progress step each): a VLM batches the
    captions of one image together, so chunking by image keeps those batches; only leftover single rows
    pool differently, within the adapters' batch invariance (tested at 1e-5)."""
    pil = {i: images[i]() for i in image_ids}
    base = np.zeros(len(pairs))
    perturbed = np.zeros(len(pairs))
    rows_of: dict[str, list[int]] = {}
    for n, p in enumerate(pairs):
        rows_of.setdefault(p.image_id, []).append(n)
    with stage("LGIP caption log-likelihood", total=len(pairs), model=_spec(scorer)) as progress:
        for start in range(0, len(image_ids), IMAGES_PER_STEP):
            rows = [n for i in image_ids[start:start + IMAGES_PER_STEP] for n in rows_of.get(i, [])]
            ims = [pil[pairs[n].image_id] for n in rows]
            base[rows] = scorer.similarity(ims, [pairs[n].caption for n in rows]).double().numpy()
            perturbed[rows] = scorer.similarity(ims, [pairs[n].perturbed for n in rows]).double().numpy()
            progress.advance(len(rows))
    return PairScores(base, perturbed)
