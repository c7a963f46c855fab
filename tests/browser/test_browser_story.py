"""The failure story in a real browser (issue 22, item 5): notebook 04 run top
to bottom in JupyterLab (headless, 127.0.0.1) and Debian's Chromium. The
``FailureStoryView`` and the strip under the ``ClusterView`` are drawn with
content: one row per lost task, the phases killed → detected → re-queued →
redone for worker 1 and killed → detected → back → restored → redone for the
parameter server, and the progress bar's last line keeps the outage.

The screenshot goes to ``docs/screenshots/failure-story.png`` only with
``NBDIST_UPDATE_SCREENSHOTS=1`` (see ``test_browser``).
"""

from __future__ import annotations

import pytest
from test_browser import _chromium, lab, run_all, shots  # noqa: F401 - fixtures

NOTEBOOK = "04-fault-tolerance.ipynb"
pytestmark = [pytest.mark.slow]


@pytest.mark.timeout(300)
def test_notebook_04_draws_the_failure_story(lab, tmp_path, shots):  # noqa: F811
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        context = _chromium(p, tmp_path)
        try:
            page = context.new_page()
            run_all(page, lab, NOTEBOOK)
            # Run All ends with `%cluster stop`.
            page.get_by_text("stopped 3 tasks").first.wait_for(timeout=200_000)

            story = page.locator(".nbdist-story-view").first
            story.wait_for(timeout=30_000)
            strip = story.locator("svg.nbdist-story")
            assert strip.count() == 1
            box = strip.bounding_box()
            assert box and box["width"] > 400 and box["height"] > 80, box
            text = story.inner_text()
            assert "FailureStory" in text or "Failure story" in text
            phases = strip.locator("g.nbdist-story-phase")
            names = [phases.nth(i).get_attribute("data-phase")
                     for i in range(phases.count())]
            # worker:1's episode, then ps:0's. How much of an episode shows, and
            # whether a restart shows as a second episode, depends on timing (a
            # restarted task may be back before it is detected); the ps is
            # always restored from the checkpoint and its steps redone.
            assert names[0] == "killed" and names.count("killed") >= 2, names
            ps = names[names.index("killed", 1):]
            assert "restored" in ps and "redone" in ps[ps.index("restored"):], names
            words = " ".join(
                phases.nth(i).text_content() for i in range(phases.count()))
            for want in ("killed", "restored step", "redone"):
                assert want in words, (want, words)
            story.scroll_into_view_if_needed()
            story.screenshot(path=str(shots / "failure-story.png"))

            # The same strip under the ClusterView's table.
            cluster = page.locator(".nbdist-cluster-view").first
            assert cluster.locator("svg.nbdist-story g.nbdist-story-phase").count() >= 4

            # The progress bar's last line: the outage, not a clean 100%.
            page.wait_for_function(
                "() => /training: 100%.*lost/"  # names the task when it can
                ".test(document.querySelector('.jp-Notebook').innerText)",
                timeout=30_000,
            )
            assert page.get_by_text("Error displaying widget").count() == 0
        finally:
            context.close()
    assert (shots / "failure-story.png").stat().st_size > 5_000
