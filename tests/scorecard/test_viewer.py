"""The item viewer (``items.html``) opens offline with its data embedded, filters hooks in place, flipped
items against a baseline with thumbnails; exemplar cards mark the flipped word (``word_diff``)."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

from _sample_scorecard import sample_scorecard
from PIL import Image

from faithtests.reports.html import render_html
from faithtests.reports.viewer import MAX_THUMBS, embedded, render_viewer
from faithtests.reports.word_diff import changed_words, marked_texts
from faithtests.scorecard.model import Exemplar


def _row(k: int, outcome: Any, test: str = "t.py::a", model: str = "clip") -> dict[str, Any]:
    return {"suite": "s", "test": test, "model": model, "variant": "base", "metric": "PR", "slice": None,
            "item": f"i{k}", "inputs": {"image": f"world/caption/0/{k}", "caption": "a red cup on a table",
                                        "perturbed": "a blue cup on a table"},
            "output": {"s(I,c)": 0.5, "s(I,c')": 0.25 + k / 100}, "outcome": outcome, "invalid": None}


def _data(html: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="viewer-data">(.*?)</script>', html, re.S)
    assert m is not None
    data: dict[str, Any] = json.loads(m.group(1))
    return data


def test_viewer_is_offline_and_embeds_every_row() -> None:
    rows = [_row(k, k % 3 != 0) for k in range(20)]
    rows.append({**_row(99, False), "inputs": {"caption": "</script><script>alert(1)</script> & <b>"}})
    html = render_viewer(rows)
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", html, re.I)  # no external URL anywhere
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    assert csp is not None and unescape(csp.group(1)).startswith("default-src 'none'; img-src data:;")
    assert html.count("<script") == 2 and "</script><script>alert" not in html  # the data cannot break out
    data = _data(html)
    assert len(data["rows"]) == 21 and data["columns"][:2] == ["suite", "test"]
    assert data["rows"][-1][2]["caption"].startswith("</script>")  # survives the escaping intact
    for name in ("test", "model", "variant", "outcome", "text"):
        assert re.search(rf'<form id="viewer-filters".*name="{name}"', html, re.S), name
    assert '<table id="viewer-items">' in html and 'className = "item o-"' in html
    assert 'id="viewer-flips"' not in html  # no baseline: no flips section


def test_flips_against_the_baseline_with_thumbnails() -> None:
    base = [_row(k, True) for k in range(MAX_THUMBS + 10)]
    current = [_row(k, k % 2 == 0) for k in range(MAX_THUMBS + 10)] + [_row(500, False, model="other")]
    asked: list[str] = []

    def image_of(ref: str) -> Image.Image | None:
        asked.append(ref)
        return Image.new("RGB", (200, 100), (200, 30, 30)) if not ref.endswith("/1") else None

    html = render_viewer(current, baseline_rows=base, image_of=image_of, baseline_label="base/")
    flips = re.findall(r'<tr class="flip">(.*?)</tr>', html, re.S)
    assert len(flips) == (MAX_THUMBS + 10) // 2  # the odd items flipped; the new model's item has no pair
    assert f"{len(flips)} item(s) changed outcome" in html
    thumbs = re.findall(r'src="(data:image/png;base64,[A-Za-z0-9+/=]+)"', html)
    assert 0 < len(thumbs) <= MAX_THUMBS and "world/caption/0/1" in asked
    assert "<mark>red</mark>" in flips[0] and "<mark>blue</mark>" in flips[0]
    assert re.search(r'class="outcome o-true">true</td>.*class="outcome o-false">false</td>', flips[0], re.S)


def test_page_rows_are_capped_fairly_failures_first() -> None:
    rows = [_row(k, k != 7, test="t.py::big") for k in range(100)] + [_row(k, True, test="t.py::small")
                                                                       for k in range(5)]
    kept, cap = embedded(rows, limit=25)
    assert cap == 20 and len(kept) == 25
    assert sum(r["test"] == "t.py::small" for r in kept) == 5  # a small group whole
    assert next(r for r in kept if r["test"] == "t.py::big")["item"] == "i7"  # the failed item first
    assert embedded(rows[:10], limit=25) == (rows[:10], 0)
    html = render_viewer(rows[:3])
    assert "viewer-capped" not in html


def test_word_diff_marks_the_flipped_word_only_for_near_duplicates() -> None:
    assert changed_words("one small blue square at the top", "one small purple square at the top") == {4}
    assert changed_words("a red cup", "a red cup") is None  # nothing differs
    assert changed_words("a dog runs in the park today", "the park has a running dog") is None  # rewrite
    marked = marked_texts({"caption": "a <red> cup on the table", "perturbed": "a <blue> cup on the table",
                           "rule": "red->blue"})
    assert marked["caption"] == "a <mark>&lt;red&gt;</mark> cup on the table"
    assert marked["perturbed"] == "a <mark>&lt;blue&gt;</mark> cup on the table"
    assert marked["rule"] == "red->blue"  # too short to diff, unchanged (escaped later by the template)


def test_scorecard_links_the_viewer_and_marks_exemplar_flips() -> None:
    sc = sample_scorecard()
    t = sc.tests[0]
    t.exemplars = [Exemplar(reason="flip scored above", model=t.results[0].model,
                            texts={"caption": "two green balls on a mat",
                                   "perturbed": "three green balls on a mat"},
                            scores={"s(I,c)": 0.4, "s(I,c')": 0.6})]
    html = render_html(sc)
    assert 'href="items.html"' in html
    assert "<mark>two</mark> green balls" in html and "<mark>three</mark> green balls" in html
