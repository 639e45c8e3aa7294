"""A minimal reference-VLM wrapper for training-time validation, straight through transformers.

It uses only the public loading path a user's checkpoint takes (``AutoModelForImageTextToText`` /
``AutoProcessor`` with ``local_files_only``) and implements just what validation needs: option logits at
the answer position and greedy generation. Prompts go through the
processor's chat template: image items first, then the text with the description in its slot (if any).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from faithtests.models import prompting
from faithtests.models.interfaces import Prompt


def messages(prompt: Prompt) -> list[dict[str, Any]]:
    """The adapters' user turn (``prompting.messages``): image items, then the text with the
    description in its slot (or first)."""
    return prompting.messages(prompt)


def render_prompt(processor: Any, prompt: Prompt) -> str:
    return str(processor.apply_chat_template(messages(prompt), add_generation_prompt=True, tokenize=False))


class LocalVlm:
    def __init__(self, path: Path) -> None:
        self.spec = f"hf:{path}"
        self.processor: Any = AutoProcessor.from_pretrained(  # type: ignore[no-untyped-call]
            str(path), local_files_only=True
        )
        # float32 like the registry's default (reference VLMs are stored in float16 to stay small)
        model: Any = AutoModelForImageTextToText.from_pretrained(str(path), local_files_only=True,
                                                                  dtype=torch.float32)
        model.eval()
        self.model = model
        self.num_layers = int(self.model.config.text_config.num_hidden_layers)

    @classmethod
    def from_loaded(cls, model: Any, processor: Any, spec: str = "in-memory") -> LocalVlm:
        """Wrap a model and processor already in memory (validation during training)."""
        vlm = cls.__new__(cls)
        vlm.spec, vlm.processor, vlm.model = spec, processor, model
        vlm.num_layers = int(model.config.text_config.num_hidden_layers)
        return vlm

    def _inputs(self, prompts: Sequence[Prompt]) -> Any:
        texts = [render_prompt(self.processor, p) for p in prompts]
        images = [im for p in prompts for im in p.images]
        self.processor.tokenizer.padding_side = "left"
        return self.processor(text=texts, images=images or None, return_tensors="pt", padding=True)

    def option_logits(self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Any = None) -> Any:
        ids = []
        for o in options:
            enc = self.processor.tokenizer.encode(o, add_special_tokens=False)
            if len(enc) != 1:
                raise ValueError(f"option {o!r} is not a single token for this tokenizer ({enc})")
            ids.append(enc[0])
        with torch.no_grad():
            logits = self.model(**self._inputs(prompts)).logits[:, -1, :]
        return logits[:, ids].float()

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32, hooks: Any = None) -> list[str]:
        inputs = self._inputs(prompts)
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
        new = out[:, inputs["input_ids"].shape[1]:]
        return [str(s).strip() for s in self.processor.tokenizer.batch_decode(new, skip_special_tokens=True)]
