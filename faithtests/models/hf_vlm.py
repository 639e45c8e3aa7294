"""Hugging Face generative VLMs (``AutoModelForImageTextToText`` + ``AutoProcessor``) behind
:class:`~faithtests.models.interfaces.VisionLanguageModel`. Conventions (documented choices):
- Prompts go through the processor's own chat template as one user turn with the generation prompt
  (:mod:`.prompting`): the last prompt position is the answer position.
- ``option_logits``: next-token logits there for each option letter's token (``answer_prefix + letter``;
  each must be exactly one token, else :class:`OptionTokenError`).
- ``states``: every decoder layer's output at that position, [L, N, D], without the embedding output;
  the last entry is the last layer's raw output *before* the final norm (the residual stream).
- Batches are right-padded; rows with identical images share one prefix forward (:mod:`.prefix`) unless
  ``prefix_cache=False`` or an attention modifier is active.
- Hooks: attention modifiers and captures through the registered attention function (:mod:`.hooks`),
  MLP scales and FFN modifiers through forward hooks, the logit adjuster on the option logits only; a
  contrast in ``generate`` only (others refuse it), greedy and left-padded (:mod:`.generation`).
- What it lacks (:mod:`.capabilities`) is found at load; a call that needs it is not applicable."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from faithtests.models.attention_rows import ATTENTION_CODEC, AttentionRow, assemble
from faithtests.models.cache import checkpoint_sha256, content_sha256, text_key
from faithtests.models.capabilities import require, require_call, stored_lacks
from faithtests.models.checks import header_parameter_count
from faithtests.models.generation import captured_rows, contrast_aux, greedy_texts
from faithtests.models.hf_loading import DESCRIPTION_KEYS, LoadedVLM, describe_vlm, load_vlm
from faithtests.models.hooks import refuse_contrast
from faithtests.models.interfaces import Attentions, Decision, Hooks, Prompt
from faithtests.models.lens import LensUnsupported
from faithtests.models.lens import lens_probs as logit_lens
from faithtests.models.prefix import ForwardRunner, Reduce
from faithtests.models.prompt_keys import caption_keys, check_prompts, image_groups, prompt_keys
from faithtests.models.prompting import EncodedBatch, encode_batch, encode_with_answers, option_token_ids
from faithtests.models.store import (
    ARRAY_CODEC,
    TEXT_CODEC,
    OutputStore,
    check_described,
    hooks_key,
    model_namespace,
)
from faithtests.models.truncation import TruncationCounter, hf_lengths, known_limit
from faithtests.progress import call_name, call_share, counted_call

if TYPE_CHECKING:
    from PIL import Image

#: Instruction of the VLM-as-scorer prompt (caption log-likelihood given the image).
DEFAULT_INSTRUCTION = "Describe the image."


class HFVisionLanguageModel:
    """A loaded image-text-to-text model; construct through :func:`faithtests.models.registry.load_model`.

    The weights and processor are loaded in the constructor; :meth:`from_store` defers them when the
    run's ``--faith-cache`` store holds the description this adapter stored when it last loaded this exact
    checkpoint (same files, adapter, dtype, device, options and library versions: layers, image token,
    context, type): then nothing is loaded until a call needs a row the store lacks. A re-run on a warm
    cache so never imports the processor stack or reads the weights, and a model that cannot load still
    fails at its fixture (nothing was stored for it). Safetensors weights only (the thread policy sizes a
    deferred model from their headers).
    """
    counts_work = True  # its loader hooks models.work's counter on the module (fingerprint: work)

    def __init__(
        self,
        spec: str,
        path: str,
        *,
        device: torch.device,
        dtype: torch.dtype,
        batch_size: int = 16,
        local_files_only: bool = True,
        prefix_cache: bool = True,
        answer_prefix: str = "",
        device_map: str | None = None,
    ) -> None:
        self._setup(spec, path, device, dtype, batch_size=batch_size, local_files_only=local_files_only,
                    prefix_cache=prefix_cache, answer_prefix=answer_prefix, device_map=device_map)
        heavy = self._load()
        self._finish(describe_vlm(heavy.model, heavy.processor))

    @classmethod
    def from_store(cls, spec: str, path: str, *, store: OutputStore, device: torch.device,
                   dtype: torch.dtype, **options: Any) -> HFVisionLanguageModel | None:
        """The adapter with nothing loaded yet, or None when ``store`` holds no description of this
        checkpoint under these settings (or its weights are not safetensors, or a device map places it): load
        it the usual way."""
        if options.get("device_map"):  # the input device is known only once accelerate has placed layers
            return None
        self = cls.__new__(cls)
        self._setup(spec, path, device, dtype, **options)
        sized = header_parameter_count(self._files) is not None
        meta = store.description(self._namespace()) if sized else None
        if meta is None or not meta.keys() >= DESCRIPTION_KEYS:  # (stored before a key was described)
            return None
        self._finish(meta)
        return self

    def _setup(self, spec: str, path: str, device: torch.device, dtype: torch.dtype, *, batch_size: int = 16,
               local_files_only: bool = True, prefix_cache: bool = True, answer_prefix: str = "",
               device_map: str | None = None) -> None:
        self.spec = spec
        self.device = device
        self.dtype = dtype
        self.batch_size = batch_size
        self.prefix_cache = prefix_cache
        self.answer_prefix = answer_prefix
        self._path, self._local_only, self._device_map = path, local_files_only, device_map
        self._heavy: LoadedVLM | None = None
        self._meta: dict[str, Any] | None = None
        self._files = [Path(path)] if Path(path).is_dir() else []
        self._sha: dict[str, str] | None = None
        self.store: OutputStore | None = None
        self.store_namespace: str | None = None

    def _finish(self, meta: dict[str, Any]) -> None:
        self._meta = meta
        self._lacks = stored_lacks(meta)
        self.num_layers = int(meta["num_layers"])
        self.image_token = int(meta["image_token"])
        # captions the VLM scorer saw that are longer than the language model's context (never cut: counted)
        self.caption_truncation = TruncationCounter("caption", known_limit(meta["context"]))

    def _load(self) -> LoadedVLM:
        """Load the processor and the weights (once); a deferred adapter checks they are what it was told."""
        if self._heavy is None:
            heavy = load_vlm(self._path, self.dtype, self.device, self._local_only, self._device_map)
            check_described(self.spec, describe_vlm(heavy.model, heavy.processor), self._meta)
            self._heavy, self.device = heavy, heavy.device
        return self._heavy

    @property
    def meta(self) -> dict[str, Any]:
        """What the adapter read off the model (layers, image token, context, type): see
        :func:`~faithtests.models.hf_loading.describe_vlm`."""
        assert self._meta is not None, "constructed through __init__ or from_store"
        return self._meta

    def lacks(self, feature: str) -> str:
        """Why the model lacks ``feature`` ("" if it has it): found at load, stored with its description."""
        return self._lacks.get(feature, "")

    @property
    def config(self) -> Any:
        return self._load().model.config

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory (False while a warm cache has answered every call)."""
        return self._heavy is not None

    @property
    def processor(self) -> Any:
        return self._load().processor

    @property
    def model(self) -> Any:
        return self._load().model

    @property
    def layers(self) -> Any:
        return self._load().layers

    @property
    def runner(self) -> ForwardRunner:
        return self._load().runner

    def _namespace(self) -> str | None:
        return model_namespace(content_sha256(self._files), type(self).__name__, self.dtype, self.device,
                               {"answer_prefix": self.answer_prefix})

    def num_parameters(self) -> int | None:
        """Parameter count (the thread policy's model size): from the safetensors headers when the
        weights are safetensors (loaded or not, so a deferred model is sized as a loaded one), else
        counted on the loaded module."""
        counted = header_parameter_count(self._files)
        if counted is None and self._heavy is not None:
            counted = int(sum(p.numel() for p in self._heavy.model.parameters()))
        return counted

    def truncation_info(self) -> dict[str, dict[str, Any]]:
        """Captions scored through :class:`~faithtests.models.vlm_scorer.VLMScorer` beyond the context."""
        return {"caption": self.caption_truncation.as_info()}

    def use_store(self, store: OutputStore) -> None:
        """Read and write outputs through a persistent :class:`OutputStore` (``--faith-cache``): option
        logits and states, caption log-probs, answer log-probs, next-token logits, attentions and
        generations."""
        self.store = store
        self.store_namespace = self._namespace()
        if self._heavy is not None:
            store.describe(self.store_namespace, self.meta)

    def _stored(self, kind: str, hooks: Hooks | None, n: int, key: Callable[[int], str],
                compute: Callable[[list[int]], list[Any]], codec: Any = ARRAY_CODEC) -> list[Any]:
        """``compute(indices)`` for the rows the store does not hold; all ``n`` rows when there is no
        store (then no key is computed: hashing images costs time)."""
        require_call(self, kind, hooks)  # what the call needs and the model lacks: not applicable, once
        compute = counted_call(compute, call_name(kind), self.spec)  # a progress stage per computation
        if self.store is None:
            return compute(list(range(n)))
        hk, owner = hooks_key(hooks), self.store_namespace
        ns = f"{owner}|{kind}|{hk}" if owner is not None and hk is not None else None
        keys = [key(i) for i in range(n)]
        return self.store.rows(owner, ns, keys, compute, codec)

    # ------------------------------------------------------------------------------------ batching
    def encode(self, prompts: Sequence[Prompt], padding_side: str = "right") -> EncodedBatch:
        require(self, "chat_template")  # found at load: one clear outcome, not an error per prompt
        return encode_batch(self.processor, self.config, prompts, padding_side)

    def _run(
        self,
        prompts: Sequence[Prompt],
        reduce: Reduce,
        want_states: bool,
        hooks: Hooks | None,
        encode_rows: Callable[[list[int]], tuple[EncodedBatch, list[list[int]]]] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run all prompts in batches; ``encode_rows(rows) -> (batch, wanted positions per row)`` defaults
        to the rendered prompts and their last positions. Results come back in prompt order."""
        check_prompts(prompts)

        def default(rows: list[int]) -> tuple[EncodedBatch, list[list[int]]]:
            enc = self.encode([prompts[r] for r in rows])
            return enc, [[n - 1] for n in enc.lengths]

        encode = encode_rows or default
        share = self.prefix_cache and not (hooks is not None and hooks.attention)
        outs: dict[int, torch.Tensor] = {}
        states: dict[int, torch.Tensor] = {}
        for rows, shareable in image_groups(prompts, self.batch_size, share):
            enc, pos = encode(rows)
            state_rows = [n - 1 for n in enc.lengths] if want_states else None
            result = None
            if shareable:
                single, _ = encode(rows[:1])
                result = self.runner.shared(enc, single, self.image_token, pos, reduce, state_rows, hooks)
            if result is None:
                result = self.runner.full(enc, pos, reduce, state_rows, hooks)
            out, st = result
            for j, r in enumerate(rows):
                outs[r] = out[j]
                if st is not None:
                    states[r] = st[:, j]
            call_share(len(outs), len(prompts))
        order = range(len(prompts))
        stacked = torch.stack([outs[i] for i in order])
        return stacked, (torch.stack([states[i] for i in order], dim=1) if want_states else None)

    # ------------------------------------------------------------------------------------ protocol
    def decide(
        self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
    ) -> Decision:
        """Option logits [N, K] (after the logit adjuster, if any) and pre-answer states [L, N, D]."""
        refuse_contrast(hooks, "decide")

        def reduce(logits: torch.Tensor, _valid: torch.Tensor, _targets: torch.Tensor) -> torch.Tensor:
            # (only computed on a miss: stored rows were made with these option tokens, which the store's
            # namespace pins through the tokenizer files' digests)
            ids = option_token_ids(self.processor.tokenizer, options, self.answer_prefix) if options else []
            return logits[:, 0, torch.tensor(ids, dtype=torch.long, device=logits.device)]

        def compute(rows: list[int]) -> list[torch.Tensor]:
            lg, st = self._run([prompts[r] for r in rows], reduce, True, hooks)
            assert st is not None
            # one stored row per prompt: its K option logits, then its L x D states, flattened
            return [torch.cat([lg[j].float().flatten(), st[:, j].float().flatten()]).cpu()
                    for j in range(len(rows))]

        check_prompts(prompts)
        flat = torch.stack(self._stored(f"decide{tuple(options)}", hooks, len(prompts),
                                        prompt_keys(prompts), compute))
        k = len(options)
        logits = flat[:, :k]
        states = flat[:, k:].reshape(len(prompts), self.num_layers, -1).transpose(0, 1)
        if hooks is not None and hooks.logit_adjuster is not None and options:
            logits = hooks.logit_adjuster(logits, list(options))
        return Decision(logits=logits, states=states)

    def option_logits(
        self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
    ) -> torch.Tensor:
        if not options:
            raise ValueError("option_logits needs at least one option letter")
        refuse_contrast(hooks, "option_logits")
        return self.decide(prompts, options, hooks).logits

    def states(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        refuse_contrast(hooks, "states")
        return self.decide(prompts, (), hooks).states

    def next_token_logits(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        """Full-vocabulary logits at the answer position [N, V] (logit lens, Yes/No probes)."""
        refuse_contrast(hooks, "next_token_logits")

        def reduce(logits: torch.Tensor, _valid: torch.Tensor, _targets: torch.Tensor) -> torch.Tensor:
            return logits[:, 0]

        def compute(rows: list[int]) -> list[torch.Tensor]:
            return list(self._run([prompts[r] for r in rows], reduce, False, hooks)[0].float().cpu())

        check_prompts(prompts)
        return torch.stack(self._stored("next_token", hooks, len(prompts), prompt_keys(prompts),
                                        compute))

    def caption_logprob(
        self, images: Sequence[Image.Image], captions: Sequence[str], instruction: str = DEFAULT_INSTRUCTION
    ) -> torch.Tensor:
        """Mean log-probability of each caption's tokens as the assistant's answer to ``instruction`` about
        the image, [N]. Only the caption's own tokens count (not the template's end-of-turn tokens).
        Captions of the same image share one prefix forward."""
        if len(images) != len(captions):
            raise ValueError(f"caption_logprob: {len(images)} images but {len(captions)} captions")
        prompts = [Prompt(images=(im,), text=instruction) for im in images]

        def reduce(logits: torch.Tensor, valid: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            logp = torch.log_softmax(logits.float(), dim=-1)
            picked = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
            picked = torch.where(valid, picked, torch.zeros_like(picked))
            return picked.sum(dim=1) / valid.sum(dim=1)

        def compute(rows: list[int]) -> list[torch.Tensor]:
            sub = [prompts[r] for r in rows]
            caps = [captions[r] for r in rows]

            def encode_sub(idx: list[int]) -> tuple[EncodedBatch, list[list[int]]]:
                enc, spans = encode_with_answers(self.processor, self.config, [sub[i] for i in idx],
                                                 [caps[i] for i in idx])
                return enc, [list(range(a - 1, b - 1)) for a, b in spans]

            return list(self._run(sub, reduce, False, None, encode_sub)[0].float().cpu())

        return torch.stack(self._stored("caption_logprob", None, len(prompts),
                                        caption_keys(prompts, captions), compute))

    def answer_logprob(
        self, prompts: Sequence[Prompt], answers: Sequence[str], hooks: Hooks | None = None
    ) -> torch.Tensor:
        """Sum of the log-probabilities of each answer's tokens after each prompt, [N, K] (constrained
        answers by whole labels: no parsing, no single-token requirement). The K continuations of one
        prompt share its images, so they share one prefix forward. The answer's end-of-turn tokens do
        not count: labels are compared as words, not as complete replies."""
        if not answers:
            raise ValueError("answer_logprob needs at least one answer")
        if any(not a.strip() for a in answers):
            raise ValueError(f"answer_logprob: empty answer in {list(answers)}")
        refuse_contrast(hooks, "answer_logprob")
        check_prompts(prompts)
        k = len(answers)
        pairs = [(i, a) for i in range(len(prompts)) for a in answers]
        rows_prompts = [prompts[i] for i, _ in pairs]

        def reduce(logits: torch.Tensor, valid: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            logp = torch.log_softmax(logits.float(), dim=-1)
            picked = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
            return torch.where(valid, picked, torch.zeros_like(picked)).sum(dim=1)

        def compute(rows: list[int]) -> list[torch.Tensor]:
            sub = [p for r in rows for p in rows_prompts[r * k : (r + 1) * k]]
            ans = [a for r in rows for _, a in pairs[r * k : (r + 1) * k]]

            def encode_sub(idx: list[int]) -> tuple[EncodedBatch, list[list[int]]]:
                enc, spans = encode_with_answers(self.processor, self.config, [sub[i] for i in idx],
                                                 [ans[i] for i in idx])
                return enc, [list(range(a - 1, b - 1)) for a, b in spans]

            out = self._run(sub, reduce, False, hooks, encode_sub)[0].float().cpu()
            return list(out.reshape(len(rows), k))

        return torch.stack(self._stored(f"answer_logprob{tuple(answers)}", hooks, len(prompts),
                                        prompt_keys(prompts), compute))

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Attentions:
        """Per layer, the answer query's attention weights [N, heads, keys] (after any modifier), with the
        spans of each row; rows shorter than the longest are zero-padded on the right. Stored per row."""
        check_prompts(prompts)
        refuse_contrast(hooks, "attentions")

        def compute(rows: list[int]) -> list[AttentionRow]:
            return captured_rows(self, [prompts[r] for r in rows], hooks)

        return assemble(self._stored("attentions", hooks, len(prompts), prompt_keys(prompts),
                                     compute, ATTENTION_CODEC))

    def generate(
        self, prompts: Sequence[Prompt], max_new_tokens: int = 32, hooks: Hooks | None = None
    ) -> list[str]:
        """Greedy decoding; with ``hooks.contrast``, contrastive against its auxiliary prompts (Eq. 7), each
        row stored under its prompt and its auxiliary prompt."""
        check_prompts(prompts)
        aux = contrast_aux(hooks, len(prompts))

        def compute(rows: list[int]) -> list[str]:
            sub_aux = None if aux is None else [aux[r] for r in rows]
            return greedy_texts(self, [prompts[r] for r in rows], max_new_tokens, hooks, sub_aux)

        return self._stored(f"generate{max_new_tokens}", hooks, len(prompts), prompt_keys(prompts, aux),
                            compute, TEXT_CODEC)

    def fingerprint(self) -> dict[str, Any]:
        if self._sha is None:
            self._sha = checkpoint_sha256(self._files)
        return {
            "spec": self.spec,
            "kind": "vlm",
            "family": str(self.meta["model_type"]),
            "architecture": str(self.meta["architecture"]),
            "num_layers": self.num_layers,
            "dtype": str(self.dtype).removeprefix("torch."),
            "device": str(self.device),
            "checkpoint_sha256": self._sha,
        }

    def caption_lengths(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts`` without special tokens and before any cut (the VLM scorer's
        truncation counts), through the store: a warm run needs no tokenizer for them."""
        def compute(rows: list[int]) -> list[str]:
            return [str(n) for n in hf_lengths(self.processor.tokenizer, False)([texts[r] for r in rows])]

        keys = [text_key(t) for t in texts]
        return [int(v) for v in self._stored("caption_tokens", None, len(texts), keys.__getitem__, compute,
                                             TEXT_CODEC)]

    def lens_probs(self, states: torch.Tensor, options: Sequence[str]) -> torch.Tensor:
        """The logit lens (IMAVB Eqs. 3-4, :mod:`.lens`) of pre-answer states [L, N, D]: P_l(option
        token) [L, N, K] through this model's final norm and unembedding, stored per row (keyed by the
        row's state bytes), so a warm run reads it back instead of loading the model."""
        if why := self.meta["lens"]:  # known from the description: no model loaded to find out again
            raise LensUnsupported(why)
        rows = [states[:, j].detach().float().cpu().contiguous() for j in range(states.shape[1])]

        def compute(idx: list[int]) -> list[torch.Tensor]:
            ids = option_token_ids(self.processor.tokenizer, options, self.answer_prefix)
            probs = logit_lens(self.model, torch.stack([rows[i] for i in idx], dim=1), ids)
            return [probs[:, j] for j in range(len(idx))]

        def key(j: int) -> str:
            return hashlib.sha256(rows[j].numpy().tobytes()).hexdigest() + f"|{tuple(rows[j].shape)}"

        return torch.stack(self._stored(f"lens{tuple(options)}", None, len(rows), key, compute), dim=1)

    def cache_stats(self) -> dict[str, int]:
        r = self.runner if self._heavy is not None else None
        return {k: getattr(r, k, 0) for k in ("prefix_calls", "suffix_calls", "full_calls")}
