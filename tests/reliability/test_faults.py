"""Issue 31 item 9: a crashing xdist worker is restarted once, not 4 x -n times; a full or read-only report
or baseline location is one ERROR line, the terminal summary still printed and exit status 1; a corrupted
output cache is named with the advice to delete it."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from xdist.dsession import get_default_max_worker_restart

from faithtests.plugin.usage import MAX_WORKER_RESTART, default_max_worker_restart


def _config(numprocesses: int | None, given: str | None) -> Any:
    return SimpleNamespace(option=SimpleNamespace(numprocesses=numprocesses, maxworkerrestart=given))


def test_default_worker_restarts_under_xdist() -> None:
    config = _config(2, None)
    assert get_default_max_worker_restart(config) == 8  # xdist's own default: a crash re-run eight more times
    default_max_worker_restart(config)
    assert get_default_max_worker_restart(config) == MAX_WORKER_RESTART == 1


def test_the_users_max_worker_restart_wins_and_serial_runs_are_untouched() -> None:
    given = _config(2, "5")
    default_max_worker_restart(given)
    assert get_default_max_worker_restart(given) == 5
    serial = _config(None, None)
    default_max_worker_restart(serial)
    assert serial.option.maxworkerrestart is None


# -- a full or read-only report / baseline location: one ERROR line, the summary, exit status 1 ------------
def _gate_run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    from test_gate_reliability import _run, _setup

    _setup(pytester)
    return _run(pytester, *args)


def _summary_printed(result: pytest.RunResult) -> None:
    out = result.stdout.str()
    assert "faithtests scorecard" in out and "2 test(s), 2 result(s), 0 check(s), 0 failed" in out


def test_a_read_only_baseline_location_is_an_error_and_the_summary_is_printed(
        pytester: pytest.Pytester) -> None:
    """Tests run as root, where chmod blocks nothing: the baseline's folder is under a regular file. It was
    an uncaught NotADirectoryError in pytest_sessionfinish (INTERNALERROR, no summary, exit 3)."""
    (pytester.path / "afile").write_text("")
    base = pytester.path / "afile" / "base" / "scorecard.json"
    result = _gate_run(pytester, "--faith-baseline", str(base), "--faith-update-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (f"ERROR: could not write the baseline {base}: Not a directory (the old one, if any, is intact); "
            "exit status 1") in result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert "baseline updated" not in result.stdout.str()
    _summary_printed(result)


@pytest.mark.parametrize("name", ["scorecard.json", "scorecard.html"])
def test_a_full_report_location_is_an_error_and_the_summary_is_printed(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A disk that fills up while the report is written (os.replace raising ENOSPC): the HTML's failure was
    an "HTML rendering failed" note with exit status 0."""
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst).name == name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    result = _gate_run(pytester)
    what = {"scorecard.json": "the scorecard", "scorecard.html": "the HTML scorecard"}[name]
    target = pytester.path / "faith-report" / name
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    message = f"ERROR: could not write {what} {target}: No space left on device; exit status 1"
    assert message in result.stdout.str()
    assert not target.exists()
    _summary_printed(result)


# -- a corrupted output cache (--faith-cache): the error names the file and says to delete it -------------
def test_a_cache_file_of_garbage_is_named_at_open(tmp_path: Path) -> None:
    from faithtests.models.store import DB_NAME, OutputStore

    db = tmp_path / DB_NAME
    db.write_bytes(bytes(range(256)) * 32)
    with pytest.raises(sqlite3.DatabaseError) as err:
        OutputStore(tmp_path)
    assert str(err.value) == (f"--faith-cache: {db} is not a usable cache (file is not a database); "
                              "delete it to start afresh")


def test_a_cache_with_malformed_pages_is_named_when_read(tmp_path: Path) -> None:
    """A valid header over damaged pages opens; the damage shows on the first read that reaches it, which
    raised sqlite's bare "database disk image is malformed" from inside a model call, without a path."""
    from faithtests.models.store import DB_NAME, OutputStore

    store = OutputStore(tmp_path)
    store.put("ns", {f"k{i}": bytes(3000) for i in range(50)})
    store.close()
    db = tmp_path / DB_NAME
    data = bytearray(db.read_bytes())
    data[4096:8192] = b"\xff" * 4096  # page 2: the table's root
    db.write_bytes(bytes(data))
    store = OutputStore(tmp_path)
    message = (f"--faith-cache: {db} is not a usable cache (database disk image is malformed); delete it "
               "to start afresh")
    for call in (lambda: store.get("ns", ["k1"]), lambda: store.put("ns", {"k": b"x"}), lambda: len(store)):
        with pytest.raises(sqlite3.DatabaseError) as err:
            call()
        assert str(err.value) == message
    store.close()


# -- captions cut at the model's context: a coverage line in the terminal and the HTML --------------------
def _truncated_card(truncated: int) -> Any:
    from faithtests.scorecard.model import MetricResult, TestRecord
    from faithtests.scorecard.scorecard import Scorecard

    info = {"caption": {"truncated": truncated, "checked": 500, "limit": 77, "longest_tokens": 131}}
    rec = TestRecord("s.py::test_a", "invariance",
                     results=[MetricResult("invariance", "s.py::test_a", "E_inv", 0.01, "clip")])
    return Scorecard(fingerprint={"models": {"clip": {"spec": "reference:clip", "truncated_inputs": info}}},
                     tests=[rec])


def test_truncated_captions_are_a_coverage_line_in_the_terminal_and_html() -> None:
    """The count was only in the fingerprint (``truncated_inputs``): a model that scored 12 shortened
    captions of 500 showed nothing in the summary or the HTML's coverage cell."""
    from faithtests.reports.html import render_html
    from faithtests.reports.summary import summary_lines

    line = ("coverage model clip: 12 of 500 captions truncated to its 77-token context (2.4%; longest 131 "
            "tokens)")
    card = _truncated_card(12)
    assert line in summary_lines(card, [], None, [])
    assert f'<div class="mono">{line}</div>' in render_html(card)
    none_cut = _truncated_card(0)
    assert not any("truncated" in x for x in summary_lines(none_cut, [], None, []))
    assert "captions truncated" not in render_html(none_cut)
