"""One-answer and random policies: models that no gate should pass (issue 44's constant-policy battery).

``--faith-vlm policy:NAME`` (``policy:NAME@INNER`` to wrap another model than ``reference:vlm``, e.g.
``policy:letter-F@reference:omni``) loads ``INNER`` and answers every question a policy decides with the
policy's answer, whatever the image, sound or text; a question it does not decide is the inner model's.
Hidden states, attention and hooks stay the inner model's, so every test runs; only the *answers* are
degenerate. Policies (``POLICIES``):

* ``letter-X``: always the option letter X (A/B forced choice, IMAVB's six letters; "first" and "last"
  option are A and B / A and F); ``reject-visual`` / ``reject-audio``: always IMAVB's "The visual
  (audio) detail in the question is incorrect", wherever the shuffle put it;
* ``yes`` / ``no``: that answer to every Yes/No question; ``same`` / ``different``: the answer that
  says the two pictures are the same (differ) to both symmetric questions;
* ``count-N``: always N differences (and N claims when asked to name them);
* ``label-E``: always the emotion E (both answer modes); ``image-only`` / ``text-only``: the inner model
  shown only the image (the description dropped; a prompt without an image gets the first option) /
  only the text (the images greyed);
* ``random``: a uniformly random option, label or count, drawn from a hash of the prompt
  (deterministic).

Each policy's fingerprint names it, so an output cache never serves one policy's answers for another.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import torch
from PIL import Image

from faithtests.models.interfaces import (
    DESCRIPTION_SLOT,
    Attentions,
    Decision,
    Hooks,
    Prompt,
    VisionLanguageModel,
)
from faithtests.models.registry import load_model
from faithtests.protocols.imavb.records import OPTION_E, OPTION_F
from faithtests.protocols.spdfaith.prompts import (
    COUNT_WORDS,
    DIFFERENT_QUESTION,
    SAME_QUESTION,
    YES_NO,
    find_text,
)
from faithtests.world.emotion import EMOTIONS

#: Logit of the chosen option and of the others: finite, far apart, never a tie.
CHOSEN, OTHER = 0.0, -20.0
DEFAULT_INNER: Final = "reference:vlm"
_OPTION_LINE = re.compile(r"^([A-F])\. (.+)$", re.MULTILINE)
#: SPD-Faith's naming prompt for each count n >= 1.
_NAMING: Final[dict[str, int]] = {find_text(n): n for n in range(1, len(COUNT_WORDS))}

Choose = Callable[[Prompt, Sequence[str]], "int | None"]
Reply = Callable[[Prompt], "str | None"]


def _digest(prompt: Prompt, extra: str = "") -> int:
    """A number from the prompt's text, description and images (pixels and sizes), stable everywhere."""
    h = hashlib.sha256(f"{prompt.text}|{prompt.description}|{extra}".encode())
    for im in (*prompt.images, *prompt.video):
        h.update(repr(im.size).encode())
        h.update(im.convert("RGB").tobytes())
    return int.from_bytes(h.digest()[:8], "little")


def _never(*_: Any) -> None:
    return None


@dataclass(frozen=True)
class Policy:
    """``choose(prompt, options)``: the index of the option (or answer) to give, None to let the inner
    model answer; ``reply(prompt)``: the generated text, None for the inner model's."""

    name: str
    choose: Choose = _never
    reply: Reply = _never
    rewrite: Callable[[Prompt], Prompt] | None = None  # what the inner model is shown instead


def _index(word: str) -> Choose:
    return lambda _p, options: options.index(word) if word in options else None


def _option_with(text: str) -> Choose:
    """The letter whose option line in the prompt says ``text`` (IMAVB's shuffled E / F)."""
    def choose(p: Prompt, options: Sequence[str]) -> int | None:
        letter = next((m[1] for m in _OPTION_LINE.finditer(p.text) if m[2].strip() == text), None)
        return options.index(letter) if letter in options else None
    return choose


def _symmetric(says_same: bool) -> Choose:
    def choose(p: Prompt, options: Sequence[str]) -> int | None:
        if tuple(options) != YES_NO or p.text not in (SAME_QUESTION, DIFFERENT_QUESTION):
            return None
        return 0 if (p.text == SAME_QUESTION) == says_same else 1
    return choose


def _count(n: int) -> Policy:
    def reply(p: Prompt) -> str | None:  # n claims in the world's claim grammar, the same for every pair
        if p.text not in _NAMING:
            return None
        return " ".join(f"{i + 1}. The red circle at the top left changed colour to blue." for i in range(n))
    return Policy(f"count-{n}", _index(COUNT_WORDS[n]), reply)


def _asks_emotion(p: Prompt) -> bool:
    """AC-Bench's prompt: it lists the eight labels."""
    return all(e in p.text for e in EMOTIONS)


def _label(emotion: str) -> Policy:
    return Policy(f"label-{emotion}", _index(emotion), lambda p: emotion if _asks_emotion(p) else None)


def _random_choice(p: Prompt, options: Sequence[str]) -> int:
    return _digest(p, "|".join(options)) % len(options)


