"""The teaching views of the tour in JupyterLab, as a class sees them: one Lab
and one Chromium for the module, each notebook Run All in turn (its kernel shut
down after it), and what the views promise read from the DOM:

* 10 (with what ``test_browser_straggler`` checked in its own Lab: the
  rounds' grids, the straggler named, the staleness histogram) and 03: each
  ``BarrierView``'s needed count (``data-needed`` and its
  "N needed of M" line) is the ``replicas_to_aggregate`` the notebook passes to
  ``SyncReplicasOptimizer`` (it said "1 of 1 needed of 2" with 2).
* 06: ``CollectiveView``'s slider and play are there while the kernel runs, and
  moving the slider redraws the ring of that step; member names stay inside
  their circles and link labels off each other.
* 09 (with what ``test_browser_wire`` checked in its own Lab: lanes, arrows,
  kinds and legend of the ps step, both traffic views, the all-reduce's
  chunks): ``TimelineView.trace(steps=3)`` keeps a live slider (it was frozen into
  its static face at the cell's end: no slider appeared), moving it shows
  another step; the transfer labels' boxes intersect neither each other nor the
  purple update bars; the header counts the arrows drawn.
* 12: the 32-worker ``ClusterView`` fits in 900 px of height.

Needs ``/usr/bin/chromium``; skipped without it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re

import pytest
from helpers import ROOT, wait_for
from test_browser import CHROMIUM, _chromium, lab_api, run_all, running_lab
from test_browser_wire import check_ps_timeline, check_traffic

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]

# Whether any two boxes of ``pairs`` (element handles) intersect, as laid out.
_OVERLAPS = """(pairs) => pairs.filter(([a, b]) => {
  const x = a.getBoundingClientRect(), y = b.getBoundingClientRect();
  return x.left < y.right && y.left < x.right && x.top < y.bottom && y.top < x.bottom;
}).map(([a, b]) => [a.textContent, b.textContent || b.getAttribute('data-kind')])"""


@pytest.fixture(scope="module")
def tour_lab(tmp_path_factory):
    pytest.importorskip("jupyterlab")
    with running_lab(tmp_path_factory.mktemp("lab")) as info:
        yield info


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        context = _chromium(p, tmp_path_factory.mktemp("chromium"))
        try:
            yield context
        finally:
            context.close()


@contextlib.contextmanager
def ran(browser, lab, name: str, last_words: str, timeout_s: float = 240):
    """Notebook ``name`` Run All in its own page, until an output shows
    ``last_words``; its kernel shut down afterwards (the next Run All waits for
    one kernel)."""
    page = browser.new_page()
    try:
        run_all(page, lab, name, workspace=name[:2])
        page.wait_for_function(
            "words => [...document.querySelectorAll('.jp-OutputArea-output')]"
            ".some(e => e.innerText.includes(words))", arg=last_words,
            timeout=timeout_s * 1000)
        assert page.get_by_text("Error displaying widget").count() == 0
        yield page
    finally:
        page.close()
        for kernel in lab_api(lab, "/api/kernels"):
            lab_api(lab, f"/api/kernels/{kernel['id']}", "DELETE")
        wait_for(lambda: not lab_api(lab, "/api/kernels"), 30.0, "kernels shut down",
                 interval=0.2)


def _replicas_to_aggregate(name: str) -> list[int]:
    """Each ``replicas_to_aggregate=N`` the notebook's code passes, in order."""
    cells = json.loads((ROOT / "notebooks" / name).read_text())["cells"]
    code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return [int(n) for n in re.findall(r"replicas_to_aggregate=(\d+)", code)]


def _sync_barriers(page):
    """The SyncReplicas cards of the notebook's BarrierViews, in page order (a
    view shown twice counts once: the last drawing of each output)."""
    outputs = page.locator(".jp-OutputArea-output:has(.nbdist-barrier"
                           "[data-barrier^='sync_replicas'])")
    return [outputs.nth(i).locator(".nbdist-barrier[data-barrier^='sync_replicas']")
            .first for i in range(outputs.count())]


