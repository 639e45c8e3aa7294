"""Hugging Face generative VLMs (``AutoModelForImageTextToText`` + ``AutoProcessor``) behind
:class:`~faithtests.models.interfaces.VisionLanguageModel`.

Conventions (documented choices):
- Prompts go through the processor's own chat template as one user turn (see :mod:`.prompting`), with
  the generation prompt, so the last prompt position is the answer position.
- ``option_logits``: next-token logits at that position for each option letter's token (tokenized as
  ``answer_prefix + letter``; each must be exactly one token, else :class:`OptionTokenError`).
- ``states``: the output of every decoder layer at that position, [L, N, D]. The embedding output is
  *not* included and the last entry is the last layer's raw output *before* the final norm: exactly the
  per-layer residual stream S3E (Eq. 2) and the IMAVB probes read.
- Batches are right-padded; rows with identical images share one prefix forward (:mod:`.prefix`) unless
  ``prefix_cache=False`` or an attention modifier is active. ``decide`` returns logits and states from one
  pass.
- Hooks: attention modifiers and captures through the registered attention function (:mod:`.hooks`),
  MLP scales and FFN modifiers through forward hooks, the logit adjuster on the option logits only; a
  contrast (SPD-Faith Eq. 7) in ``generate`` only, every other method refuses it (ValueError).
- ``generate`` is greedy, left-padded (as generation requires), and returns the decoded new tokens
  (:mod:`.generation`, contrastive decoding included).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from faithtests.models.attention_rows import ATTENTION_CODEC, AttentionRow, assemble, split_rows
from faithtests.models.cache import checkpoint_sha256, content_sha256, image_key
from faithtests.models.generation import contrast_aux, greedy_texts, kind_runs
from faithtests.models.hooks import (
    AttentionContext,
    attention_context,
    refuse_contrast,
    register_attention,
    residual_hooks,
)
from faithtests.models.interfaces import Attentions, Decision, Hooks, Prompt
from faithtests.models.prefix import ForwardRunner, Reduce
from faithtests.models.prompting import (
    EncodedBatch,
    encode_batch,
    encode_with_answers,
    image_token_id,
    option_token_ids,
)
from faithtests.models.store import (
    ARRAY_CODEC,
    TEXT_CODEC,
    OutputStore,
    digest,
    hooks_key,
    model_namespace,
)
from faithtests.models.truncation import TruncationCounter, known_limit

if TYPE_CHECKING:
    from PIL import Image

#: Instruction of the VLM-as-scorer prompt (caption log-likelihood given the image).
DEFAULT_INSTRUCTION = "Describe the image."


def prompt_key(prompt: Prompt) -> str:
    """Content digest of a prompt: its images' pixels, its text and description."""
    return digest([[image_key(im) for im in prompt.images], prompt.text, prompt.description])


def _check_prompts(prompts: Sequence[Prompt]) -> None:
    if not prompts:
        raise ValueError("no prompts given")
    for i, p in enumerate(prompts):
        if not isinstance(p, Prompt):
            raise TypeError(f"prompt {i} is {type(p).__name__}, expected faithtests Prompt")


