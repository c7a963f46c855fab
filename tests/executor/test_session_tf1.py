"""Session semantics as TF1's own session tests define them: OpError.op, bytes
fetches, feed type checks, re-entry, empty graphs, InteractiveSession,
partial runs, callables, RunMetadata and attrs fetches."""

from __future__ import annotations

import collections
import logging
import pickle

import attr
import numpy as np
import pytest

import nbdist as nd
from nbdist import errors
from nbdist.proto import config_pb2


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()
    yield
    nd.reset_default_graph()


# -- OpError.op is the Operation ----------------------------------------------------
def test_op_error_op_is_the_operation_of_the_sessions_graph():
    x = nd.placeholder(nd.float32, [], name="x")
    y = nd.identity(x, name="y")
    with nd.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run(y)
    assert e.value.op is x.op
    assert e.value.node_def.name == "x"
    assert "x" in e.value.message


def test_op_error_op_for_a_remote_error_is_resolved_in_the_graph():
    server = nd.Server.create_local_server()
    try:
        with nd.Graph().as_default() as g:
            p = nd.placeholder(nd.float32, None, name="p")
            bad = nd.reshape(p, [3], name="bad")
            with nd.Session(server.target, graph=g) as sess:
                with pytest.raises(errors.InvalidArgumentError) as e:
                    sess.run(bad, {p: [1.0, 2.0]})
        assert isinstance(e.value.op, nd.Operation)
        assert e.value.op is g.get_operation_by_name("bad")
        assert e.value.node_def.op == "Reshape"
    finally:
        server.stop()


def test_op_error_with_an_operation_pickles_with_its_name():
    x = nd.placeholder(nd.float32, [], name="x")
    err = errors.InvalidArgumentError(None, x.op, "boom")
    back = pickle.loads(pickle.dumps(err))
    assert back.op == "x" and back.message == "boom"


# -- fetches, feeds, entry ----------------------------------------------------------
def test_fetch_by_bytes_name_and_feed_by_bytes_name():
    nd.constant(3.0, name="c")
    named_by_bytes = nd.constant(4.0, name=b"e")
    assert named_by_bytes.name == "e:0" and isinstance(named_by_bytes.op.name, str)
    p = nd.placeholder(nd.float32, [], name="p")
    q = p * 2
    with nd.Session() as sess:
        assert sess.run(b"e:0") == 4.0
        assert sess.run(b"c:0") == 3.0
        assert sess.run([b"c:0", "c:0"]) == [3.0, 3.0]
        assert sess.run(q, {b"p:0": 4.0}) == 8.0


@pytest.mark.parametrize("dtype,value", [
    (nd.uint8, 300), (nd.int8, 300), (nd.uint8, -1), (nd.int32, 2 ** 40),
    (nd.string, 5)])
def test_python_int_that_does_not_fit_the_dtype_is_a_type_error(dtype, value):
    p = nd.placeholder(dtype, [])
    with nd.Session() as sess:
        with pytest.raises(TypeError, match="is not compatible with Tensor type"):
            sess.run(nd.identity(p), {p: value})


def test_python_ints_that_fit_are_fed():
    p8, p32 = nd.placeholder(nd.uint8, []), nd.placeholder(nd.int32, [])
    with nd.Session() as sess:
        assert sess.run(nd.identity(p8), {p8: 255}) == 255
        assert sess.run(nd.identity(p32), {p32: -2 ** 31}) == -2 ** 31


def test_session_context_is_not_reentrant():
    nd.constant(1.0)
    sess = nd.Session()
    with sess:
        with pytest.raises(RuntimeError, match="not re-entrant"):
            with sess:
                pass
        assert nd.get_default_session() is sess
    assert nd.get_default_session() is None


def test_run_on_an_empty_graph_is_a_runtime_error():
    with nd.Session() as sess:
        with pytest.raises(RuntimeError, match="The Session graph is empty. Add "
                           "operations to the graph before calling run()"):
            sess.run([])


