"""``view_faces``, the structure test_nbval compares between a committed view
face and a fresh run's: two runs of a view (other times, other counts of
measured events) have one structure; an older wording, another axis or a task
more do not."""

from __future__ import annotations

from nbval_faces import Recorder
from view_faces import differences, structure


def _barrier(rounds: int, wait_ms: int, wording: str = "needed of", tasks: int = 3):
    chips = "".join(f"<span class='chip'>worker:{i}</span>" for i in range(tasks))
    cells = "".join(f"<rect><title>round {r}</title></rect>" for r in range(rounds))
    return (f"<div class='nbdist'><div class='nbdist-barrier' data-needed='2'>"
            f"<div>{rounds} rounds completed</div><div class='muted'>round "
            f"{rounds + 1}: 1 of 2 {wording} {tasks} arrived</div>{chips}"
            f"<div class='nbdist-round-line'>mean wait: worker:0 {wait_ms} ms</div>"
            f"<svg class='nbdist-rounds'>{cells}</svg></div>"
            f"<div class='muted nbdist-face' data-face='final'>final state at "
            f"05:0{rounds % 10}:00</div></div>")


def _cells(*faces):
    return [{"cell_type": "code", "source": "barriers",
             "outputs": [{"output_type": "display_data", "data": {"text/html": f}}]}
            for f in faces]


def _fresh(*faces):
    return [{"code": "barriers", "outputs": [{"data": {"text/html": f}}]}
            for f in faces]


def test_two_runs_of_a_view_have_one_structure():
    assert structure(_barrier(150, 12)) == structure(_barrier(151, 9))
    assert not differences(_cells(_barrier(150, 12)), _fresh(_barrier(301, 40)))


def test_older_wording_a_task_more_or_a_face_less_differ():
    old = _cells(_barrier(150, 12, wording="needed"))
    assert any("words" in d for d in differences(old, _fresh(_barrier(150, 12))))
    rows = "<table class='nbdist-cluster-table'>{}</table>"
    row = "<tr data-task='worker:{}'><td>worker:{}</td></tr>"
    three = rows.format("".join(row.format(i, i) for i in range(3)))
    four = rows.format("".join(row.format(i, i) for i in range(4)))
    assert differences(_cells(three), _fresh(four)) == [(
        "cell 0 face 0: counts {'nbdist-cluster-table': 1, 'data-task': 3} != "
        "{'nbdist-cluster-table': 1, 'data-task': 4}")]
    lane = ("<svg class='nbdist-timeline'><g class='nbdist-lane'>worker:0</g>{}</svg>")
    two = lane.format("<g class='nbdist-lane'>worker:1</g>")
    assert any("counts" in d for d in differences(_cells(lane.format("")), _fresh(two)))
    gone = differences(_cells(_barrier(1, 1)), [{"code": "barriers", "outputs": []}])
    assert gone == ["cell 0: 1 faces committed, 0 fresh"]


def test_the_recorder_applies_display_updates_across_cells():
    """A live view shown in one cell and frozen by a later one: its output holds
    the last face, as nbclient and JupyterLab keep it (nbval kept the first)."""
    recorder = Recorder()
    shown = {"transient": {"display_id": "d1"}, "data": {"text/html": "live"},
             "metadata": {}}
    for msg in (
        {"msg_type": "execute_input", "parent_header": {"msg_id": "a"},
         "content": {"code": "view"}},
        {"msg_type": "display_data", "parent_header": {"msg_id": "a"},
         "content": shown},
        {"msg_type": "execute_input", "parent_header": {"msg_id": "b"},
         "content": {"code": "%cluster stop"}},
        {"msg_type": "update_display_data", "parent_header": {"msg_id": "b"},
         "content": {**shown, "data": {"text/html": "final"}}},
    ):
        recorder.see(msg)
    assert recorder.cells == [
        {"code": "view", "outputs": [{"output_type": "display_data",
                                      "data": {"text/html": "final"}}]},
        {"code": "%cluster stop", "outputs": []}]


def test_which_tasks_arrived_at_the_round_being_gathered_is_measured():
    # A run that ends as a straggler's gradient for one round more arrives (or
    # not yet) draws one structure: the round's ✓ marks follow the timing.
    from nbdist.notebook import BarrierView
    from nbdist.notebook.widget_barrier import BarrierRecord

    workers = ["worker:0", "worker:1", "worker:2"]
    faces = []
    for arrived in ([], ["worker:1"]):
        view = BarrierView(live=False)
        view.state.barriers["sync"] = BarrierRecord(
            "sync", "coordination", workers, arrived, 150)
        faces.append(view._repr_html_())
    assert "✓ " in faces[1] and "✓ " not in faces[0]
    assert structure(faces[0]) == structure(faces[1])
