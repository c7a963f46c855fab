"""``TrainingView``'s curves that tell the truth (issue 22, item 6): the x-axis
by global step, examples or wall time; no line across an idle gap; every run
labelled; an asynchronous and a synchronous run on one global-step axis."""

from __future__ import annotations

import numpy as np
import pytest

from nbdist.notebook.widget_training import TrainingView, segments


def view_with_a_gap():
    """worker:0 trains steps 0..9 (one a second from t=1000), is idle 60 s,
    then trains steps 10..19."""
    view = TrainingView(live=False, examples_per_step=32)
    for step in range(10):
        view.record("worker:0", step, 1.0 / (1 + step), wall_time=1000.0 + step)
    for step in range(10, 20):
        view.record("worker:0", step, 1.0 / (1 + step), wall_time=1069.0 + step - 9)
    return view


def test_a_run_an_idle_gap_and_a_run_are_two_segments():
    view = view_with_a_gap()
    (segs,) = view.curves().values()
    assert len(segs) == 2
    assert segs[0][0] == list(range(10)) and segs[1][0] == list(range(10, 20))
    np.testing.assert_allclose(segs[1][1], [1.0 / (1 + s) for s in range(10, 20)])
    # Drawn as two lines of one colour, one legend entry.
    fig = view.figure()
    lines = [ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata())]
    assert [list(ln.get_xdata()) for ln in lines] == [
        list(range(10)), list(range(10, 20))]
    assert len({ln.get_color() for ln in lines}) == 1
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["worker:0"]


def test_steady_points_stay_one_segment_and_a_restore_splits():
    pts = [(float(t), t, 1.0) for t in range(50)]
    assert len(segments(pts)) == 1
    # The step going back (restored from a checkpoint) starts a new segment.
    back = pts[:20] + [(20.0 + i, 15 + i, 1.0) for i in range(10)]
    assert [len(s) for s in segments(back)] == [20, 10]
    # An explicit gap_s.
    assert len(segments(pts, gap_s=0.5)) == 50


def test_three_x_axes():
    view = view_with_a_gap()
    steps = view.curves("step")["worker:0"]
    examples = view.curves("examples")["worker:0"]
    wall = view.curves("wall")["worker:0"]
    assert [xs for xs, _ in examples] == [[32 * s for s in xs] for xs, _ in steps]
    assert wall[0][0] == [float(s) for s in range(10)]  # seconds since the first point
    assert wall[1][0] == [70.0 + i for i in range(10)]
    for axis, label in (("step", "global step"), ("examples", "examples"),
                        ("wall", "seconds")):
        view.x = axis
        assert view.figure().axes[0].get_xlabel() == label
    with pytest.raises(ValueError, match="x must be one of"):
        view.x = "epochs"
    with pytest.raises(ValueError, match="examples_per_step"):
        TrainingView(live=False, x="examples")


def test_async_and_sync_runs_share_the_global_step_axis():
    """An async worker's summaries and a sync chief's, written at the global
    step: on the step axis both span the same steps; by examples the sync run
    (2 replicas, 2 batches per global step) is twice as far along."""
    view = TrainingView(live=False, examples_per_step={"async": 16, "sync": 32})
    for step in range(0, 40, 2):  # another worker took the odd steps
        view.record("async", step, 2.0 / (1 + step), wall_time=10.0 + step / 10)
    for step in range(20):
        view.record("sync", step, 2.0 / (1 + step), wall_time=10.0 + step / 5)
    steps = view.curves("step")
    assert steps["async"][0][0][-1] == 38 and steps["sync"][0][0][-1] == 19
    ex = view.curves("examples")
    assert ex["async"][0][0][-1] == 38 * 16 and ex["sync"][0][0][-1] == 19 * 32
    fig = view.figure()
    labels = sorted(t.get_text() for t in fig.axes[0].texts)
    assert labels == ["async", "sync"]  # each run labelled at its end


def test_end_labels_never_overlap_and_stay_in_the_figure():
    """Three runs ending at one point (03: "sync" was buried under
    "async/worker…"): the labels' boxes, as drawn, do not intersect."""
    from matplotlib.text import Text

    view = TrainingView(live=False)
    for s in range(100):
        view.record("async/worker0", 2 * s, 1 / (1 + s), wall_time=100 + s * 0.01)
        view.record("async/worker1", 2 * s + 1, 1.02 / (1 + s),
                    wall_time=100 + s * 0.01)
    for s in range(50):
        view.record("sync", 150 + s, 0.99 / (1 + 2 * s), wall_time=103 + s * 0.02)
    fig = view.figure()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = {t.get_text(): Text.get_window_extent(t, renderer)
             for t in fig.axes[0].texts}
    assert sorted(boxes) == ["async/worker0", "async/worker1", "sync"]
    names = sorted(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not boxes[a].overlaps(boxes[b]), (a, b)
    width, height = fig.canvas.get_width_height()
    for box in boxes.values():
        assert 0 <= box.x0 and box.x1 <= width and 0 <= box.y0 and box.y1 <= height


def test_the_axis_says_which_step_it_plots():
    assert TrainingView(live=False).x_label() == "global step"
    view = TrainingView(live=False, steps="local")
    view.record("worker:0", 1, 1.0)
    assert view.figure().axes[0].get_xlabel() == "each worker's own step"
    with pytest.raises(ValueError, match="steps must be one of"):
        TrainingView(live=False, steps="epoch")


def test_steps_per_sec_breaks_over_an_idle_gap_of_a_few_step_times():
    """Steps every 10 ms, idle 1 s, steps again (03's two runs; the old rule
    needed a gap of 2 s): two lines, none drawn across the gap."""
    view = TrainingView(live=False)
    times = [100 + 0.01 * i for i in range(30)] + [101.3 + 0.01 * i for i in range(30)]
    for i, t in enumerate(times):
        view.record("w", i, 1.0, wall_time=t)
    xs, ys = view.steps_per_sec()["w"]
    gaps = [i for i, x in enumerate(xs) if np.isnan(x)]
    assert len(gaps) == 1
    parts = xs[: gaps[0]], xs[gaps[0] + 1:]
    assert max(parts[0]) < 0.3 and min(parts[1]) > 1.3  # nothing spans the gap
    np.testing.assert_allclose([y for y in ys if not np.isnan(y)], 100.0, rtol=1e-6)


def test_the_tours_curves_log_the_step_their_axis_names():
    """Every summary the tour's cells write for a TrainingView is written at
    the global step the same ``sess.run`` fetched (03 and 07 wrote each
    worker's own loop counter under an axis that said "global step")."""
    import json
    import re

    from helpers import ROOT

    checked = 0
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        cells = [("".join(c["source"])) for c in json.loads(path.read_text())["cells"]
                 if c["cell_type"] == "code"]
        if not any("TrainingView(" in c and "steps=\"local\"" not in c for c in cells):
            continue
        for cell in cells:
            for step in re.findall(r"add_summary\(\w+, (\w+)\)", cell):
                fetched = re.search(
                    rf"(?m)^.*\b{step}\b[^=\n]*= *sess\.run\(\[[^\]]*global_step", cell)
                assert fetched, f"{path.name}: add_summary(..., {step}) is not the " \
                    "global step"
                checked += 1
    assert checked >= 3
