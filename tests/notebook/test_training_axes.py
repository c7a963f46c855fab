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
