"""Per-call checks of what a plug-in model returns (``py:`` and entry-point models, :mod:`.plugins`).

A plug-in is code faithtests did not write; a list where a tensor belongs, one row too few, or
``generate`` returning None would otherwise surface as a TypeError or a silent broadcast deep inside a
metric. :class:`ContractChecked` wraps the loaded object and checks every call of the protocol methods
(:mod:`.interfaces`) against the shapes the protocol states; a breach raises
:class:`~faithtests.models.errors.PluginContractError` naming the plug-in, the protocol and the call.

Not checked here: NaN / inf values, which the suites count per item as ``non-finite score`` (a broken
item, not a broken plug-in). Embeddings must be unit length (a scorer's score is their cosine, LGIP
Eq. 1, and the invariance suite takes the dot product of ``encode_*`` rows): a row whose norm is more
than :data:`NORM_TOLERANCE` from 1 is a breach, unless the scorer declares ``score_kind`` other than
``"cosine"``; its ``similarity()`` is then used pair by pair and its embeddings are not read for scores.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from faithtests.models.errors import PluginContractError
from faithtests.models.interfaces import Attentions, Decision, ImageTextScorer, VisionLanguageModel

#: Allowed |norm - 1| of an embedding row: bf16/fp16 normalisation errs by ~4e-3, an unnormalised row
#: is off by far more (the case that let E_inv pass at 2.4e-6 had norms ~1e-3).
NORM_TOLERANCE = 1e-2
_SCORER_METHODS = ("encode_images", "encode_texts", "similarity")
_VLM_METHODS = ("option_logits", "states", "decide", "answer_logprob", "attentions", "generate")


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a torch.Tensor {list(value.shape)}"
    return type(value).__name__


def _tensor(value: Any, shape: Sequence[int | None], what: str) -> torch.Tensor:
    """``value`` if it is a tensor of ``shape`` (None: any size), else a breach message."""
    want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
    if not isinstance(value, torch.Tensor) or value.dim() != len(shape) or any(
            s is not None and s != got for s, got in zip(shape, value.shape, strict=True)):
        raise _Breach(f"{what} returned {_describe(value)}, expected a torch.Tensor {want}")
    return value


class _Breach(Exception):
    """A contract breach, before the plug-in and protocol are added to its message."""


def _unit_rows(t: torch.Tensor, what: str) -> None:
    norms = t.detach().double().norm(dim=-1)
    off = norms.isfinite() & ((norms - 1.0).abs() > NORM_TOLERANCE)  # NaN rows: the non-finite rule's
    if bool(off.any()):
        i = int(off.nonzero()[0, 0])
        raise _Breach(f"{what} returned embeddings that are not unit length (row {i} has norm "
                      f"{float(norms[i]):.3g}, {int(off.sum())} of {len(norms)} rows off by more than "
                      f"{NORM_TOLERANCE}); L2-normalise them, or declare score_kind (not \"cosine\") if "
                      "similarity() is no cosine")


def _check_scorer(model: Any, name: str, a: dict[str, Any], out: Any) -> None:
    if name == "similarity":
        n = len(a["images"])
        if len(a["texts"]) != n:
            return  # the caller's mistake, not the plug-in's
        _tensor(out, (n,), f"similarity() of {n} pairs")
        return
    items = a["images"] if name == "encode_images" else a["texts"]
    t = _tensor(out, (len(items), None), f"{name}() of {len(items)} inputs")
    if getattr(model, "score_kind", "cosine") == "cosine":
        _unit_rows(t, f"{name}()")


def _check_vlm(model: Any, name: str, a: dict[str, Any], out: Any) -> None:
    n = len(a["prompts"])
    layers = getattr(model, "num_layers", None)
    if name == "generate":
        if not isinstance(out, list) or len(out) != n or not all(isinstance(s, str) for s in out):
            got = _describe(out)
            if isinstance(out, list):
                got = f"a list of {len(out)} ({', '.join(sorted({type(s).__name__ for s in out}))})"
            raise _Breach(f"generate() of {n} prompts returned {got}, expected a list of {n} str")
    elif name in ("option_logits", "answer_logprob"):
        k = len(a["options"] if name == "option_logits" else a["answers"])
        _tensor(out, (n, k), f"{name}() of {n} prompts and {k} options")
    elif name == "states":
        _tensor(out, (layers, n, None), f"states() of {n} prompts ({layers} layers)")
    elif name == "decide":
        if not isinstance(out, Decision):
            raise _Breach(f"decide() returned {_describe(out)}, expected a Decision(logits, states)")
        k = len(a["options"])
        _tensor(out.logits, (n, k), f"decide() of {n} prompts and {k} options: logits")
        _tensor(out.states, (layers, n, None), f"decide() of {n} prompts: states")
    elif name == "attentions":
        if not isinstance(out, Attentions):
            raise _Breach(f"attentions() returned {_describe(out)}, expected an Attentions")
        for layer, w in enumerate(out.weights):
            _tensor(w, (n, None, None), f"attentions() of {n} prompts: weights[{layer}]")


class ContractChecked:
    """A plug-in model whose protocol calls are checked (see module doc); everything else is the plug-in's
    own (attributes, other methods, assignments), so it satisfies the same protocols it does."""

    def __init__(self, spec: str, inner: Any) -> None:
        object.__setattr__(self, "_spec", spec)
        object.__setattr__(self, "_inner", inner)
        checks: dict[str, tuple[type, Callable[[Any, str, dict[str, Any], Any], None]]] = {}
        for protocol, methods, check in ((ImageTextScorer, _SCORER_METHODS, _check_scorer),
                                         (VisionLanguageModel, _VLM_METHODS, _check_vlm)):
            for m in methods:
                if callable(getattr(inner, m, None)):
                    checks[m] = (protocol, check)
        object.__setattr__(self, "_checks", checks)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        inner = object.__getattribute__(self, "_inner")
        value = getattr(inner, name)
        found = object.__getattribute__(self, "_checks").get(name)
        if found is None:
            return value
        protocol, check = found
        signature = inspect.signature(getattr(protocol, name))

        def call(*args: Any, **kwargs: Any) -> Any:
            out = value(*args, **kwargs)
            try:
                bound = signature.bind(None, *args, **kwargs)
            except TypeError:
                return out  # called off the protocol's signature: the plug-in's own business
            try:
                check(inner, name, dict(bound.arguments), out)
            except _Breach as breach:
                raise PluginContractError(f"plug-in {self._spec} broke the {protocol.__name__} contract: "
                                          f"{breach}") from None
            return out

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)

    def __repr__(self) -> str:
        return f"ContractChecked({self._spec!r}, {self._inner!r})"
