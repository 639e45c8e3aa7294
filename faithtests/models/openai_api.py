"""``openai:MODEL@BASE_URL``: a model behind an OpenAI-compatible endpoint (vLLM, SGLang, ``transformers
serve``, a hosted API), the black-box half of the VLM protocol (issue 45).

What an endpoint gives is found once at load by a probe request (one small image, one answer token,
``logprobs``) and kept in :attr:`OpenAIModel.capabilities`:

- ``generate``: greedy answers (temperature 0, a fixed seed), the prompt's images as PNG data URLs in
  one user turn, the server applying the model's own chat template;
- ``option_logits``: the option letters' log-probabilities among the first answer token's
  ``top_logprobs``, where the endpoint returns them (``transformers serve`` accepts the parameter and
  returns none: then not applicable, with that reason). An endpoint lists at most 20 alternatives; a
  letter outside them is scored exactly where the endpoint scores a given reply (vLLM's
  ``prompt_logprobs`` with the letter as the assistant's reply, ``continue_final_message``: the last
  prompt token's log-probability), else it gets the lowest listed log-probability, nudged below it: an
  upper bound, so the argmax over the options stays exact whenever one letter is listed; their softmax
  is then a bound, and :attr:`OpenAIModel.bounded` counts such letters;
- ``media_parts``: whether the endpoint takes a clip with its soundtrack (:mod:`.api_media`, one more probe
  request); then :attr:`OpenAIModel.accepts_audio`, and a suite sends it clips with their soundtracks as
  to an in-process omni model, else a clip or audio prompt is not applicable with the server's words;
- hidden states, attention, hooks and full-answer log-probabilities: not applicable, with the reason.

The key is read from ``$FAITH_API_KEY`` (else ``$OPENAI_API_KEY``; a local server needs none); it is
never logged, fingerprinted or written. Retries with backoff on 429 / 5xx / timeouts are the ``openai``
client's own (``max_retries``); calls run ``concurrency`` at a time, answers in prompt order. A call
that still fails raises :class:`~faithtests.models.errors.EndpointError` with what the server said.

Every answer goes through the run's output cache (``--faith-cache``) when there is one, written in
chunks as they complete: a re-run asks the endpoint nothing, and a run stopped by a dead server keeps
what it was told. An endpoint has no weights to hash: its rows are keyed by the base URL, the served
model name, the server's version and ``system_fingerprint`` (what the probe found). A server that serves
other weights under the same name and version must be cached apart (another ``--faith-cache``).

``--faith-api-estimate`` (:mod:`.api_estimate`): after its probe, the model sends nothing; each call
counts the prompts it would send (and their images) and the ones the output cache already holds, and
answers with placeholders ("" / a zero row) that are never stored (:meth:`OpenAIModel.estimate_rows`).
"""

from __future__ import annotations

import base64
import io
import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from faithtests.models.api_estimate import Tally, add_model, estimating
from faithtests.models.api_media import has_media, media_parts, media_request, probe_prompt
from faithtests.models.api_replies import server_says, server_version, top_logprobs
from faithtests.models.capabilities import require
from faithtests.models.errors import EndpointError, ModelSpecError, NotApplicable
from faithtests.models.interfaces import Attentions, Decision, Hooks, Prompt
from faithtests.models.prompt_keys import prompt_key
from faithtests.models.prompting import user_text
from faithtests.models.store import ARRAY_CODEC, TEXT_CODEC, OutputStore, digest
from faithtests.progress import call_share, model_call

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
#: What a chat endpoint never shows, feature -> why (``lacks``; the calls that need it raise with it).
NEVER = {"hidden_states": "a served model shows no hidden states",
         "attention": "a served model shows no attention weights",
         "residual_hooks": "a served model takes no inference-time hooks",
         "logits_processors": "a served model takes no logits processors",
         "patch_grid": "a served model shows no image tokens",
         "caption_scores": "a chat endpoint scores no given caption",
         "answer_scores": "a chat endpoint scores no given answer, only what it generates"}
