"""The report directory's lifecycle and the baseline gate's preconditions (controller only).

* :class:`ReportLock`: at the start of a run that records results the controller checks that the report
  directory is writable (``pytest.UsageError`` if not), takes ``.faithtests.lock`` (pid, host, start; a
  second run on the same directory refuses; a lock whose pid is dead on this host is taken over with a
  note) and marks the previous ``scorecard.json`` ``"status": "superseded"`` (its HTML is removed), so a
  run that dies before writing never leaves the last run's report looking current. Released at the end.
* :func:`check_comparable`: the baseline's fingerprint against this run's (seed, limit, gate, data
  sets, thresholds): a difference is a usage error unless ``--faith-allow-mismatch`` names the field.
* :func:`missing_message`: the gate fails when baseline results were not compared (unless allowed).
* :data:`EXIT_STATUS`: a note's "exit status N" says the run's final status (:func:`final_notes`),
  whatever a later step changed; :func:`none_selected`: pytest's exit status 5 explained.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from faithtests.plugin.option_table import PROFILES
from faithtests.protocols import DIAGNOSTIC
from faithtests.scorecard.baseline import MetricDelta, test_label
from faithtests.scorecard.fingerprint import (
    COMPARABLE,
    comparable,
    describe_mismatch,
    mismatches,
    now_iso,
    refused_mismatches,
)
from faithtests.scorecard.scorecard import Scorecard, atomic_write_text

#: Stands for the run's exit status in a note: the terminal summary writes the final one in its place
#: (:func:`final_notes`), so no note names a status the run does not end with.
EXIT_STATUS = "exit status {exit}"
LOCK_NAME = ".faithtests.lock"
SUPERSEDED = "superseded"
MAX_LISTED = 10


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class ReportLock:
    """``.faithtests.lock`` in the report directory, held from the start of the run to its end."""

    def __init__(self, report_dir: Path, option: str = "--faith-report") -> None:
        self.dir = report_dir
        self.path = report_dir / LOCK_NAME
        self.held = False
        self.option = option  # what chose the directory, for messages (``faithtests merge`` takes it too)

    def acquire(self, notes: list[str], supersede: bool = True) -> None:
        """Writable check, lock, supersede the previous report (unless ``supersede`` is False: a merge
        into another file of the folder); every failure is a ``UsageError``."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            probe = self.dir / f".faithtests.probe.{os.getpid()}"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise pytest.UsageError(
                f"{self.option}: cannot write to {self.dir} ({exc.strerror or exc}); "
                f"choose a writable directory with {self.option} DIR") from None
        me = {"pid": os.getpid(), "host": socket.gethostname(), "start": now_iso()}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._take_over_if_stale(notes)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(me, fh)
            self.held = True
            break
        if not self.held:  # another run took the stale lock first
            raise pytest.UsageError(f"{self.option}: {self.dir} was taken by another faithtests run "
                                    f"while this one started; use another {self.option} DIR")
        if supersede:
            self._supersede_previous()

    def _take_over_if_stale(self, notes: list[str]) -> None:
        try:
            other: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
            pid, host = int(other["pid"]), str(other["host"])
        except (OSError, ValueError, KeyError, TypeError):
            other, pid, host = {}, -1, ""
        if pid > 0 and host == socket.gethostname() and not _alive(pid):
            # rename, then check it is still the dead run's lock: two runs taking over at once must not
            # both delete a lock (one of them could be the other's fresh one)
            aside = self.path.with_name(f"{LOCK_NAME}.stale.{os.getpid()}")
            try:
                os.rename(self.path, aside)
            except OSError:
                return  # gone already: the caller tries to create it again
            try:
                taken: dict[str, Any] = json.loads(aside.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                taken = {}
            if taken.get("pid") != other.get("pid") or taken.get("start") != other.get("start"):
                os.replace(aside, self.path)  # another run's fresh lock: put it back, it holds the dir
            else:
                aside.unlink(missing_ok=True)
                notes.append(f"note: took over the stale lock {self.path} of pid {pid} (no longer running)")
            return
        who = f"pid {pid} on host {host}, since {other.get('start', '?')}" if pid > 0 else "unreadable lock"
        raise pytest.UsageError(
            f"{self.option}: {self.dir} is in use by another faithtests run ({who}); wait for it to finish "
            f"or use another {self.option} DIR (delete {self.path} if that run is gone)")

    def _supersede_previous(self) -> None:
        """The previous run's scorecard.json says ``superseded`` until this run writes its own; its HTML
        (which cannot be re-marked without re-rendering) is removed: ``faithtests render`` rebuilds it."""
        old = self.dir / "scorecard.json"
        if old.exists():
            try:
                data = json.loads(old.read_text(encoding="utf-8"))
                if not isinstance(data, dict):
                    raise ValueError("not an object")
            except (OSError, ValueError):
                old.unlink(missing_ok=True)  # not a readable scorecard: nothing worth keeping current
            else:
                if data.get("status") != SUPERSEDED:
                    data["superseded_status"] = data.get("status")
                    data["status"] = SUPERSEDED
                    atomic_write_text(old, json.dumps(data, indent=1, allow_nan=False))
        (self.dir / "scorecard.html").unlink(missing_ok=True)

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


def check_comparable(baseline_fp: Mapping[str, Any], run_fp: Mapping[str, Any], allowed: Iterable[str],
                     source: str, notes: list[str]) -> None:
    """A usage error naming every comparable field (``COMPARABLE``) whose value differs between the
    baseline and this run, unless allowed; allowed differences and fields the baseline does not record
    (an older scorecard) become notes."""
    differ, unknown = mismatches(baseline_fp, run_fp, COMPARABLE)
    refused, what = refused_mismatches(baseline_fp, run_fp, allowed)
    if refused:
        raise pytest.UsageError(
            f"--faith-baseline: {source} is not comparable with this run: it differs in {what} "
            f"(baseline vs run). Re-create the baseline with --faith-update-baseline, or pass "
            f"--faith-allow-mismatch {','.join(refused)} to compare anyway")
    for f in differ:
        notes.append(f"warning: baseline differs in {describe_mismatch(f, baseline_fp, run_fp)} "
                     "(allowed by --faith-allow-mismatch)")
    missing = [f for f in unknown if f not in comparable(baseline_fp)]
    if missing:
        notes.append(f"note: the baseline does not record {', '.join(missing)} (older scorecard): "
                     "unknown, not checked")


def missing_message(missing: list[MetricDelta]) -> list[str]:
    """The gate's error for baseline results this run did not produce, grouped by test."""
    by_test: dict[str, list[str]] = {}
    for d in missing:
        what = f"{d.label} [model={d.model or '-'}, variant={d.variant}]"
        by_test.setdefault(test_label(d.test), []).append(what)
    listed = [f"  {t}: {', '.join(ms)}" for t, ms in sorted(by_test.items())]
    more = len(listed) - MAX_LISTED
    lines = [f"FAIL: {len(missing)} baseline result(s) of {len(by_test)} test(s) were not compared "
             "(missing from this run: a deselected test, a renamed model label or parameter):",
             *listed[:MAX_LISTED], *([f"  ... {more} more test(s)"] if more > 0 else []),
             "pass --faith-allow-missing (ini faith_allow_missing = true) if this selection is intended; "
             + EXIT_STATUS]
    return lines


def final_notes(notes: Iterable[str], status: int) -> list[str]:
    """The notes with :data:`EXIT_STATUS` replaced by ``status`` (the run's final exit status)."""
    return [note.replace(EXIT_STATUS, f"exit status {int(status)}") for note in notes]


def none_selected(deselected: int, baseline: Scorecard | None) -> str:
    """The note of a run in which pytest selected no test (its exit status 5, "no tests collected")."""
    what = f" (all {deselected} collected test(s) were deselected)" if deselected else ""  # xdist: not known
    gate = f"; none of the baseline's {len(baseline.results)} result(s) was compared" if baseline else ""
    return (f"ERROR: no test selected{what}{gate}: check the -k / -m expression, --faith-shard and the "
            "paths given (`pytest suites/ --collect-only -q` lists the test ids -k matches against); "
            + EXIT_STATUS)


def diagnostics_note(profile: str, left: int) -> list[str]:
    """What a profile without diagnostics left out (``left``: 0 when not known)."""
    if PROFILES[profile].diagnostics:
        return []
    n = f"{left} test(s)" if left else "the tests"
    return [f"{profile} profile: {n} marked {DIAGNOSTIC} (they record and gate nothing) not run; "
            "--faith-profile default runs them"]
