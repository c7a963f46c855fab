"""``nd.client.timeline.Timeline`` and ``nd.train.ProfilerHook`` as TensorFlow's
timeline_test.py and ProfilerHookTest define them: a traced step becomes a
Chrome trace (``traceEvents``: a process per device, an ``"X"`` event per op
with its name, type and inputs, ``"s"``/``"t"`` flows for data crossing
devices), and the hook writes ``timeline-<step>.json`` every N steps.
"""

from __future__ import annotations

import glob
import json
import os

import pytest

import nbdist as nd
from nbdist.proto import step_stats_pb2, summary_pb2


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g
    nd.summary.FileWriterCache.clear()


def check_trace_shape(trace: dict):
    """Every event has what the Trace Event Format asks of its phase."""
    assert set(trace) == {"traceEvents"}
    for event in trace["traceEvents"]:
        assert isinstance(event["name"], str) and isinstance(event["pid"], int)
        if event["ph"] == "M":
            assert event["name"] in ("process_name", "thread_name")
            continue
        assert isinstance(event["tid"], int) and isinstance(event["ts"], int)
        if event["ph"] == "X":
            assert isinstance(event["dur"], int) and event["dur"] >= 0
            assert event["cat"] == "Op"
        elif event["ph"] in "st":
            assert event["cat"] == "DataFlow" and isinstance(event["id"], int)


def synthetic_step_stats():
    """``a`` on CPU:0 (10..14 us, 8 bytes), ``b = Mul(a, a)`` on CPU:1 (20..25),
    ``c = Add(b, a)`` on CPU:1 (30..31), labelled the way TF labels them."""
    stats = step_stats_pb2.StepStats()
    cpu0 = stats.dev_stats.add(device="/job:w/replica:0/task:0/device:CPU:0")
    cpu1 = stats.dev_stats.add(device="/job:w/replica:0/task:0/device:CPU:1")
    for dev, name, label, start, dur, nbytes in [
            (cpu0, "a", "a = Const()", 10, 4, 8),
            (cpu1, "b", "b = Mul(a, a)", 20, 5, 8),
            (cpu1, "c", "c = Add(b, a)", 30, 1, 8)]:
        ns = dev.node_stats.add(node_name=name, timeline_label=label,
                                all_start_micros=start, all_end_rel_micros=dur,
                                thread_id=123456)
        ns.output.add(slot=0).tensor_description.allocated_bytes = nbytes
    return stats


def test_timeline_from_labels_processes_ops_and_cross_device_flows():
    stats = synthetic_step_stats()
    before = stats.SerializeToString()
    timeline = nd.client.timeline.Timeline(stats)
    trace = json.loads(timeline.generate_chrome_trace_format())
    check_trace_shape(trace)
    assert stats.SerializeToString() == before  # the caller's proto is untouched
    events = trace["traceEvents"]
    processes = {e["args"]["name"]: e["pid"] for e in events if e["ph"] == "M"}
    cpu0 = "/job:w/replica:0/task:0/device:CPU:0"
    cpu1 = "/job:w/replica:0/task:0/device:CPU:1"
    assert processes == {"Allocators": 0, f"{cpu0} Compute": 1, f"{cpu0} Tensors": 2,
                         f"{cpu1} Compute": 3, f"{cpu1} Tensors": 4}
    ops = {e["args"]["name"]: e for e in events if e["ph"] == "X"}
    assert ops["b"] == {"ph": "X", "cat": "Op", "name": "Mul", "pid": 3, "tid": 0,
                        "ts": 20, "dur": 5,
                        "args": {"name": "b", "op": "Mul", "input0": "a",
                                 "input1": "a"}}
    assert (ops["a"]["pid"], ops["a"]["tid"], ops["a"]["ts"], ops["a"]["dur"]) == \
        (1, 0, 10, 4)
    assert ops["c"]["args"] == {"name": "c", "op": "Add", "input0": "b", "input1": "a"}
    # Flows only where data crosses devices: a -> b (twice, one per input) and
    # a -> c; b -> c stays in one lane of CPU:1.
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "t"}
    assert sorted(starts) == sorted(ends) == [0, 1, 2]
    pairs = sorted((starts[i]["name"], starts[i]["pid"], starts[i]["ts"],
                    ends[i]["pid"], ends[i]["ts"]) for i in starts)
    # Each starts where ``a`` ended (10 + 4) and ends where its consumer starts.
    assert pairs == [("a", 1, 14, 3, 20), ("a", 1, 14, 3, 20), ("a", 1, 14, 3, 30)]


def test_timeline_without_dataflow_and_with_memory():
    stats = synthetic_step_stats()
    trace = json.loads(nd.client.timeline.Timeline(stats).generate_chrome_trace_format(
        show_dataflow=False, show_memory=True))
    check_trace_shape(trace)
    events = trace["traceEvents"]
    assert not [e for e in events if e["ph"] in "st"]
    created = {e["name"]: e for e in events if e["ph"] == "N"}
    deleted = {e["name"]: e for e in events if e["ph"] == "D"}
    assert set(created) == set(deleted) == {"a", "b", "c"}
    # ``a`` lives from its start until the last op using it ends (c: 30 + 1 - 1).
    assert (created["a"]["ts"], deleted["a"]["ts"]) == (10, 30)
    assert created["a"]["pid"] == 2 and created["b"]["pid"] == 4
    counters = [(e["name"], e["ts"], e["args"]) for e in events if e["ph"] == "C"]
    cpu1 = "/job:w/replica:0/task:0/device:CPU:1"
    # CPU:1: b (8 bytes) from 20, c from 30; b is last used by c (30).
    assert [c for c in counters if c[0] == cpu1][-1][2] == {cpu1: 0}
    analysis = nd.client.timeline.Timeline(stats).analyze_step_stats()
    # b's free at 30 is counted before c's allocation at 30 (in order): 8 bytes.
    assert analysis.allocator_maximums[cpu1] == (20, 8, {"b"})


