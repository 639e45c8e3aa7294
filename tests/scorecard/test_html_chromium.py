"""Open the rendered scorecard in headless Chromium (Debian package ``chromium``): the tables, images
and plots must be in the DOM, every inline image must decode, and the console must stay silent
(the page's Content-Security-Policy turns any external fetch or unpinned inline code into a console
error). A control page proves the console check itself can fail on this Chromium.

Skipped when Chromium is absent, unless ``FAITH_REQUIRE_CHROMIUM=1`` (set by CI), which makes that a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from _sample_scorecard import sample_scorecard

from faithtests.scorecard.render import render_html

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=3000",
]


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found is None:
        if os.environ.get("FAITH_REQUIRE_CHROMIUM") == "1":
            pytest.fail("FAITH_REQUIRE_CHROMIUM=1 but no chromium binary (apt-get install chromium)")
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    return found


def _dump_dom(chromium: str, page: Path, profile: Path) -> tuple[str, list[str]]:
    """The DOM after load, and the console lines Chromium logged to stderr."""
    proc = subprocess.run(
        [chromium, *_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]
    return proc.stdout, console


def test_scorecard_renders_in_chromium_without_console_errors(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "scorecard.html"
    html = render_html(sample_scorecard())
    page.write_text(html, encoding="utf-8")
    dom, console = _dump_dom(chromium, page, tmp_path / "profile")
    assert console == []
    assert dom.count('<table class="metrics">') == 3 and '<table class="invalid">' in dom
    assert '<table class="fingerprint">' in dom
    n_img = len(re.findall(r"<img ", html))
    assert n_img == 51 and len(re.findall(r"<img ", dom)) == n_img
    assert re.search(r'data-images-ok="(\d+)/(\d+)"', dom) is not None
    assert f'data-images-ok="{n_img}/{n_img}"' in dom  # every thumbnail decoded
    assert dom.count("<svg") == 5 and dom.count('class="band"') == 3


def test_the_console_check_can_fail(chromium: str, tmp_path: Path) -> None:
    """Control: a broken image, an external image and a console.error must all be visible to the check."""
    sc_html = render_html(sample_scorecard())
    script = re.search(r"<script>.*?</script>", sc_html, re.S)
    assert script is not None
    page = tmp_path / "control.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; img-src data:; script-src 'unsafe-inline'\"></head><body>"
        '<img src="data:image/png;base64,AAAA"><img src="https://example.invalid/a.png">'
        f"{script.group(0)}<script>console.error('control-error')</script></body></html>",
        encoding="utf-8",
    )
    dom, console = _dump_dom(chromium, page, tmp_path / "profile")
    assert 'data-images-ok="0/2"' in dom
    assert any("control-error" in ln for ln in console)
    assert any("example.invalid" in ln and "Content Security Policy" in ln for ln in console)
