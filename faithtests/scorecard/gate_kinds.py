"""What kind of gate a default threshold is (``suites/thresholds.toml``, README "Thresholds"): a *paper
gate* names the table whose rows measure the same quantity and quotes them with the verdict the gate
gives each (a library test applies it to every row); a *floor* has no paper row and says what its
failure means. Parsed here so the thresholds parser stays about values, slices and merging."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KINDS = ("paper", "floor")
#: The kind of an entry a user file changed: its value is the user's, no longer the default's anchor.
USER_KIND = "user"
#: The fields of a default entry that say its kind.
KIND_FIELDS = ("kind", "family_kind", "anchor", "pass", "fail", "means")
#: How each kind is named where a check is shown (failure message, HTML badge, verdict list).
KIND_WORDS = {"paper": "paper gate", "floor": "floor", USER_KIND: "your threshold"}


def kind_word(kind: str | None) -> str:
    """The words for ``kind`` (:data:`KIND_WORDS`), "" for a check without one."""
    return KIND_WORDS.get(kind, kind) if kind else ""


class ThresholdError(ValueError):
    """A thresholds file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class PaperRow:
    """A paper's published value of the gated quantity for one of its models, and the verdict the gate
    must give it (``family``: checked at that family's value)."""

    model: str
    value: float
    passes: bool
    family: str | None = None


def number(x: object, where: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(float(x)):
        raise ThresholdError(f"{where}: value {x!r} is not a finite number")
    return float(x)


def _text(x: object, what: str, where: str) -> str:
    if not isinstance(x, str) or not x.strip():
        raise ThresholdError(f"{where}: {what} must be a non-empty string, got {x!r}")
    return " ".join(x.split())


def _rows(spec: dict[str, Any], family: Mapping[str, float], where: str) -> tuple[PaperRow, ...]:
    """``pass`` / ``fail`` tables of model = value; a model name ending in `` @FAMILY`` is checked at that
    family's value."""
    out = []
    for verdict in ("pass", "fail"):
        table = spec.get(verdict, {})
        if not isinstance(table, dict):
            raise ThresholdError(f"{where}: {verdict} must be a table of model = value, got {table!r}")
        for model, v in table.items():
            name, _, fam = str(model).partition(" @")
            if fam and fam.lower() not in family:
                raise ThresholdError(
                    f"{where}: {verdict}.{model!r} names family {fam!r}, which has no value here")
            out.append(PaperRow(name, number(v, f"{where}: {verdict}.{model}"), verdict == "pass",
                                fam.lower() or None))
    return tuple(out)


def kind_fields(spec: dict[str, Any], family: Mapping[str, float], where: str) -> dict[str, Any]:
    """The kind fields of a default entry: ``kind`` ("paper" needs ``anchor`` and quoted ``pass`` /
    ``fail`` rows; "floor" needs ``means``), ``family_kind`` for a family gated another way."""
    if "kind" not in spec:
        if any(k in spec for k in ("family_kind", "anchor", "pass", "fail", "means")):
            raise ThresholdError(f"{where}: anchor, pass, fail, means and family_kind go with a kind")
        return {}
    fk = spec.get("family_kind", {})
    if not isinstance(fk, dict) or any(str(f).lower() not in family for f in fk):
        raise ThresholdError(f"{where}: family_kind must map families of this entry to a kind, got {fk!r}")
    kinds = {spec["kind"], *fk.values()}
    bad = sorted(str(k) for k in kinds if k not in KINDS)
    if bad:
        raise ThresholdError(f"{where}: kind {bad[0]!r} is not one of {', '.join(KINDS)}")
    out: dict[str, Any] = {"kind": spec["kind"], "family_kind": {str(f).lower(): k for f, k in fk.items()}}
    if "paper" in kinds:
        out["anchor"] = _text(spec.get("anchor"), "anchor (the paper table whose rows it is checked on)",
                              where)
        out["rows"] = _rows(spec, family, where)
        if not out["rows"]:
            raise ThresholdError(
                f"{where}: a paper gate quotes its rows (pass / fail tables of model = value)")
    elif "pass" in spec or "fail" in spec or "anchor" in spec:
        raise ThresholdError(f"{where}: only a paper gate has an anchor and quoted rows")
    if "floor" in kinds:
        out["means"] = _text(spec.get("means"), "means (what a failure of the floor means)", where)
    return out
