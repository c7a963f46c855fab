"""Notebook 09 ("one step on the wire") as committed: its ``TimelineView``
of a parameter-server step is drawn with a lane per task, bars of each kind, a
legend, round ticks and an arrow per transfer; its ``TrafficView`` with a
lifeline per task, an arrow per call and the task × task matrix. The notebook
as committed, exported by nbconvert and opened with JavaScript disabled,
shows the same faces. Screenshots as ``test_browser`` (``docs/screenshots/``
only with ``NBDIST_UPDATE_SCREENSHOTS=1``).

Needs ``/usr/bin/chromium``; skipped without it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from helpers import ROOT
from test_static_faces_nojs import offline_page  # noqa: F401

NOTEBOOK = ROOT / "notebooks" / "09-one-step-on-the-wire.ipynb"

pytestmark = [pytest.mark.slow]


def check_ps_timeline(timeline):
    """The parameter-server step: 3 lanes, 10 transfers, kinds, legend, ticks."""
    lanes = timeline.locator("g.nbdist-lane")
    assert lanes.count() == 3
    assert {lanes.nth(i).get_attribute("data-task") for i in range(3)} == {
        "worker:0", "worker:1", "ps:0"}
    arrows = timeline.locator("g.nbdist-transfer")
    assert arrows.count() == 10
    links = {(arrows.nth(i).get_attribute("data-source"),
              arrows.nth(i).get_attribute("data-destination"))
             for i in range(arrows.count())}
    assert links == {("ps:0", "worker:0"), ("ps:0", "worker:1"),
                     ("worker:0", "ps:0"), ("worker:1", "ps:0")}
    kinds = {timeline.locator("rect.nbdist-op").nth(i).get_attribute("data-kind")
             for i in range(timeline.locator("rect.nbdist-op").count())}
    assert {"compute", "transfer", "update"} <= kinds
    text = timeline.inner_text()
    for words in ("compute", "Send/Recv", "variable update", "time (ms)",
                  "w1/read · 2.0 KB", "10 transfers"):
        assert words in text, words
    box = timeline.locator("svg.nbdist-timeline").bounding_box()
    assert box and box["width"] > 600 and box["height"] > 150, box


def check_traffic(traffic, tasks: int, kinds: set):
    assert traffic.locator("g.nbdist-lifeline").count() == tasks
    calls = traffic.locator("g.nbdist-call")
    assert calls.count() >= 4
    seen = {calls.nth(i).get_attribute("data-kind") for i in range(calls.count())}
    assert kinds <= seen, seen
    cells = traffic.locator("td.nbdist-link")
    assert cells.count() >= 2
    assert all(int(cells.nth(i).get_attribute("data-bytes")) > 0
               or cells.nth(i).get_attribute("data-calls") != "0"
               for i in range(cells.count()))
    assert re.search(r"calls/s", traffic.inner_text())


def test_notebook_09_saves_its_views_as_static_faces():
    nb = json.loads(NOTEBOOK.read_text())
    assert "widgets" not in nb["metadata"]
    html = "".join("".join(out.get("data", {}).get("text/html", ""))
                   for cell in nb["cells"] if cell["cell_type"] == "code"
                   for out in cell["outputs"])
    assert "application/vnd.jupyter.widget-view+json" not in json.dumps(nb)
    assert html.count("<svg class='nbdist-timeline'") == 2
    assert html.count("<svg class='nbdist-traffic'") == 2
    assert html.count("class='nbdist-traffic-matrix'") == 2


@pytest.mark.timeout(300)
def test_notebook_09_as_committed_shows_its_views_without_javascript(
        tmp_path, offline_page):  # noqa: F811
    proc = subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", "--output-dir",
         str(tmp_path), str(NOTEBOOK)],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = offline_page
    page.goto((tmp_path / f"{NOTEBOOK.stem}.html").as_uri(), wait_until="load")
    timelines = page.locator(".nbdist-timeline-view")
    assert timelines.count() == 2
    check_ps_timeline(timelines.first)
    traffic = page.locator(".nbdist-traffic-view")
    assert traffic.count() == 2
    check_traffic(traffic.first, 3, {"RunGraph", "RecvTensor"})
    check_traffic(traffic.nth(1), 2, {"collective"})
    for view in (timelines.first, traffic.first):
        assert view.is_visible()
    for cell in page.locator(".nbdist td").all()[:20]:
        align = cell.evaluate("e => getComputedStyle(e).textAlign")
        assert align in ("left", "start"), align
