"""Model adapters served by a pool of workers, each holding one copy of the model (``--faith-ray``).

The pooled adapters satisfy :class:`~faithtests.models.interfaces.ImageTextScorer` /
:class:`~faithtests.models.interfaces.VisionLanguageModel`. Every batched call is split into contiguous
chunks, one per worker (:func:`chunks`), and the results are concatenated in input order, on the CPU in
float32, exactly as the in-process adapter returns them. A :class:`Pool` is anything that runs a method
of the worker's model on one worker; :mod:`.ray_actors` implements it with Ray actors, the tests with a
list of local models. This module imports neither torch nor ray at load time.

Documented choices:
- Content-hash caches stay in the driver: a scorer's image/text embeddings go through driver-side
  :class:`~faithtests.models.cache.EncodeCache` s (each unique item is sent to one worker once), and a
  VLM scorer's pair scores through a driver-side dict; a dual encoder's ``similarity`` is computed in the
  driver from the cached embeddings, as the in-process adapter computes it. The persistent output store
  (``--faith-cache``) is not used by pooled models: the plugin refuses the combination (usage error).
- Hooks travel to the workers (pickled by the pool; Ray uses cloudpickle, so closures ship by value),
  except the ``logit_adjuster``, which is row-aligned with the whole call: it is stripped and applied in
  the driver to the concatenated logits (the in-process adapter applies it after its store too). A
  ``contrast``'s auxiliary prompts are split with their rows.
- Hooks with attention/FFN modifiers but no ``tag`` are, by the repo's convention, *recording* hooks
  (monitors, KL profiles) whose side effects must land in driver objects; hooks the pool cannot pickle
  cannot be shipped at all. Both run in-process on a driver copy of the model, loaded on first need, and
  each such call is counted in the fingerprint (``ray.in_process_calls``, by reason). So are reads of
  the HF ``model`` / ``processor`` attributes (the logit lens, :mod:`.lens`, reads the unembedding through
  them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from faithtests.models.capabilities import require_call
from faithtests.models.interfaces import Attentions, Decision, Hooks, Prompt, TokenSpans

if TYPE_CHECKING:
    import torch
    from PIL import Image

UNTAGGED = "hooks with modifiers but no tag (recording hooks: their side effects belong to the driver)"
UNPICKLABLE = "hooks that cannot be pickled"
ATTRIBUTE = "read of the HF model/processor (e.g. the logit lens)"


class Pool(Protocol):
    """Workers that each hold one copy of a model."""

    size: int

    def map(self, method: str, calls: Sequence[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[Any]:
        """``getattr(model, method)(*args, **kwargs)`` with ``calls[i]`` on worker ``i``, results in order."""
        ...

    def why_unshippable(self, obj: object) -> str | None:
        """None when ``obj`` can be sent to a worker, else why not."""
        ...


def chunks(n: int, k: int) -> list[range]:
    """``range(n)`` in at most ``k`` contiguous, non-empty chunks whose sizes differ by at most one."""
    if k < 1:
        raise ValueError(f"a pool needs at least one worker, got {k}")
    parts = min(n, k)
    base, extra = divmod(n, parts) if parts else (0, 0)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


def merge_attentions(parts: Sequence[Attentions]) -> Attentions:
    """Chunks' attentions as one call's: weights zero-padded on the right to the longest key axis (as
    the in-process adapter pads its rows) and concatenated; spans concatenated row by row."""
    import torch  # lazy: torch (module doc)

    width = max(p.weights[0].shape[-1] for p in parts)

    def pad(w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(w, (0, width - w.shape[-1]))

    layers = len(parts[0].weights)
    weights = [torch.cat([pad(p.weights[layer]) for p in parts]) for layer in range(layers)]
    # omni audio runs: a chunk without audio has none at all, where the whole call has [] per such row
    heard = any(p.spans.audio_runs for p in parts)
    spans = TokenSpans(
        image=[x for p in parts for x in p.spans.image],
        description=[x for p in parts for x in p.spans.description],
        length=[x for p in parts for x in p.spans.length],
        image_runs=[x for p in parts for x in p.spans.image_runs],
        offset=[x for p in parts for x in p.spans.offset],
        audio_runs=[x for p in parts for x in (p.spans.audio_runs or [[]] * len(p.spans.length))]
        if heard else [],
    )
    return Attentions(weights=weights, spans=spans)


class _Pooled:
    """What both pooled adapters share: the pool, the workers' metadata, the split-and-concatenate."""

    def __init__(self, pool: Pool, meta: dict[str, Any], info: dict[str, Any],
                 local: Callable[[], Any] | None = None) -> None:
        self.pool = pool
        self.spec: str = meta["spec"]
        self._meta = meta
        self._info = dict(info)  # goes into the fingerprint under "ray"
        self._local_factory = local
        self._local: Any = None
        self.in_process_calls: dict[str, int] = {}

    def _split(self, method: str, n: int, args: Callable[[range], tuple[Any, ...]],
               kwargs: dict[str, Any] | None = None) -> list[Any]:
        """``method`` on each worker with the arguments of its chunk of ``n`` rows; n == 0 goes whole to
        one worker, so the model raises its own error."""
        parts = chunks(n, self.pool.size) or [range(0)]
        return self.pool.map(method, [(args(part), dict(kwargs or {})) for part in parts])

    def local(self, reason: str) -> Any:
        """The driver's own copy of the model (loaded on first need); counts the call under ``reason``."""
        if self._local_factory is None:
            raise RuntimeError(f"{self.spec}: {reason} must run in-process, and this pool has no local "
                               "loader")
        if self._local is None:
            self._local = self._local_factory()
        self.in_process_calls[reason] = self.in_process_calls.get(reason, 0) + 1
        return self._local

    def fingerprint(self) -> dict[str, Any]:
        base = dict(self._meta["fingerprint"])
        return {**base, "ray": {**self._info, "in_process_calls": dict(self.in_process_calls)}}

    def truncation_info(self) -> dict[str, dict[str, Any]]:
        """Summed over the workers (each saw its own chunks)."""
        merged: dict[str, dict[str, Any]] = {}
        for info in self.pool.map("truncation_info", [((), {})] * self.pool.size):
            for kind, v in dict(info).items():
                m = merged.setdefault(kind, {"truncated": 0, "checked": 0, "limit": v.get("limit"),
                                             "longest_tokens": 0})
                m["truncated"] += int(v.get("truncated") or 0)
                m["checked"] += int(v.get("checked") or 0)
                m["longest_tokens"] = max(int(m["longest_tokens"] or 0), int(v.get("longest_tokens") or 0))
        return merged