def test_as_default_exits_out_of_order_are_detected():
    s1, s2 = nd.Session(), nd.Session()
    c1, c2 = s1.as_default(), s2.as_default()
    c1.__enter__()
    c2.__enter__()
    with pytest.raises(AssertionError, match="Nesting violated"):
        c1.__exit__(None, None, None)
    from nbdist.framework.default_session import _default_session_stack

    _default_session_stack.reset()
    g1, g2 = nd.Graph(), nd.Graph()
    d1, d2 = g1.as_default(), g2.as_default()
    d1.__enter__()
    d2.__enter__()
    with pytest.raises(AssertionError, match="Nesting violated"):
        d1.__exit__(None, None, None)
    nd.framework.ops._default_graph_stack.reset()
    s1.close()
    s2.close()


# -- InteractiveSession -------------------------------------------------------------
def test_interactive_session_places_only_what_a_run_needs():
    sess = nd.InteractiveSession()
    try:
        with nd.device("/job:nowhere/task:7"):
            bad = nd.constant([1.0, 2.0])
        good = nd.constant([3.0, 4.0])
        np.testing.assert_array_equal(good.eval(), [3.0, 4.0])
        with pytest.raises(errors.InvalidArgumentError, match="Cannot assign a "
                           "device"):
            bad.eval()
        np.testing.assert_array_equal((good * 2).eval(), [6.0, 8.0])
    finally:
        sess.close()


def test_plain_session_places_the_whole_graph():
    with nd.device("/job:nowhere/task:7"):
        nd.constant([1.0, 2.0])
    good = nd.constant([3.0, 4.0])
    with nd.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="Cannot assign"):
            sess.run(good)


def test_second_active_interactive_session_logs_an_error(caplog, monkeypatch):
    # As TF's test: sessions other tests left open do not count here.
    monkeypatch.setattr(nd.InteractiveSession, "_active_session_count", 0)
    nd.constant(1.0)
    first = nd.InteractiveSession()
    try:
        with caplog.at_level(logging.ERROR, logger="nbdist"):
            second = nd.InteractiveSession()
        second.close()
        assert any("An interactive session is already active" in r.message
                   for r in caplog.records)
        assert nd.get_default_session() is first
    finally:
        first.close()
    assert nd.get_default_session() is None
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="nbdist"):
        nd.InteractiveSession().close()
    assert not caplog.records


# -- partial runs -------------------------------------------------------------------
def _three_placeholders():
    return [nd.placeholder(nd.float32, []) for _ in range(3)]


def test_partial_run_in_pieces():
    a, b, c = _three_placeholders()
    r1 = a + b
    r2 = r1 * c
    with nd.Session() as sess:
        for scale in (17, 18):
            h = sess.partial_run_setup([r1, r2], [a, b, c])
            res = sess.partial_run(h, r1, feed_dict={a: 1, b: 2})
            assert res == 3
            assert sess.partial_run(h, r2, feed_dict={c: res * scale}) == 3 * 3 * \
                scale


@pytest.mark.parametrize("remote", [False, True])
def test_partial_run_runs_each_op_once(remote):
    server = nd.Server.create_local_server() if remote else None
    try:
        v = nd.Variable(0.0)
        p = nd.placeholder(nd.float32, [])
        inc = nd.assign_add(v, 1.0)
        first = inc * 1.0
        second = inc + p
        with nd.Session(server.target if remote else "") as sess:
            sess.run(v.initializer)
            h = sess.partial_run_setup([first, second], [p])
            assert sess.partial_run(h, first) == 1.0
            assert sess.partial_run(h, second, feed_dict={p: 10.0}) == 11.0
            assert sess.run(v) == 1.0
    finally:
        if server is not None:
            server.stop()


def test_partial_run_fetches_a_value_an_earlier_piece_computed():
    a, b, c = _three_placeholders()
    r1 = a + b
    r2 = r1 * c
    with nd.Session() as sess:
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        assert sess.partial_run(h, r2, feed_dict={a: 1, b: 2, c: 4}) == 12
        assert sess.partial_run(h, r1) == 3


