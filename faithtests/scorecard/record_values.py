"""Checking and converting what a suite hands the recorder (:mod:`faithtests.scorecard.recording`):
numbers (NaN is undefined, inf an error or a broken model), CIs, counts, per-item values, thumbnails,
the message of a failed or insufficient check, and where a deferred check was made."""

from __future__ import annotations

import base64
import io
import json
import math
import os
import sys
from collections.abc import Collection, Mapping, Sequence
from types import FrameType, TracebackType
from typing import Any, Protocol

from faithtests.scorecard.gate_kinds import kind_word
from faithtests.scorecard.kinds import is_fatal
from faithtests.scorecard.model import Exemplar, ItemValues, MetricResult, passes

THUMBNAIL_SIDE = 128
_EXEMPLAR_KEYS = frozenset({"image", "image_b", "texts", "scores", "reason"})


def json_safe(info: Mapping[str, Any], what: str) -> dict[str, Any]:
    """A JSON round trip of ``info`` (``str`` for unknown types); NaN/inf are errors."""
    try:
        out: dict[str, Any] = json.loads(json.dumps(dict(info), default=str, allow_nan=False))
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    return out


def fmt_number(x: float | None) -> str:
    if x is None:
        return "undefined"
    return f"{x:.3g}" if x != 0 and abs(x) < 1e-3 else f"{x:.3f}"


def finite(x: Any, what: str) -> float | None:
    """float(x), or None for NaN; inf and non-numbers are errors (plots, items)."""
    v = number(x, what)
    if v is not None and math.isinf(v):
        raise ValueError(f"{what} is infinite ({v}); record NaN (undefined) or a finite value")
    return v


