"""Notebook 10 (stragglers, backup workers, staleness) as committed, exported by
``nbconvert --to html`` and opened in Debian's Chromium (no network): the
synchronous run's ``BarrierView`` draws one row per worker and one cell per
round with the slowed worker red (arrived last) in most rounds, and
the ``StalenessView`` draws its histogram. The picture of both is
``straggler.png`` (in ``docs/screenshots/`` with
``NBDIST_UPDATE_SCREENSHOTS=1``, else a temporary directory).

Needs ``/usr/bin/chromium``; skipped without it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT
from test_browser import CHROMIUM, CHROMIUM_ARGS, shots  # noqa: F401 (a fixture)

NOTEBOOK = ROOT / "notebooks" / "10-stragglers-backup-workers-staleness.ipynb"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]


def test_the_straggler_is_red_in_every_round_and_staleness_is_drawn(
        tmp_path, shots):  # noqa: F811 (the fixture imported above)
    proc = subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", "--output-dir",
         str(tmp_path), str(NOTEBOOK)],
        capture_output=True, text=True, timeout=240, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = tmp_path / f"{NOTEBOOK.stem}.html"
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                    headless=True)
        try:
            context = browser.new_context(viewport={"width": 1100, "height": 900},
                                          device_scale_factor=2)
            context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
                ("file:", "data:")) else r.abort())
            page = context.new_page()
            page.goto(html.as_uri())
            assert page.locator("svg.nbdist-rounds").count() >= 2  # with, without
            card = page.locator(".nbdist-barrier").filter(
                has=page.locator("svg.nbdist-rounds")).first
            grid = card.locator("svg.nbdist-rounds")
            assert grid.is_visible()
            # The synchronous run without a backup: worker:2's row is red.
            rows = grid.evaluate(
                """svg => {
                    const out = {};
                    for (const r of svg.querySelectorAll('rect')) {
                        const tip = r.querySelector('title').textContent;
                        const w = tip.split(': ')[1].split(' ')[0];
                        out[w] = out[w] || {red: 0, all: 0};
                        out[w].all += 1;
                        if (r.getAttribute('fill') === '#cf222e') out[w].red += 1;
                    }
                    return out;
                }""")
            # (As saved: a run on a busy machine; test_faults.py holds the 90%.)
            assert rows["worker:2"]["red"] > 0.5 * rows["worker:2"]["all"], rows
            assert rows["worker:2"]["red"] > rows["worker:0"]["red"] + rows[
                "worker:1"]["red"], rows
            assert "straggler: worker:2" in card.inner_text()
            staleness = page.locator("svg.nbdist-staleness")
            assert staleness.count() == 1 and staleness.first.is_visible()
            box = staleness.first.bounding_box()
            assert box and box["width"] >= 200 and box["height"] > 100, box
            # The picture: the staleness histogram above the barrier's rounds.
            top = page.locator(".nbdist-staleness-view").first.bounding_box()
            bottom = card.bounding_box()
            page.screenshot(path=str(shots / "straggler.png"), full_page=True, clip={
                "x": min(top["x"], bottom["x"]) - 8, "y": top["y"] - 8,
                "width": max(top["width"], bottom["width"]) + 16,
                "height": bottom["y"] + bottom["height"] - top["y"] + 16})
        finally:
            browser.close()
    assert (shots / "straggler.png").stat().st_size > 10_000