def test_many_partial_runs_and_a_full_run():
    steps = 50
    inputs, outputs = [], []
    acc = nd.constant(2.0)
    for _ in range(steps):
        inputs.append(nd.placeholder(nd.float32, []))
        acc = acc * inputs[-1]
        outputs.append(acc)
    with nd.Session() as sess:
        h = sess.partial_run_setup(outputs, inputs)
        for i in range(steps):
            res = sess.partial_run(h, outputs[i], feed_dict={inputs[i]: 1.0})
        assert res == 2.0
        full = sess.run(outputs, {t: 1.0 for t in inputs})
        assert len(full) == steps and full[-1] == 2.0


def test_partial_run_errors_as_tf():
    a, b, c = _three_placeholders()
    r1 = a + b
    r2 = a * c
    with nd.Session() as sess:
        h = sess.partial_run_setup([r1], [a, b])
        with pytest.raises(errors.InvalidArgumentError,
                           match="was not specified in partial_run_setup.$"):
            sess.partial_run(h, r1, feed_dict={a: 1, b: 2, c: 3})
        h = sess.partial_run_setup([r1], [a, b, c])
        with pytest.raises(errors.InvalidArgumentError,
                           match="was not specified in partial_run_setup.$"):
            sess.partial_run(h, r2, feed_dict={a: 1, c: 3})
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        sess.partial_run(h, r1, feed_dict={a: 1, b: 2})
        with pytest.raises(errors.InvalidArgumentError,
                           match="has already been fed.$"):
            sess.partial_run(h, r2, feed_dict={a: 1, c: 3})
        with pytest.raises(errors.InvalidArgumentError,
                           match="has already been fetched.$"):
            sess.partial_run(h, r1, feed_dict={c: 3})
        assert sess.partial_run(h, r2, feed_dict={c: 3}) == 3
        x = nd.placeholder(nd.float32, [])
        doubled, tripled = x * 2, x * 3
        h = sess.partial_run_setup([doubled, tripled], [])
        with pytest.raises(errors.InvalidArgumentError,
                           match="You must feed a value for placeholder"):
            sess.partial_run(h, doubled)
        h = sess.partial_run_setup([r1], [a, b])
        with pytest.raises(errors.InvalidArgumentError, match="can't be computed"):
            sess.partial_run(h, r1, feed_dict={a: 1})


def test_partial_run_feeds_first_fetches_later_and_needs_a_fetch():
    x = nd.placeholder(nd.float32, [])
    y = x * 2.0
    r = nd.constant([6.0])
    with nd.Session() as sess:
        h = sess.partial_run_setup(fetches=[y], feeds=[x])
        assert sess.partial_run(h, [], {x: 1.0}) == []
        assert sess.partial_run(h, y) == 2.0
        h = sess.partial_run_setup([r])  # no feeds
        np.testing.assert_array_equal(sess.partial_run(h, r), [6.0])
        with pytest.raises(errors.InvalidArgumentError,
                           match="specify at least one target to fetch or execute"):
            sess.partial_run_setup(fetches=[], feeds=[x])


def test_partial_run_of_constants_matches_run():
    a = nd.constant(2.0)
    b = a * 2
    c = b * 3
    with nd.Session() as sess:
        expected = sess.run([b, c])
        h = sess.partial_run_setup([b, c], [])
        assert sess.partial_run(h, [b, c]) == expected


def test_interleaved_partial_runs():
    a, b, c = _three_placeholders()
    r1 = a + b
    r2 = r1 * c
    with nd.Session() as sess:
        h1 = sess.partial_run_setup([r1], [a, b, c])
        h2 = sess.partial_run_setup([r1, r2], [a, b, c])
        assert sess.partial_run(h1, r1, feed_dict={a: 1, b: 2}) == 3
        assert sess.partial_run(h2, r1, feed_dict={a: 10, b: 20}) == 30
        assert sess.partial_run(h2, r2, feed_dict={c: 2}) == 60


