"""Pass/fail thresholds: ``suites/thresholds.toml`` plus an optional user file merged over it.

Format (one table per suite; a key is a metric, or ``metric[slice]`` for one slice)::

    [flip_sensitivity]
    PR = { op = ">=", value = 0.80, family = { siglip = 0.45 } }
    "PR[color]" = { op = ">=", value = 0.70 }

* In the default file every entry needs ``op`` (one of ``>= > <= <``) and a numeric ``value``;
  ``family`` maps a model family to its own value (same ``op``).
* The user file (``--faith-thresholds``) may only *override* what the defaults define: an unknown suite
  or metric key is an error naming the key and the file (a typo must not silently keep the default).
  A user entry may give any subset of ``op``/``value``/``family`` (family entries merge key-wise), or a
  bare number meaning ``value``.
* Lookup of ``(suite, metric, slice)`` tries ``metric[slice]`` and then ``metric``, so a metric-level
  threshold also applies to its slices unless a slice overrides it.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from faithtests.scorecard.model import OPS, Op

_KEY = re.compile(r"^(?P<metric>[^\[\]]+)(?:\[(?P<slice>[^\[\]]+)\])?$")
_FIELDS = ("op", "value", "family")


class ThresholdError(ValueError):
    """A thresholds file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Threshold:
    """One configured threshold (``family`` keys are lower-case)."""

    op: Op
    value: float
    family: Mapping[str, float] = field(default_factory=dict)
    source: str = ""  # the file that set it last

    def value_for(self, families: Iterable[str] = ()) -> tuple[float, str | None]:
        """The value for the first candidate family that has its own entry, else the default value."""
        for fam in families:
            v = self.family.get(fam.lower())
            if v is not None:
                return v, fam.lower()
        return self.value, None


@dataclass(frozen=True)
class ResolvedThreshold:
    """What a check compares against: op, value, the family that chose it (if any), and the source."""

    op: Op
    value: float
    family: str | None
    source: str
    key: str  # the key that matched: "PR[color]" or "PR"


def metric_key(metric: str, slice: str | None = None) -> str:
    return f"{metric}[{slice}]" if slice else metric


def split_key(key: str) -> tuple[str, str | None]:
    m = _KEY.match(key)
    if m is None:
        raise ValueError(f"{key!r} is not 'metric' or 'metric[slice]'")
    return m["metric"].strip(), (m["slice"].strip() if m["slice"] else None)


class Thresholds:
    """The merged thresholds of a run."""

    def __init__(self, table: Mapping[str, Mapping[str, Threshold]] | None = None,
                 files: Iterable[str] = ()) -> None:
        self._table: dict[str, dict[str, Threshold]] = {s: dict(t) for s, t in (table or {}).items()}
        self.files: tuple[str, ...] = tuple(files)  # every file consulted, in merge order

    def __contains__(self, suite: str) -> bool:
        return suite in self._table

    def suites(self) -> list[str]:
        return list(self._table)

    def entries(self, suite: str) -> dict[str, Threshold]:
        return dict(self._table.get(suite, {}))

    def lookup(self, suite: str, metric: str, slice: str | None = None,
               families: Iterable[str] = ()) -> ResolvedThreshold | None:
        entries = self._table.get(suite, {})
        keys = [metric_key(metric, slice), metric] if slice else [metric]
        fams = list(families)
        for key in keys:
            t = entries.get(key)
            if t is not None:
                value, fam = t.value_for(fams)
                return ResolvedThreshold(op=t.op, value=value, family=fam, source=t.source, key=key)
        return None

    def describe_files(self) -> str:
        return ", ".join(self.files) if self.files else "no thresholds file"


