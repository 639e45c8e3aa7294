"""The controller's item log and viewer (``items.jsonl.gz`` and ``items.html`` beside the scorecard).

The rows come with each test's record (:attr:`TestRecord.outputs`, moved out of the record on arrival so
``scorecard.json`` never holds them); with ``--faith-baseline`` and the baseline's own item log beside its
scorecard (:func:`~faithtests.scorecard.item_log.log_beside`: ``items.jsonl.gz`` beside a ``scorecard.json``,
``NAME.items.jsonl.gz`` beside a baseline file ``NAME.json``, where ``--faith-update-baseline`` copies the
run's log: :func:`keep_baseline_log`), the viewer also shows the items whose outcome flipped, with
thumbnails rendered here from the rows' image references (a reference-world ref or an image file;
:func:`image_of`). Without that log, a note and the viewer say that item flips were not compared.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from faithtests.reports.viewer import VIEWER, render_viewer
from faithtests.scorecard.item_log import ITEM_LOG, iter_item_log, log_beside, log_rows, write_item_log
from faithtests.scorecard.scorecard import Scorecard, atomic_write_text


def image_of(ref: str) -> Any:
    """The image an item's ``inputs`` names (a PIL image), or None when it names none this process can
    read: a reference-world ref (its generator module imported by the run) or an existing image file."""
    from PIL import Image  # lazy: PIL, only when a baseline's flipped items get thumbnails

    from faithtests.world.refs import resolve_image_ref, resolve_pair_ref  # lazy: world, only for thumbnails

    if ref.startswith("world/"):
        try:
            return resolve_image_ref(ref)
        except ValueError:
            try:
                return resolve_pair_ref(ref)[0]
            except ValueError:
                return None
    if os.path.isfile(ref):
        with Image.open(ref) as im:
            im.load()
            return im.copy()
    return None


def write_item_report(out: Path, sc: Scorecard, outputs: Mapping[str, list[dict[str, Any]]],
                      baseline: Path | None, notes: list[str]) -> list[Path]:
    """Write the item log and the viewer into ``out``; the paths written. ``outputs``: test key -> rows.
    A run whose tests logged nothing writes neither (and removes a previous run's)."""
    tests = [(t.suite, t.test, outputs.get(t.test, [])) for t in sc.tests]
    log = out / ITEM_LOG
    if not any(rows for _, _, rows in tests):
        log.unlink(missing_ok=True)
        (out / VIEWER).unlink(missing_ok=True)
        return []
    rows = list(log_rows(tests))  # JSON-native already (``output_row`` bounds every value)
    write_item_log(rows, log)
    written = [log]
    base_rows, why = _baseline_rows(baseline) if baseline else (None, "")
    if why:
        notes.append(why)
    # the viewer is built from the rows in memory: reading the log back gave the same rows (a JSON round
    # trip of JSON-native values) and cost a warm run a gunzip and a parse of every row
    html = render_viewer(rows, baseline_rows=base_rows, image_of=image_of,
                         baseline_label=str(baseline) if baseline else None, baseline_note=why)
    atomic_write_text(out / VIEWER, html)
    written.append(out / VIEWER)
    return written


def _baseline_rows(baseline: Path) -> tuple[list[dict[str, Any]] | None, str]:
    """(the rows of the item log kept with the baseline, None without a readable one; the note saying why
    item flips are not compared, "" when they are or there is no baseline yet: --faith-update-baseline)."""
    card = baseline / "scorecard.json" if baseline.is_dir() else baseline
    log = log_beside(card)
    if not log.exists():
        if not card.exists():
            return None, ""
        return None, (f"note: no item log beside the baseline {card} ({log} does not exist): item flips not "
                      "compared in items.html (--faith-update-baseline keeps the run's log there; a "
                      f"scorecard copied by hand needs its report's {ITEM_LOG} copied to that name)")
    try:
        return list(iter_item_log(log)), ""
    except ValueError as exc:  # damaged: the viewer is still written (the scorecard links it)
        return None, (f"warning: the baseline's item log is unreadable ({exc}): item flips not compared in "
                      "items.html; the gate reads the baseline scorecard, not this log")


def keep_baseline_log(written: Sequence[Path], baseline: Path) -> list[Path]:
    """Copy the item log this run wrote (one of ``written``) beside the baseline file it becomes
    (:func:`~faithtests.scorecard.item_log.log_beside`), atomically; a run that logged none removes the old
    baseline's there (its flips would be against another run). The paths written."""
    dest = log_beside(baseline)
    src = next((p for p in written if p.name == ITEM_LOG), None)
    if src is None:
        dest.unlink(missing_ok=True)
        return []
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return [dest]
