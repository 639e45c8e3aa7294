"""The Ray side of ``--faith-ray``: actors that each hold one copy of a model, and the pool over them.

Each actor loads the model from the same spec with :func:`faithtests.load_model` (so a cluster node needs
faithtests and the checkpoint where the spec points) and serves two roles: ``model`` (the adapter as
loaded) and ``scorer`` (an HF VLM through its caption log-likelihood, :class:`VLMScorer`, built on the
same copy). The driver sees :mod:`.ray_pool`'s adapters. ray is imported only when a pool starts.

Device: an actor with GPUs (``gpus_per_actor > 0``) uses ``cuda`` (Ray sets its visible devices); an
actor without uses ``cpu`` unless ``--faith-device`` names one. torch threads per actor are explicit.
Actors reserve no CPUs (``num_cpus=0``): a run holds one pool per model for the whole session, and
reserved CPUs would leave the next model's actors pending forever on a small instance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import faithtests
from faithtests.models.ray_pool import PooledScorer, PooledVLM

#: How ``--faith-ray`` names a Ray instance started (and stopped) by the run itself.
LOCAL = "local"


@dataclass(frozen=True)
class RaySettings:
    address: str  # "local", "auto" or a cluster address (ray://host:10001, host:6379)
    actors: int = 2
    gpus_per_actor: float = 0.0
    threads: int = 1  # torch intra-op threads in each actor


class ModelHost:
    """One actor's model (wrapped by ``ray.remote`` in :func:`start_pool`; a plain class for tests)."""

    def __init__(self, spec: str, device: str, dtype: str, batch_size: int, threads: int,
                 options: dict[str, Any]) -> None:
        import torch  # lazy: the plugin imports this module torch-free

        torch.set_num_threads(threads)
        self.model: Any = faithtests.load_model(spec, device=device, dtype=dtype, batch_size=batch_size,
                                                **options)
        self._scorer: Any = None

    def _target(self, role: str) -> Any:
        if role == "model":
            return self.model
        if self._scorer is None:
            from faithtests.models.vlm_scorer import VLMScorer  # lazy: torch (see ModelHost)

            self._scorer = VLMScorer(self.model)
        return self._scorer

    def call(self, role: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return getattr(self._target(role), method)(*args, **kwargs)

    def meta(self, role: str) -> dict[str, Any]:
        """What the driver's adapter answers without a call: spec, fingerprint, sizes, score kind."""
        from faithtests.models.hf_vlm import HFVisionLanguageModel  # lazy: torch (see ModelHost)

        m = self._target(role)
        return {"spec": m.spec, "fingerprint": m.fingerprint(), "num_layers": getattr(m, "num_layers", None),
                "batch_size": getattr(m, "batch_size", None) or getattr(self.model, "batch_size", None),
                "score_kind": getattr(m, "score_kind", "cosine"),
                "answer_prefix": getattr(m, "answer_prefix", ""),
                "accepts_audio": bool(getattr(m, "accepts_audio", False)),  # an omni model hears
                "audio_window_s": getattr(m, "audio_window_s", None),  # ... this much of a clip whole
                # what it lacks, found at its load (faithtests.models.capabilities)
                "lacks": dict(getattr(m, "meta", {}).get("lacks") or {}),
                "kind": "vlm" if isinstance(m, HFVisionLanguageModel) else "scorer"}


class RolePool:
    """A :class:`~faithtests.models.ray_pool.Pool` over ``hosts`` for one role. ``run(host, role, method,
    args, kwargs)`` starts a call and ``wait(handles)`` collects results (Ray: ``.remote`` and
    ``ray.get``; tests: direct calls)."""

    def __init__(self, hosts: Sequence[Any], role: str, run: Callable[..., Any],
                 wait: Callable[[list[Any]], list[Any]], dumps: Callable[[object], bytes]) -> None:
        self.hosts, self.role, self._run, self._wait, self._dumps = list(hosts), role, run, wait, dumps
        self.size = len(self.hosts)

    def map(self, method: str, calls: Sequence[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[Any]:
        handles = [self._run(h, self.role, method, a, k)
                   for h, (a, k) in zip(self.hosts, calls, strict=False)]
        return self._wait(handles)

    def why_unshippable(self, obj: object) -> str | None:
        try:
            self._dumps(obj)
        except Exception as exc:  # any pickling failure means "cannot ship"
            return f"{type(exc).__name__}: {exc}"
        return None

    def with_role(self, role: str) -> RolePool:
        return RolePool(self.hosts, role, self._run, self._wait, self._dumps)


def adapter(pool: RolePool, info: dict[str, Any], local: Callable[[], Any] | None,
            meta: Callable[[str], dict[str, Any]]) -> PooledScorer | PooledVLM:
    """The driver's adapter over ``pool``: a :class:`PooledVLM` (with ``as_scorer``) or a scorer."""
    m = meta(pool.role)
    if m["kind"] != "vlm":
        return PooledScorer(pool, m, info, local)
    return PooledVLM(pool, m, info, local,
                     scorer=lambda: PooledScorer(pool.with_role("scorer"), meta("scorer"), info, None))


def connect(address: str) -> bool:
    """Join or start Ray; True when this call started a local instance (the run then stops it)."""
    import ray  # lazy: an optional extra

    if ray.is_initialized():
        return False
    if address == LOCAL:
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
        return True
    ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    return False


def start_pool(spec: str, settings: RaySettings, *, device: str, dtype: str, batch_size: int,
               options: dict[str, Any], local: Callable[[], Any] | None) -> tuple[PooledScorer | PooledVLM,
                                                                                  list[Any]]:
    """``settings.actors`` actors holding ``spec``; returns the driver's adapter and the actor handles."""
    import ray  # lazy: an optional extra

    actor_device = "cuda" if settings.gpus_per_actor > 0 else ("cpu" if device == "auto" else device)
    # num_cpus=0: an actor reserves only its GPUs, so every model of a session can hold its pool at once
    # (reserving a CPU each, the second model's actors waited forever on a 2-core instance)
    remote: Any = ray.remote(num_cpus=0, num_gpus=settings.gpus_per_actor)(ModelHost)
    hosts: list[Any] = [remote.remote(spec, actor_device, dtype, batch_size, settings.threads, options)
             for _ in range(settings.actors)]
    pool = RolePool(hosts, "model", lambda h, *a: h.call.remote(*a), ray.get, ray.cloudpickle.dumps)
    info = {"address": settings.address, "actors": settings.actors,
            "gpus_per_actor": settings.gpus_per_actor, "threads_per_actor": settings.threads}

    def meta(role: str) -> dict[str, Any]:
        return dict(ray.get(hosts[0].meta.remote(role)))

    try:
        return adapter(pool, info, local, meta), hosts
    except BaseException:  # a model that fails to load, or an interrupt: no actor may keep its GPUs
        for h in hosts:
            ray.kill(h)
        raise


def stop(handles: Sequence[Any], started: bool) -> None:
    """Kill the actors; stop Ray when the run started it."""
    import ray  # lazy: an optional extra

    if not ray.is_initialized():
        return
    for h in handles:
        ray.kill(h)
    if started:
        ray.shutdown()
