"""``TrainingView``: loss points read back from the event files ``nd.summary``
writes (values checked against what was written), steps/s from step events and
from points, its static forms; and TensorBoard's own server, on 127.0.0.1, sees
the same tags."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
from helpers import free_port
from PIL import Image

import nbdist as nd
from nbdist.notebook.widget_training import TrainingView, read_scalars
from nbdist.runtime.coordination import CoordinationService

LOSSES = {"worker0": [2.5, 1.25, 0.75, 0.5], "worker1": [3.0, 1.5, 0.25]}


def _write_runs(logdir, losses=LOSSES):
    with nd.Graph().as_default():
        value = nd.placeholder(nd.float32, [])
        summary = nd.summary.scalar("loss", value)
        with nd.Session() as sess:
            for run, values in losses.items():
                with nd.summary.FileWriter(f"{logdir}/{run}") as writer:
                    for step, v in enumerate(values):
                        writer.add_summary(sess.run(summary, {value: v}), step)


def test_reads_the_losses_written_by_nd_summary(tmp_path):
    _write_runs(tmp_path)
    got = read_scalars(str(tmp_path))
    assert sorted(got) == sorted(LOSSES)
    for run, values in LOSSES.items():
        assert [p[1] for p in got[run]] == list(range(len(values)))
        np.testing.assert_array_equal(
            [p[2] for p in got[run]], np.float32(values)
        )


def test_poll_reads_only_whole_new_records(tmp_path):
    _write_runs(tmp_path, {"w": [1.0]})
    view = TrainingView(logdir=str(tmp_path), live=False)
    assert len(view.losses["w"]) == 1
    path = next((tmp_path / "w").glob("*.tfevents.*"))
    assert view.poll() is False
    _write_runs(tmp_path / "later", {"w": [4.0, 5.0]})
    more = next((tmp_path / "later" / "w").glob("*.tfevents.*")).read_bytes()
    with open(path, "ab") as f:  # half a record: left for the next poll
        f.write(more[: len(more) - 3])
    view.poll()
    n = len(view.losses["w"])
    with open(path, "ab") as f:
        f.write(more[len(more) - 3 :])
    assert view.poll() is True
    assert len(view.losses["w"]) == n + 1
    assert [p[2] for p in view.losses["w"]][-2:] == [4.0, 5.0]


def test_steps_per_sec_from_points_and_step_events():
    view = TrainingView(live=False)
    for i in range(20):  # 4 steps per second, by construction
        view.record("w", 2 * i, 1.0 / (i + 1), wall_time=100.0 + 0.5 * i)
    xs, ys = view.steps_per_sec()["w"]
    np.testing.assert_allclose(ys, 4.0)
    assert xs[0] == pytest.approx(0.5 * 8)

    service = CoordinationService(["/job:worker/replica:0/task:0"])
    try:
        view = TrainingView(live=False)
        for i in range(12):  # 10 steps per second on worker:0; ps steps ignored
            for task in ("/job:worker/replica:0/task:0", "/job:ps/replica:0/task:0"):
                service.publish(
                    "step", task, {"task": task}, wall_time_us=int(1e6 + i * 1e5)
                )
        for event in service.wait_events(1, 1.0):
            view.apply(event)
        rates = view.steps_per_sec()
        assert list(rates) == ["worker:0"]
        np.testing.assert_allclose(rates["worker:0"][1], 10.0)
    finally:
        service.stop()


def test_static_forms():
    view = TrainingView(live=False, title="demo")
    assert repr(view) == "TrainingView: no loss yet"
    for step, loss in enumerate([2.0, 1.0, 0.5]):
        view.record("worker:1", step, loss)
        view.record("worker:0", step, 2 * loss)
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "image/png"}  # nbval compares text only
    assert bundle["text/plain"] == (
        "TrainingView: loss of 2 runs: worker:0 (3 points), worker:1 (3 points)"
    )
    image = Image.open(io.BytesIO(base64.b64decode(bundle["image/png"])))
    assert image.size == (900, 320)
    assert view.png() == view.png()  # deterministic for the same points
    loss_ax = view.figure().axes[0]
    assert [t.get_text() for t in loss_ax.get_legend().get_texts()] == [
        "worker:0",
        "worker:1",
    ]
    assert "data:image/png;base64," in view._full_html()


@pytest.mark.slow
def test_tensorboard_serves_our_event_files_on_localhost(tmp_path):
    _write_runs(tmp_path)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(tmp_path),
         "--host", "127.0.0.1", "--port", str(port), "--reload_interval", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/data/plugin/scalars/tags"
    try:
        tags, deadline = {}, time.monotonic() + 120
        while time.monotonic() < deadline and sorted(tags) != sorted(LOSSES):
            assert proc.poll() is None, "TensorBoard exited"
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    tags = json.load(r)
            except OSError:
                pass  # not listening yet
            if sorted(tags) != sorted(LOSSES):
                time.sleep(0.2)  # TensorBoard loads runs in the background
        assert sorted(tags) == sorted(LOSSES)
        assert all("loss" in t for t in tags.values()), tags
        q = f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?run=worker1&tag=loss"
        with urllib.request.urlopen(q, timeout=5) as r:
            rows = json.load(r)
        assert [row[1] for row in rows] == [0, 1, 2]
        np.testing.assert_allclose([row[2] for row in rows], LOSSES["worker1"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_tensorboards_static_card_shows_the_runs_and_a_picture(tmp_path):
    """07's ``%tensorboard`` output, read without TensorBoard (a static copy):
    a card naming the runs it served and a PNG of their curves, under the
    frame (it was a blank 600 px frame)."""
    from nbdist.notebook.tensorboard_magic import card_html

    _write_runs(tmp_path)
    html = card_html(str(tmp_path))
    assert "TensorBoard ran here" in html and "2 runs (worker0, worker1)" in html
    data = html.split("src='data:image/png;base64,", 1)[1].split("'", 1)[0]
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    assert image.size[0] > 400 and image.size[1] > 200
    empty = card_html(str(tmp_path / "nothing"))
    assert "no <code>loss</code> curve yet" in empty and "<img" not in empty


def test_32_runs_are_drawn_without_a_legend_or_a_label_each():
    """32 workers' curves: a legend and an end label per run filled the figure
    (matplotlib collapsed the axes); the runs are drawn thin and counted in the
    titles instead."""
    from nbdist.notebook import TrainingView

    view = TrainingView(live=False)
    for i in range(32):
        for step in range(i, 200, 32):
            view.record(f"async/worker{i}", step, 2.0 / (1 + step), wall_time=step / 50)
    loss_ax, rate_ax = view.figure().axes
    assert loss_ax.get_legend() is None and rate_ax.get_legend() is None
    assert loss_ax.get_title() == "loss · 32 runs" and not loss_ax.texts
    assert len(loss_ax.lines) == 32
    assert view.png()[:4] == b"\x89PNG"  # drawn without a warning (they are errors)
