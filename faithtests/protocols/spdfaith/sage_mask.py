"""SAGE stage 3's discrepancy mask (SPD-Faith §5.1 Eq. 6, App. D.1 Eqs. 17-18, App. E Alg. 1 lines 26-29):
pure functions on arrays and images. :mod:`.sage` calls them with what the model shows at each step.

* Ω_A (attention map): the current query's attention to each image patch (the answer position, then
  each decoding step's query), mean over layers and heads, summed over the images of the prompt — the
  mask occludes the same cell in both images, so a cell's score is what the query reads from it in
  either image (occluding a cell in one image only would put a new difference there for the auxiliary
  path to see). The image tokens of a row are split evenly among its images, in order (the reference
  VLM writes both pictures' 36 tokens as one run of 72); each image's share must be a square number of
  tokens (a row-major patch grid), else :class:`PatchGridError`.
* Ω_T (token activation map, App. D.1, after Li et al. 2025b): Z = H·W_head (Eq. 17), H the last
  layer's hidden states, and A(y_t) = [h_j·w_{y_t}] over the image positions j (Eq. 18): the logit of
  the token being generated read at each image token. The paper states no normalisation for SAGE; the
  top-k is taken on the raw logits, summed over the images per cell as Ω_A is. H is taken after the
  final norm, as the public code reads the model's own logits (``analysis/tam.py``); the code also
  clips the scores at 0, min-max normalises them with the text tokens', subtracts earlier tokens'
  maps (its ECI step) and smooths them (rank-Gaussian filter) for its figures: none of that is in the
  paper's definition and none is done here (the clip and the min-max scaling leave the top-k of the
  positive cells unchanged).
* Top-k: the k highest cells (ties broken by cell order, row-major); Ω_A keeps only cells with a
  positive score (zero attention is no attention), Ω_T ranks the raw logits.
* M = Ω_A ∩ Ω_T (Eq. 6). When the intersection is empty ``fallback="attention"`` uses Ω_A alone: the
  auxiliary path is meant to miss the evidence the step reads (Alg. 1 lines 28-30); an empty mask
  would make it the main path and Eq. 7 a no-op. ``fallback="none"`` keeps the empty mask.
* ``sage-oracle`` (a diagnostic, not the paper's method): Ω_T = the top-k cells of the pair's pixel
  change (:func:`change_grid`), mean |a − b| over each cell's pixels and channels. It hands SAGE the
  location of the edits, which the model would have to find, so it is an upper bound on what stage 3's
  masking can do.
* Occlusion: each masked cell is filled with its own image's mean colour (per channel, over the whole
  image). The patch's content goes; no new edges or colours come in (black or noise would add
  features of their own for the model to read). The cells are laid over the whole image, which is
  exact for square images that the processor resizes without cropping (the world's pairs); a
  processor that centre-crops non-square images sees the cells shifted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray
from PIL import Image

if TYPE_CHECKING:
    from faithtests.models.interfaces import Attentions

Fallback = Literal["attention", "none"]
FALLBACKS: tuple[Fallback, ...] = ("attention", "none")
Grid = tuple[int, int]


class PatchGridError(ValueError):
    """A row's image tokens do not form one square patch grid per image."""


def patch_grid(n_tokens: int, grid: Grid | None = None) -> Grid:
    """(rows, cols) of one image's ``n_tokens`` patch tokens: ``grid`` when given (checked), else the
    square root (a non-square count is a :class:`PatchGridError` naming the fix)."""
    if grid is not None:
        if grid[0] * grid[1] != n_tokens or min(grid) < 1:
            raise PatchGridError(f"grid {grid} does not hold {n_tokens} image tokens")
        return grid
    side = math.isqrt(n_tokens)
    if n_tokens < 1 or side * side != n_tokens:
        raise PatchGridError(
            f"{n_tokens} image tokens per image are not a square patch grid (non-square image, or tiles); "
            "SAGE's masks need each image as one square patch grid: give the difference suite square "
            "images (a variable-resolution model keeps a non-square image's aspect ratio; from Python, "
            "faithtests.protocols.spdfaith.sage's functions take grid=(rows, cols))")
    return side, side


def image_positions(runs: Sequence[tuple[int, int]]) -> list[int]:
    return [p for a, b in sorted(runs) for p in range(a, b)]


def attention_grid(att: Attentions, row: int, n_images: int, grid: Grid | None = None) -> NDArray[np.float64]:
    """Ω_A's scores for one row of ``att``: the answer query's attention to each patch cell, mean over
    layers and heads, summed over the row's ``n_images`` images, shape (rows, cols)."""
    if n_images < 1:
        raise PatchGridError(f"row {row}: a mask needs at least one image")
    runs = att.spans.image_runs[row] if att.spans.image_runs else [att.spans.image[row]]
    pos = image_positions(runs)
    if not pos or len(pos) % n_images:
        raise PatchGridError(f"row {row}: {len(pos)} image tokens cannot be split among {n_images} images")
    weights = np.stack([np.asarray(w[row].float().numpy(), dtype=np.float64) for w in att.weights])
    per_key = weights.mean(axis=(0, 1))  # [keys]: mean over layers and heads
    return image_cells(per_key[pos], n_images, grid)