class HFVisionLanguageModel:
    """A loaded image-text-to-text model; construct through :func:`faithtests.models.registry.load_model`."""

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
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.spec = spec
        self.device = device
        self.dtype = dtype
        self.batch_size = batch_size
        self.prefix_cache = prefix_cache
        self.answer_prefix = answer_prefix
        auto_processor: Any = AutoProcessor  # transformers' loaders are untyped
        self.processor = auto_processor.from_pretrained(path, local_files_only=local_files_only)
        # device_map (``--faith-device-map``): accelerate places the layers; inputs go to the first device
        placement = {"device_map": device_map} if device_map else {}
        model: Any = AutoModelForImageTextToText.from_pretrained(
            path, dtype=dtype, local_files_only=local_files_only, **placement
        )
        # Text model only: the vision tower keeps its implementation (no hooks there).
        model.set_attn_implementation({"text_config": register_attention()})
        self.model = (model if device_map else model.to(device)).eval()
        if device_map:
            self.device = device = model.get_input_embeddings().weight.device
        self.config = self.model.config
        self.layers = self.model.get_decoder().layers
        self.num_layers = len(self.layers)
        self.image_token = image_token_id(self.config)
        self.runner = ForwardRunner(self.model, self.layers, device, dtype)
        self._files = [Path(path)] if Path(path).is_dir() else []
        self._sha: dict[str, str] | None = None
        self.store: OutputStore | None = None
        self.store_namespace: str | None = None
        # captions the VLM scorer saw that are longer than the language model's context (never cut: counted)
        text_config = getattr(self.config, "text_config", self.config)
        self.caption_truncation = TruncationCounter(
            "caption", known_limit(getattr(text_config, "max_position_embeddings", None)))

    def truncation_info(self) -> dict[str, dict[str, Any]]:
        """Captions scored through :class:`~faithtests.models.vlm_scorer.VLMScorer` beyond the context."""
        return {"caption": self.caption_truncation.as_info()}

    def use_store(self, store: OutputStore) -> None:
        """Read and write outputs through a persistent :class:`OutputStore` (``--faith-cache``): option
        logits and states, caption log-probs, answer log-probs, next-token logits, attentions and
        generations."""
        self.store = store
        self.store_namespace = model_namespace(content_sha256(self._files), type(self).__name__, self.dtype,
                                         self.device, {"answer_prefix": self.answer_prefix})

    def _stored(self, kind: str, hooks: Hooks | None, n: int, key: Callable[[int], str],
                compute: Callable[[list[int]], list[Any]], codec: Any = ARRAY_CODEC) -> list[Any]:
        """``compute(indices)`` for the rows the store does not hold; all ``n`` rows when there is no
        store (then no key is computed: hashing images costs time)."""
        if self.store is None:
            return compute(list(range(n)))
        hk, owner = hooks_key(hooks), self.store_namespace
        ns = f"{owner}|{kind}|{hk}" if owner is not None and hk is not None else None
        keys = [key(i) for i in range(n)]
        return self.store.rows(owner, ns, keys, compute, codec)

    # ------------------------------------------------------------------------------------ batching
    def encode(self, prompts: Sequence[Prompt], padding_side: str = "right") -> EncodedBatch:
        return encode_batch(self.processor, self.config, prompts, padding_side)

    def _groups(self, prompts: Sequence[Prompt], share: bool) -> list[tuple[list[int], bool]]:
        """Row-index batches (at most ``batch_size``), each flagged whether it may share a prefix.

        Rows with the same images (content hash) batch together; leftover single rows are pooled by
        whether they carry images (a processor call takes all-image or all-text batches)."""
        by_images: dict[tuple[str, ...], list[int]] = {}
        for i, p in enumerate(prompts):
            by_images.setdefault(tuple(image_key(im) for im in p.images), []).append(i)
        batches: list[tuple[list[int], bool]] = []
        singles: dict[bool, list[int]] = {True: [], False: []}
        for rows in by_images.values():
            if share and len(rows) > 1:
                for s in range(0, len(rows), self.batch_size):
                    chunk = rows[s : s + self.batch_size]
                    if len(chunk) > 1:
                        batches.append((chunk, True))
                    else:
                        singles[bool(prompts[chunk[0]].images)].extend(chunk)
            else:
                for r in rows:
                    singles[bool(prompts[r].images)].extend([r])
        for rows in singles.values():
            batches += [(rows[s : s + self.batch_size], False) for s in range(0, len(rows), self.batch_size)]
        return batches

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
        _check_prompts(prompts)

        def default(rows: list[int]) -> tuple[EncodedBatch, list[list[int]]]:
            enc = self.encode([prompts[r] for r in rows])
            return enc, [[n - 1] for n in enc.lengths]

        encode = encode_rows or default
        share = self.prefix_cache and not (hooks is not None and hooks.attention)
        outs: dict[int, torch.Tensor] = {}
        states: dict[int, torch.Tensor] = {}
        for rows, shareable in self._groups(prompts, share):
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
        order = range(len(prompts))
        stacked = torch.stack([outs[i] for i in order])
        return stacked, (torch.stack([states[i] for i in order], dim=1) if want_states else None)

    # ------------------------------------------------------------------------------------ protocol
    def decide(
        self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
    ) -> Decision:
        """Option logits [N, K] (after the logit adjuster, if any) and pre-answer states [L, N, D]."""
        refuse_contrast(hooks, "decide")
        ids = option_token_ids(self.processor.tokenizer, options, self.answer_prefix) if options else []
        index = torch.tensor(ids, dtype=torch.long)

        def reduce(logits: torch.Tensor, _valid: torch.Tensor, _targets: torch.Tensor) -> torch.Tensor:
            return logits[:, 0, index.to(logits.device)]

        def compute(rows: list[int]) -> list[torch.Tensor]:
            lg, st = self._run([prompts[r] for r in rows], reduce, True, hooks)
            assert st is not None
            # one stored row per prompt: its K option logits, then its L x D states, flattened
            return [torch.cat([lg[j].float().flatten(), st[:, j].float().flatten()]).cpu()
                    for j in range(len(rows))]

        _check_prompts(prompts)
        flat = torch.stack(self._stored(f"decide{tuple(options)}", hooks, len(prompts),
                                        lambda i: prompt_key(prompts[i]), compute))
        k = len(ids)
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

        _check_prompts(prompts)
        return torch.stack(self._stored("next_token", hooks, len(prompts), lambda i: prompt_key(prompts[i]),
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
                                        lambda i: digest([prompt_key(prompts[i]), captions[i]]), compute))

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
        _check_prompts(prompts)
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
                                        lambda i: prompt_key(prompts[i]), compute))

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Attentions:
        """Per layer, the answer query's attention weights [N, heads, keys] (after any modifier), with the
        spans of each row; rows shorter than the longest are zero-padded on the right. Stored per row."""
        _check_prompts(prompts)
        refuse_contrast(hooks, "attentions")

        @torch.inference_mode()
        def compute(rows: list[int]) -> list[AttentionRow]:
            out: list[AttentionRow] = []
            todo = [prompts[r] for r in rows]
            for start in range(0, len(todo), self.batch_size):
                for run in kind_runs(todo, start, min(start + self.batch_size, len(todo))):
                    enc = self.encode([todo[i] for i in run])
                    ctx = AttentionContext(
                        modifiers=dict(hooks.attention) if hooks else {}, spans=enc.spans,
                        capture_rows=torch.tensor([n - 1 for n in enc.lengths]),
                    )
                    with attention_context(ctx), residual_hooks(self.layers, hooks):
                        self.model(**self.runner.to_device(enc.inputs), logits_to_keep=1, use_cache=False)
                    missing = [i for i in range(self.num_layers) if i not in ctx.captured]
                    if missing:
                        raise RuntimeError(f"no attention captured for layers {missing}")
                    out += split_rows([ctx.captured[i] for i in range(self.num_layers)], enc.spans)
            return out

        return assemble(self._stored("attentions", hooks, len(prompts), lambda i: prompt_key(prompts[i]),
                                     compute, ATTENTION_CODEC))

    def generate(
        self, prompts: Sequence[Prompt], max_new_tokens: int = 32, hooks: Hooks | None = None
    ) -> list[str]:
        """Greedy decoding; with ``hooks.contrast``, contrastive against its auxiliary prompts (Eq. 7), each
        row stored under its prompt and its auxiliary prompt."""
        _check_prompts(prompts)
        aux = contrast_aux(hooks, len(prompts))

        def key(i: int) -> str:
            main = prompt_key(prompts[i])
            return main if aux is None else digest([main, prompt_key(aux[i])])

        def compute(rows: list[int]) -> list[str]:
            sub_aux = None if aux is None else [aux[r] for r in rows]
            return greedy_texts(self, [prompts[r] for r in rows], max_new_tokens, hooks, sub_aux)

        return self._stored(f"generate{max_new_tokens}", hooks, len(prompts), key, compute, TEXT_CODEC)

    def fingerprint(self) -> dict[str, Any]:
        if self._sha is None:
            self._sha = checkpoint_sha256(self._files)
        return {
            "spec": self.spec,
            "kind": "vlm",
            "family": str(self.config.model_type),
            "architecture": type(self.model).__name__,
            "num_layers": self.num_layers,
            "dtype": str(self.dtype).removeprefix("torch."),
            "device": str(self.device),
            "checkpoint_sha256": self._sha,
        }

    def cache_stats(self) -> dict[str, int]:
        r = self.runner
        return {"prefix_calls": r.prefix_calls, "suffix_calls": r.suffix_calls, "full_calls": r.full_calls}