class PooledScorer(_Pooled):
    """An :class:`ImageTextScorer` whose encoders run on the pool (module doc: caches in the driver)."""

    def __init__(self, pool: Pool, meta: dict[str, Any], info: dict[str, Any],
                 local: Callable[[], Any] | None = None) -> None:
        from faithtests.models.cache import EncodeCache, PairScores, image_key, text_key  # lazy: torch

        super().__init__(pool, meta, info, local)
        self.score_kind: str = meta.get("score_kind", "cosine")
        worker_batch = int(meta.get("batch_size") or 16)
        # a suite sizes its progress chunks from batch_size: a chunk then gives every worker its share
        self.batch_size = worker_batch * pool.size
        big = 1 << 30  # the driver's caches hand every miss of a call to the pool at once
        self.image_cache: EncodeCache[Image.Image] = EncodeCache(
            f"{self.spec}|image", image_key, lambda xs: self._encode("encode_images", xs), big)
        self.text_cache: EncodeCache[str] = EncodeCache(
            f"{self.spec}|text", text_key, lambda xs: self._encode("encode_texts", xs), big)
        self.pairs = PairScores()

    def _encode(self, method: str, items: list[Any]) -> torch.Tensor:
        import torch  # lazy: torch (module doc)

        parts = self._split(method, len(items), lambda r: ([items[i] for i in r],))
        return torch.cat([p.float().cpu() for p in parts])

    def encode_images(self, images: Sequence[Image.Image]) -> torch.Tensor:
        from faithtests.models.scorer_base import check_images  # lazy: torch (module doc)

        check_images(images)
        return self.image_cache.get(list(images))

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        from faithtests.models.scorer_base import check_texts  # lazy: torch (module doc)

        check_texts(texts)
        return self.text_cache.get(list(texts))

    def similarity(self, images: Sequence[Image.Image], texts: Sequence[str]) -> torch.Tensor:
        """Cosine scorers: from the cached embeddings, as in-process. Other scores (a VLM's caption
        log-likelihood): each unique pair scored once, on the pool."""
        import torch  # lazy: torch (module doc)

        from faithtests.models.scorer_base import check_images, check_texts  # lazy: torch (module doc)

        if len(images) != len(texts):
            raise ValueError(f"similarity: {len(images)} images but {len(texts)} texts")
        if self.score_kind == "cosine":
            return (self.encode_images(images) * self.encode_texts(texts)).sum(dim=-1)
        check_images(images)
        check_texts(texts)

        def score(rows: list[int]) -> list[float]:
            parts = self._split("similarity", len(rows), lambda r: ([images[rows[i]] for i in r],
                                                                     [texts[rows[i]] for i in r]))
            return [float(s) for s in torch.cat([p.float().cpu() for p in parts]).tolist()]

        return self.pairs.get(images, texts, score)

    def similarity_matrix(self, images: Sequence[Image.Image], texts: Sequence[str]) -> torch.Tensor:
        if self.score_kind != "cosine":  # a VLM's caption log-likelihood has no embedding product
            raise NotImplementedError(f"similarity_matrix: a {self.score_kind} scorer has no embeddings")
        return self.encode_images(images) @ self.encode_texts(texts).T

    def cache_stats(self) -> dict[str, int]:
        return {"images_encoded": self.image_cache.stats.encoded,
                "texts_encoded": self.text_cache.stats.encoded, "image_hits": self.image_cache.stats.hits,
                "text_hits": self.text_cache.stats.hits,
                "pairs_scored": self.pairs.stats.encoded, "pair_hits": self.pairs.stats.hits}