def image_cells(
    per_token: NDArray[np.float64], n_images: int, grid: Grid | None = None
) -> NDArray[np.float64]:
    """Scores of the image tokens in order (``n_images`` equal shares, each a row-major patch grid),
    summed over the images per cell: shape (rows, cols)."""
    values = np.asarray(per_token, dtype=np.float64).ravel()
    if n_images < 1 or not values.size or values.size % n_images:
        raise PatchGridError(f"{values.size} image tokens cannot be split among {n_images} images")
    shape = patch_grid(values.size // n_images, grid)
    return np.asarray(values.reshape(n_images, shape[0] * shape[1]).sum(axis=0).reshape(shape))


def token_activation(image_states: NDArray[np.float64], head_row: NDArray[np.float64]) -> NDArray[np.float64]:
    """Eq. 18: A(y)_j = h_j · w_y for the hidden states ``image_states`` [N, D] of the image tokens (the
    rows of H in Eq. 17 = H·W_head) and ``head_row`` = w_y [D], the LM head's column of token y."""
    h, w = np.asarray(image_states, dtype=np.float64), np.asarray(head_row, dtype=np.float64)
    if h.ndim != 2 or w.shape != (h.shape[1],):
        raise ValueError(f"token_activation: states {h.shape} and head row {w.shape} do not match")
    return np.asarray(h @ w, dtype=np.float64)


def _edges(n: int, parts: int) -> list[int]:
    return [round(i * n / parts) for i in range(parts + 1)]


def change_grid(a: Image.Image, b: Image.Image, grid: Grid) -> NDArray[np.float64]:
    """Ω_T's scores: mean |a − b| over each cell's pixels and channels (module doc), shape ``grid``.
    ``b`` is resized to ``a``'s size when they differ."""
    x = np.asarray(a.convert("RGB"), dtype=np.float64)
    bb = b.convert("RGB")
    bb = bb if bb.size == a.size else bb.resize(a.size, Image.Resampling.BILINEAR)
    y = np.asarray(bb, dtype=np.float64)
    diff = np.abs(x - y).mean(axis=-1)
    ys, xs = _edges(diff.shape[0], grid[0]), _edges(diff.shape[1], grid[1])
    out = np.zeros(grid, dtype=np.float64)
    for i in range(grid[0]):
        for j in range(grid[1]):
            cell = diff[ys[i] : ys[i + 1], xs[j] : xs[j + 1]]
            out[i, j] = float(cell.mean()) if cell.size else 0.0
    return out


def top_cells(scores: NDArray[np.float64], k: int, positive: bool = True) -> NDArray[np.bool_]:
    """The ``k`` highest cells (stable: ties go to the earlier cell, row-major); with ``positive`` only
    cells with a score > 0 (fewer than k when fewer are positive)."""
    if k < 1:
        raise ValueError(f"top-k needs k >= 1, got {k}")
    flat = np.asarray(scores, dtype=np.float64).ravel()
    order = np.argsort(-flat, kind="stable")[:k]
    keep = np.zeros(flat.size, dtype=np.bool_)
    keep[order[flat[order] > 0] if positive else order] = True
    return keep.reshape(scores.shape)


def discrepancy_mask(
    attention: NDArray[np.float64], activation: NDArray[np.float64], k: int, fallback: Fallback = "attention",
    *, positive_activation: bool = False,
) -> NDArray[np.bool_]:
    """Eq. 6: M = top-k(Ω_A) ∩ top-k(Ω_T), or top-k(Ω_A) when that is empty and ``fallback="attention"``.
    ``activation`` is the TAM's cell scores (raw logits: any sign), or for the oracle the pixel change
    (``positive_activation``: unchanged cells are never in Ω_T)."""
    if attention.shape != activation.shape:
        raise ValueError(f"attention grid {attention.shape} and activation grid {activation.shape} differ")
    if fallback not in FALLBACKS:
        raise ValueError(f"unknown mask fallback {fallback!r}; expected one of {FALLBACKS}")
    omega_a = top_cells(attention, k)
    mask = omega_a & top_cells(activation, k, positive_activation)
    if not mask.any() and fallback == "attention":
        return omega_a
    return mask


def occlude(image: Image.Image, mask: NDArray[np.bool_]) -> Image.Image:
    """``image`` with each masked cell (grid = ``mask.shape``) filled with the image's mean colour."""
    x = np.asarray(image.convert("RGB"), dtype=np.uint8).copy()
    fill = np.rint(x.reshape(-1, 3).mean(axis=0)).astype(np.uint8)
    ys, xs = _edges(x.shape[0], mask.shape[0]), _edges(x.shape[1], mask.shape[1])
    for i, j in zip(*np.nonzero(mask), strict=True):
        x[ys[i] : ys[i + 1], xs[j] : xs[j + 1]] = fill
    return Image.fromarray(x)


def masked_pair(a: Image.Image, b: Image.Image, mask: NDArray[np.bool_]) -> tuple[Image.Image, Image.Image]:
    """The auxiliary pair (Alg. 1 line 29, I ⊙ (1 − M)): the cells of ``mask`` occluded in both images,
    each with its own mean colour (module doc). The patch grid is ``mask.shape``."""
    m = np.asarray(mask, dtype=np.bool_)
    if m.ndim != 2:
        raise ValueError(f"the mask must be a (rows, cols) grid, got shape {m.shape}")
    return occlude(a, m), occlude(b, m)
