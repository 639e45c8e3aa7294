"""Encoding reference-VLM training examples: chat-rendered prompts, answer labels, and the token
positions the training-only truth heads read (per noun, per clause, claim end, per option, per image
patch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from faithtests.reference.local_models import render_prompt
from faithtests.world.captions import PLURAL
from faithtests.world.examples import CaptionTruth, Example
from faithtests.world.patches import PATCH
from faithtests.world.scene import CANVAS, SHAPES

IMAGE_TOKENS = (CANVAS // PATCH) ** 2


def approx_len(ex: Example) -> int:
    return IMAGE_TOKENS * len(ex.prompt.images) + len((ex.prompt.description or "").split()) + len(
        ex.prompt.text.split()) + len(ex.answer.split())


def _find(seq: list[int], sub: list[int]) -> int:
    """Start of the last occurrence of ``sub`` in ``seq`` (-1 if absent)."""
    for i in range(len(seq) - len(sub), -1, -1):
        if seq[i:i + len(sub)] == sub:
            return i
    return -1


#: Words that end a caption clause ("... on the left", "... in the middle"): the clause-truth targets sit
#: on these tokens; the noun targets on the shape words.
CLAUSE_END_WORDS = ("left", "right", "top", "bottom", "center", "middle")
NOUN_WORDS = (*SHAPES, *PLURAL.values())


def _truth_targets(tok: Any, ids: list[int], truth: Sequence[CaptionTruth]) -> tuple[list[int], list[int]]:
    """Per token, for the captions quoted in the prompt: the noun target (1/0 on each shape word: such an
    object exists) and the clause target (1/0 on each clause end: every claim so far holds); -100
    elsewhere."""
    ends = set(tok.convert_tokens_to_ids(list(CLAUSE_END_WORDS)))
    nouns = set(tok.convert_tokens_to_ids(list(NOUN_WORDS)))
    noun_out, clause_out = [-100] * len(ids), [-100] * len(ids)
    for t in truth:
        sub = tok.encode(t.text, add_special_tokens=False)
        # last occurrence: when one caption is a token prefix of the other (an other-scene foil), both
        # get targets on the second's tokens; the flags of a shared prefix are equal, so only some
        # supervision is lost (kept as trained: the committed checkpoints come from this labelling)
        at = _find(ids, sub)
        if at < 0:
            raise ValueError(f"caption not found in its prompt: {t.text!r}")
        for words, flags, out in ((ends, t.clauses, clause_out), (nouns, t.nouns, noun_out)):
            pos = [at + i for i, x in enumerate(sub) if x in words]
            if len(pos) != len(flags):
                raise ValueError(f"{t.text!r}: {len(pos)} target words in the tokens, {len(flags)} flags")
            for i, flag in zip(pos, flags, strict=True):
                out[i] = int(flag)
    return noun_out, clause_out


def _premise_end(tok: Any, ids: list[int], ex: Example) -> int:
    """Token index of the last word of a premise question's premise: its first position word, or
    "background" for a background premise."""
    q = tok.encode(ex.prompt.text, add_special_tokens=False)
    at = _find(ids, q)
    words = set(tok.convert_tokens_to_ids([*CLAUSE_END_WORDS, "background"]))
    first = next((i for i, t in enumerate(q) if t in words), None)
    if at < 0 or first is None:
        raise ValueError(f"no premise end found in {ex.prompt.text!r}")
    return at + first


def _option_ends(tok: Any, ids: list[int]) -> list[int]:
    """Token index of the last token of each of the six option lines of an IMAVB prompt ("A . red B .
    blue ... F . The audio ... incorrect Answer ..."): the token before the next letter, or before the
    instruction after F."""
    start = _find(ids, tok.encode("Options:", add_special_tokens=False))
    dot = tok.convert_tokens_to_ids(".")
    letters = tok.convert_tokens_to_ids(list("ABCDEF"))
    at, pos = start, []
    for letter in letters:
        at = next((i for i in range(at + 1, len(ids) - 1) if ids[i] == letter and ids[i + 1] == dot), -1)
        if start < 0 or at < 0:
            raise ValueError("an IMAVB prompt without six option lines")
        pos.append(at)
    answer = _find(ids, tok.encode("Answer with", add_special_tokens=False))
    if answer < pos[-1]:
        raise ValueError("an IMAVB prompt without the instruction after its options")
    return [p - 1 for p in pos[1:]] + [answer - 1]


def _context_targets(tok: Any, ids: list[int], n: int, ex: Example) -> list[int]:
    """The context caption's own ids where it sits in the prompt, -100 elsewhere (``n`` positions)."""
    ctx = [-100] * n
    if ex.context_caption is not None:
        sub = tok.encode(ex.context_caption, add_special_tokens=False)
        at = _find(ids, sub)
        if at < 0:
            raise ValueError(f"context caption not found in its prompt: {ex.context_caption!r}")
        ctx[at:at + len(sub)] = sub
    return ctx


def _patch_targets(image_token_id: int, ids: list[int], ex: Example, extra_targets: bool) -> list[int]:
    """Per token: the difference flag on each image token of a pair's second image, -100 elsewhere."""
    patch_t = [-100] * len(ids)
    if extra_targets and ex.patch_diff is not None:
        image_at = [i for i, t in enumerate(ids) if t == image_token_id]
        if len(image_at) != 2 * IMAGE_TOKENS:
            raise ValueError(f"a pair prompt has {len(image_at)} image tokens, not {2 * IMAGE_TOKENS}")
        for i, flag in zip(image_at[IMAGE_TOKENS:], ex.patch_diff, strict=True):
            patch_t[i] = int(flag)
    return patch_t


def _option_targets(tok: Any, ids: list[int], ex: Example) -> list[int]:
    option_t = [-100] * len(ids)
    if ex.option_truth is not None:
        for i, flag in zip(_option_ends(tok, ids), ex.option_truth, strict=True):
            option_t[i] = int(flag)
    return option_t


#: The sequences :func:`encode` returns per example, besides the input ids.
TARGETS: tuple[str, ...] = ("labels", "context_labels", "truth_labels", "noun_labels", "patch_labels",
                            "option_labels")


def _row(processor: Any, ids: list[int], ex: Example, extra_targets: bool) -> dict[str, list[int]]:
    """Input ids (prompt + answer + end of sequence) and every target sequence of one example."""
    tok = processor.tokenizer
    ans = [*tok.encode(" " + ex.answer, add_special_tokens=False), tok.eos_token_id]
    ctx = _context_targets(tok, ids, len(ids) + len(ans), ex)
    noun_t, clause_t = _truth_targets(tok, ids, ex.truth)
    if extra_targets and ex.claim_true is not None:
        clause_t[_premise_end(tok, ids, ex)] = int(ex.claim_true)
    return {"input_ids": ids + ans, "labels": [-100] * len(ids) + ans,
            "context_labels": ctx,
            "truth_labels": clause_t, "noun_labels": noun_t,
            "patch_labels": _patch_targets(processor.image_token_id, ids, ex, extra_targets),
            "option_labels": _option_targets(tok, ids, ex)}


def encode(processor: Any, examples: Sequence[Example], extra_targets: bool = True) -> dict[str, Any]:
    """Right-padded input ids; ``labels`` on the answer tokens and the end-of-sequence token only;
    ``context_labels`` on the tokens of an example's ``context_caption`` inside the prompt (-100
    elsewhere); ``truth_labels`` / ``noun_labels`` the clause and noun targets (:func:`_truth_targets`;
    with ``extra_targets`` also the claim target of a question that presupposes one) and
    ``patch_labels`` the per-patch difference target of an image pair's second image (with
    ``extra_targets``); ``option_labels`` the per-option target of a six-option question
    (:attr:`Example.option_truth`, on each option's last token)."""
    tok = processor.tokenizer
    texts = [render_prompt(processor, ex.prompt) for ex in examples]
    images = [im for ex in examples for im in ex.prompt.images]
    enc = processor(text=texts, images=images or None, padding=False)
    rows = [_row(processor, list(ids), ex, extra_targets)
            for ids, ex in zip(enc["input_ids"], examples, strict=True)]
    width = max(len(r["input_ids"]) for r in rows)

    def padded(seqs: list[list[int]], value: int = -100) -> Any:  # right padding to the batch width
        return torch.tensor([q + [value] * (width - len(q)) for q in seqs])

    out: dict[str, Any] = {
        "input_ids": padded([r["input_ids"] for r in rows], tok.pad_token_id),
        "attention_mask": padded([[1] * len(r["input_ids"]) for r in rows], 0),
        **{name: padded([r[name] for r in rows]) for name in TARGETS},
    }
    if images:
        out["pixel_values"] = torch.as_tensor(np.asarray(enc["pixel_values"]), dtype=torch.float32)
    return out
