"""TensorBoard's own web page, in Debian's Chromium, shows the scalars of event
files nbdist wrote: the server binds 127.0.0.1 only and is stopped by its handle.

Needs ``/usr/bin/chromium`` (``.ci/run`` installs it); skipped without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from helpers import free_port
from test_browser import CHROMIUM, _chromium, shots  # noqa: F401 - a fixture
from test_training_view import LOSSES, _write_runs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]


def _wait_for_tags(port: int, proc, timeout: float = 120.0) -> dict:
    url = f"http://127.0.0.1:{port}/data/plugin/scalars/tags"
    tags, deadline = {}, time.monotonic() + timeout
    while sorted(tags) != sorted(LOSSES):
        assert proc.poll() is None, "TensorBoard exited"
        assert time.monotonic() < deadline, f"TensorBoard loaded only {tags}"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                tags = json.load(r)
        except OSError:
            pass  # not listening yet
        if sorted(tags) != sorted(LOSSES):
            time.sleep(0.2)  # TensorBoard loads runs in the background
    return tags


def test_tensorboards_page_shows_nbdists_scalars(tmp_path, shots):
    sync_api = pytest.importorskip("playwright.sync_api")
    logdir = tmp_path / "logs"
    logdir.mkdir()
    _write_runs(logdir)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
         "--host", "127.0.0.1", "--port", str(port), "--reload_interval", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_tags(port, proc)
        with sync_api.sync_playwright() as p:
            context = _chromium(p, tmp_path)
            try:
                page = context.new_page()
                page.goto(f"http://127.0.0.1:{port}/#scalars",
                          wait_until="domcontentloaded")
                # A scalar card for the "loss" tag, and every run in the run list.
                page.get_by_text("loss", exact=True).first.wait_for(timeout=90_000)
                for run in LOSSES:
                    page.get_by_text(run, exact=True).first.wait_for(timeout=30_000)
                # The chart drew a line per run (locators pierce Polymer's shadow DOM).
                lines = page.locator("vz-line-chart2 path.line")
                end = time.monotonic() + 90
                while lines.count() < len(LOSSES):
                    assert time.monotonic() < end, "TensorBoard drew no lines"
                    page.wait_for_timeout(200)  # a canvas redraw has no DOM event
                page.screenshot(path=str(shots / "tensorboard.png"))
            finally:
                context.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
