"""Notebook 06 as committed, exported by ``nbconvert --to html`` and opened in
Debian's Chromium with JavaScript disabled: its ``CollectiveView`` draws the
all-reduce's four ring steps (two reduce-scatter, two all-gather), three
arrows each, labelled with bytes and bandwidth, and the per-link table. The
picture is the README's ``docs/screenshots/ring.png`` (written there only with
``NBDIST_UPDATE_SCREENSHOTS=1``; otherwise to a temporary directory).

Needs ``/usr/bin/chromium`` (``.ci/run`` installs it); skipped without it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from helpers import ROOT
from test_browser import CHROMIUM, CHROMIUM_ARGS, DOC_SHOTS

NOTEBOOK = ROOT / "notebooks" / "06-collective-allreduce.ipynb"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]


@pytest.fixture
def shots(tmp_path):
    if os.environ.get("NBDIST_UPDATE_SCREENSHOTS") == "1":
        DOC_SHOTS.mkdir(parents=True, exist_ok=True)
        return DOC_SHOTS
    return tmp_path


@pytest.mark.timeout(300)
def test_the_ring_shows_without_javascript(tmp_path, shots):
    sync_api = pytest.importorskip("playwright.sync_api")
    proc = subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", "--output-dir",
         str(tmp_path), str(NOTEBOOK)],
        capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = tmp_path / f"{NOTEBOOK.stem}.html"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                    headless=True)
        try:
            context = browser.new_context(java_script_enabled=False,
                                          viewport={"width": 1280, "height": 1000},
                                          device_scale_factor=1)
            context.route("**/*", lambda route: route.continue_()
                          if route.request.url.startswith(("file:", "data:"))
                          else route.abort())
            page = context.new_page()
            page.goto(html.as_uri(), wait_until="load")
            view = page.locator(".nbdist-collective").first
            assert view.is_visible()
            rings = view.locator("svg.nbdist-ring")
            assert rings.count() == 4
            titles = [rings.nth(i).locator("text").first.text_content()
                      for i in range(4)]
            assert titles == ["reduce-scatter step 1", "reduce-scatter step 2",
                              "all-gather step 1", "all-gather step 2"]
            for i in range(4):
                ring = rings.nth(i)
                assert ring.locator(".nbdist-link").count() == 3
                assert ring.locator(".nbdist-member").count() == 3
                box = ring.bounding_box()
                assert box and box["width"] > 150 and box["height"] > 150, box
                labels = ring.locator(".nbdist-link text").all_text_contents()
                assert all(re.fullmatch(r"8\.0 MiB · ?\d+ MiB/s", t) for t in labels), (
                    labels)
            text = view.inner_text()
            assert re.search(r"worker:2 → worker:0\s+32\.0 MiB\s+4\s+\d+ MiB/s",
                             text), text
            view.screenshot(path=str(shots / "ring.png"))
        finally:
            browser.close()
    assert (shots / "ring.png").stat().st_size > 5000
