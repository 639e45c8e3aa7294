"""Stored rows of work done *around* an adapter's calls (``--faith-cache``), so a warm run loads no model.

An HF adapter stores its own outputs (:meth:`HFVisionLanguageModel._stored
<faithtests.models.hf_vlm.HFVisionLanguageModel>`); a few computations outside its methods need the
loaded model or its processor only to produce inputs of cached calls (a decision's step-0 auxiliary
prompts, the token count of each answer). Storing their rows in the adapter's namespace (the same
:func:`~faithtests.models.store.model_namespace`: weights and tokenizer files, adapter, dtype, device,
versions, options; and :func:`~faithtests.models.store.hooks_key`) lets a fully cached run skip the
import of transformers and the weight load. A row is exactly what ``compute`` returned (no rounding),
so results are bit-identical to an uncached run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from faithtests.models.interfaces import Hooks
from faithtests.models.store import ARRAY_CODEC, OutputStore, hooks_key
from faithtests.progress import counted_call


def adapter_store(vlm: object) -> OutputStore | None:
    """The output store the adapter reads and writes (``use_store``), or None (no ``--faith-cache``, or
    an adapter that keeps none). A plain attribute read: it never loads the model."""
    store = getattr(vlm, "store", None)
    return store if isinstance(store, OutputStore) else None


def adapter_rows(vlm: object, kind: str, hooks: Hooks | None, keys: Sequence[str],
                 compute: Callable[[list[int]], list[torch.Tensor]], stage: str) -> list[torch.Tensor]:
    """``compute(indices)`` (as a progress stage named ``stage``) for the rows of ``keys`` the adapter's
    store does not hold under ``kind`` and ``hooks``; every row when there is no store or the call
    cannot be keyed (no weights digest, hooks without a tag)."""
    run = counted_call(compute, stage, str(getattr(vlm, "spec", "")) or None)
    store = adapter_store(vlm)
    if store is None:
        return run(list(range(len(keys))))
    owner: Any = getattr(vlm, "store_namespace", None)
    hk = hooks_key(hooks)
    ns = f"{owner}|{kind}|{hk}" if isinstance(owner, str) and hk is not None else None
    return store.rows(owner, ns, keys, run, ARRAY_CODEC)
