"""E_inv relative to the scorer's own separation of true from unrelated captions (scale-free invariance).

Why. Raw E_inv (LGIP Eq. 2) is in the units of s(I, c) (Eq. 1), and a scorer that barely reacts to its
inputs is trivially invariant: a random-weight open_clip ViT-S-32 has E_inv 0.022 on COCO-MINI and
passes ``E_inv <= 0.05``, a constant scorer has E_inv 0. The paper reads E_inv against the model's
separation of captions (Fig. 2 plots E_inv against E_sens, Eq. 4; §4.2: "low paraphrase variance with
strong separation between original captions and flips"). Here the separation is Eq. 4's mean gap with
the strongest possible flip, a true caption of another image (every attribute changed):

    Δ_u = E_(I,c) [s(I, c) − s(I, c_u)]               (LGIP Eqs. 3–4, c† := c_u, one per (I, c))
    E_inv_rel = E_inv / Δ_u                           (LGIP Eq. 2 over Eq. 4)

E_inv_rel is the share of the model's own true-vs-unrelated separation that a paraphrase moves the
score: unit-free, so one threshold serves cosine, logit and log-likelihood scorers alike. For a model
whose one-word flips separate less than whole-caption swaps (Δ_u >= E_sens), E_inv_rel <= E_inv / E_sens,
which Table 2 puts at 0.17–0.33 for the five CLIP-family models (CLIP B/16 0.008 / 0.024).

Undefined (NaN, which fails any gate) when the separation is not positive, and, with a bootstrap, when
it is not resolved from zero (the CI of a ratio is bounded only if its denominator's is, Fieller 1954):
a constant scorer (Δ_u = 0) and a random one (Δ_u ≈ 0 ± noise) have no separation to be invariant
relative to.

Unrelated captions: for the base (I, c) pairs in first-seen order, the images sorted by id and the
captions of each image in order, c_u is the caption of the same index (modulo its count) of the image
⌊M/2⌋ places further on (cyclic); an image whose caption there equals one of I's own captions is
skipped for the next. Deterministic, model-free, and every image serves as an unrelated one once.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.protocols.lgip.metrics import Estimate, paired_scores
from faithtests.stats import cluster_bootstrap_sums_ci

FloatArray = NDArray[np.float64]


class _Base(Protocol):
    @property
    def image_id(self) -> str: ...
    @property
    def caption_id(self) -> str: ...
    @property
    def caption(self) -> str: ...


@dataclass(frozen=True)
class UnrelatedPair:
    """(I, c, c_u): a true caption c of image I and a true caption c_u of another image."""

    image_id: str
    caption_id: str
    caption: str
    perturbed: str  # c_u (named like PerturbationPair's c' so run.score_pairs scores it)


def unrelated_pairs(pairs: Sequence[_Base]) -> tuple[UnrelatedPair, ...]:
    """One unrelated caption per distinct base (I, c) of ``pairs`` (module doc); needs >= 2 images."""
    captions: dict[str, list[tuple[str, str]]] = {}
    seen: set[tuple[str, str]] = set()
    for p in pairs:
        if (p.image_id, p.caption_id) not in seen:
            seen.add((p.image_id, p.caption_id))
            captions.setdefault(p.image_id, []).append((p.caption_id, p.caption))
    images = sorted(captions)
    m = len(images)
    if m < 2:
        raise ValueError(f"unrelated captions need at least 2 images, got {m}")
    out: list[UnrelatedPair] = []
    for i, image in enumerate(images):
        own = {c for _, c in captions[image]}
        others = [captions[images[(i + k) % m]] for k in range(m // 2, m // 2 + m) if k % m]
        for n, (cid, cap) in enumerate(captions[image]):
            found = next((o[n % len(o)][1] for o in others if o[n % len(o)][1] not in own), None)
            if found is None:
                raise ValueError(f"image {image!r}: every other image's caption is one of its own")
            out.append(UnrelatedPair(image, cid, cap, found))
    return tuple(out)


def separation(base: ArrayLike, unrelated: ArrayLike) -> float:
    """Δ_u = mean [s(I, c) − s(I, c_u)] over base pairs (LGIP Eq. 4 with c† an unrelated caption)."""
    b, u = paired_scores(base, unrelated, "unrelated-caption scores")
    return float(np.mean(b - u))


def relative_invariance(e_inv: float, sep: float) -> float:
    """E_inv_rel = E_inv / Δ_u (LGIP Eq. 2 over Eq. 4); NaN (undefined) when Δ_u <= 0."""
    if not (np.isfinite(e_inv) and np.isfinite(sep)) or e_inv < 0:
        raise ValueError(f"relative invariance undefined for E_inv = {e_inv}, separation = {sep}")
    return e_inv / sep if sep > 0 else float("nan")


@dataclass(frozen=True)
class RelativeInvariance:
    """Δ_u with its CI, and E_inv_rel (value NaN, CI None when the separation is not resolved > 0)."""

    separation: Estimate
    relative: Estimate


def _theta(t: FloatArray) -> FloatArray:
    """atan2(Δ_u, E_inv) of resampled totals: monotone in Δ_u / E_inv, finite even where E_inv = 0."""
    return np.arctan2(t[:, 2] / t[:, 3], t[:, 0] / t[:, 1])


def relative_invariance_summary(
    para_base: ArrayLike,
    paraphrase: ArrayLike,
    para_images: Sequence[Hashable],
    unrel_base: ArrayLike,
    unrelated: ArrayLike,
    unrel_images: Sequence[Hashable],
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> RelativeInvariance:
    """E_inv_rel of the given paraphrase pairs (all, or one kind) against Δ_u, both pooled over pairs;
    no unrelated pairs (a dataset of one image) leave both undefined.

    CIs resample images (an image's paraphrase pairs and unrelated-caption pairs together). The ratio's
    CI is the percentile CI of θ = atan2(Δ_u, E_inv), mapped back by E_inv / Δ_u = cot θ: the
    percentile bootstrap respects monotone maps, and θ stays finite where the ratio does not. It is
    bounded, and E_inv_rel defined, only when the lower bound of θ, like that of Δ_u, is above 0.
    """
    pb, pp = paired_scores(para_base, paraphrase, "paraphrase scores")
    if np.asarray(unrel_base).size == 0 and np.asarray(unrelated).size == 0:  # fewer than 2 images
        undefined = Estimate(float("nan"), None, 0, 0)
        return RelativeInvariance(undefined, Estimate(float("nan"), None, int(pb.size), 0))
    ub, uu = paired_scores(unrel_base, unrelated, "unrelated-caption scores")
    if len(para_images) != pb.size or len(unrel_images) != ub.size:
        raise ValueError("one image id per pair is needed for the paraphrase and the unrelated pairs")
    diffs, gaps = np.abs(pb - pp), ub - uu
    e_inv, sep = float(diffs.mean()), float(gaps.mean())
    images = [str(i) for i in [*para_images, *unrel_images]]
    n_img = len(set(images))
    cols = np.zeros((diffs.size + gaps.size, 4))
    cols[: diffs.size, 0], cols[: diffs.size, 1] = diffs, 1.0
    cols[diffs.size :, 2], cols[diffs.size :, 3] = gaps, 1.0
    sep_ci = theta_ci = None
    if n_resamples > 0:
        sep_ci = cluster_bootstrap_sums_ci(cols, images, lambda t: t[:, 2] / t[:, 3],
                                           n_resamples=n_resamples, level=level, seed=seed)
        theta_ci = cluster_bootstrap_sums_ci(cols, images, _theta, n_resamples=n_resamples, level=level,
                                             seed=seed)
    sep_est = Estimate(sep, sep_ci, int(gaps.size), len({str(i) for i in unrel_images}))
    value = relative_invariance(e_inv, sep)
    ci = None
    if theta_ci is not None:
        lo, hi = theta_ci
        if not lo > 0:  # the separation is not resolved from 0: the ratio's CI is unbounded
            value = float("nan")
        else:
            ci = (1.0 / float(np.tan(hi)), 1.0 / float(np.tan(lo)))
    if np.isnan(value):
        ci = None
    return RelativeInvariance(sep_est, Estimate(value, ci, int(diffs.size + gaps.size), n_img))