def _check_needed(card, needed: int):
    assert card.get_attribute("data-needed") == str(needed)
    workers = int(card.get_attribute("data-participants"))
    text = card.inner_text()
    wording = rf"\bof {needed}\b" if needed == workers else (
        rf"\b{needed} needed of {workers}\b")
    assert re.search(wording, text), (needed, workers, text)


def _live_output(page, face: str):
    """The first output holding a slider and ``face``, pinned by its place
    (moving the slider may redraw it without ``face``'s class)."""
    outputs = page.locator(".jp-OutputArea-output")
    index = outputs.evaluate_all(
        "(els, face) => els.findIndex(e => e.querySelector('.widget-slider') "
        "&& e.querySelector(face))", face)
    assert index >= 0, f"no live view with a slider and {face}"
    return outputs.nth(index)


def _slider_handle(view):
    """The slider's handle (ipywidgets' IntSlider: a noUiSlider, role=slider)."""
    handle = view.get_by_role("slider").first
    try:
        handle.wait_for(timeout=30_000)
    except Exception as e:
        slider = view.locator(".widget-slider").first.inner_html()[:3000]
        raise AssertionError(f"no slider handle in {slider}") from e
    handle.focus()
    return handle


def _no_overlaps(page, pairs):
    assert not page.evaluate(_OVERLAPS, pairs)


@pytest.mark.timeout(300)
def test_03_barrier_needs_replicas_to_aggregate(browser, tour_lab):
    name = "03-parameter-server-training.ipynb"
    assert _replicas_to_aggregate(name) == [2]
    with ran(browser, tour_lab, name, "stopped 3 tasks") as page:
        cards = _sync_barriers(page)
        assert cards
        for card in cards:
            _check_needed(card, 2)


@pytest.mark.timeout(300)
def test_06_ring_slider_replays_each_step_and_labels_fit(browser, tour_lab):
    with ran(browser, tour_lab, "06-collective-allreduce.ipynb",
             "stopped 4 tasks") as page:
        view = _live_output(page, ".nbdist-collective")
        assert view.locator(".widget-play, .jupyter-widgets button").count() >= 1
        assert "all steps" in view.inner_text()
        assert view.locator("svg.nbdist-ring").count() == 4
        handle = _slider_handle(view)
        for _ in range(4):  # from "all steps" to the first step
            handle.press("ArrowLeft")
        wait_for(lambda: "1/4: " in view.inner_text(), 30.0, "step 1 shown",
                 interval=0.1)
        rings = view.locator("svg.nbdist-ring")
        wait_for(lambda: rings.count() == 1, 30.0, "one ring drawn", interval=0.1)
        assert rings.first.locator("text").first.text_content() == (
            "reduce-scatter step 1")
        handle.press("ArrowRight")
        wait_for(lambda: "2/4: " in view.inner_text(), 30.0, "step 2 shown",
                 interval=0.1)
        wait_for(lambda: rings.first.locator("text").first.text_content()
                 == "reduce-scatter step 2", 30.0, "the second step drawn",
                 interval=0.1)
        for member in rings.first.locator("g.nbdist-member").element_handles():
            c = member.query_selector("circle").bounding_box()
            t = member.query_selector("text").bounding_box()
            assert c["x"] <= t["x"] and t["x"] + t["width"] <= c["x"] + c["width"]
        links = rings.first.locator(".nbdist-link text").element_handles()
        assert len(links) == 3
        _no_overlaps(page, [[a, b] for i, a in enumerate(links) for b in links[i + 1:]])


