"""Screenshots of every view at 2 tasks and at 32, into docs/screenshots/.

At 2 tasks (2 or 3 workers and a ps), each view's face as the tour notebooks
saved it (a real run: ``python -m nbdist.tour --inplace`` made it); at 32, the
faces notebook 12 saved (ClusterView, TrafficView, BarrierView of a 32-worker
cluster) and, for the views no notebook shows at that size, faces drawn from
made-up records of 32 workers (a traced step, a ring all-reduce, staleness,
loss curves, a placement). Each face is laid out by Debian's Chromium as the
only content of a page, and its box is the picture.

    .venv/bin/python scripts/make_screenshots.py [--out docs/screenshots]

Needs /usr/bin/chromium and playwright (the test extra).
"""

from __future__ import annotations

import argparse
import base64
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
# (picture, notebook, a class its face holds, which such output: 0 the first)
SAVED_FACES = [
    ("cluster-2", "02-cluster-and-placement", "nbdist-cluster-view", -1),
    ("placement-2", "02-cluster-and-placement", "nbdist-ps-bars", 0),
    ("barrier-2", "03-parameter-server-training", "nbdist-barrier", -1),
    ("story-2", "04-fault-tolerance", "nbdist-story", 0),
    ("collective-2", "06-collective-allreduce", "nbdist-collective", -1),
    ("timeline-2", "09-one-step-on-the-wire", "nbdist-timeline-view", 0),
    ("traffic-2", "09-one-step-on-the-wire", "nbdist-traffic-view", 0),
    ("staleness-2", "10-stragglers-backup-workers-staleness",
     "nbdist-staleness-view", 0),
    ("cluster-32", "12-32-workers-on-one-laptop", "nbdist-cluster-view", 0),
    ("traffic-32", "12-32-workers-on-one-laptop", "nbdist-traffic-view", -1),
    ("barrier-32", "12-32-workers-on-one-laptop", "nbdist-barrier", -1),
]
# TrainingView's face is a picture already: its PNG, as saved.
SAVED_PICTURES = [("training-2", "03-parameter-server-training", -1)]
WORKERS = [f"/job:worker/replica:0/task:{i}" for i in range(32)]
PS = "/job:ps/replica:0/task:0"


def saved_outputs(notebook: str, key: str):
    nb = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", ()):
            value = out.get("data", {}).get(key)
            if value:
                yield "".join(value) if isinstance(value, list) else value


def saved_face(notebook: str, marker: str, which: int) -> str:
    faces = [h for h in saved_outputs(notebook, "text/html") if marker in h]
    if not faces:
        raise SystemExit(f"{notebook}: no saved face with {marker} (run the tour)")
    return faces[which]


def traced_step_of_32():
    """A ps step of 32 workers: each pulls the weights, computes, pushes its
    gradient; the ps applies them."""
    from nbdist.proto.config_pb2 import RunMetadata

    md, t0 = RunMetadata(), 1_800_000_000_000_000
    ps = md.step_stats.dev_stats.add()
    ps.device = f"{PS}/device:CPU:0"

    def node(dev, name, op, start, length, nbytes=0):
        n = dev.node_stats.add()
        n.node_name, n.op_type = name, op
        n.all_start_micros = t0 + start
        n.op_end_rel_micros = n.all_end_rel_micros = length
        if nbytes:
            n.output.add().tensor_description.allocated_bytes = nbytes

    for i, task in enumerate(WORKERS):
        dev = md.step_stats.dev_stats.add()
        dev.device = f"{task}/device:CPU:0"
        node(ps, f"_send/edge_{i}_w", "_Send", 100 + 15 * i, 10)
        node(dev, f"_recv/edge_{i}_w", "_Recv", 110 + 15 * i, 200, 8192)
        node(dev, f"matmul_{i}", "MatMul", 320 + 15 * i, 400 + 7 * i)
        node(dev, f"_send/edge_{100 + i}_grad", "_Send", 730 + 22 * i, 10)
        node(ps, f"_recv/edge_{100 + i}_grad", "_Recv", 740 + 22 * i, 150, 8192)
    node(ps, "update_w", "ApplyGradientDescent", 1600, 300)
    return md


def made_up_views_of_32() -> dict:
    import numpy as np

    import nbdist as nd
    from nbdist.notebook import (
        CollectiveView,
        PlacementView,
        StalenessView,
        TimelineView,
        TrainingView,
    )
    from nbdist.runtime.collective import ChunkEvent

    n = len(WORKERS)
    ring = CollectiveView([
        ChunkEvent(1, 1, 0, phase, step, 0, WORKERS[i], WORKERS[(i + 1) % n],
                   (24 << 20) // n, 0.01 * k, 0.01 * k + 0.004 + 0.0001 * i)
        for k, (phase, step) in enumerate(
            [("reduce-scatter", s) for s in range(n - 1)]
            + [("all-gather", s) for s in range(n - 1)])
        for i in range(n)], title="24 MiB over 32 workers")
    rng = np.random.default_rng(0)
    stale = StalenessView({f"worker:{i}": [(s, s + int(rng.poisson(1 + i % 5)))
                                           for s in range(40)] for i in range(n)},
                          title="asynchronous, 32 workers")
    curves = TrainingView(live=False, steps="global")
    for i in range(n):
        for step in range(i, 400, n):
            curves.record(f"async/worker{i}", step, 2.3 * np.exp(-step / 150)
                          + 0.05 * rng.standard_normal(), wall_time=step * 0.01)
    spec = nd.train.ClusterSpec({"ps": ["localhost:2000"],
                                 "worker": [f"localhost:{3000 + i}" for i in range(n)]})
    graph = nd.Graph()
    with graph.as_default():  # the weights on the ps, a loss on each worker
        with nd.device("/job:ps/task:0"):
            w = nd.get_variable("w", [64, 10], initializer=nd.zeros_initializer())
        for i in range(n):
            with nd.device(f"/job:worker/task:{i}"):
                x = nd.placeholder(nd.float32, [None, 64], name=f"x{i}")
                nd.reduce_sum(nd.matmul(x, w), name=f"loss{i}")
    placement = PlacementView(graph, spec)
    return {"timeline-32": TimelineView(traced_step_of_32(),
                                         title="a ps step of 32 workers"),
            "collective-32": ring, "staleness-32": stale, "training-32": curves,
            "placement-32": placement}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    args = p.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    faces = {name: saved_face(nb, marker, which)
             for name, nb, marker, which in SAVED_FACES}
    for name, view in made_up_views_of_32().items():
        if hasattr(view, "png"):  # TrainingView: its face is a picture
            (out / f"{name}.png").write_bytes(view.png())
        else:
            faces[name] = view._repr_html_()
    for name, nb, which in SAVED_PICTURES:
        png = list(saved_outputs(nb, "image/png"))[which]
        (out / f"{name}.png").write_bytes(base64.b64decode(png))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            for name, html in sorted(faces.items()):
                page.set_content(f"<body style='margin:8px;background:#fff'>{html}"
                                 "</body>")
                page.locator("body > div").first.screenshot(path=str(out / f"{name}.png"))
                print(f"{out / name}.png")
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