#: Rows per output-cache write: a run stopped mid-way loses at most this many answers.
CACHE_CHUNK = 16
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
    """One user turn: the images, the video and audio (:mod:`.api_media`), then the text with its
    description laid out as in-process."""
    content: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": data_url(im)}}
                                     for im in prompt.images]
    content += media_parts(prompt)
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
    bounded: int = 0  # option letters given an upper bound, not a score (module doc)
    store: OutputStore | None = None
    store_namespace: str | None = None
    max_requests: int | None = None  # the run's request budget (None: no limit)
    requests: int = 0  # requests sent so far (the probe's included)
    probe_requests: int = 0  # of which the probe's at load
    failed: str = ""  # why the endpoint stopped answering: every later call fails at once with it
    estimating: bool = False  # --faith-api-estimate: count, never send (after the probe)
    _tally: Tally = field(default_factory=Tally)
    _planned: set[tuple[str, str]] = field(default_factory=set)  # (kind, prompt key) counted so far
    _client: Any = None
    _lock: Any = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        from openai import OpenAI  # local: the api extra; the plugin loads this module only for openai:

        key = next((os.environ[k] for k in KEY_ENVS if os.environ.get(k)), "not-needed")
        self._client = OpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout_s,
                              max_retries=self.max_retries)

    # ------------------------------------------------------------------------------ calls
    @property
    def accepts_audio(self) -> bool:
        """Whether the endpoint took the probe's clip with its soundtrack (:mod:`.api_media`): then a
        suite sends it each clip with its audio, as to an in-process omni model."""
        return self.capabilities.get("media_parts") == "yes"

    def _sendable(self, prompt: Prompt) -> None:
        if has_media(prompt) and not self.accepts_audio:
            raise NotApplicable(self.spec, "media_parts", self.capabilities.get(
                "media_parts", "the endpoint was not probed for video and audio parts"))

    def _complete(self, prompt: Prompt, max_tokens: int, logprobs: bool) -> Any:
        self._sendable(prompt)
        return self._send(prompt, max_tokens, logprobs)

    def _send(self, prompt: Prompt, max_tokens: int, logprobs: bool) -> Any:
        """One greedy chat completion of ``prompt`` with the request fields its media need."""
        extra: dict[str, Any] = {"logprobs": True, "top_logprobs": TOP_LOGPROBS} if logprobs else {}
        if media := media_request(prompt):
            extra["extra_body"] = media
        return self._create(messages=chat_messages(prompt), max_tokens=max_tokens, temperature=0.0,
                            seed=SEED, **extra)

    def configure(self, concurrency: int | None = None, timeout_s: float | None = None,
                  max_requests: int | None = None) -> None:
        """The run's endpoint settings (``--faith-api-*``), set after load."""
        self.concurrency = concurrency or self.concurrency
        self.max_requests = max_requests
        if timeout_s:
            self.timeout_s = timeout_s
            self._client = self._client.with_options(timeout=timeout_s)

    def _create(self, **request: Any) -> Any:
        """One chat completion; what still fails after the client's retries names the model. A server
        that stopped answering (connection lost, timed out) or a spent budget fails every later call at
        once with the same reason, instead of each waiting out its retries."""
        from openai import APIConnectionError, APIError  # local: the api extra

        if self.estimating:  # never reached through the protocol calls (estimate_rows): a last guard
            raise EndpointError(f"{self.spec}: --faith-api-estimate sends nothing past the probe")
        with self._lock:
            if not self.failed and self.max_requests is not None and self.requests >= self.max_requests:
                self.failed = (f"{self.spec}: the run's budget of {self.max_requests} requests is spent "
                               "(--faith-api-max-requests); answers so far are in the output cache: a re-run "
                               "with the same --faith-cache asks only for the rest")
            if self.failed:
                raise EndpointError(self.failed)
            self.requests += 1
        try:
            return self._client.chat.completions.create(model=self.model, **request)
        except APIError as err:
            why = f"{self.spec}: {server_says(err)}"
            if isinstance(err, APIConnectionError):  # the timeout error is one: the server is gone or hung
                with self._lock:
                    self.failed = self.failed or f"{why} (the endpoint stopped answering: later calls fail)"
            raise EndpointError(why) from err
        except ValueError as err:  # a 200 whose body is not a JSON chat completion (a proxy's error page)
            raise EndpointError(f"{self.spec}: the reply is not a JSON chat completion: {err}") from err

    def _each(self, prompts: Sequence[Prompt], call: Callable[[Prompt], T]) -> list[T]:
        if len(prompts) <= 1 or self.concurrency <= 1:
            return [call(p) for p in prompts]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(call, prompts))

    def use_store(self, store: OutputStore) -> None:
        """Answers through ``store`` (module doc), keyed by what identifies the served model."""
        self.store = store
        self.store_namespace = digest({"adapter": "openai", "base_url": self.base_url, "model": self.model,
                                       "served": self.served, "seed": SEED})

    def _rows(self, kind: str, prompts: Sequence[Prompt], call: Callable[[Prompt], T],
              codec: tuple[Callable[[T], bytes], Callable[[bytes], T]], blank: T, more: int = 0) -> list[T]:
        """``call`` per prompt, through the output store in chunks (module doc); one progress stage over
        all the prompts (rate and time left), advanced as each chunk is answered or read back. In
        estimate mode, :meth:`estimate_rows` instead (``blank``, ``more``: its placeholder and bound)."""
        if self.estimating:
            return self.estimate_rows(kind, prompts, codec, blank, more)

        def compute(chunk: Sequence[Prompt]) -> Callable[[list[int]], list[T]]:
            return lambda idx: self._each([chunk[i] for i in idx], call)

        out: list[T] = []
        with model_call(f"endpoint {kind}", len(prompts), model=self.spec):
            for start in range(0, len(prompts), CACHE_CHUNK):
                chunk = prompts[start:start + CACHE_CHUNK]
                if self.store is None or self.store_namespace is None:
                    out += compute(chunk)(list(range(len(chunk))))
                else:
                    keys = [prompt_key(p) for p in chunk]
                    out += self.store.rows(self.store_namespace, f"{self.store_namespace}|{kind}", keys,
                                           compute(chunk), codec)
                call_share(len(out), len(prompts))
        return out

    def start_estimate(self) -> None:
        """Estimate mode from now on (:mod:`.api_estimate`): no further request is sent."""
        self.estimating = True
        add_model(self)

    def tally(self) -> Tally:
        """What estimate mode counted so far, and the requests really sent (the probe's)."""
        return Tally(**{**self._tally.as_dict(), "sent": self.requests})

    def estimate_rows(self, kind: str, prompts: Sequence[Prompt],
                      codec: tuple[Callable[[T], bytes], Callable[[bytes], T]], blank: T,
                      more: int = 0) -> list[T]:
        """Estimate mode: nothing is sent. A prompt the output cache holds is read back and counted
        ``cached``; any other is counted as a request the run would send (with its images, and ``more``:
        the most further requests its answer may cost) and answered with ``blank``, never stored. Each
        (kind, prompt) counts once, as the real run asks it once (a repeat is answered from the store);
        without a store every prompt counts. A prompt the endpoint cannot take is not applicable, as in
        the real run."""
        ns = f"{self.store_namespace}|{kind}" if self.store is not None and self.store_namespace else None
        keys = [prompt_key(p) for p in prompts]
        held = self.store.get(ns, keys) if self.store is not None and ns is not None else {}
        out: list[T] = []
        for p, k in zip(prompts, keys, strict=True):
            first = ns is None or (kind, k) not in self._planned
            self._planned.add((kind, k))
            if k in held:
                self._tally.cached += first
                out.append(codec[1](held[k]))
                continue
            self._sendable(p)
            if first:
                self._tally.requests += 1
                self._tally.images += len(p.images)
                self._tally.more += more
            out.append(blank)
        return out

    def probe(self) -> None:
        """Find what the endpoint gives (module doc); raises on an endpoint that answers nothing."""
        from PIL import Image  # local: PIL is only needed once a model is loaded

        probe = Prompt(images=(Image.new("RGB", (8, 8), "white"),), text="Reply with the letter A.")
        client, self._client = self._client, self._client.with_options(max_retries=1)  # a wrong URL: fast
        try:
            with_image = self._complete(probe, 1, logprobs=True)
        except Exception as err:  # the server's own words go into the reason
            raise ModelSpecError(f"{self.spec}: the endpoint refused a one-image probe request: "
                                 f"{server_says(err)}{self._served_models()}") from err
        finally:
            self._client = client
        self.served = {"model": str(getattr(with_image, "model", "") or self.model),
                       "system_fingerprint": str(getattr(with_image, "system_fingerprint", "") or "")}
        self.served["version"] = server_version(self.base_url)
        self.capabilities["images"] = "yes"
        self.capabilities["logprobs"] = "yes" if top_logprobs(with_image) else (
            "the endpoint accepted logprobs=True but returned no top_logprobs")
        self.capabilities["reply_scores"] = self._probe_reply_scores(probe)
        self.capabilities["media_parts"] = self._probe_media()
        self.probe_requests = self.requests

    def _probe_media(self) -> str:
        """"yes" when the endpoint takes a clip with its soundtrack (:mod:`.api_media`), else why not."""
        try:
            self._send(probe_prompt(), 1, logprobs=False)
        except Exception as err:  # an endpoint without video or audio input: its own words
            return f"the endpoint refused a video with its soundtrack: {server_says(err)}"
        return "yes"

    def _probe_reply_scores(self, probe: Prompt) -> str:
        """"yes" when the endpoint scores a given one-letter reply (module doc), else why not."""
        try:
            scored = self._reply_logprob(probe, "A")
        except Exception as err:  # an endpoint that refuses the extra parameters: its own words
            return f"the endpoint refused prompt_logprobs: {server_says(err)}"
        return "yes" if scored is not None else (
            "the endpoint returned no prompt_logprobs ending in the reply's letter")

    def _reply_logprob(self, prompt: Prompt, letter: str) -> float | None:
        """log P(letter | prompt) from the last prompt token of a reply that is just ``letter``; None
        when the endpoint gives no such score (or the letter is not one token there)."""
        messages = [*chat_messages(prompt), {"role": "assistant", "content": letter}]
        # a clip's own request fields too (every frame, its soundtrack interleaved): the same prompt
        out = self._create(
            messages=messages, max_tokens=1, temperature=0.0, seed=SEED,
            extra_body={**media_request(prompt), "prompt_logprobs": 0, "continue_final_message": True,
                        "add_generation_prompt": False})
        rows = (out.model_extra or {}).get("prompt_logprobs") or []
        last = rows[-1] if rows and isinstance(rows[-1], dict) else {}
        for entry in last.values():  # {token_id: {logprob, rank, decoded_token}}: the prompt's own token
            if isinstance(entry, dict) and str(entry.get("decoded_token", "")).strip() == letter:
                return float(entry["logprob"])
        return None

    def _served_models(self) -> str:
        """'; it serves: a, b' when the endpoint lists its models (a wrong MODEL is the usual mistake)."""
        try:
            names = [m.id for m in self._client.models.list()]
        except Exception:  # the endpoint is down or lists nothing: the probe's own error says enough
            return ""
        return f"; it serves: {', '.join(names)} (the MODEL in openai:MODEL@BASE_URL)" if names else ""

    # ------------------------------------------------------------------------------ the protocol
    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> list[str]:
        _no_hooks(self.spec, hooks)

        def one(p: Prompt) -> str:  # a refusal (no content) is an empty reply: the protocol counts it
            out = self._complete(p, max_new_tokens, logprobs=False)
            try:
                return str(out.choices[0].message.content or "").strip()
            except (AttributeError, IndexError, TypeError) as err:
                raise EndpointError(f"{self.spec}: the reply is not a chat completion: {out!r:.300}") from err
        return self._rows(f"generate/{max_new_tokens}", prompts, one, TEXT_CODEC, "")

    def option_logits(self, prompts: Sequence[Prompt], options: Sequence[str],
                      hooks: Hooks | None = None) -> torch.Tensor:
        import torch  # local: the VLM protocol returns tensors

        _no_hooks(self.spec, hooks)
        require(self, "logprobs")  # found at load: transformers serve returns none

        def one(p: Prompt) -> torch.Tensor:
            top = top_logprobs(self._complete(p, 1, logprobs=True))
            best: dict[str, float] = {}
            for token, logprob in top:  # " A" and "A" are the same letter; keep the likelier spelling
                key = token.strip()
                best[key] = max(best.get(key, -math.inf), logprob)
            row = [best[o] if o in best else self._unlisted(p, o, top) for o in options]
            return torch.tensor(row, dtype=torch.float32)
        # estimate mode: a zero row; where replies are scored, a letter outside the top 20 costs a request
        more = len(options) if self.capabilities.get("reply_scores") == "yes" else 0
        rows = self._rows(f"option_logits/{','.join(options)}", prompts, one, ARRAY_CODEC,
                          torch.zeros(len(options), dtype=torch.float32), more)
        return torch.stack(rows) if rows else torch.zeros(0, len(options))

    def _unlisted(self, prompt: Prompt, letter: str, top: list[tuple[str, float]]) -> float:
        """A letter outside the listed alternatives: its exact score where the endpoint gives one, else
        an upper bound just under the lowest listed one (module doc)."""
        if self.capabilities.get("reply_scores") == "yes":
            exact = self._reply_logprob(prompt, letter)
            if exact is not None:
                return exact
        if not top:
            raise EndpointError(f"{self.spec}: a reply came back without the log-probabilities it "
                                "returned at load (top_logprobs)")
        with self._lock:  # rows are answered on several threads
            self.bounded += 1
        return math.nextafter(min(lp for _, lp in top), -math.inf)

    def decide(self, prompts: Sequence[Prompt], options: Sequence[str],
               hooks: Hooks | None = None) -> Decision:
        """The option logits and no states ([0, N, 0]: no layer is visible); a test that reads states
        asks :meth:`lacks` first and is not applicable."""
        import torch  # local: the VLM protocol returns tensors

        logits = self.option_logits(prompts, options, hooks)
        return Decision(logits=logits, states=torch.zeros(0, len(prompts), 0))

    def lacks(self, feature: str) -> str:
        """Why the endpoint lacks ``feature`` ("" if it has it): what a chat endpoint never shows
        (:data:`NEVER`), and what the probe at load found missing."""
        if feature in NEVER:
            return NEVER[feature]
        found = self.capabilities.get(feature)
        return "" if found in (None, "yes") else str(found)

    def states(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        raise NotApplicable(self.spec, "hidden_states", NEVER["hidden_states"])

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Attentions:
        raise NotApplicable(self.spec, "attention", NEVER["attention"])

    def answer_logprob(self, prompts: Sequence[Prompt], answers: Sequence[str],
                       hooks: Hooks | None = None) -> torch.Tensor:
        raise NotApplicable(self.spec, "answer_scores", NEVER["answer_scores"])

    def fingerprint(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": "openai-compatible endpoint", "base_url": self.base_url,
                "served": dict(self.served), "capabilities": dict(self.capabilities)}


def _no_hooks(spec: str, hooks: Hooks | None) -> None:
    if hooks is not None:
        raise NotApplicable(spec, "hooks", "a served model takes no inference-time hooks")


def load(rest: str, **_: Any) -> OpenAIModel:
    """Entry point of the ``openai`` prefix (``faithtests.models``): parse, connect, probe."""
    model, url = parse_spec(rest)
    vlm = OpenAIModel(spec=f"openai:{rest}", model=model, base_url=url)
    vlm.probe()
    if estimating():  # --faith-api-estimate: the probe's requests are the last ones sent
        vlm.start_estimate()
    return vlm