class PooledVLM(_Pooled):
    """A :class:`VisionLanguageModel` whose calls run on the pool (module doc: hooks); ``scorer`` builds
    the same workers' VLM-as-scorer view (:meth:`as_scorer`)."""

    def __init__(self, pool: Pool, meta: dict[str, Any], info: dict[str, Any],
                 local: Callable[[], Any] | None = None,
                 scorer: Callable[[], PooledScorer] | None = None) -> None:
        super().__init__(pool, meta, info, local)
        self._scorer = scorer
        self.num_layers: int = int(meta["num_layers"])
        self.batch_size = int(meta.get("batch_size") or 16)
        self.answer_prefix: str = str(meta.get("answer_prefix", ""))
        #: Whether prompts may carry audio and video (the workers' omni adapter), as in process.
        self.accepts_audio = bool(meta.get("accepts_audio", False))
        self.audio_window_s: float | None = meta.get("audio_window_s")
        self._lacks = {str(k): str(v) for k, v in dict(meta.get("lacks") or {}).items() if v}

    def lacks(self, feature: str) -> str:
        """What the workers' adapter lacks (found at its load), as in process."""
        return self._lacks.get(feature, "")

    def as_scorer(self) -> PooledScorer:
        """The VLM through its caption log-likelihood, on the same workers (no second copy)."""
        if self._scorer is None:
            raise RuntimeError(f"{self.spec}: this pool has no scorer view")
        return self._scorer()

    @property
    def model(self) -> Any:
        return self.local(ATTRIBUTE).model

    @property
    def processor(self) -> Any:
        return self.local(ATTRIBUTE).processor

    def lens_probs(self, states: Any, options: Sequence[str]) -> Any:
        """The logit lens, in-process (it reads the model's own norm and unembedding)."""
        return self.local(ATTRIBUTE).lens_probs(states, options)

    def _local_reason(self, hooks: Hooks | None) -> str | None:
        if hooks is None:
            return None
        if (hooks.attention or hooks.ffn) and hooks.tag is None:
            return UNTAGGED
        why = self.pool.why_unshippable(replace(hooks, logit_adjuster=None))
        return None if why is None else f"{UNPICKLABLE} ({why})"

    def _call(self, method: str, n: int, rows: Callable[[range], tuple[Any, ...]],
              hooks: Hooks | None, combine: Callable[[list[Any]], Any], local_args: tuple[Any, ...],
              **kwargs: Any) -> Any:
        """One protocol call: in-process when the hooks cannot be shipped, else split over the pool."""
        require_call(self, method, hooks)  # as in process: what the model lacks, before any row runs
        reason = self._local_reason(hooks)
        if reason is not None:
            return getattr(self.local(reason), method)(*local_args, hooks=hooks, **kwargs)
        shipped = None if hooks is None else replace(hooks, logit_adjuster=None)
        if shipped is not None and shipped.contrast is not None:
            contrast = shipped.contrast
            parts = chunks(n, self.pool.size) or [range(0)]
            if len(contrast.aux) != n:  # as in process: one aux prompt per row, never cut silently
                raise ValueError(f"{method}: {len(contrast.aux)} contrast prompts for {n} rows")
            calls = [(rows(p), {**kwargs, "hooks": replace(
                shipped, contrast=replace(contrast, aux=tuple(contrast.aux[i] for i in p)))})
                     for p in parts]
            return combine(self.pool.map(method, calls))
        return combine(self._split(method, n, rows, {**kwargs, "hooks": shipped}))

    def decide(self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
               ) -> Decision:
        import torch  # lazy: torch (module doc)

        def combine(parts: list[Decision]) -> Decision:
            return Decision(logits=torch.cat([p.logits for p in parts]),
                            states=torch.cat([p.states for p in parts], dim=1))

        reason = self._local_reason(hooks)
        if reason is not None:  # the local adapter applies the adjuster itself
            return self.local(reason).decide(prompts, options, hooks)  # type: ignore[no-any-return]
        out: Decision = self._call("decide", len(prompts),
                                   lambda r: ([prompts[i] for i in r], tuple(options)), hooks, combine,
                                   (prompts, options))
        if hooks is not None and hooks.logit_adjuster is not None and options:
            out = Decision(logits=hooks.logit_adjuster(out.logits, list(options)), states=out.states)
        return out

    def option_logits(self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
                      ) -> torch.Tensor:
        from faithtests.models.hooks import refuse_contrast  # lazy: torch (module doc)

        if not options:
            raise ValueError("option_logits needs at least one option letter")
        refuse_contrast(hooks, "option_logits")
        return self.decide(prompts, options, hooks).logits

    def states(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        import torch  # lazy: torch (module doc)

        out: Any = self._call("states", len(prompts), lambda r: ([prompts[i] for i in r],), hooks,
                          lambda ps: torch.cat(ps, dim=1), (prompts,))
        return out  # type: ignore[no-any-return]

    def next_token_logits(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        import torch  # lazy: torch (module doc)

        out: Any = self._call("next_token_logits", len(prompts), lambda r: ([prompts[i] for i in r],), hooks,
                          torch.cat, (prompts,))
        return out  # type: ignore[no-any-return]

    def answer_logprob(self, prompts: Sequence[Prompt], answers: Sequence[str], hooks: Hooks | None = None
                       ) -> torch.Tensor:
        import torch  # lazy: torch (module doc)

        out: Any = self._call("answer_logprob", len(prompts),
                              lambda r: ([prompts[i] for i in r], list(answers)), hooks, torch.cat,
                              (prompts, answers))
        return out  # type: ignore[no-any-return]

    def caption_logprob(self, images: Sequence[Image.Image], captions: Sequence[str],
                        instruction: str | None = None) -> torch.Tensor:
        import torch  # lazy: torch (module doc)

        if len(images) != len(captions):
            raise ValueError(f"caption_logprob: {len(images)} images but {len(captions)} captions")
        extra = {} if instruction is None else {"instruction": instruction}
        parts = self._split("caption_logprob", len(images),
                            lambda r: ([images[i] for i in r], [captions[i] for i in r]), extra)
        return torch.cat(parts)

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Attentions:
        out: Any = self._call("attentions", len(prompts), lambda r: ([prompts[i] for i in r],), hooks,
                          merge_attentions, (prompts,))
        return out  # type: ignore[no-any-return]

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32, hooks: Hooks | None = None
                 ) -> list[str]:
        def combine(parts: list[list[str]]) -> list[str]:
            return [text for part in parts for text in part]

        out: Any = self._call("generate", len(prompts), lambda r: ([prompts[i] for i in r],), hooks, combine,
                          (prompts,), max_new_tokens=max_new_tokens)
        return out  # type: ignore[no-any-return]

    def cache_stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for stats in self.pool.map("cache_stats", [((), {})] * self.pool.size):
            for k, v in dict(stats).items():
                total[k] = total.get(k, 0) + int(v)
        return total
