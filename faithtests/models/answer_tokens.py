"""How many tokens each answer has as the assistant's reply to a prompt (length-normalised scoring).

Counted as :meth:`~faithtests.models.hf_vlm.HFVisionLanguageModel.answer_logprob` sums them: the
chat-template rendering of prompt + answer, the tokens overlapping the answer's characters. Only the
processor is needed, but an adapter loads its processor with its weights; with the adapter's output store
(``--faith-cache``) the counts are stored rows (:mod:`.adapter_store`), so a warm run loads neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from faithtests.models.adapter_store import adapter_rows, adapter_store
from faithtests.models.interfaces import Prompt
from faithtests.models.prompt_keys import prompt_keys
from faithtests.models.prompting import adds_special_tokens, render_with_answer


def _counted(processor: Any, prompts: Sequence[Prompt], answers: Sequence[str]) -> NDArray[np.float64]:
    tok = processor.tokenizer
    out = np.zeros((len(prompts), len(answers)))
    for i, p in enumerate(prompts):
        for j, answer in enumerate(answers):
            text, a, b = render_with_answer(processor, p, answer)
            enc = tok(text, add_special_tokens=adds_special_tokens(tok, text), return_offsets_mapping=True)
            out[i, j] = sum(1 for s, e in enc["offset_mapping"] if e > s and s < b and e > a)
    return out


def answer_token_counts(vlm: object, prompts: Sequence[Prompt], answers: Sequence[str]
                        ) -> NDArray[np.float64] | None:
    """[N, K]: the token count of each of the K ``answers`` as the reply to each prompt (module doc);
    None when the adapter exposes no processor with a tokenizer to count with."""
    lazy = isinstance(getattr(type(vlm), "processor", None), property)  # read without loading the model
    if adapter_store(vlm) is None or not lazy:
        processor = getattr(vlm, "processor", None)
        if getattr(processor, "tokenizer", None) is None:
            return None
        return _counted(processor, prompts, answers)

    def compute(rows: list[int]) -> list[torch.Tensor]:
        processor = getattr(vlm, "processor", None)
        if getattr(processor, "tokenizer", None) is None:
            raise TypeError(f"{type(vlm).__name__}.processor has no tokenizer to count answer tokens with")
        return list(torch.from_numpy(_counted(processor, [prompts[r] for r in rows], answers)))

    key = prompt_keys(prompts)
    got = adapter_rows(vlm, f"answer_tokens{tuple(answers)}", None, [key(i) for i in range(len(prompts))],
                       compute, "answer tokens")
    if not got:
        return np.zeros((0, len(answers)))
    return np.stack([np.asarray(r.numpy(), dtype=np.float64) for r in got])
