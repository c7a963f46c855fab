"""TimelineView, CollectiveView, StalenessView and PlacementView of 32 tasks
in Debian's Chromium (each static face the page's only content, no kernel):
each fits in 700 px of height (they were 1,831, 4,229, 1,946 and 1,320 px)
and at 2 tasks still draws its per-task picture. The faces are those of
tests/notebook/test_view_scale.py (real runs: a traced ps step of 32
workers, 32 threads training asynchronously, a graph placed on 32 workers;
a ring of 32 from its chunks).

Needs ``/usr/bin/chromium``; skipped without it.
"""

from __future__ import annotations

import pytest
from test_browser import _chromium, shots  # noqa: F401 - a fixture
from test_view_scale import async_pairs, placed, ps_step, ring_of

from nbdist.notebook import StalenessView

pytestmark = [pytest.mark.slow]
SCREEN_PX = 700


@pytest.mark.timeout(180)
def test_the_views_of_32_tasks_fit_a_screen_in_chromium(tmp_path, servers,
                                                        shots):  # noqa: F811
    sync_api = pytest.importorskip("playwright.sync_api")
    faces = {
        "timeline": (ps_step(servers, 32), ps_step(servers, 2)),
        "collective": (ring_of(32), ring_of(2)),
        "staleness": (StalenessView(async_pairs(32, 5)),
                      StalenessView(async_pairs(2, 5))),
        "placement": (placed(32)[1], placed(2)[1]),
    }
    # At 2 tasks: what each draws per task (or per step), as before.
    per_task = {"timeline": ("g.nbdist-lane", 3), "collective": ("svg.nbdist-ring", 2),
                "staleness": ("svg.nbdist-staleness line", 2),  # a baseline each
                "placement": ("div.nbdist-device", 3)}
    with sync_api.sync_playwright() as p:
        context = _chromium(p, tmp_path)
        try:
            page = context.new_page()
            for name, (big, small) in faces.items():
                page.set_content(f"<body style='margin:8px'>{big._repr_html_()}</body>")
                face = page.locator("body > div").first
                box = face.bounding_box()
                assert box and box["height"] <= SCREEN_PX, (name, box)
                face.screenshot(path=str(shots / f"{name}-32-real.png"))
                page.set_content(f"<body style='margin:8px'>{small._repr_html_()}"
                                 "</body>")
                selector, count = per_task[name]
                assert page.locator(selector).count() == count, name
        finally:
            context.close()
