"""The item viewer (``items.html`` beside ``scorecard.html``): the run's item log as one offline page.

Self-contained like the scorecard (:mod:`faithtests.reports.html`): inline CSS and script pinned by hash
in a Content-Security-Policy that forbids every fetch; the rows are embedded as a JSON data block (never
executed), so the page opens from ``file://``. Stable hooks for browser tests: the filter form
``#viewer-filters`` (inputs ``test``, ``model``, ``variant``, ``outcome``, ``text``), the table
``#viewer-items`` with one ``tr.item`` per shown row, and, with a baseline, ``#viewer-flips``: the items
whose outcome differs between the baseline's log and this run's, side by side, with thumbnails of the
first :data:`MAX_THUMBS` of them (rendered by the caller's ``image_of``; small PNG data URIs).

Bounded: at most :data:`MAX_ROWS` rows are embedded (every row of the default run), shared between the
tests' item groups with each group's failed and invalid items first (:func:`embedded`; the page says how
many the log holds beyond), long strings repeated across rows stored once (:func:`interned`). The script
pages through every embedded row, :data:`PAGE_ROWS` at a time (``#viewer-prev``, ``#viewer-next``,
``#viewer-page``), the failed and invalid items first (``#viewer-flagged`` keeps only those); a click on a
column header (``th[data-col]``) sorts by it, again reverses; a click on a row shows all its fields in
``#viewer-detail``. At most :data:`MAX_FLIPS` flipped items are listed, the first :data:`MAX_THUMBS`
with thumbnails.
"""

from __future__ import annotations

import base64
import io
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from faithtests.reports.html import _csp_hash, _environment
from faithtests.reports.word_diff import marked_texts

VIEWER = "items.html"
MAX_ROWS = 50_000
PAGE_ROWS = 200
MIN_INTERN = 12
REF = "\u2063"  # marks a reference into the data block's string table (an invisible separator)
MAX_FLIPS = 300
MAX_THUMBS = 48
THUMB_SIDE = 64
_COLUMNS = ("suite", "test", "model", "variant", "metric", "slice", "item", "inputs", "output", "outcome",
            "invalid")
ImageOf = Callable[[str], Any]


def outcome_text(x: Any) -> str:
    """An outcome as the page shows and filters it: ``true`` / ``false`` / the number / the label."""
    if x is None:
        return ""
    if isinstance(x, bool):
        return "true" if x else "false"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def show(v: Any) -> str:
    """A logged value as text: a string as it is, a dict as ``key: value`` lines, the rest as JSON."""
    if isinstance(v, str):
        return v
    if isinstance(v, Mapping):
        return "\n".join(f"{k}: {show(x)}" for k, x in v.items())
    return json.dumps(v, ensure_ascii=False)


def row_key(r: Mapping[str, Any]) -> tuple[str, ...]:
    """The identity of an item across runs: test, model, variant, metric, slice, item."""
    return tuple(str(r.get(c) or "") for c in ("test", "model", "variant", "metric", "slice", "item"))


def png_thumbnail(image: Any, side: int = THUMB_SIDE) -> str:
    """A PIL image as a small PNG data URI (longest side ``side``)."""
    img = image.convert("RGB")
    img.thumbnail((side, side))
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


@dataclass
class Flip:
    key: tuple[str, ...]
    baseline: Mapping[str, Any]
    current: Mapping[str, Any]
    thumbs: list[str]


def _refs(r: Mapping[str, Any]) -> list[str]:
    inputs = r.get("inputs") or {}
    return [str(inputs[k]) for k in ("image", "image_b") if isinstance(inputs.get(k), str)]


def flips(rows: Sequence[Mapping[str, Any]], baseline_rows: Sequence[Mapping[str, Any]],
          image_of: ImageOf | None) -> tuple[list[Flip], int]:
    """(the first :data:`MAX_FLIPS` items whose outcome differs from the baseline's, how many differ)."""
    base = {row_key(r): r for r in baseline_rows}
    out: list[Flip] = []
    total = 0
    cache: dict[str, str | None] = {}
    for r in rows:
        b = base.get(row_key(r))
        if b is None or outcome_text(b.get("outcome")) == outcome_text(r.get("outcome")):
            continue
        total += 1
        if len(out) >= MAX_FLIPS:
            continue
        thumbs: list[str] = []
        for ref in _refs(r) if image_of is not None and len(out) < MAX_THUMBS else []:
            if ref not in cache:
                try:
                    img = image_of(ref)  # type: ignore[misc]
                    cache[ref] = png_thumbnail(img) if img is not None else None
                except Exception:  # a display-only thumbnail never fails the report
                    cache[ref] = None
            if cache[ref]:
                thumbs.append(str(cache[ref]))
        out.append(Flip(row_key(r), b, r, thumbs))
    return out, total


def _bad_first(r: Mapping[str, Any]) -> int:
    """Sort key: an invalid or failed (false / zero) item before a passing one."""
    return 0 if r.get("invalid") or r.get("outcome") in (False, 0) else 1


