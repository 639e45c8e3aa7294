"""The item viewer driven in headless Chromium (issue 49 item 4): over 500 rows it pages through every
row (page 2 exists, the last row is on the last page), opens on the failed and invalid items, sorts by
a clicked column (again: reversed) and shows a clicked row's fields in its detail pane; repeated long
strings travel once in the data block and decode intact. A test-only probe script, pinned by hash in
the page's CSP (as test_html_chromium's), drives the page and writes what it saw into the DOM."""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_html_chromium import _dump_dom, _with_measurement, find_chromium

from faithtests.reports.viewer import PAGE_ROWS, REF, interned, render_viewer

N_ROWS = 1234
PROBE = """
window.addEventListener("load", function () {
  var out = {};
  function items() {
    return Array.prototype.map.call(document.querySelectorAll("#viewer-items tbody tr.item"),
                                    function (tr) { return tr.cells[3].textContent; });
  }
  var label = document.getElementById("viewer-page"), next = document.getElementById("viewer-next");
  out.page1 = label.textContent;
  out.first = items().slice(0, 3);
  out.flaggedOnPage1 = document.querySelectorAll("#viewer-items tbody tr.item.flagged").length;
  next.click();
  out.page2 = label.textContent;
  out.rows2 = items().length;
  var guard = 0;
  while (!next.disabled && guard++ < 100) { next.click(); }
  out.lastPage = label.textContent;
  out.lastItems = items();
  var th = document.querySelector('#viewer-items th[data-col="item"]');
  th.click();
  out.ascending = items().slice(0, 2);
  out.ascendingPage = label.textContent;
  th.click();
  out.descending = items().slice(0, 2);
  document.querySelector("#viewer-items tbody tr.item td").click();
  var pane = document.getElementById("viewer-detail");
  out.detailShown = !pane.hidden;
  out.detail = pane.querySelector("dl").textContent;
  document.documentElement.dataset.probe = JSON.stringify(out);
});
"""


def _row(k: int) -> dict[str, Any]:
    caption = "a long caption that every model saw, so it travels once"
    return {"suite": "s", "test": "t.py::test_a[m]", "model": "m", "variant": "base", "metric": "acc",
            "slice": None, "item": f"i{k:04d}", "inputs": {"caption": caption, "tag": f"{REF}odd {k}"},
            "output": {"reply": "the same long reply for many items" if k % 2 else f"reply {k}"},
            "outcome": k % 100 != 50, "invalid": None}


def test_strings_repeated_across_rows_are_stored_once_and_round_trip() -> None:
    rows = [_row(k) for k in range(4)]
    table, enc = interned([v for r in rows for v in (r["inputs"], r["output"])])
    assert table == ["a long caption that every model saw, so it travels once",
                     "the same long reply for many items"]
    assert enc(rows[0]["inputs"]) == {"caption": f"{REF}0", "tag": f"{REF}{REF}odd 0"}  # literal REF: doubled
    assert enc(rows[0]["output"]) == {"reply": "reply 0"}  # short and once: as it is


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


def test_viewer_pages_sorts_and_shows_details_in_chromium(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "items.html"
    html = render_viewer([_row(k) for k in range(N_ROWS)])
    page.write_text(_with_measurement(html, PROBE), encoding="utf-8")
    dom, console = _dump_dom(chromium, page, tmp_path / "profile", "--window-size=1280,900")
    assert console == [], console
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found is not None, "the probe did not run"
    out = json.loads(html_lib.unescape(found.group(1)))
    pages = -(-N_ROWS // PAGE_ROWS)
    assert out["page1"] == f"page 1 of {pages}" and out["page2"] == f"page 2 of {pages}"
    assert out["rows2"] == PAGE_ROWS
    failed = [f"i{k:04d}" for k in range(N_ROWS) if k % 100 == 50]
    assert out["flaggedOnPage1"] == len(failed) and out["first"] == failed[:3]  # the failed items first
    assert out["lastPage"] == f"page {pages} of {pages}" and out["lastItems"][-1] == f"i{N_ROWS - 1:04d}"
    assert len(out["lastItems"]) == N_ROWS - (pages - 1) * PAGE_ROWS  # every row reachable
    assert out["ascending"] == ["i0000", "i0001"] and out["ascendingPage"] == f"page 1 of {pages}"
    assert out["descending"] == [f"i{N_ROWS - 1:04d}", f"i{N_ROWS - 2:04d}"]
    last = N_ROWS - 1
    assert out["detailShown"] and f"itemi{last:04d}" in out["detail"]
    assert "a long caption that every model saw" in out["detail"] and f"{REF}odd {last}" in out["detail"]
