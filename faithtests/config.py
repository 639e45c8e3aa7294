"""Options declared once and read through one rule, and what a protocol's fixtures may know about the run.

- :class:`Option`: one faithtests option (the plugin's in :mod:`faithtests.plugin.option_table`, a
  protocol's in its manifest). :func:`setting` reads it: command line, else ini, else its default, then
  its parser, the same rule for every option. Relative paths given on the command line are relative to
  the invocation directory, paths in the ini file to the ini file's folder (pytest's convention for
  ``paths`` ini values); :class:`Source` tells a parser which, and how to name the value in a message.
- :class:`RunConfig`: dataset locations, the item limit, the seed and the cache folder, built once by
  the plugin at configure time; protocol packages read it with :func:`run_config` (they sit below the
  plugin and never import it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest


@dataclass(frozen=True)
class Source:
    """Where a setting's raw value came from: ``cli`` (the command line) or not (the ini file or the
    default); ``base`` is the folder relative paths start from; ``label`` names it in messages
    (``--faith-cache`` or ``ini faith_cache``)."""

    cli: bool
    base: Path
    label: str


Kind = Literal["value", "flag", "list"]


@dataclass(frozen=True)
class Option:
    """One faithtests option, declared once (by the plugin or a protocol's manifest).

    ``name`` is the ini key and the command-line dest; the flag is ``--`` + the name with dashes.
    ``kind``: ``value`` (a string; ini type string), ``flag`` (store_true; ini type bool) or ``list``
    (repeatable; ini type linelist). ``default`` is the ini default (``cli=False``: the value when the
    key is absent) or, for a command-line-only option (``ini=False``), the flag's default. ``parse``
    turns the raw value into the setting (``parse(raw, source)``; usage errors raise
    ``pytest.UsageError``). ``cli_type`` is argparse's ``type`` for the flag (argparse's own error then),
    ``const`` makes the value optional (``--flag`` alone means ``const``). ``ini_help``: the ini line's
    help when it is not the flag's. ``section``: the options reference's section.
    """

    name: str
    help: str
    default: Any = None
    kind: Kind = "value"
    parse: Callable[[Any, Source], Any] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    cli: bool = True  # False: an ini-only key
    ini: bool = True  # False: a command-line-only flag
    cli_type: Callable[[str], Any] | None = None
    const: str | None = None
    ini_help: str | None = None
    section: str = "run"
    doc_default: str | None = None  # the reference's default column when ``default`` is not what applies

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def where(self, source: Source) -> str:
        """``--faith-x`` or ``ini faith_x`` for messages, by where the value came from."""
        return self.flag if source.cli or not self.ini else f"ini {self.name}"


def _raw(config: pytest.Config, option: Option) -> tuple[Any, Source]:
    """The unparsed value and its source: the one place faithtests reads its options from pytest."""
    cwd = config.invocation_params.dir
    if option.cli:
        value = config.getoption(option.name)
        if value is not None or not option.ini:  # a command-line-only option: its flag's default
            return value, Source(True, cwd, option.flag)
    # without an ini file, ini values and defaults are relative to where pytest was started: the rootdir
    # moves with the arguments (a path-like option value can move it up a folder)
    base = config.inipath.parent if config.inipath else cwd
    return config.getini(option.name), Source(False, base, f"ini {option.name}")


def setting_source(config: pytest.Config, option: Option) -> tuple[Any, Source]:
    """The parsed value of ``option`` and where it came from (command line > ini > default)."""
    raw, source = _raw(config, option)
    return (option.parse(raw, source) if option.parse is not None else raw), source


def setting(config: pytest.Config, option: Option) -> Any:
    """The value of ``option`` in this run: command line, else ini, else its default (parsed)."""
    return setting_source(config, option)[0]


def foreign_option(config: pytest.Config, dest: str, default: Any = None) -> Any:
    """An option another plugin owns (pytest-xdist's ``numprocesses``): the one documented exception to
    reading options through :func:`setting`, since faithtests declares neither its flag nor its default."""
    return config.getoption(dest, default)


@dataclass(frozen=True)
class RunConfig:
    data: Mapping[str, Path] = field(default_factory=dict)  # --faith-data NAME=PATH, resolved
    limit: int | None = None  # --faith-limit: at most N items per dataset
    scale: int = 1  # --faith-profile full: the suites' own sizes times this (never past --faith-limit)
    #: protocol -> its own limit (``None``: none) where a profile sets one apart from ``limit``
    limits: Mapping[str, int | None] = field(default_factory=dict)
    seed: int = 0  # --faith-seed: item sampling and bootstrap
    cache: Path | None = None  # --faith-cache: persistent outputs (and generated data) of this run
    answer_mode: str = "auto"  # --faith-answer-mode: how models answer multiple-choice prompts
    #: each protocol's own options (its manifest's), option name -> parsed value, read once with the
    #: plugin's: a protocol's fixtures read them here (:meth:`option`), never from the command line
    protocol: Mapping[str, Any] = field(default_factory=dict)

    def option(self, option: Option) -> Any:
        """The parsed value of a protocol's ``option`` in this run."""
        return self.protocol[option.name]

    def capped(self, n: int, protocol: str | None = None) -> int:
        """A suite's ``n`` items, times :attr:`scale` (``--faith-profile full``), or fewer under
        ``--faith-limit`` (or ``protocol``'s own limit in :attr:`limits`)."""
        limit = self.limits.get(protocol, self.limit) if protocol is not None else self.limit
        return min(n * self.scale, limit) if limit else n * self.scale


#: ``--faith-answer-mode``: ``auto`` scores the option letters where the model gives their
#: log-probabilities, else parses its generated letter; ``generated`` makes every model generate
#: (:mod:`faithtests.models.letters`).
ANSWER_MODES = ("auto", "generated")

RUN_CONFIG = pytest.StashKey[RunConfig]()


def run_config(config: pytest.Config) -> RunConfig:
    return config.stash[RUN_CONFIG]


#: Protocol settings that change what a run measures (e.g. frames per video clip): name -> value,
#: written by protocol fixtures at configure time, copied into the fingerprint's ``settings``.
SETTINGS = pytest.StashKey[dict[str, Any]]()


def record_setting(config: pytest.Config, name: str, value: Any) -> None:
    """Record a protocol setting (JSON-safe value) for the scorecard's fingerprint."""
    config.stash.setdefault(SETTINGS, {})[name] = value


def settings(config: pytest.Config) -> dict[str, Any]:
    """The recorded protocol settings, sorted by name."""
    return dict(sorted(config.stash.get(SETTINGS, {}).items()))


K = TypeVar("K")
V = TypeVar("V")


def session_memo(config: pytest.Config, key: pytest.StashKey[dict[K, V]], k: K, make: Callable[[], V]) -> V:
    """``make()`` once per session for ``k`` (a protocol fixture's per-(model, dataset) data or its
    dataset's records), kept in the config's stash under ``key``: every test of the session shares it."""
    cache = config.stash.setdefault(key, {})
    if k not in cache:
        cache[k] = make()
    return cache[k]