def embedded(rows: Sequence[Mapping[str, Any]], limit: int = MAX_ROWS) -> tuple[list[Mapping[str, Any]], int]:
    """At most ``limit`` rows for the page, shared fairly between the (test, model, variant, metric, slice)
    groups (a group under its share keeps all its rows; the rest split what is left), each group's
    failed and invalid items first; (the rows, the per-group cap or 0 when every row fits)."""
    if len(rows) <= limit:
        return list(rows), 0
    by: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        by.setdefault(row_key(r)[:5], []).append(r)
    sizes = sorted(len(g) for g in by.values())
    cap, left, groups = 0, limit, len(sizes)
    for size in sizes:  # the largest cap that fits: small groups whole, the others equal shares
        share = left // groups
        if size > share:
            cap = share
            break
        left, groups = left - size, groups - 1
    out = [r for g in by.values() for r in sorted(g, key=_bad_first)[:cap or len(g)]]
    return out, cap


def _strings(v: Any) -> Iterator[str]:
    if isinstance(v, str):
        yield v
    elif isinstance(v, Mapping):
        for x in v.values():
            yield from _strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)


def interned(values: Sequence[Any]) -> tuple[list[str], Callable[[Any], Any]]:
    """The string table of ``values`` (every string of at least :data:`MIN_INTERN` characters that occurs
    twice or more: a caption shown to every model, a reply given to many items) and the encoder that
    writes such a string as ``REF`` + its index (a string that starts with ``REF`` gets a second one);
    the viewer's script decodes it."""
    counts = Counter(s for v in values for s in _strings(v) if len(s) >= MIN_INTERN)
    table = [s for s, n in counts.items() if n > 1]
    index = {s: i for i, s in enumerate(table)}

    def enc(v: Any) -> Any:
        if isinstance(v, str):
            return f"{REF}{index[v]}" if v in index else (REF + v if v.startswith(REF) else v)
        if isinstance(v, Mapping):
            return {k: enc(x) for k, x in v.items()}
        if isinstance(v, list):
            return [enc(x) for x in v]
        return v

    return table, enc


def _data_block(rows: Sequence[Mapping[str, Any]]) -> Markup:
    """Rows in a JSON data block, the labels of each (suite, test, model, variant, metric, slice) group
    stored once and repeated long strings of the inputs and outputs once (:func:`interned`); ``<``,
    ``>`` and ``&`` escaped so no text can close the script tag."""
    groups: dict[tuple[Any, ...], int] = {}
    strings, enc = interned([v for r in rows for v in (r.get("inputs"), r.get("output"))])
    packed = []
    for r in rows:
        g = groups.setdefault(tuple(r.get(c) for c in _COLUMNS[:6]), len(groups))
        packed.append([g, enc(r.get("item")), enc(r.get("inputs")), enc(r.get("output")),
                       outcome_text(r.get("outcome")), enc(r.get("invalid"))])
    data = {"columns": list(_COLUMNS), "groups": [list(g) for g in groups], "strings": strings,
            "rows": packed}
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _assets(env: Any) -> dict[str, Any]:
    """The inline CSS and script and the CSP pinning exactly them (as the scorecard's)."""
    css = env.get_template("viewer.css.j2").render()
    script = env.get_template("viewer.js.j2").render(page_rows=PAGE_ROWS)
    csp = (f"default-src 'none'; img-src data:; style-src '{_csp_hash(css)}'; "
           f"script-src '{_csp_hash(script)}'; base-uri 'none'; form-action 'none'")
    return {"css": Markup(css), "script": Markup(script), "csp": csp}


def _choices(rows: Sequence[Mapping[str, Any]], column: str) -> list[str]:
    if column == "outcome":
        return sorted({outcome_text(r.get("outcome")) for r in rows} - {""})[:50]
    return sorted({str(r.get(column) or "") for r in rows} - {""})


def render_viewer(rows: Sequence[Mapping[str, Any]], *,
                  baseline_rows: Sequence[Mapping[str, Any]] | None = None,
                  image_of: ImageOf | None = None, title: str = "faithtests item log",
                  baseline_label: str | None = None, baseline_note: str = "") -> str:
    """The viewer page of an item log's ``rows`` (and a baseline log's, for the flipped items;
    ``baseline_note``: why a baseline's items are not compared, shown in their place)."""
    env = _environment()
    assets = _assets(env)
    shown, cap = embedded(rows)
    flipped, n_flips = flips(rows, baseline_rows, image_of) if baseline_rows is not None else ([], 0)
    return env.get_template("viewer.html.j2").render(
        title=title, **assets, data=_data_block(shown), n_rows=len(rows), n_shown=len(shown), cap=cap,
        page_rows=PAGE_ROWS, has_baseline=baseline_rows is not None, baseline_label=baseline_label or "",
        baseline_note=baseline_note,
        flips=flipped, n_flips=n_flips, max_flips=MAX_FLIPS,
        choices={c: _choices(shown, c) for c in ("test", "model", "variant", "outcome")},
        show=show, marked=lambda d: marked_texts({str(k): show(v) for k, v in (d or {}).items()}),
        outcome_text=outcome_text,
    )
