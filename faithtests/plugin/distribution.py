"""Which xdist worker runs what (``pytest suites/ -n N``), so that workers share the work instead of
repeating it.

- ``-n N`` without ``--dist`` means ``--dist loadgroup`` (xdist's own default, ``load``, would load
  every model on every worker and repeat every model stage there). ``--dist load`` etc. still win.
- Each test parametrised with a model carries one ``xdist_group``: the model's label, so a model is
  loaded on one worker. A *small* model (weights under :data:`SPLIT_MODEL_BYTES` on disk, the reference
  models) is loaded on every worker that needs it, because loading it costs less than the work it
  does: its group is ``LABEL/STAGE``, where the stage is the set of fixtures of the test that use the
  model with the values of the parameters they take (e.g. ``flip_scored(world,flip)``), so tests
  sharing a model stage still run on one worker and the stage runs once. Tests that use a model
  directly share the group ``LABEL``. Groups are marked at collection (``pytest_collection_modifyitems``
  in :mod:`.model_fixtures`), when every parameter of a test is known.
- The pytest >= 9.2 shim writes the group suffix into the structured node id (pytest-xdist#1386).
- Longest groups first: the controller records each group's seconds in pytest's cache
  (:data:`GROUP_SECONDS_KEY`); the next ``-n`` run collects the groups longest-first (groups it has
  no record of first of all) and turns xdist's own reorder (by test count) off, so the worker that
  finishes early takes the next-longest group instead of starting a long one last. A ``--faith-shard``
  run reads the record (to balance the shards) but never writes it.
- ``worker_device``: worker ``gwN`` uses ``cuda:N % device_count`` when the device is plain "cuda".

Torch-free: the plugin imports no torch at load.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

import pytest

from faithtests.models.locations import weight_bytes
from faithtests.plugin.options import get_options

#: Models whose weight files are smaller than this may load on several workers (see module doc):
#: the reference models (a few MB) load in well under a second, a 2B model in float32 (~9 GB) does not.
SPLIT_MODEL_BYTES = 256 * 2**20
#: xdist's loadgroup takes the group after the last "@" of a node id only when no "]" follows it.
_NO_SCOPE_CHARS = str.maketrans({"@": "_", "[": "(", "]": ")"})
#: pytest cache key: {xdist group: seconds of its tests in the last ``-n`` run}.
GROUP_SECONDS_KEY = "faithtests/xdist_group_seconds"


def group_of(nodeid: str) -> str | None:
    """The loadgroup work unit of a node id (xdist's own rule), None for an ungrouped test."""
    return nodeid.split("@")[-1] if nodeid.rfind("@") > nodeid.rfind("]") else None


def longest_first(items: list[Any], seconds: Mapping[str, float]) -> list[Any]:
    """``items`` stably ordered by their group's recorded seconds, longest first; a group without a
    record counts as the longest (it may be new and heavy), ungrouped tests as the shortest."""

    def weight(item: Any) -> float:
        group = group_of(str(item.nodeid))
        return -1.0 if group is None else seconds.get(group, float("inf"))

    return sorted(items, key=weight, reverse=True)


def _cache(config: pytest.Config) -> Any:
    return getattr(config, "cache", None)  # None under -p no:cacheprovider


class GroupClock:
    """Controller of a loadgroup run: each group's seconds, saved to pytest's cache at the end."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if (group := group_of(report.nodeid)) is not None:
            self.seconds[group] = self.seconds.get(group, 0.0) + float(report.duration)

    def pytest_sessionfinish(self) -> None:
        if self.seconds:
            self.cache.set(GROUP_SECONDS_KEY, {**self.cache.get(GROUP_SECONDS_KEY, {}), **self.seconds})


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Controller of a loadgroup run: time the groups; with a record, keep our collection order."""
    cache = _cache(config)
    if hasattr(config, "workerinput") or getattr(config.option, "dist", None) != "loadgroup" or cache is None:
        return
    # a shard's record would change the split of the shards that start after it (see .shard)
    if not get_options(config).shard:
        config.pluginmanager.register(GroupClock(cache), "faithtests-group-clock")
    if cache.get(GROUP_SECONDS_KEY, None):
        config.option.loadscopereorder = False


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, object, object]:
    """Before xdist's own (tryfirst) hook turns ``-n N`` with no ``--dist`` into ``load``: make it
    ``loadgroup``. A wrapper, because a wrapper's first half runs before every plain implementation."""
    option = config.option
    if getattr(option, "numprocesses", None) and getattr(option, "dist", None) == "no" and not getattr(
        option, "distload", False
    ):
        option.dist = "loadgroup"
    return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist (controller): workers build their config from the command line, not from ours, so tell
    them when the ``loadgroup`` default above applies."""
    if getattr(node.config.option, "dist", None) == "loadgroup":
        node.workerinput["faith_loadgroup"] = True


def _loadgroup(config: pytest.Config) -> bool:
    workerinput: dict[str, Any] = getattr(config, "workerinput", {})
    return bool(getattr(config.option, "loadgroup", False) or workerinput.get("faith_loadgroup"))


def model_stage(fixturenames: Sequence[str], fixturedefs: Mapping[str, Sequence[Any]], model: str,
                params: Mapping[str, object] | None = None) -> str:
    """The fixtures in a test's closure that (transitively) use fixture ``model``, joined with "+"
    ("" when the test uses the model only directly), each followed by the values of the parameters it
    takes directly (``flip_scored(world,flip)``): protocol fixtures keep their model outputs for the
    session per parameter values, so tests with the same stage share one computation."""

    def uses_model(name: str, seen: frozenset[str]) -> bool:
        for arg in getattr(fixturedefs.get(name, [None])[-1], "argnames", ()):
            if arg == model or (arg not in seen and uses_model(arg, seen | {arg})):
                return True
        return False

    stage = sorted(n for n in fixturenames
                   if n != model and n in fixturedefs and uses_model(n, frozenset({n})))
    out = []
    for name in stage:
        args = getattr(fixturedefs[name][-1], "argnames", ())
        values = [str((params or {})[a]) for a in args if a != model and a in (params or {})]
        out.append(f"{name}({','.join(values)})" if values else name)
    return "+".join(out)


def group_name(item: pytest.Item, model_fixture: str, label: str, spec: str) -> str:
    """The ``xdist_group`` of a test parametrised with the model ``label`` (see module doc)."""
    size = weight_bytes(spec)
    if size is None or size >= SPLIT_MODEL_BYTES:
        return label.translate(_NO_SCOPE_CHARS)
    info = getattr(item, "_fixtureinfo", None)  # pytest internals: the closure's fixture definitions
    defs: Mapping[str, Sequence[Any]] = getattr(info, "name2fixturedefs", {})
    params: Mapping[str, object] = getattr(getattr(item, "callspec", None), "params", {})
    stage = model_stage(list(getattr(item, "fixturenames", ())), defs, model_fixture, params)
    return (f"{label}/{stage}" if stage else label).translate(_NO_SCOPE_CHARS)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On the workers, after xdist's own hook: give each grouped item its ``@group`` node-id suffix,
    which is how ``--dist loadgroup`` schedules. Needed (a) when loadgroup is our default (xdist's hook
    does not know it) and (b) on pytest >= 9.2 (pytest-dev/pytest-xdist#1386): xdist appends the suffix
    to the legacy ``_nodeid`` field, which structured node ids no longer read, so groups would be
    silently ignored and a model would load on every worker."""
    if not _loadgroup(config):
        return
    parse: Any = None
    try:  # lazy: a pytest >= 9.2 internal, absent before
        from _pytest.nodeid import NodeId  # type: ignore[import-not-found, unused-ignore]

        parse = NodeId.parse
    except ImportError:
        pass  # pytest < 9.2: the legacy field is the node id
    for item in items:
        marks = item.iter_markers("xdist_group")
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks})
        suffix = "@" + "_".join(groups)
        if not groups or item.nodeid.endswith(suffix):
            continue
        if parse is not None and hasattr(item, "_id"):
            item._id = parse(item.nodeid + suffix)
        else:
            setattr(item, "_nodeid", item.nodeid + suffix)  # noqa: B010  (a private field of pytest's)
    cache = _cache(config)
    recorded = cache.get(GROUP_SECONDS_KEY, None) if cache is not None else None
    if recorded:
        items[:] = longest_first(items, recorded)


def worker_device(device: str, worker: str | None, device_count: int) -> str:
    """Pin xdist worker ``gwN`` to ``cuda:N % device_count`` when ``device`` is plain "cuda"."""
    if device != "cuda" or not worker or device_count < 2:
        return device
    digits = worker.removeprefix("gw")
    return f"cuda:{int(digits) % device_count}" if digits.isdigit() else device
