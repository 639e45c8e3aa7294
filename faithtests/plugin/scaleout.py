"""Scale-out options of the model stage: ``--faith-ray`` (a pool of Ray actors per model) and
``--faith-device-map`` (an HF VLM spread over the GPUs of one process or actor, via accelerate).

- ``--faith-ray [ADDRESS]`` (ini ``faith_ray``): ``local`` (also the bare flag) starts a Ray instance for
  the run and stops it at the end; ``auto`` joins the cluster this machine belongs to; anything else is a
  cluster address (``ray://head:10001``, ``head:6379``). Off by default.
- ``--faith-ray-actors N`` (ini ``faith_ray_actors``, default 2): actors per model, each holding one copy.
- ``--faith-ray-gpus-per-actor G`` (ini ``faith_ray_gpus_per_actor``, default 0): GPUs each actor holds
  (with ``--faith-device-map auto`` a model spreads over them).
- ``--faith-device-map MAP`` (ini ``faith_device_map``): ``auto``/``balanced``/``balanced_low_0``/
  ``sequential`` go to ``from_pretrained(device_map=...)`` of HF VLMs; needs accelerate.

Every mistake is a usage error at configure time (exit 4): ray or accelerate missing (naming what to
install), a count out of range, ``--faith-ray`` with ``--faith-cache`` (pooled models keep their caches
in memory only: :mod:`faithtests.models.ray_pool`) or with xdist workers (one pool serves the run).
Nothing here imports torch or ray at plugin load.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from faithtests.config import Option, foreign_option
from faithtests.plugin.option_table import (
    DEVICE_MAP,
    DEVICE_MAPS,
    RAY,
    RAY_ACTORS,
    RAY_EXTRA,
    RAY_GPUS,
)
from faithtests.plugin.options import get_options

if TYPE_CHECKING:
    from faithtests.models.ray_actors import RaySettings

__all__ = ["DEVICE_MAPS", "RAY_EXTRA", "device_map", "load_options", "ray_settings", "ray_threads",
           "start_pool", "stop"]
_SETTINGS = pytest.StashKey[Any]()  # RaySettings | None, parsed once
_ACTORS = pytest.StashKey[list[Any]]()  # every actor this run started
_STARTED = pytest.StashKey[bool]()  # whether this run started the Ray instance


def _importable(name: str) -> bool:
    """Whether ``name`` imports (not just whether it is found: a broken install is missing too)."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def _value(config: pytest.Config, option: Option) -> tuple[str, str]:
    """(text, where it came from for messages: ``--faith-x`` or ``ini faith_x``), as parsed once."""
    return get_options(config).scale[option.name]


def _number(text: str, where: str, minimum: float, kind: type) -> Any:
    try:
        value = kind(text)
    except ValueError:
        what = "whole number" if kind is int else "number"
        raise pytest.UsageError(f"{where}: {text!r} is not a {what}") from None
    if value < minimum:
        raise pytest.UsageError(f"{where}: {value} must be >= {minimum}")
    return value


def ray_settings(config: pytest.Config) -> RaySettings | None:
    """The parsed ``--faith-ray*`` options, or None when Ray is off; checked once (usage errors)."""
    if _SETTINGS in config.stash:
        return config.stash[_SETTINGS]  # type: ignore[no-any-return]
    address, where = _value(config, RAY)
    settings = None
    if address:
        settings = _parse(config, address, where)
    config.stash[_SETTINGS] = settings
    return settings


def _parse(config: pytest.Config, address: str, where: str) -> RaySettings:
    if address.endswith(".py") or "::" in address or Path(address).exists():
        raise pytest.UsageError(f"{where} took {address!r} as the Ray address; write --faith-ray local (or "
                                "put test paths before --faith-ray)")
    if not _importable("ray"):
        raise pytest.UsageError(f"{where} needs ray, which is not installed: {RAY_EXTRA}")
    if get_options(config).cache is not None:
        raise pytest.UsageError(f"{where} cannot be combined with --faith-cache / ini faith_cache: pooled "
                                "models keep their caches in the driver's memory only")
    if int(foreign_option(config, "numprocesses", 0) or 0) > 0:
        raise pytest.UsageError(f"{where} cannot be combined with xdist (-n): one process drives the pool")
    from faithtests.models.ray_actors import RaySettings  # lazy: ray, an optional extra

    actors_text, actors_where = _value(config, RAY_ACTORS)
    gpus_text, gpus_where = _value(config, RAY_GPUS)
    return RaySettings(
        address=address,
        actors=_number(actors_text or "2", actors_where, 1, int),
        gpus_per_actor=_number(gpus_text or "0", gpus_where, 0, float),
        threads=ray_threads(get_options(config).threads),
    )


def ray_threads(threads: int | None) -> int:
    """Torch threads of each Ray actor: ``--faith-threads`` (``threads``), else 1 (an actor has no thread
    policy of its own; in the driver, an unset ``--faith-threads`` leaves the choice to the policy)."""
    return threads or 1


def device_map(config: pytest.Config) -> str | None:
    """``--faith-device-map`` / ini ``faith_device_map``, checked (usage errors), or None."""
    text, where = _value(config, DEVICE_MAP)
    if not text:
        return None
    if text not in DEVICE_MAPS:
        raise pytest.UsageError(f"{where}: {text!r} is not one of {', '.join(DEVICE_MAPS)}")
    if not _importable("accelerate"):
        raise pytest.UsageError(f"{where} {text} needs accelerate, which is not installed: "
                                "pip install accelerate")
    return text


def load_options(config: pytest.Config) -> dict[str, Any]:
    """Adapter options for :func:`faithtests.load_model` (HF VLMs read ``device_map``)."""
    dm = device_map(config)
    return {} if dm is None else {"device_map": dm}


def start_pool(config: pytest.Config, spec: str, device: str, dtype: str, batch: int,
               local: Any) -> Any:
    """The pooled adapter of ``spec`` (Ray joined or started on first use)."""
    from faithtests.models.ray_actors import connect, start_pool  # lazy: ray, an optional extra

    settings = ray_settings(config)
    assert settings is not None
    if _STARTED not in config.stash:
        config.stash[_STARTED] = connect(settings.address)
    model, hosts = start_pool(spec, settings, device=device, dtype=dtype, batch_size=batch,
                              options=load_options(config), local=local)
    config.stash.setdefault(_ACTORS, []).extend(hosts)
    return model


def stop(config: pytest.Config) -> None:
    if _STARTED in config.stash:
        from faithtests.models.ray_actors import stop  # lazy: ray, an optional extra

        actors: list[Any] = config.stash.get(_ACTORS, [])
        stop(actors, config.stash[_STARTED])
