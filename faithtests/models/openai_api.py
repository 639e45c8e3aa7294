"""``openai:MODEL@BASE_URL``: a model behind an OpenAI-compatible endpoint (vLLM, SGLang, ``transformers
serve``, a hosted API), the black-box half of the VLM protocol (issue 45).

What an endpoint gives is found once at load by a probe request (one small image, one answer token,
``logprobs``) and kept in :attr:`OpenAIModel.capabilities`:

- ``generate``: greedy answers (temperature 0, a fixed seed), the prompt's images as PNG data URLs in
  one user turn, the server applying the model's own chat template;
- ``option_logits``: the option letters' log-probabilities among the first answer token's
  ``top_logprobs``, where the endpoint returns them (``transformers serve`` accepts the parameter and
  returns none: then not applicable, with that reason). A letter outside the top ``k`` gets ``-inf``: the
  argmax over the options is still exact whenever one letter is listed, their softmax is not;
- hidden states, attention, hooks and full-answer log-probabilities: not applicable, with the reason.

The key is read from ``$FAITH_API_KEY`` (else ``$OPENAI_API_KEY``; a local server needs none); it is
never logged, fingerprinted or written. Retries with backoff on 429 / 5xx / timeouts are the ``openai``
client's own (``max_retries``); calls run ``concurrency`` at a time, answers in prompt order.
"""

from __future__ import annotations

import base64
import io
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from faithtests.models.errors import ModelSpecError, NotApplicable
from faithtests.models.interfaces import Attentions, Decision, Hooks, Prompt
from faithtests.models.prompting import user_text

if TYPE_CHECKING:
    import torch
    from PIL import Image

KEY_ENVS = ("FAITH_API_KEY", "OPENAI_API_KEY")
#: The most alternatives an OpenAI-compatible endpoint lists per token (OpenAI's and vLLM's cap).
TOP_LOGPROBS = 20
DEFAULT_CONCURRENCY = 4
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_RETRIES = 4
SEED = 0
T = TypeVar("T")


def parse_spec(rest: str) -> tuple[str, str]:
    """``MODEL@BASE_URL`` -> (model, base_url); the URL must be http(s) and end at its API root."""
    model, sep, url = rest.rpartition("@")
    if not sep or not model or not url.startswith(("http://", "https://")):
        raise ModelSpecError(f"openai:{rest}: expected openai:MODEL@BASE_URL, e.g. "
                             "openai:reference-vlm@http://127.0.0.1:8000/v1")
    return model, url.rstrip("/")


def data_url(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def chat_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """One user turn: the images, then the text with its description laid out as in-process."""
    content: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": data_url(im)}}
                                     for im in prompt.images]
    content.append({"type": "text", "text": user_text(prompt)})
    return [{"role": "user", "content": content}]