def _number(x: object, where: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(float(x)):
        raise ThresholdError(f"{where}: value {x!r} is not a finite number")
    return float(x)


def _op(x: object, where: str) -> Op:
    if x not in OPS:
        raise ThresholdError(f"{where}: op {x!r} is not one of {', '.join(OPS)}")
    return x


def _family(x: object, where: str) -> dict[str, float]:
    if not isinstance(x, dict):
        raise ThresholdError(f"{where}: family must be a table of family = value, got {x!r}")
    return {str(k).lower(): _number(v, f"{where}: family.{k}") for k, v in x.items()}


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ThresholdError(f"{path}: cannot read thresholds file ({exc.strerror or exc})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThresholdError(f"{path}: not valid TOML ({exc})") from None


def _entries(data: dict[str, Any], source: str) -> Iterable[tuple[str, str, Any]]:
    for suite, body in data.items():
        if not isinstance(body, dict):
            raise ThresholdError(f"{source}: [{suite}] must be a table of metric thresholds, got {body!r}")
        for key, spec in body.items():
            where = f"{source}: [{suite}] {key}"
            try:
                split_key(key)
            except ValueError as exc:
                raise ThresholdError(f"{where}: {exc}") from None
            yield suite, key, spec


def _check_fields(spec: dict[str, Any], where: str) -> None:
    unknown = sorted(set(spec) - set(_FIELDS))
    if unknown:
        raise ThresholdError(
            f"{where}: unknown field(s) {', '.join(unknown)} (allowed: {', '.join(_FIELDS)})"
        )


def parse_defaults(data: dict[str, Any], source: str) -> Thresholds:
    """Parse the default (complete) thresholds table."""
    table: dict[str, dict[str, Threshold]] = {}
    for suite, key, spec in _entries(data, source):
        where = f"{source}: [{suite}] {key}"
        if not isinstance(spec, dict) or "op" not in spec or "value" not in spec:
            raise ThresholdError(f"{where}: needs {{ op = \">=\", value = ... }}, got {spec!r}")
        _check_fields(spec, where)
        table.setdefault(suite, {})[key] = Threshold(
            op=_op(spec["op"], where),
            value=_number(spec["value"], where),
            family=_family(spec.get("family", {}), where),
            source=source,
        )
    return Thresholds(table, [source])


def _did_you_mean(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _known_in(base: Thresholds) -> str:
    return f"not in {base.describe_files()}" if base.files else "no default thresholds file was loaded"


def merge_user(base: Thresholds, data: dict[str, Any], source: str) -> Thresholds:
    """Merge a user table over ``base``; keys unknown to ``base`` are errors."""
    table = {s: base.entries(s) for s in base.suites()}
    for suite, key, spec in _entries(data, source):
        where = f"{source}: [{suite}] {key}"
        if suite not in table:
            raise ThresholdError(
                f"{source}: unknown suite {suite!r} ({_known_in(base)})"
                + _did_you_mean(suite, table)
            )
        old = table[suite].get(key)
        if old is None:
            raise ThresholdError(
                f"{source}: unknown metric key {key!r} in suite [{suite}] ({_known_in(base)})"
                + _did_you_mean(key, table[suite])
            )
        if not isinstance(spec, dict):
            spec = {"value": spec}
        _check_fields(spec, where)
        new = old
        if "op" in spec:
            new = replace(new, op=_op(spec["op"], where))
        if "value" in spec:
            new = replace(new, value=_number(spec["value"], where))
        if "family" in spec:
            new = replace(new, family={**old.family, **_family(spec["family"], where)})
        table[suite][key] = replace(new, source=source)
    return Thresholds(table, [*base.files, source])


def load_thresholds(default: Path | None, user: Path | None = None, *,
                    default_required: bool = False) -> Thresholds:
    """Load the defaults (an absent file is allowed unless ``default_required``) and merge ``user``."""
    if default is not None and default.is_file():
        merged = parse_defaults(_read_toml(default), str(default))
    elif default is not None and default_required:
        raise ThresholdError(f"{default}: default thresholds file not found")
    else:
        merged = Thresholds()
    if user is not None:
        if not user.is_file():
            raise ThresholdError(f"{user}: thresholds file not found")
        merged = merge_user(merged, _read_toml(user), str(user))
    return merged
