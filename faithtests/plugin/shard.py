"""Test sharding for CI matrices and batch schedulers: ``--faith-shard K/N`` (ini ``faith_shard``) runs
shard K (1-based) of N of the collected tests; ``faithtests merge`` of the N reports is the whole run.

- Whole groups go to a shard: a test's group is its ``xdist_group`` (:mod:`.distribution`: a model's
  label, or ``LABEL/STAGE`` for a small model), so a model loads once per shard and a model stage runs
  on one shard; a test without a model is a group of its own.
- The split is a pure function of the collection (:func:`assign`): groups sorted heaviest first (ties
  by name) go one by one to the lightest shard (longest processing time first). The weight of a group
  is its recorded seconds when the pytest cache has a record of every group (``GROUP_SECONDS_KEY``,
  written by unsharded ``-n`` runs; a shard run never writes it, so the shards of one run read the same
  record), else its test count.
- Every shard computes the whole plan and records its digest in the scorecard fingerprint (``shard``);
  ``faithtests merge`` refuses shards planned differently (another selection or cache record) and an
  incomplete set of shards, so a merged report has every test exactly once.
- Baseline results of tests in other shards are not "missing" (:func:`split_missing`): the shard's gate
  notes them; the whole run is gated after the merge (``faithtests compare BASELINE MERGED``).
- Under xdist each worker plans the same split; the controller gets the plan from a worker's output.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import pytest

from faithtests.plugin.distribution import GROUP_SECONDS_KEY
from faithtests.plugin.item_keys import record_test_id
from faithtests.plugin.options import get_options
from faithtests.scorecard.model import test_key

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_OUTPUT = "faith_shard"  # xdist workeroutput key: the plan a worker made


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` -> (K, N) with 1 <= K <= N; anything else is a ``pytest.UsageError``."""
    m = _SPEC.match(text)
    if m is None:
        raise pytest.UsageError(f"--faith-shard: {text!r} is not K/N (shard K of N, 1-based, e.g. 2/3)")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= k <= n:
        raise pytest.UsageError(f"--faith-shard: {text!r}: K must be between 1 and N (got K={k}, N={n})")
    return k, n


def assign(weights: Mapping[str, float], n: int) -> list[list[str]]:
    """Groups -> ``n`` shards, greedy longest processing time first: heaviest group first (ties by
    name) to the shard with the least weight (then the fewest groups, then the lowest index, so no
    shard stays empty while there are at least ``n`` groups). Deterministic; shard i is list i."""
    bins: list[list[str]] = [[] for _ in range(n)]
    loads = [0.0] * n
    for name in sorted(weights, key=lambda g: (-weights[g], g)):
        i = min(range(n), key=lambda b: (loads[b], len(bins[b]), b))
        bins[i].append(name)
        loads[i] += weights[name]
    return bins


@dataclass
class ShardPlan:
    """Shard ``index`` of ``count``; the rest is filled at collection."""

    index: int
    count: int
    digest: str = ""  # sha256 of every collected test's key and shard: equal on every shard of a run
    weights: str = ""  # "seconds" (recorded) or "tests"
    groups: int = 0  # groups shared out
    collected: int = 0  # tests before sharding
    selected: int = 0  # tests of this shard
    elsewhere: frozenset[str] = field(default_factory=frozenset)  # result keys of the other shards' tests

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def fingerprint(self) -> dict[str, Any]:
        return {"shard": {"index": self.index, "count": self.count, "plan": self.digest,
                          "weights": self.weights, "groups": self.groups, "tests": self.selected,
                          "collected": self.collected}}

    def to_output(self) -> dict[str, Any]:
        return {**self.fingerprint()["shard"], "elsewhere": sorted(self.elsewhere)}

    def update(self, out: Mapping[str, Any]) -> None:
        """The plan made by an xdist worker (the controller collects nothing)."""
        self.digest, self.weights = str(out["plan"]), str(out["weights"])
        self.groups, self.selected = int(out["groups"]), int(out["tests"])
        self.collected = int(out["collected"])
        self.elsewhere = frozenset(str(k) for k in out["elsewhere"])


FAITH_SHARD = pytest.StashKey[ShardPlan]()


