"""The story of a failure (issue 22, item 5): a worker SIGKILLed under a
``ClusterCoordinator`` and a parameter server SIGKILLed under a
``MonitoredTrainingSession`` (real processes of a ``LocalCluster``) publish
their recovery events in order, with numbers checked against what the test
saw itself (the closures in flight at the kill, the checkpoint's step), and a
live ``ClusterView`` following the cluster shows the same story in its model,
its text and its SVG strip.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import numpy as np
import pytest

import nbdist as nd
from nbdist.distribute import recovery_events
from nbdist.distribute.coordinator.cluster_coordinator import ClusterCoordinator
from nbdist.distribute.strategies.parameter_server_strategy import ParameterServerStrategy
from nbdist.notebook.widget_cluster import ClusterView
from nbdist.notebook.widget_story import FailureStory, FailureStoryView
from nbdist.train.checkpoint_management import latest_checkpoint

BOUND_S = 60.0  # generous: a loaded 2-core machine


@pytest.fixture
def made():
    """Things to stop at teardown, last made first."""
    things = []
    yield things
    for obj in reversed(things):
        if isinstance(obj, (ClusterCoordinator, ClusterView, FailureStoryView)):
            obj.close()
        else:
            for t in obj.tasks:
                if t.pid:
                    try:
                        os.kill(t.pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
            obj.shutdown()


@pytest.fixture
def recorded():
    """The recovery events of this process, as published."""
    events = []
    fn = recovery_events.subscribe(events.append)
    yield events
    recovery_events.unsubscribe(fn)


def cluster_of(made, **kw):
    cluster = nd.LocalCluster(
        progress=False,
        start_timeout=60,
        coordination_config={
            "heartbeat_interval_ms": 100,
            "heartbeat_timeout_ms": 2000,
        },
        **kw,
    )
    made.append(cluster)
    return cluster


def wait_for(predicate, what, timeout=BOUND_S):
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def phases(events, task):
    return [e["phase"] for e in events if task in e.get("task", "")]


@pytest.mark.usefixtures("graph")  # its variable on /job:ps stays out of later tests
def test_a_killed_worker_story_counts_the_closures_in_flight(made, recorded):
    cluster = cluster_of(made, ps=1, workers=2)
    view = ClusterView(cluster)
    made.append(view)
    strategy = ParameterServerStrategy(cluster.cluster_spec)
    coordinator = ClusterCoordinator(strategy)
    made.append(coordinator)
    with strategy.scope():
        counter = nd.Variable(0, name="counter")

    @nd.function
    def step(x):
        counter.assign_add(1)
        return x

    n = 400
    results = [coordinator.schedule(step, args=(np.int32(i),)) for i in range(n)]
    wait_for(lambda: coordinator.stats.get("completed", 0) >= n // 4, "progress")
    # The coordinator's state frozen: what runs on worker 1 now is in flight.
    with coordinator._lock:
        in_flight = len(coordinator._state.running_on(1))
        cluster.kill("worker", 1)
        killed_at = time.time()
    coordinator.join()
    assert [int(r.fetch()) for r in results] == list(range(n))
    wait_for(
        lambda: (
            "redone" in phases(recorded, "worker:1")
            or (in_flight == 0 and "requeued" in phases(recorded, "worker:1"))
        ),
        "redone",
    )

    mine = [e for e in recorded if e["task"] == "worker:1"]
    assert [e["phase"] for e in mine][:2] == ["lost", "requeued"], mine
    lost, requeued = mine[0], mine[1]
    assert {e["source"] for e in mine} == {"ClusterCoordinator"}
    assert len({e["story"] for e in mine}) == 1
    assert killed_at <= lost["at"] <= killed_at + BOUND_S
    assert requeued["count"] == in_flight >= 1
    redone = [e for e in mine if e["phase"] == "redone"]
    assert len(redone) == 1 and redone[0]["count"] == in_flight
    assert redone[0]["unit"] == "closures" and redone[0]["at"] >= requeued["at"]
    assert 0 <= redone[0]["seconds"] <= BOUND_S

    # The view's story: the kill it saw itself, then the coordinator's events.
    assert view.wait_for(
        lambda s: any(
            e.task == "worker:1" and e.has("redone") and e.has("killed")
            for e in s.story.episodes
        ),
        timeout=BOUND_S,
    )
    with view._lock:
        ep = next(e for e in view.state.story.episodes if e.task == "worker:1")
        assert [p for p, _, _ in ep.phases()] == [
            "killed",
            "detected",
            "re-queued",
            "redone",
        ]
        assert ep.requeued == in_flight and ep.redone == in_flight
        assert ep.killed_at <= ep.lost_at + 0.5  # polled every 0.25 s
        text, html = repr(view), view._repr_html_()
    assert re.search(
        r"worker:1 +\d\d:\d\d:\d\d killed → detected after \d+\.\d s → "
        rf"re-queued {in_flight} closures? → redone {in_flight} "
        r"closures? in \d+\.\d s",
        text,
    ), text
    assert "<svg class='nbdist-story'" in html
    assert html.count("class='nbdist-story-phase'") == 4

    # Restarted, it rejoins: the story ends with "back".
    cluster.restart("worker", 1)
    wait_for(lambda: "rejoined" in phases(recorded, "worker:1"), "rejoined")
    assert view.wait_for(
        lambda s: any(e.task == "worker:1" and e.has("back") for e in s.story.episodes),
        timeout=BOUND_S,
    )


LAST_STEP, KILL_AT, SAVE_EVERY = 14, 8, 3


def test_a_killed_ps_story_restores_the_checkpoint_step(made, recorded, tmp_path):
    cluster = cluster_of(made, ps=1, workers=1)
    view = FailureStoryView(cluster)
    made.append(view)
    with nd.Graph().as_default():
        with nd.device(
            nd.train.replica_device_setter(
                cluster=cluster.cluster_spec, worker_device="/job:worker/task:0"
            )
        ):
            gs = nd.train.get_or_create_global_step()
            w = nd.Variable(np.zeros(4, np.float32), name="w")
            loss = nd.reduce_sum(nd.square(w - 1.0))
            train = nd.train.GradientDescentOptimizer(0.1).minimize(
                loss, global_step=gs
            )
        bar = nd.train.ProgressBarHook(last_step=LAST_STEP)
        seen, checkpoints = [], []
        restarter = threading.Thread(
            target=lambda: (
                view.wait_for(
                    lambda s: any(e.has("detected") for e in s.episodes), BOUND_S
                ),
                cluster.restart("ps", 0),
            ),
            daemon=True,
        )
        with nd.train.MonitoredTrainingSession(
            master=cluster.target("worker", 0),
            is_chief=True,
            checkpoint_dir=str(tmp_path),
            save_checkpoint_steps=SAVE_EVERY,
            hooks=[nd.train.StopAtStepHook(last_step=LAST_STEP), bar],
            log_step_count_steps=None,
            save_summaries_steps=None,
        ) as sess:
            while not sess.should_stop():
                _, step = sess.run([train, gs])
                seen.append(int(step))
                if len(seen) == KILL_AT:
                    checkpoints.append(latest_checkpoint(str(tmp_path)))
                    os.kill(
                        cluster.tasks[0].pid
                        if cluster.tasks[0].job == "ps"
                        else cluster.tasks[1].pid,
                        signal.SIGKILL,
                    )
                    restarter.start()
                assert len(seen) < 200
        restarter.join(BOUND_S)

    mine = [e for e in recorded if e["source"] == "MonitoredSession"]
    assert [e["phase"] for e in mine] == ["lost", "restored", "redone"], mine
    lost, restored, redone = mine
    assert lost["task"] == "ps:0"
    assert abs(lost["at_step"] - seen[KILL_AT - 1]) <= 1, (lost, seen)
    # The checkpoint restored is the last one written before the kill.
    step_of_checkpoint = int(checkpoints[0].rsplit("-", 1)[1])
    assert restored["step"] == step_of_checkpoint
    assert restored["checkpoint"].endswith(f"model.ckpt-{step_of_checkpoint}")
    assert seen[KILL_AT] <= step_of_checkpoint + 1  # training went on from it
    assert redone["count"] == lost["at_step"] - restored["step"]
    assert redone["unit"] == "steps" and redone["at"] >= restored["at"]
    assert "ps:0 lost, restored" in str(bar._bar.postfix), bar._bar.postfix

    assert view.wait_for(
        lambda s: any(e.task == "ps:0" and e.has("redone") for e in s.episodes),
        timeout=BOUND_S,
    )
    with view._lock:
        ep = next(e for e in view.story.episodes if e.task == "ps:0")
        # The ps came back before the new session restored the checkpoint.
        assert [p for p, _, _ in ep.phases()] == [
            "killed",
            "detected",
            "back",
            "restored",
            "redone",
        ]
        assert ep.restored_step == step_of_checkpoint
        assert ep.redone == redone["count"]
        assert ep.killed_at <= ep.lost_at + 0.5
        text = repr(view)
    assert re.search(
        rf"ps:0 +\d\d:\d\d:\d\d killed → detected after \d+\.\d s → back → "
        rf"restored step {step_of_checkpoint} → redone "
        rf"{redone['count']} steps? in \d+\.\d s",
        text,
    ), text


def test_story_model_merges_sources_and_keeps_episodes_apart():
    story = FailureStory()
    story.note("ps:0", "killed", 10.0)
    story.apply_payload(
        {
            "phase": "lost",
            "task": "ps:0",
            "at": 10.5,
            "story": "c1",
            "source": "ClusterCoordinator",
            "how": "probe",
        }
    )
    story.apply_payload(
        {
            "phase": "lost",
            "task": "",
            "at": 10.2,
            "story": "s1",
            "source": "MonitoredSession",
            "how": "UnavailableError",
        }
    )
    story.apply_payload(
        {
            "phase": "restored",
            "task": "",
            "at": 13.0,
            "step": 6,
            "story": "s1",
            "source": "MonitoredSession",
        }
    )
    story.note("ps:0", "restarted", 12.0)
    assert len(story.episodes) == 1
    ep = story.episodes[0]
    assert ep.lost_at == 10.2 and len(ep.detected_by) == 2
    assert [p for p, _, _ in ep.phases()] == ["killed", "detected", "back", "restored"]
    # The same task killed again later: a second episode.
    story.note("ps:0", "killed", 100.0)
    assert len(story.episodes) == 2 and story.episodes[1].killed_at == 100.0
    assert story.svg().count("<g class='nbdist-story-phase'") == 5


def test_a_heartbeat_failure_told_after_the_restart_is_the_same_failure():
    story = FailureStory()
    story.note("worker:1", "killed", 10.0)
    story.note("worker:1", "restarted", 12.5)
    # Heartbeats stopped at 12.0: the service says so after the restart was seen.
    assert story.note("worker:1", "failed by heartbeat", 12.0, weak=True) is False
    assert len(story.episodes) == 1
    # ... or timed after the restart (a restart can beat the heartbeat timeout):
    # still the failure that was already told, not a second one.
    assert story.note("worker:1", "failed by heartbeat", 13.0, weak=True) is False
    assert len(story.episodes) == 1
    # Killed again after it came back: another failure.
    assert story.note("worker:1", "killed", 20.0) is True
    assert len(story.episodes) == 2
    # With no kill seen (a remote task), heartbeats alone still tell a failure.
    assert story.note("ps:0", "failed by heartbeat", 30.0, weak=True) is True
    assert len(story.episodes) == 3 and story.episodes[2].task == "ps:0"


def test_an_in_process_session_tells_its_recovery_from_a_messageless_error(recorded):
    """A step that fails once with ``AbortedError(None, None, None)`` (no
    message): lost at the step reached, a new session (no checkpoint: the
    model initialised afresh, step 0), the steps redone once passed again."""
    from nbdist import errors

    class FailOnce(nd.train.SessionRunHook):
        failed = False

        def after_run(self, run_context, run_values):
            if not self.failed and len(steps) == 3:
                FailOnce.failed = True
                raise errors.AbortedError(None, None, None)

    steps = []
    with nd.Graph().as_default():
        gs = nd.train.get_or_create_global_step()
        inc = nd.assign_add(gs, 1)
        with nd.train.MonitoredSession(hooks=[FailOnce()]) as sess:
            while len(steps) < 8:
                steps.append(int(sess.run(inc)))
    mine = [e for e in recorded if e["source"] == "MonitoredSession"]
    assert [e["phase"] for e in mine] == ["lost", "restored", "redone"], mine
    lost, restored, redone = mine
    assert lost["how"].startswith("AbortedError") and lost["task"] == ""
    # The global step the last good run read: before or after its increment.
    assert lost["at_step"] in (2, 3) and restored["step"] == 0
    assert restored["checkpoint"] == ""
    assert redone["count"] == lost["at_step"] and redone["unit"] == "steps"
    assert steps[:4] == [1, 2, 3, 1], steps  # the new session started afresh


def test_heartbeat_failures_of_32_workers_are_told_as_such_and_fit_the_cluster_view():
    """32 workers that missed their heartbeats at once (a loaded laptop) and came
    back: each story says "failed by heartbeat" (it said "killed", though no
    process ended), and the ClusterView's strip draws four and counts the rest
    (it drew 32 strips: 2,700 px)."""
    story = FailureStory()
    for i in range(32):
        assert story.note(f"worker:{i}", "failed by heartbeat", 10.0 + 0.01 * i,
                          weak=True)
        story.note(f"worker:{i}", "restarted", 12.0)
    lines = story.lines()
    assert lines.count("failed by heartbeat") == 32 and "killed" not in lines
    assert story.lines(most=4).splitlines()[-1] == "… and 28 more failures"
    assert len(story.lines(most=4).splitlines()) == 5
    html = story.html(most=4)
    assert html.count("failed by heartbeat") == 4 and "… and 28 more failures" in html
    story.note("worker:0", "killed", 20.0)  # a kill after it came back: killed
    assert story.episodes[-1].phases()[0][2] == "killed"


def test_a_detection_told_after_the_recovery_joins_the_same_failure():
    # On a busy machine the coordinator's probe can tell ps:0's loss after the
    # session already restored and redid its steps: one failure, opened by its
    # kill ("detected after"), never a second one that starts at "detected".
    story = FailureStory()
    story.note("ps:0", "killed", 10.0)
    session = {"task": "ps:0", "story": "s1", "source": "MonitoredSession"}
    story.apply_payload(dict(session, phase="lost", at=10.3, how="Unavailable"))
    story.note("ps:0", "restarted", 11.0)
    story.apply_payload(dict(session, phase="restored", at=12.0, step=40))
    story.apply_payload(dict(session, phase="redone", at=12.5, count=3))
    story.apply_payload({"phase": "lost", "task": "ps:0", "at": 13.0, "story": "c1",
                         "source": "ClusterCoordinator", "how": "probe"})
    assert len(story.episodes) == 1
    ep = story.episodes[0]
    assert ep.lost_at == 10.3 and len(ep.detected_by) == 2
    labels = [label for _, _, label in ep.phases()]
    assert labels[:2] == ["killed", "detected after 0.3 s"]
    # The same source telling a loss again is another failure.
    story.apply_payload(dict(session, phase="lost", at=14.0, story="s2", how="x"))
    assert len(story.episodes) == 2


def test_a_session_names_the_task_its_error_names_when_no_probe_can(recorded):
    """No service to probe (or the task back before the probe ran): the task
    the step's error names is the one lost, for the progress bar and the story."""
    from nbdist import errors

    class FailOnce(nd.train.SessionRunHook):
        failed = False

        def after_run(self, run_context, run_values):
            if not self.failed and len(steps) == 2:
                FailOnce.failed = True
                raise errors.UnavailableError(
                    None, None, "Task /job:ps/replica:0/task:1 at localhost:1 is "
                    "unavailable: could not connect within 3.0 s (calling RunGraph)")

    steps = []
    with nd.Graph().as_default():
        inc = nd.assign_add(nd.train.get_or_create_global_step(), 1)
        with nd.train.MonitoredSession(hooks=[FailOnce()]) as sess:
            while len(steps) < 5:
                steps.append(int(sess.run(inc)))
    mine = [e for e in recorded if e["source"] == "MonitoredSession"]
    assert [e["phase"] for e in mine] == ["lost", "restored", "redone"], mine
    assert [e["task"] for e in mine] == ["ps:1"] * 3
