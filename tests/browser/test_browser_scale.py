"""The views' static faces in Debian's Chromium (no JupyterLab, no kernel:
each face set as the page's content), measured from the DOM: a ClusterView of
2 ps + 32 workers fits in 900 px of height, with its strip of each task's
steps/s and CPU (a bar per task); TimelineView's transfer labels and
CollectiveView's member names, as the browser lays them out, overlap nothing
they must not. The 32-task faces are the screenshots ``cluster-32.png``,
``barrier-32.png`` and ``traffic-32.png`` (``NBDIST_UPDATE_SCREENSHOTS=1``).

Needs ``/usr/bin/chromium``; skipped without it.
"""

from __future__ import annotations

import pytest
from test_browser import _chromium, shots  # noqa: F401 - a fixture
from test_view_numbers import _crowded_step

pytestmark = [pytest.mark.slow]

_OVERLAPS = """(pairs) => pairs.some(([a, b]) => {
  const x = a.getBoundingClientRect(), y = b.getBoundingClientRect();
  return x.left < y.right && y.left < x.right && x.top < y.bottom && y.top < x.bottom;
})"""


def _faces():
    import nbdist as nd
    from nbdist.notebook import BarrierView, ClusterView, TrafficView
    from nbdist.notebook.barrier_rounds import RoundTracker
    from nbdist.notebook.widget_barrier import BarrierRecord
    from nbdist.runtime.tap import TapEvent

    spec = nd.train.ClusterSpec({
        "ps": [f"localhost:{2000 + i}" for i in range(2)],
        "worker": [f"localhost:{3000 + i}" for i in range(32)]})
    cluster = ClusterView(spec, live=False)
    for i, row in enumerate(cluster.state.sorted_rows()):
        row.process, row.pid = "running", 1000 + i
        row.note("started", 1_800_000_000.0 + 0.03 * i)
        for k in range(3):  # heartbeats: worker:5 the slowest, 10-12 steps/s else
            rate = 2 if row.name == "worker:5" else 10 + i % 3
            row.load.add(100.0 + k, rate * k, 0.4 * k * (1 + i % 2))
    workers = [f"worker:{i}" for i in range(32)]
    rounds = RoundTracker()
    for step_id, w in enumerate(workers):
        rounds.name(step_id, w)
        rounds.push(step_id, {"local_step": 0, "time": 0.004 * step_id ** 1.3})
    rounds.complete_oldest()
    rounds.push(0, {"local_step": 1, "time": 5.0})
    barrier = BarrierView(live=False)
    barrier.state.barriers["sync_replicas@ps:0"] = BarrierRecord(
        "sync_replicas@ps:0", "SyncReplicas", workers, ["worker:0"], 1,
        rounds=rounds, needed=32)
    traffic = TrafficView(steps=None)
    for w in range(32):
        for p in range(2):
            traffic.add(TapEvent("RunGraph", f"/job:worker/replica:0/task:{w}",
                                 f"/job:ps/replica:0/task:{p}", 1,
                                 4096 * (1 + (w * 7 + p) % 5), 1.0, 1.002))
    return {"cluster": cluster, "barrier": barrier, "traffic": traffic}


@pytest.mark.timeout(120)
def test_faces_at_32_workers_fit_and_labels_do_not_overlap(
        tmp_path, shots):  # noqa: F811
    sync_api = pytest.importorskip("playwright.sync_api")
    from nbdist.notebook import CollectiveView, TimelineView
    from nbdist.runtime.collective import ChunkEvent

    faces = _faces()
    timeline = TimelineView(_crowded_step(1_700_000_000_000_000))
    tasks = [f"/job:worker/replica:0/task:{i}" for i in range(4)]
    ring = CollectiveView([ChunkEvent(1, 1, 0, "reduce-scatter", 0, 0, tasks[i],
                                      tasks[(i + 1) % 4], 8 << 20, 0.0, 0.01)
                           for i in range(4)])
    with sync_api.sync_playwright() as p:
        context = _chromium(p, tmp_path)
        try:
            page = context.new_page()
            for name, view in faces.items():
                html = view._repr_html_()
                page.set_content(f"<body style='margin:8px'>{html}</body>")
                face = page.locator("body > div").first
                box = face.bounding_box()
                assert box and box["height"] <= 900, (name, box)
                if name == "cluster":  # a bar per task, drawn, under the grid
                    strip = page.locator(".nbdist-load-job")
                    assert strip.count() == 2
                    spark = strip.first.locator(".nbdist-task-load svg").first
                    box = spark.bounding_box()  # 32 bars, 3 px apart
                    assert box["width"] == 96 and box["height"] == 14
                    bars = page.evaluate(
                        "(p) => p.getTotalLength()",
                        spark.locator("path").element_handle())
                    assert bars > 32  # drawn: at least a 1 px stub per worker
                    assert "slowest worker:5" in strip.first.inner_text()
                face.screenshot(path=str(shots / f"{name}-32.png"))
            assert page.locator(".nbdist-heat-cell").count() == 64  # the last face

            page.set_content(timeline._repr_html_())
            labels = page.locator("text.nbdist-transfer-label").element_handles()
            bars = page.locator("rect.nbdist-op[data-kind='update']").element_handles()
            assert len(labels) >= 2 and len(bars) == 6
            pairs = [[a, b] for i, a in enumerate(labels) for b in labels[i + 1:]]
            pairs += [[a, b] for a in labels for b in bars]
            assert not page.evaluate(_OVERLAPS, pairs)

            page.set_content(ring._repr_html_())
            for member in page.locator("g.nbdist-member").element_handles():
                circle, text = member.query_selector("circle"), member.query_selector(
                    "text")
                c, t = circle.bounding_box(), text.bounding_box()
                assert c["x"] <= t["x"] and t["x"] + t["width"] <= c["x"] + c["width"]
        finally:
            context.close()