def test_overlapping_ops_get_separate_lanes():
    stats = step_stats_pb2.StepStats()
    dev = stats.dev_stats.add(device="/job:w/replica:0/task:0/device:CPU:0")
    for name, start, dur in [("x", 0, 10), ("y", 5, 10), ("z", 12, 1)]:
        dev.node_stats.add(node_name=name, timeline_label=f"{name} = NoOp()",
                           all_start_micros=start, all_end_rel_micros=dur)
    timeline = nd.client.timeline.Timeline(stats)
    trace = json.loads(timeline.generate_chrome_trace_format())
    lanes = {e["args"]["name"]: e["tid"] for e in trace["traceEvents"]
             if e["ph"] == "X"}
    assert lanes == {"x": 0, "y": 1, "z": 0}


def test_traced_run_across_two_devices_with_the_graph(fresh_graph):
    with nd.device("/cpu:0"):
        a = nd.constant(1.0, name="a")
        b = nd.constant(2.0, name="b")
    with nd.device("/cpu:1"):
        c = nd.add(a, b, name="c")
    md = nd.RunMetadata()
    with nd.Session(config=nd.ConfigProto(device_count={"CPU": 2})) as sess:
        assert sess.run(c, options=nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE),
                        run_metadata=md) == 3.0
    trace = json.loads(nd.client.timeline.Timeline(
        md.step_stats, graph=fresh_graph).generate_chrome_trace_format())
    check_trace_shape(trace)
    events = trace["traceEvents"]
    pid_of = {e["args"]["name"]: e["pid"] for e in events if e["ph"] == "M"}
    ops = {e["args"]["name"]: e for e in events if e["ph"] == "X"}
    assert ops["c"]["name"] == "Add"
    assert ops["c"]["args"]["input0"] == "a" and ops["c"]["args"]["input1"] == "b"
    assert ops["c"]["pid"] == pid_of[
        "/job:localhost/replica:0/task:0/device:CPU:1 Compute"]
    assert ops["a"]["pid"] == pid_of[
        "/job:localhost/replica:0/task:0/device:CPU:0 Compute"]
    flows = sorted((e["name"], e["ph"]) for e in events if e["ph"] in "st")
    assert flows == [("a", "s"), ("a", "t"), ("b", "s"), ("b", "t")]
    end_of_a = ops["a"]["ts"] + ops["a"]["dur"]
    assert [e["ts"] for e in events if e["ph"] == "s" and e["name"] == "a"] == \
        [end_of_a]


def test_timeline_rejects_what_is_not_step_stats():
    with pytest.raises(TypeError, match="StepStats"):
        nd.client.timeline.Timeline(nd.RunMetadata())
    with pytest.raises(ValueError, match="op_time"):
        nd.client.timeline.Timeline(step_stats_pb2.StepStats()).analyze_step_stats(
            op_time="gpu-ish")


def test_profiler_hook_writes_timelines_every_n_steps(tmp_path):
    gs = nd.train.get_or_create_global_step()
    with nd.device("/cpu:0"):
        x = nd.constant(3.0, name="x")
    with nd.device("/cpu:1"):
        y = nd.multiply(x, x, name="y")
    with nd.control_dependencies([y]):
        train_op = gs.assign_add(1)
    hooks = [nd.train.ProfilerHook(save_steps=2, output_dir=str(tmp_path)),
             nd.train.StopAtStepHook(last_step=6)]
    creator = nd.train.ChiefSessionCreator(
        config=nd.ConfigProto(device_count={"CPU": 2}))
    with nd.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op)
    names = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "timeline-*")))
    # The first run starts the clock at step 0; then every 2 steps.
    assert names == ["timeline-2.json", "timeline-4.json", "timeline-6.json"]
    with open(tmp_path / "timeline-4.json") as f:
        trace = json.load(f)
    check_trace_shape(trace)
    ops = {e["args"]["name"]: e for e in trace["traceEvents"] if e["ph"] == "X"}
    assert ops["y"]["args"] == {"name": "y", "op": "Mul", "input0": "x", "input1": "x"}
    assert any(e["ph"] == "s" and e["name"] == "x" for e in trace["traceEvents"])
    nd.summary.FileWriterCache.get(str(tmp_path)).flush()
    (events,) = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    tags = [e.tagged_run_metadata.tag for e in nd.train.summary_iterator(events)
            if e.HasField("tagged_run_metadata")]
    assert tags == ["step_2", "step_4", "step_6"]
    meta = [e for e in nd.train.summary_iterator(events)
            if e.HasField("tagged_run_metadata")][0]
    run_metadata = nd.RunMetadata.FromString(meta.tagged_run_metadata.run_metadata)
    assert any(n.node_name == "y" for d in run_metadata.step_stats.dev_stats
               for n in d.node_stats)
    assert isinstance(meta, summary_pb2.Event)


def test_profiler_hook_needs_a_global_step_and_one_schedule():
    with pytest.raises(ValueError):
        nd.train.ProfilerHook(save_steps=1, save_secs=1)
    with pytest.raises(RuntimeError, match="Global step"):
        nd.train.ProfilerHook(save_steps=1).begin()
