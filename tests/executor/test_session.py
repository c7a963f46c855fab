"""Session("") behaviour: fetch structures, feeds, errors, defaults, threads."""

from __future__ import annotations

import collections
import threading

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()
    yield


def test_hello_distributed_returns_bytes():
    assert nd.Session().run(nd.constant("Hello, distributed!")) == b"Hello, distributed!"


def test_python_numbers_get_tf_dtypes():
    assert nd.constant(1.5).dtype is nd.float32
    assert nd.constant(3).dtype is nd.int32
    assert nd.constant([1, 2**40]).dtype is nd.int64
    assert nd.constant(True).dtype is nd.bool
    with nd.Session() as s:
        v = s.run(nd.constant(1.5))
        assert isinstance(v, np.float32) and v == 1.5


def test_nested_fetch_structures():
    a = nd.constant(1.0, name="a")
    b = nd.constant([2, 3], name="b")
    Pair = collections.namedtuple("Pair", "x y")
    with nd.Session() as s:
        out = s.run({"a": a, "rest": [b, (a, Pair(b, a))], "op": a.op})
    assert out["a"] == 1.0
    assert out["op"] is None
    np.testing.assert_array_equal(out["rest"][0], [2, 3])
    assert isinstance(out["rest"][1], tuple)
    assert isinstance(out["rest"][1][1], Pair)
    assert out["rest"][1][1].y == 1.0


def test_fetch_by_name_and_variable():
    v = nd.Variable([1.0, 2.0], name="v")
    with nd.Session() as s:
        s.run("v/Assign")
        np.testing.assert_array_equal(s.run("v/read:0"), [1.0, 2.0])
        np.testing.assert_array_equal(s.run(v), [1.0, 2.0])


def test_uninitialized_variable_is_failed_precondition_naming_it():
    v = nd.Variable(3.0, name="weights")
    with nd.Session() as s:
        with pytest.raises(nd.errors.FailedPreconditionError, match="weights"):
            s.run(v)


def test_wrong_feed_shape_and_dtype_name_the_placeholder():
    x = nd.placeholder(nd.float32, [None, 3], name="images")
    y = nd.identity(x)
    with nd.Session() as s:
        with pytest.raises(nd.errors.InvalidArgumentError, match="images"):
            s.run(y, {x: np.zeros((2, 4))})
        with pytest.raises(nd.errors.InvalidArgumentError, match="images"):
            s.run(y, {x: [["a", "b", "c"]]})
        with pytest.raises(nd.errors.InvalidArgumentError, match="images"):
            s.run(y)
        np.testing.assert_array_equal(s.run(y, {x: np.ones((1, 3))}), np.ones((1, 3)))


def test_unknown_fetch_name_other_graph_and_unfeedable_are_clear_errors():
    c = nd.constant(1.0, name="c")
    other = nd.Graph()
    with other.as_default():
        foreign = nd.constant(2.0, name="foreign")
    v = nd.Variable(1.0, name="v")
    with nd.Session() as s:
        with pytest.raises(ValueError, match="does not exist"):
            s.run("nope:0")
        with pytest.raises(ValueError, match="not an element of this graph"):
            s.run(foreign)
        with pytest.raises(ValueError, match="may not be fed"):
            s.run(c, {v._ref(): 1.0})
        with pytest.raises(TypeError, match="invalid type"):
            s.run(None)


def test_feed_overrides_a_non_placeholder_tensor():
    c = nd.constant(1.0)
    d = nd.identity(c)
    with nd.Session() as s:
        assert s.run(d, {c: 5.0}) == 5.0
        assert s.run(c, {c: 7.0}) == 7.0


def test_eval_and_run_use_the_default_session():
    v = nd.Variable(2.0)
    with nd.Session() as s:
        v.initializer.run()
        assert v.eval() == 2.0
        assert s is nd.get_default_session()
    with pytest.raises(ValueError, match="No default session"):
        v.eval()