@dataclass
class OpenAIModel:
    """A served model; see the module doc. Build it with :func:`load`."""

    spec: str
    model: str
    base_url: str
    concurrency: int = DEFAULT_CONCURRENCY
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_RETRIES
    capabilities: dict[str, str] = field(default_factory=dict)  # feature -> "yes" or why not
    served: dict[str, str] = field(default_factory=dict)  # what the server says it is
    num_layers: int = 0  # no layers are visible through an endpoint
    _client: Any = None

    def __post_init__(self) -> None:
        from openai import OpenAI  # local: the api extra; the plugin loads this module only for openai:

        key = next((os.environ[k] for k in KEY_ENVS if os.environ.get(k)), "not-needed")
        self._client = OpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout_s,
                              max_retries=self.max_retries)

    # ------------------------------------------------------------------------------ calls
    def _complete(self, prompt: Prompt, max_tokens: int, logprobs: bool) -> Any:
        if prompt.video or prompt.audio is not None:
            raise NotApplicable(self.spec, "media_parts", "the openai: adapter sends images and text only "
                                "(no video or audio parts yet)")
        extra: dict[str, Any] = {"logprobs": True, "top_logprobs": TOP_LOGPROBS} if logprobs else {}
        return self._client.chat.completions.create(
            model=self.model, messages=chat_messages(prompt), max_tokens=max_tokens, temperature=0.0,
            seed=SEED, **extra)

    def _each(self, prompts: Sequence[Prompt], call: Callable[[Prompt], T]) -> list[T]:
        if len(prompts) <= 1 or self.concurrency <= 1:
            return [call(p) for p in prompts]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(call, prompts))

    def probe(self) -> None:
        """Find what the endpoint gives (module doc); raises on an endpoint that answers nothing."""
        from PIL import Image  # local: PIL is only needed once a model is loaded

        probe = Prompt(images=(Image.new("RGB", (8, 8), "white"),), text="Reply with the letter A.")
        try:
            with_image = self._complete(probe, 1, logprobs=True)
        except Exception as err:  # the server's own words go into the reason
            raise ModelSpecError(f"{self.spec}: the endpoint refused a one-image probe request: "
                                 f"{err}") from err
        self.served = {"model": str(getattr(with_image, "model", "") or self.model),
                       "system_fingerprint": str(getattr(with_image, "system_fingerprint", "") or "")}
        self.capabilities["images"] = "yes"
        self.capabilities["logprobs"] = "yes" if _top(with_image) else (
            "the endpoint accepted logprobs=True but returned no top_logprobs")

    def _need(self, feature: str) -> None:
        why = self.capabilities.get(feature, "not probed")
        if why != "yes":
            raise NotApplicable(self.spec, feature, why)

    # ------------------------------------------------------------------------------ the protocol
    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> list[str]:
        _no_hooks(self.spec, hooks)

        def one(p: Prompt) -> str:
            out = self._complete(p, max_new_tokens, logprobs=False)
            return str(out.choices[0].message.content or "").strip()
        return self._each(prompts, one)

    def option_logits(self, prompts: Sequence[Prompt], options: Sequence[str],
                      hooks: Hooks | None = None) -> torch.Tensor:
        import torch  # local: the VLM protocol returns tensors

        _no_hooks(self.spec, hooks)
        self._need("logprobs")

        def one(p: Prompt) -> list[float]:
            top = _top(self._complete(p, 1, logprobs=True))
            best: dict[str, float] = {}
            for token, logprob in top:  # " A" and "A" are the same letter; keep the likelier spelling
                key = token.strip()
                best[key] = max(best.get(key, -math.inf), logprob)
            return [best.get(o, -math.inf) for o in options]
        return torch.tensor(self._each(prompts, one), dtype=torch.float32)

    def decide(self, prompts: Sequence[Prompt], options: Sequence[str],
               hooks: Hooks | None = None) -> Decision:
        """The option logits and no states ([0, N, 0]: no layer is visible); a test that reads states
        asks :meth:`lacks` first and is not applicable."""
        import torch  # local: the VLM protocol returns tensors

        logits = self.option_logits(prompts, options, hooks)
        return Decision(logits=logits, states=torch.zeros(0, len(prompts), 0))

    def lacks(self, feature: str) -> str:
        """Why the endpoint lacks ``feature`` ("" if it has it): what a chat endpoint never shows, and
        what the probe at load found missing."""
        never = {"hidden_states": "a served model shows no hidden states",
                 "attention": "a served model shows no attention weights",
                 "residual_hooks": "a served model takes no inference-time hooks",
                 "logits_processors": "a served model takes no logits processors",
                 "patch_grid": "a served model shows no image tokens",
                 "caption_scores": "a chat endpoint scores no given caption"}
        if feature in never:
            return never[feature]
        found = self.capabilities.get(feature)
        return "" if found in (None, "yes") else str(found)

    def states(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        raise NotApplicable(self.spec, "hidden_states", "a served model shows no hidden states")

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Attentions:
        raise NotApplicable(self.spec, "attention", "a served model shows no attention weights")

    def answer_logprob(self, prompts: Sequence[Prompt], answers: Sequence[str],
                       hooks: Hooks | None = None) -> torch.Tensor:
        raise NotApplicable(self.spec, "answer_scores",
                            "a chat endpoint scores no given answer, only what it generates")

    def fingerprint(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": "openai-compatible endpoint", "base_url": self.base_url,
                "served": dict(self.served), "capabilities": dict(self.capabilities)}


def _top(response: Any) -> list[tuple[str, float]]:
    """(token, logprob) of the first generated token's alternatives; [] when the endpoint gave none."""
    try:
        content = response.choices[0].logprobs.content
        first = content[0]
    except (AttributeError, IndexError, TypeError):
        return []
    alts = list(first.top_logprobs or [])
    return [(str(a.token), float(a.logprob)) for a in alts] or [(str(first.token), float(first.logprob))]


def _no_hooks(spec: str, hooks: Hooks | None) -> None:
    if hooks is not None:
        raise NotApplicable(spec, "hooks", "a served model takes no inference-time hooks")


def load(rest: str, **_: Any) -> OpenAIModel:
    """Entry point of the ``openai`` prefix (``faithtests.models``): parse, connect, probe."""
    model, url = parse_spec(rest)
    vlm = OpenAIModel(spec=f"openai:{rest}", model=model, base_url=url)
    vlm.probe()
    return vlm