# -- callables and run metadata -----------------------------------------------------
def test_make_callable_with_feed_list_and_options():
    ph = nd.placeholder(nd.float32)
    a = ph + 1.0
    with nd.Session() as sess:
        runner = sess.make_callable(a, feed_list=[ph.name], accept_options=True)
        opts = nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE)
        meta = nd.RunMetadata()
        np.testing.assert_allclose(runner([1.0, 2.0, 3.0], options=opts,
                                          run_metadata=meta), [2.0, 3.0, 4.0])
        assert len(meta.step_stats.dev_stats) > 0


def test_make_callable_on_tensor_and_operation():
    v = nd.Variable(42.0)
    inc = nd.assign_add(v, 1.0)
    with nd.Session() as sess:
        sess.run(v.initializer)
        read = sess.make_callable(v.value() * 1.0)
        assert read() == 42.0
        with pytest.raises(TypeError):
            read(options=nd.RunOptions())
        step = sess.make_callable(inc.op, accept_options=True)
        meta = nd.RunMetadata()
        assert step(options=nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE),
                    run_metadata=meta) is None
        assert len(meta.step_stats.dev_stats) > 0
        assert sess.run(v) == 43.0
        with pytest.raises(TypeError, match="must be a list or tuple"):
            sess.make_callable(inc, feed_list=v)


def test_callable_from_options():
    ph = nd.placeholder(nd.float32)
    a = ph + 1.0
    with nd.Session() as sess:
        opts = nd.CallableOptions()
        opts.feed.append(ph.name)
        opts.fetch.append(a.name)
        opts.run_options.trace_level = nd.RunOptions.FULL_TRACE
        fn = sess._make_callable_from_options(opts)
        meta = nd.RunMetadata()
        for _ in range(3):
            out = fn(np.array([1.0], dtype=np.float32), run_metadata=meta)
            assert isinstance(out, list) and len(out) == 1
            np.testing.assert_allclose(out[0], [2.0])
        assert len(meta.step_stats.dev_stats) > 0
        with pytest.raises(errors.InvalidArgumentError):
            fn()


def test_callable_options_use_tf_field_numbers():
    fields = {f.name: f.number for f in config_pb2.CallableOptions.DESCRIPTOR.fields}
    assert fields == {"feed": 1, "fetch": 2, "target": 3, "run_options": 4,
                      "tensor_connection": 5, "feed_devices": 6,
                      "fetch_devices": 7, "fetch_skip_sync": 8}


def test_run_metadata_partition_graphs_and_step_stats():
    server = nd.Server.create_local_server()
    try:
        with nd.Graph().as_default() as g:
            a = nd.constant(2.0, name="a")
            b = nd.multiply(a, 3.0, name="b")
            with nd.Session(server.target, graph=g) as sess:
                opts = nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE,
                                     output_partition_graphs=True)
                meta = nd.RunMetadata()
                assert sess.run(b, options=opts, run_metadata=meta) == 6.0
        names = {n.name for gd in meta.partition_graphs for n in gd.node}
        assert {"a", "b"} <= names
        ran = {ns.node_name for ds in meta.step_stats.dev_stats
               for ns in ds.node_stats}
        assert "b" in ran
    finally:
        server.stop()


# -- attrs classes as fetches -------------------------------------------------------
@attr.s
class Pair:
    left = attr.ib()
    right = attr.ib()


def test_attrs_instances_are_fetched_field_by_field():
    a, b = nd.constant(1.0), nd.constant(2.0)
    pt = collections.namedtuple("pt", ["x", "y"])
    with nd.Session() as sess:
        got = sess.run(Pair(a, [b, pt(a, b)]))
    assert isinstance(got, Pair)
    assert got.left == 1.0 and got.right[0] == 2.0
    assert got.right[1] == pt(1.0, 2.0)
    values = np.array([1.5, 2.5])
    with nd.Session() as sess:
        fed = sess.run(Pair(a, nd.constant(values)), {a: 7.0})
    assert fed.left == 7.0
    np.testing.assert_array_equal(fed.right, values)
