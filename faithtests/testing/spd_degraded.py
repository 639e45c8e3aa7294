"""A deterministic degradation of a VLM's SPD-Faith answers, for the failing side of the count and naming
gates (issue 30, item 6): ``--faith-vlm py:faithtests.testing.spd_degraded:diffblind``.

:class:`DiffBlind` wraps a model and passes every call through, except two:

* the count question ("How many differences ...?"): the model's own top count k swaps logits with a
  count t in 1..6, t != k, drawn from a hash of the pair's pixels, so the answer is wrong for every pair
  the model counted right (and a pair is still named: t >= 1);
* the naming prompt ("There are n differences ... Can you find them?"): the reply is n claims in the
  world's claim grammar about random objects (colour, shape, place, edit type, new colour or place drawn
  from the same hash), not what the model saw; a random claim matches a real edit only by chance.

The symmetric questions ("same?" / "different?") are untouched, so contradiction, CR and DS_exist are
the wrapped model's. Deterministic: the same pair always gets the same count and the same claims.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import torch

from faithtests.models.interfaces import Decision, Hooks, Prompt, VisionLanguageModel
from faithtests.models.registry import load_model
from faithtests.protocols.spdfaith.prompts import COUNT_QUESTION, COUNT_WORDS, find_text
from faithtests.protocols.spdfaith.stimuli import EDIT_TYPES, Edit, claims_text
from faithtests.world.scene import COLOURS, POSITIONS, SHAPES

DEGRADATION: Final = "diffblind-v1"
_NAMING: Final[dict[str, int]] = {find_text(n): n for n in range(1, len(COUNT_WORDS))}


def _pair_seed(prompt: Prompt) -> int:
    """A seed from the prompt's images (pixels and sizes), stable across runs and machines."""
    h = hashlib.sha256()
    for im in prompt.images:
        h.update(repr(im.size).encode())
        h.update(np.asarray(im.convert("RGB")).tobytes())
    return int.from_bytes(h.digest()[:8], "little")


def wrong_counts(prompts: Sequence[Prompt], logits: torch.Tensor) -> torch.Tensor:
    """[N, len(COUNT_WORDS)] count logits with each row's top count swapped for a wrong one in 1..6."""
    out = logits.clone()
    for i, p in enumerate(prompts):
        row = out[i]
        if not torch.isfinite(row).all():
            continue  # a broken answer stays broken (the suite counts it)
        k = int(row.argmax())
        choices = [c for c in range(1, len(COUNT_WORDS)) if c != k]
        t = choices[np.random.default_rng(_pair_seed(p)).integers(len(choices))]
        row[[k, t]] = row[[t, k]].clone()
    return out


def random_claims(prompt: Prompt, n: int) -> str:
    """``n`` claims about random objects in the world's claim grammar, drawn from the pair's hash."""
    rng = np.random.default_rng(_pair_seed(prompt) + 1)
    edits = []
    for oid in range(n):
        kind, colour = str(rng.choice(EDIT_TYPES)), str(rng.choice(COLOURS))
        place = str(rng.choice(POSITIONS))
        new_colour = str(rng.choice([c for c in COLOURS if c != colour])) if kind == "color" else None
        new_place = str(rng.choice([q for q in POSITIONS if q != place])) if kind == "position" else None
        edits.append(Edit(kind, str(rng.choice(SHAPES)), oid, colour, place, new_colour, new_place))
    return claims_text(edits)


class DiffBlind:
    """``inner`` with wrong counts and random named differences (module docstring); everything else,
    the symmetric questions included, is ``inner``'s."""

    def __init__(self, inner: VisionLanguageModel) -> None:
        self._inner = inner
        self.spec = f"{inner.spec}+{DEGRADATION}"
        self.num_layers = inner.num_layers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _is_count(self, prompts: Sequence[Prompt], options: Sequence[str]) -> list[bool]:
        return [tuple(options) == COUNT_WORDS and p.text == COUNT_QUESTION for p in prompts]

    def _degrade(self, prompts: Sequence[Prompt], options: Sequence[str],
                 logits: torch.Tensor) -> torch.Tensor:
        rows = [i for i, c in enumerate(self._is_count(prompts, options)) if c]
        if not rows:
            return logits
        out = logits.clone()
        out[rows] = wrong_counts([prompts[i] for i in rows], logits[rows])
        return out

    def option_logits(self, prompts: Sequence[Prompt], options: Sequence[str],
                      hooks: Hooks | None = None) -> torch.Tensor:
        return self._degrade(prompts, options, self._inner.option_logits(prompts, options, hooks))

    def decide(self, prompts: Sequence[Prompt], options: Sequence[str],
               hooks: Hooks | None = None) -> Decision:
        d = self._inner.decide(prompts, options, hooks)
        return Decision(self._degrade(prompts, options, d.logits), d.states)

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> list[str]:
        texts = self._inner.generate(prompts, max_new_tokens, hooks)
        return [random_claims(p, _NAMING[p.text]) if p.text in _NAMING else t
                for p, t in zip(prompts, texts, strict=True)]

    def fingerprint(self) -> dict[str, Any]:
        """The inner model's, marked: a cache must never serve the inner model's answers for these."""
        return {**self._inner.fingerprint(), "degradation": DEGRADATION}


def diffblind(**kwargs: Any) -> DiffBlind:
    """``py:faithtests.testing.spd_degraded:diffblind``: ``reference:vlm`` degraded (module docstring)."""
    inner = load_model("reference:vlm", **kwargs)
    if not isinstance(inner, VisionLanguageModel):
        raise TypeError("reference:vlm did not load as a VisionLanguageModel")
    return DiffBlind(inner)