def test_interactive_session_is_default():
    c = nd.constant(4)
    s = nd.InteractiveSession()
    try:
        assert c.eval() == 4
    finally:
        s.close()
    assert nd.get_default_session() is None


def test_closed_session_raises():
    s = nd.Session()
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        s.run(nd.constant(1))


def test_graph_grows_between_runs():
    a = nd.constant(1.0)
    with nd.Session() as s:
        assert s.run(a) == 1.0
        b = nd.identity(a, name="later")
        assert s.run(b) == 1.0


def test_sessions_do_not_share_variables_in_process():
    v = nd.Variable(1.0)
    inc = v.assign_add(1.0)
    s1, s2 = nd.Session(), nd.Session()
    s1.run(v.initializer)
    s1.run(inc)
    with pytest.raises(nd.errors.FailedPreconditionError):
        s2.run(v)
    assert s1.run(v) == 2.0
    s1.close()
    s2.close()


def test_fetched_values_are_private_copies():
    v = nd.Variable(np.zeros(3, np.float32))
    with nd.Session() as s:
        s.run(v.initializer)
        got = s.run(v)
        got += 5
        np.testing.assert_array_equal(s.run(v), np.zeros(3))


def test_concurrent_runs_on_one_session():
    counter = nd.Variable(0, name="counter")
    inc = counter.assign_add(1)
    errors = []
    with nd.Session() as s:
        s.run(counter.initializer)

        def work():
            try:
                for _ in range(1000):
                    s.run(inc.op)
            except Exception as e:  # noqa: BLE001 - collected and asserted
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a thread deadlocked"
        assert errors == []
        assert s.run(counter) == 8000


def test_default_graph_is_per_thread():
    g = nd.Graph()
    seen = {}
    with g.as_default():
        def other():
            seen["g"] = nd.get_default_graph()

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert nd.get_default_graph() is g
    assert seen["g"] is not g


def test_log_device_placement_prints_one_line_per_op(capsys):
    a = nd.constant(1.0, name="a")
    b = nd.identity(a, name="b")
    with nd.Session(config=nd.ConfigProto(log_device_placement=True)) as s:
        s.run(b)
    out = capsys.readouterr().out.splitlines()
    assert "a: (Const): /job:localhost/replica:0/task:0/device:CPU:0" in out
    assert "b: (Identity): /job:localhost/replica:0/task:0/device:CPU:0" in out


def test_impossible_device_lists_devices_unless_soft_placement():
    with nd.device("/job:ps/task:0/cpu:1"):
        c = nd.constant(1.0, name="far")
    with nd.Session() as s:
        with pytest.raises(nd.errors.InvalidArgumentError,
                           match="far.*available devices.*CPU:0"):
            s.run(c)
    cfg = nd.ConfigProto(allow_soft_placement=True)
    with nd.Session(config=cfg) as s:
        assert s.run(c) == 1.0


def test_device_count_gives_several_cpus():
    with nd.device("/cpu:1"):
        v = nd.Variable(1.0, name="on_cpu1")
    cfg = nd.ConfigProto(device_count={"CPU": 2})
    with nd.Session(config=cfg) as s:
        s.run(v.initializer)
        assert s.run(v) == 1.0
        names = [d.name for d in s.list_devices()]
    assert names == ["/job:localhost/replica:0/task:0/device:CPU:0",
                     "/job:localhost/replica:0/task:0/device:CPU:1"]


def test_step_stats_with_full_trace():
    a = nd.constant(np.ones((4, 4), np.float32), name="a")
    b = nd.identity(a, name="b")
    md = nd.RunMetadata()
    opts = nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE,
                         output_partition_graphs=True)
    with nd.Session() as s:
        s.run(b, options=opts, run_metadata=md)
    nodes = {n.node_name: n for d in md.step_stats.dev_stats for n in d.node_stats}
    assert {"a", "b"} <= set(nodes)
    assert nodes["b"].output[0].tensor_description.allocated_bytes == 64
    assert md.step_stats.dev_stats[0].task == "/job:localhost/replica:0/task:0"
    assert len(md.partition_graphs) == 1