@pytest.mark.timeout(300)
def test_09_timeline_slider_moves_and_labels_do_not_overlap(browser, tour_lab):
    with ran(browser, tour_lab, "09-one-step-on-the-wire.ipynb",
             "stopped 3 tasks") as page:
        view = _live_output(page, ".nbdist-timeline-view")
        check_ps_timeline(view)  # lanes, arrows, kinds, legend of the ps step
        titles = view.locator("g.nbdist-transfer title")
        assert re.search(r"w1/read: ps:0 → worker:\d · 2\.0 KB \(2048 bytes\)",
                         " ".join(titles.all_text_contents()))
        traffic = page.locator(".jp-OutputArea-output:has(.nbdist-traffic-view)")
        assert traffic.count() == 2
        check_traffic(traffic.first, 3, {"RunGraph", "RecvTensor"})
        check_traffic(traffic.nth(1), 2, {"collective"})
        ring = page.locator(".jp-OutputArea-output:has(.nbdist-timeline-view)").nth(1)
        # Per worker: the all-reduce op and the chunk it received, as collective.
        assert ring.locator("rect.nbdist-op[data-kind='collective']").count() == 4
        assert ring.locator("g.nbdist-wire").count() >= 1
        svg = view.locator("svg.nbdist-timeline")
        assert "step 3 of 3" in view.inner_text()
        before = svg.inner_html()
        handle = _slider_handle(view)
        handle.press("ArrowLeft")
        wait_for(lambda: "step 2 of 3" in view.inner_text(), 30.0, "step 2 shown",
                 interval=0.1)
        assert svg.inner_html() != before

        # The step as first drawn: its labels against each other and the bars.
        labels = view.locator("text.nbdist-transfer-label").element_handles()
        bars = view.locator("rect.nbdist-op[data-kind='update']").element_handles()
        assert len(labels) >= 2 and len(bars) >= 2
        pairs = [[a, b] for i, a in enumerate(labels) for b in labels[i + 1:]]
        _no_overlaps(page, pairs + [[a, b] for a in labels for b in bars])
        arrows = view.locator("g.nbdist-transfer").count()
        assert f"{arrows} transfers" in view.inner_text()


@pytest.mark.timeout(300)
def test_10_barriers_need_replicas_to_aggregate(browser, tour_lab):
    name = "10-stragglers-backup-workers-staleness.ipynb"
    needed = _replicas_to_aggregate(name)
    assert needed == [3, 2]  # without and with a backup worker
    with ran(browser, tour_lab, name, "stopped 4 tasks") as page:
        # The rounds' grids (without and with a backup), the slowed worker
        # named, its dropped gradients, the staleness histogram drawn.
        grids = page.locator("svg.nbdist-rounds")
        assert grids.count() >= 2
        box = grids.first.bounding_box()
        assert box and box["width"] > 100 and box["height"] > 20, box
        text = page.locator(".jp-Notebook").inner_text()
        assert "straggler: worker:2" in text and "stale gradients dropped" in text
        staleness = page.locator("svg.nbdist-staleness")
        assert staleness.count() == 1
        box = staleness.first.bounding_box()
        assert box and box["width"] >= 200 and box["height"] > 100, box
        cards = _sync_barriers(page)
        shown = [int(card.get_attribute("data-needed")) for card in cards]
        # Each view in order, once or more (the backup run's is shown twice).
        assert [n for i, n in enumerate(shown) if not i or shown[i - 1] != n] == (
            needed), shown
        for card, n in zip(cards, shown, strict=True):
            _check_needed(card, n)


@pytest.mark.timeout(300)
def test_12_a_cluster_of_32_workers_fits_one_screen(browser, tour_lab):
    """Run All until 12's first cell has started 1 ps + 32 workers: its live
    ClusterView (a grid of squares, the history grouped) is at most 900 px
    tall. The kernel is shut down then (the tasks follow their parent)."""
    with ran(browser, tour_lab, "12-32-workers-on-one-laptop.ipynb",
             "33 running") as page:
        view = page.locator(".jp-OutputArea-output:has(.nbdist-cluster-view)").first
        assert view.locator("[data-task]").count() >= 33
        box = view.bounding_box()
        assert box and box["height"] <= 900, box