def _random_reply(p: Prompt) -> str | None:
    if _asks_emotion(p):
        return EMOTIONS[_digest(p) % len(EMOTIONS)]
    return "1. The blue square at the bottom right was removed." if p.text in _NAMING else None


def _grey(p: Prompt) -> Prompt:
    return replace(p, images=tuple(Image.new("RGB", im.size, (128, 128, 128)) for im in p.images))


def _no_description(p: Prompt) -> Prompt:
    return replace(p, description=None, text=p.text.replace(DESCRIPTION_SLOT, ""))


def _blind_to_text(p: Prompt, options: Sequence[str]) -> int | None:
    """A model that reads only images has nothing to go on in a prompt without one: the first option."""
    return None if p.images or p.video else 0


def _blind_reply(p: Prompt) -> str | None:
    return None if p.images or p.video or not _asks_emotion(p) else EMOTIONS[0]


POLICIES: Final[dict[str, Policy]] = {
    **{f"letter-{x}": Policy(f"letter-{x}", _index(x)) for x in "ABCDEF"},
    "reject-visual": Policy("reject-visual", _option_with(OPTION_E)),
    "reject-audio": Policy("reject-audio", _option_with(OPTION_F)),
    "yes": Policy("yes", _index("Yes")),
    "no": Policy("no", _index("No")),
    "same": Policy("same", _symmetric(True)),
    "different": Policy("different", _symmetric(False)),
    **{f"count-{n}": _count(n) for n in (0, 1, 2, 5)},
    **{f"label-{e}": _label(e) for e in EMOTIONS},
    "image-only": Policy("image-only", _blind_to_text, _blind_reply, rewrite=_no_description),
    "text-only": Policy("text-only", rewrite=_grey),
    "random": Policy("random", _random_choice, _random_reply),
}


class PolicyVLM:
    """``inner`` answering by ``policy`` (module docstring); every other call is ``inner``'s."""

    def __init__(self, inner: VisionLanguageModel, policy: Policy) -> None:
        self._inner, self.policy = inner, policy
        self.spec = f"policy:{policy.name}@{inner.spec}"
        self.num_layers = inner.num_layers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _shown(self, prompts: Sequence[Prompt]) -> list[Prompt]:
        rewrite = self.policy.rewrite
        return [rewrite(p) for p in prompts] if rewrite is not None else list(prompts)

    def _answered(self, prompts: Sequence[Prompt], options: Sequence[str],
                  inner: Callable[[], torch.Tensor]) -> torch.Tensor:
        picks = [self.policy.choose(p, options) for p in prompts]
        out = inner() if any(k is None for k in picks) else torch.zeros(len(prompts), len(options))
        out = out.clone().float()
        for i, k in enumerate(picks):
            if k is not None:
                out[i] = OTHER
                out[i, k] = CHOSEN
        return out

    def option_logits(self, prompts: Sequence[Prompt], options: Sequence[str],
                      hooks: Hooks | None = None) -> torch.Tensor:
        shown = self._shown(prompts)
        return self._answered(prompts, options, lambda: self._inner.option_logits(shown, options, hooks))

    def decide(self, prompts: Sequence[Prompt], options: Sequence[str],
               hooks: Hooks | None = None) -> Decision:
        d = self._inner.decide(self._shown(prompts), options, hooks)
        return Decision(self._answered(prompts, options, lambda: d.logits), d.states)

    def states(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        return self._inner.states(self._shown(prompts), hooks)

    def answer_logprob(self, prompts: Sequence[Prompt], answers: Sequence[str],
                       hooks: Hooks | None = None) -> torch.Tensor:
        shown = self._shown(prompts)
        return self._answered(prompts, answers, lambda: self._inner.answer_logprob(shown, answers, hooks))

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Attentions:
        return self._inner.attentions(self._shown(prompts), hooks)

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> list[str]:
        replies = [self.policy.reply(p) for p in prompts]
        todo = [i for i, r in enumerate(replies) if r is None]
        if todo:
            inner = self._inner.generate(self._shown([prompts[i] for i in todo]), max_new_tokens, hooks)
            for i, text in zip(todo, inner, strict=True):
                replies[i] = text
        return [r or "" for r in replies]

    def fingerprint(self) -> dict[str, Any]:
        """The inner model's, marked: a cache must never serve the inner model's answers for these."""
        return {**self._inner.fingerprint(), "policy": self.policy.name}


def load(rest: str, **kwargs: Any) -> PolicyVLM:
    """The ``policy:`` prefix (entry point ``faithtests.models``): ``NAME`` or ``NAME@INNER``."""
    name, _, inner_spec = rest.partition("@")
    if name not in POLICIES:
        raise ValueError(f"policy:{rest}: unknown policy {name!r} (policies: {', '.join(POLICIES)})")
    inner = load_model(inner_spec or DEFAULT_INNER, **kwargs)
    if not isinstance(inner, VisionLanguageModel):
        raise TypeError(f"policy:{rest}: {inner_spec or DEFAULT_INNER} is not a VisionLanguageModel")
    return PolicyVLM(inner, POLICIES[name])
