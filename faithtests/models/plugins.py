"""Models from outside faithtests: ``py:package.module:factory`` and prefixes that packages register.

- ``py:package.module:factory`` imports ``package.module`` and calls ``factory()``;
- a package registers a prefix with an entry point in the group ``faithtests.models`` (name = the prefix
  without its colon, value = ``module:factory``); the spec ``NAME:REST`` then calls ``factory("REST")``.

A factory receives, as keyword arguments, those of ``device`` (``torch.device``), ``dtype``
(``torch.dtype``) and ``batch_size`` (int) that its signature declares (all of them with ``**kwargs``).
What it returns must satisfy :class:`~faithtests.models.interfaces.ImageTextScorer` or
:class:`~faithtests.models.interfaces.VisionLanguageModel`; anything else is refused at load with the
members it lacks, not when a suite first calls a missing method. What it returns from each protocol call
is then checked too (:mod:`.contracts`: tensors of the protocol's shapes, unit-length embeddings, a list of
str from ``generate``), so a breach names the plug-in rather than failing deep inside a metric.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from faithtests.models.errors import ModelNotFoundError, ModelSpecError, UnsupportedModelError
from faithtests.models.interfaces import ImageTextScorer, VisionLanguageModel

ENTRY_POINT_GROUP = "faithtests.models"
PY_PREFIX = "py:"


def plugin_prefixes() -> dict[str, EntryPoint]:
    """Prefix name (no colon) -> entry point, for every installed package that registers one."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def py_target(spec: str) -> tuple[str, str]:
    """(module, factory name) of a ``py:`` spec."""
    module, sep, factory = spec.removeprefix(PY_PREFIX).partition(":")
    if not sep or not module or not factory.isidentifier():
        raise ModelSpecError(f"{spec}: expected py:package.module:factory")
    return module, factory


def protocol_members(protocol: type) -> dict[str, bool]:
    """Member name -> is it a method, over a Protocol class and its protocol bases."""
    out: dict[str, bool] = {}
    for base in reversed(protocol.__mro__):
        if base.__name__ in ("Protocol", "Generic", "object"):
            continue
        out.update({name: False for name in getattr(base, "__annotations__", {}) if not name.startswith("_")})
        out.update({name: True for name, value in vars(base).items()
                    if callable(value) and not name.startswith("_")})
    return out


def missing_members(obj: Any, protocol: type) -> list[str]:
    """What ``obj`` lacks of ``protocol``: absent attributes, and methods that are absent or not callable."""
    return sorted(name for name, is_method in protocol_members(protocol).items()
                  if not hasattr(obj, name) or (is_method and not callable(getattr(obj, name))))


def checked(spec: str, obj: Any) -> Any:
    """``obj``, its calls checked (:class:`~.contracts.ContractChecked`), if it satisfies one of the two
    model protocols, else an error naming what each one lacks."""
    from faithtests.models.contracts import ContractChecked  # lazy: torch; the plugin imports this module

    gaps = {p.__name__: missing_members(obj, p) for p in (ImageTextScorer, VisionLanguageModel)}
    if not all(gaps.values()):
        return ContractChecked(spec, obj)
    lacking = " nor ".join(f"an {name} (missing: {', '.join(g)})" if name[0] in "AEIOU"
                           else f"a {name} (missing: {', '.join(g)})" for name, g in gaps.items())
    raise UnsupportedModelError(
        f"{spec}: the factory returned a {type(obj).__name__}, which is neither {lacking}")


def _call(factory: Callable[..., Any], args: tuple[Any, ...], context: dict[str, Any]) -> Any:
    """Call with the keyword arguments the factory declares: one that needs none takes none."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin or C callable without a signature: give it everything
        return factory(*args, **context)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return factory(*args, **context)
    return factory(*args, **{k: v for k, v in context.items() if k in params})


def load_py(spec: str, **context: Any) -> Any:
    """``py:package.module:factory``: import, call, check against the protocols."""
    module_name, name = py_target(spec)
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ModelNotFoundError(f"{spec}: cannot import {module_name!r}: {err}") from err
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ModelSpecError(f"{spec}: module {module_name!r} has no callable {name!r}")
    return checked(spec, _call(factory, (), context))


def load_entry_point(spec: str, prefix: str, **context: Any) -> Any:
    """``PREFIX:REST`` for a prefix registered in ``faithtests.models``: ``factory("REST")``, checked."""
    ep = plugin_prefixes()[prefix]
    try:
        factory = ep.load()
    except Exception as err:  # whatever the package raises on import, name the entry point
        raise ModelNotFoundError(f"{spec}: the {ENTRY_POINT_GROUP} entry point {prefix!r} = {ep.value!r} "
                                 f"failed to load: {err}") from err
    return checked(spec, _call(factory, (spec.removeprefix(f"{prefix}:"),), context))