def number(x: Any, what: str) -> float | None:
    """float(x) (inf kept), or None for NaN; non-numbers are errors."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a number, got {type(x).__name__}: {x!r}") from None
    return None if math.isnan(v) else v


def thumbnail_data_uri(image: Any, max_side: int = THUMBNAIL_SIDE, quality: int = 80) -> str:
    """A small JPEG thumbnail (longest side <= ``max_side``) of a PIL image, an image path, or an
    HxW(x3) uint8 array, as a ``data:`` URI. Reading errors propagate (the caller decides)."""
    from PIL import Image  # lazy: PIL, only when a test keeps exemplars

    if isinstance(image, str | os.PathLike):
        with Image.open(image) as im:
            im.load()
            img = im.convert("RGB")
    elif isinstance(image, Image.Image):
        img = image.convert("RGB")
    elif hasattr(image, "__array_interface__"):
        img = Image.fromarray(image).convert("RGB")
    else:
        raise TypeError(f"exemplar image must be a PIL image, a path or an array, got {type(image).__name__}")
    img.thumbnail((max_side, max_side))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def metric_ci(ci: Sequence[Any] | None, v: float | None,
              where: str) -> tuple[tuple[float, float] | None, str | None]:
    """(the CI, or None; why it is undefined, or None): a CI with a NaN or infinite bound is undefined
    (:class:`faithtests.stats.UndefinedCI` says why: too few clusters), not an error."""
    if ci is None or v is None:
        return None, None
    if len(ci) != 2:
        raise ValueError(f"{where}: ci must be (lo, hi), got {ci!r}")
    lo, hi = number(ci[0], f"{where} ci lo"), number(ci[1], f"{where} ci hi")
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return None, str(getattr(ci, "reason", "") or "undefined (the bootstrap gave no finite interval)")
    if lo > hi:
        raise ValueError(f"{where}: ci {tuple(ci)!r} is not an interval lo <= hi")
    return (lo, hi), None


def count(n: int | None, where: str) -> int | None:
    if n is not None and (isinstance(n, bool) or int(n) != n or n < 0):
        raise ValueError(f"{where}: n must be a non-negative integer, got {n!r}")
    return int(n) if n is not None else None


def per_item_values(per_item: ItemValues | Mapping[Any, Any] | None, v: float | None,
                    where: str) -> ItemValues | None:
    """The per-item values a metric is the mean of, checked to be its mean (when it is defined)."""
    if per_item is None:
        return None
    items = ItemValues.make(per_item.values if isinstance(per_item, ItemValues) else per_item,
                            per_item.clusters if isinstance(per_item, ItemValues) else None,
                            f"{where} per_item")
    mean = items.mean()
    if v is not None and mean is not None and abs(mean - v) > 1e-5 * max(1.0, abs(v)):
        raise ValueError(f"{where}: value {v:.6g} is not the mean of per_item ({mean:.6g})")
    return items


def _stats_text(r: MetricResult) -> str:
    """`` (95% CI 0.61–0.70, n=320)``, or ""."""
    stats = []
    if r.ci is not None:
        stats.append(f"95% CI {fmt_number(r.ci[0])}–{fmt_number(r.ci[1])}")
    elif r.ci_note:
        stats.append(f"95% CI {r.ci_note}")
    if r.n is not None:
        stats.append(f"n={r.n}")
    return f" ({', '.join(stats)})" if stats else ""


def _gate_text(r: MetricResult) -> str:
    gate = f"gate={r.gate}"
    if r.gate == "ci" and r.ci is not None:
        gate += f", bound {fmt_number(r.ci[0] if r.op in ('>=', '>') else r.ci[1])}"
    if r.gate == "ci" and r.ci is None:
        gate += f", no CI bound: CI {r.ci_note or 'undefined'}"
    if r.inconclusive:
        gate += ", inconclusive: the CI straddles the threshold"
    return gate


def failure_message(r: MetricResult, family: str | None, inf: float | None) -> str:
    """What a failed (or insufficient) check says: value, CI and n, the threshold, the gate, the labels;
    ``inf``: the infinite value recorded (undefined), said as such."""
    sl = f"[{r.slice}]" if r.slice else ""
    paren = _stats_text(r)
    labels = f"model={r.model or '-'}, variant={r.variant}" + (f", family={family}" if family else "")
    value = fmt_number(r.value) if inf is None else f"{inf} (non-finite: the model's outputs overflowed)"
    if r.coverage is not None:
        verdict = "no verdict: " + r.coverage
        if r.value is not None and r.op is not None and r.threshold is not None:
            verdict = (f"{'passes' if passes(r.value, r.op, r.threshold) else 'fails'} {r.op} "
                       f"{fmt_number(r.threshold)} but has " + verdict)
        return f"{r.suite}/{r.metric}{sl} = {value}{paren} {verdict} [{labels}]"
    return (
        f"{r.suite}/{r.metric}{sl} = {value}{paren} fails {r.op} "
        f"{fmt_number(r.threshold)} ({_gate_text(r)}) [{labels}]{kind_text(r)}"
    )


def kind_text(r: MetricResult) -> str:
    """`` (floor: a model ... )`` / `` (paper gate: IMAVB Table 1 ...)``: what kind of gate failed and
    what that means; "" for a check without a declared kind."""
    word = kind_word(r.gate_kind)
    if not word:
        return ""
    return f" ({word}: {r.gate_note})" if r.gate_note else f" ({word})"


def call_site() -> TracebackType | None:
    """The frames that called :meth:`Faith.check`, up to the test runner's, as a traceback: a deferred
    failure raised when the test ends still shows where its check was made (``--tb=long`` prints the
    test's source, as for a check that raised at once)."""
    frames: list[FrameType] = []
    frame: FrameType | None = sys._getframe(2)  # (0: here, 1: Faith.check)
    runner = ("_pytest", "pluggy")
    while frame is not None and not str(frame.f_globals.get("__name__", "")).startswith(runner):
        frames.append(frame)
        frame = frame.f_back
    tb: TracebackType | None = None
    for f in frames:  # innermost first: each outer frame's traceback points at the inner one
        tb = TracebackType(tb, f, f.f_lasti, f.f_lineno)
    return tb


def check_exemplar(i: int, item: Mapping[str, Any]) -> None:
    """An exemplar with a key the scorecard does not know is a suite bug: a ValueError naming it."""
    unknown = set(item) - _EXEMPLAR_KEYS
    if unknown:
        raise ValueError(f"exemplar {i}: unknown key(s) {sorted(unknown)} "
                         f"(allowed: {sorted(_EXEMPLAR_KEYS)})")


def exemplar(i: int, item: Mapping[str, Any], model: str, variant: str) -> Exemplar:
    """The :class:`Exemplar` of a suite's ``item`` (``Faith.exemplars``): images become small JPEG
    thumbnails here, on the worker. An unreadable image is ``None`` with the reason saying why; a
    non-finite score is left out and named in the reason (JSON has no NaN)."""
    check_exemplar(i, item)
    notes: list[str] = []
    images: list[str | None] = []
    for key in ("image", "image_b"):
        src = item.get(key)
        uri: str | None = None
        if src is not None:
            try:
                uri = thumbnail_data_uri(src)
            except TypeError:
                raise
            except Exception as exc:  # a display-only thumbnail must not fail the test
                notes.append(f"({key} unreadable: {type(exc).__name__}: {exc})")
        images.append(uri)
    scores: dict[str, float] = {}
    bad: list[str] = []
    for k, v in dict(item.get("scores", {})).items():
        f = float(v)
        if math.isfinite(f):
            scores[str(k)] = f
        else:
            bad.append(str(k))
    if bad:
        notes.append(f"(non-finite scores: {', '.join(bad)})")
    return Exemplar(
        reason=" ".join([str(item.get("reason", "")), *notes]).strip(),
        texts={str(k): str(v) for k, v in dict(item.get("texts", {})).items()},
        scores=scores, image=images[0], image_b=images[1], model=model, variant=variant,
    )


class Counts(Protocol):
    """A counter of unusable rows by kind (``faithtests.data.invalid.CountsInvalid``, read structurally:
    the data layer sits above this one)."""

    invalid: dict[str, int]
    examples: dict[str, list[str]]

    def totals(self) -> dict[str, int]: ...


def counted_rows(part: Counts, total: int, tag: str | None, untotalled: Collection[str]
                 ) -> list[tuple[str, int, int | None, list[str]]]:
    """(kind, count, out of, examples) per kind of ``part``, sorted by kind: out of ``total`` or the
    kind's own total; ``tag`` names the answer mode or variant in the kind, except on the one fatal kind
    (non-finite outputs fail every check of the model, whatever produced them); a kind in ``untotalled``
    is the model's answer noted (no total), so it never makes a check INSUFFICIENT."""
    own = part.totals()
    return [(kind if tag is None or is_fatal(kind) else f"{kind} [{tag}]", n,
             None if kind in untotalled else own.get(kind, total), part.examples.get(kind, []))
            for kind, n in sorted(part.invalid.items())]