@pytest.hookimpl(trylast=True)  # after faithtests.plugin.pytest_hooks has parsed the options
def pytest_configure(config: pytest.Config) -> None:
    text = get_options(config).shard
    if not text:
        return
    k, n = parse_shard(text)
    if get_options(config).update_baseline:
        raise pytest.UsageError(
            f"--faith-shard {k}/{n} with --faith-update-baseline would write one shard's results as the "
            "baseline: run the shards, `faithtests merge` them, and use the merged scorecard.json")
    config.stash[FAITH_SHARD] = ShardPlan(k, n)


class _Item(Protocol):
    @property
    def nodeid(self) -> str: ...

    def iter_markers(self, name: str | None = None) -> Any: ...


I = TypeVar("I", bound=_Item)  # noqa: E741  (an item)


def group_key(item: _Item) -> str:
    """The unit a shard takes whole: the test's ``xdist_group`` (as xdist joins several), else itself."""
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    return "_".join(names) if names else f"test:{item.nodeid}"


def split(items: Sequence[I], keys: Sequence[str], plan: ShardPlan,
          seconds: Mapping[str, float] | None) -> list[I]:
    """Fill ``plan`` and return this shard's items (in their collected order)."""
    groups: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(group_key(item), []).append(i)
    if len(groups) < plan.count:
        raise pytest.UsageError(
            f"--faith-shard {plan.label}: the selected tests form only {len(groups)} group(s) (a model or "
            f"model stage, or a test without a model, each), too few for {plan.count} shards: use at most "
            f"{len(groups)} shards")
    timed = bool(seconds) and all(g in seconds for g in groups)  # type: ignore[operator]
    weights = {g: float(seconds[g]) if timed else float(len(ix)) for g, ix in groups.items()}  # type: ignore[index]
    shard_of = {g: s for s, names in enumerate(assign(weights, plan.count)) for g in names}
    where = [shard_of[group_key(item)] for item in items]
    plan.digest = hashlib.sha256("".join(f"{k}\t{s}\n" for k, s in sorted(zip(keys, where, strict=True)))
                                 .encode()).hexdigest()
    plan.weights = "seconds" if timed else "tests"
    plan.groups, plan.collected = len(groups), len(items)
    mine = [item for item, s in zip(items, where, strict=True) if s == plan.index - 1]
    plan.selected = len(mine)
    plan.elsewhere = frozenset(k for k, s in zip(keys, where, strict=True) if s != plan.index - 1)
    return mine


@pytest.hookimpl(trylast=True)  # after -k/-m deselection and the model marks; before the @group suffix
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    plan = config.stash.get(FAITH_SHARD, None)
    if plan is None or not items:
        return
    cache = getattr(config, "cache", None)
    seconds = cache.get(GROUP_SECONDS_KEY, None) if cache is not None else None
    mine = split(items, [record_test_id(item) for item in items], plan,
                 seconds if isinstance(seconds, dict) else None)
    chosen = {id(item) for item in mine}
    deselected = [item for item in items if id(item) not in chosen]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = mine
    workeroutput: dict[str, Any] | None = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_OUTPUT] = plan.to_output()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: take the plan a worker made (every worker makes the same one)."""
    plan = node.config.stash.get(FAITH_SHARD, None)
    out = getattr(node, "workeroutput", {}).get(_OUTPUT)
    if plan is not None and out is not None and not plan.digest:
        plan.update(out)


def fingerprint(config: pytest.Config) -> dict[str, Any]:
    """The fingerprint's ``shard`` field of a sharded run; nothing for a whole run."""
    plan = config.stash.get(FAITH_SHARD, None)
    return plan.fingerprint() if plan is not None else {}


D = TypeVar("D")


def split_missing(config: pytest.Config, missing: list[D], notes: list[str]) -> list[D]:
    """The baseline's missing results that count against a shard: those of tests in other shards are
    expected (a note says so); a test no shard collected is still missing."""
    plan = config.stash.get(FAITH_SHARD, None)
    if plan is None or not missing:
        return missing
    elsewhere = [test_key(str(getattr(d, "test", ""))) in plan.elsewhere for d in missing]
    if any(elsewhere):
        tests = len({str(getattr(d, "test", "")) for d, e in zip(missing, elsewhere, strict=True) if e})
        notes.append(f"note: {sum(elsewhere)} baseline result(s) of {tests} test(s) belong to other shards "
                     f"of --faith-shard {plan.label} (expected, not gated here): gate the whole run with "
                     "`faithtests merge` of every shard, then `faithtests compare BASELINE MERGED`")
    return [d for d, e in zip(missing, elsewhere, strict=True) if not e]
