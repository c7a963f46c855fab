"""``QueueRunner``, ``start_queue_runners`` and ``Coordinator`` as TF1's own tests
define them: thread names and counts, clean ends on a closed queue, errors kept
(``exceptions_raised``) or reported to the coordinator, ``cancel_op`` on stop, the
``QueueRunnerDef`` round trip. Oracles: the counters the threads advance, the
errors TF raises for the same program."""

from __future__ import annotations

import collections
import sys
import threading

import pytest

import nbdist as nd
from nbdist import errors
from nbdist.proto.error_codes_pb2 import CANCELLED, OUT_OF_RANGE
from nbdist.proto.queue_runner_pb2 import QueueRunnerDef

JOIN_SECS = 30  # generous bound for any thread to finish
# A runner thread without a coordinator re-raises its error (as TF); pytest
# reports such thread exceptions as warnings.
thread_errors_expected = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnhandledThreadExceptionWarning")


# Something a session cannot run: a (named) tuple holding a name that is not in
# the graph, as TF's tests use.
_NotAnOp = collections.namedtuple("NotAnOp", ["name"])


def _session(graph=None):
    # A blocked op fails after 30 s instead of hanging the test.
    return nd.Session(graph=graph,
                      config=nd.ConfigProto(operation_timeout_in_ms=30_000))


def _join_all(threads):
    for t in threads:
        t.join(JOIN_SECS)
        assert not t.is_alive(), f"{t.name} did not end"


def _counter(limit):
    v = nd.Variable(nd.constant(0, dtype=nd.int64))
    return v, v.count_up_to(limit)


# -- count_up_to --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [nd.int32, nd.int64])
def test_count_up_to_returns_the_old_value_until_the_limit(graph, dtype):
    v = nd.Variable(nd.constant(5, dtype=dtype))
    via_method, via_function = v.count_up_to(8), nd.count_up_to(v, 8)
    assert via_method.dtype == dtype and via_method.shape == nd.TensorShape([])
    with _session() as sess:
        sess.run(v.initializer)
        assert [int(sess.run(via_method)), int(sess.run(via_function)),
                int(sess.run(via_method))] == [5, 6, 7]
        with pytest.raises(errors.OutOfRangeError, match="limit of 8"):
            sess.run(via_function)
        assert int(sess.run(v)) == 8


# -- threads ------------------------------------------------------------------------
def test_runner_thread_counts_to_the_limit_and_ends_cleanly(graph):
    var, count = _counter(3)
    queue = nd.FIFOQueue(10, nd.float32)
    qr = nd.train.QueueRunner(queue, [count])
    with _session() as sess:
        sess.run(nd.global_variables_initializer())
        threads = qr.create_threads(sess)
        assert [t.name for t in threads] == ["QueueRunnerThread-fifo_queue-CountUpTo:0"]
        for t in threads:
            t.start()
        _join_all(threads)
        assert qr.exceptions_raised == []
        assert int(sess.run(var)) == 3


def test_two_enqueue_ops_get_a_thread_each(graph):
    var0, count3 = _counter(3)
    var1, count30 = _counter(30)
    qr = nd.train.QueueRunner(nd.FIFOQueue(10, nd.float32), [count3, count30])
    with _session() as sess:
        sess.run(nd.global_variables_initializer())
        threads = qr.create_threads(sess, start=True)
        assert sorted(t.name for t in threads) == [
            "QueueRunnerThread-fifo_queue-CountUpTo:0",
            "QueueRunnerThread-fifo_queue-CountUpTo_1:0"]
        _join_all(threads)
        assert (int(sess.run(var0)), int(sess.run(var1))) == (3, 30)


@thread_errors_expected
def test_errors_without_a_coordinator_are_kept_per_run(graph):
    _, count = _counter(3)
    qr = nd.train.QueueRunner(nd.FIFOQueue(10, nd.float32),
                              [count, _NotAnOp("bad_op")])
    with _session() as sess:
        sess.run(nd.global_variables_initializer())
        for _ in range(2):  # a new run starts with a fresh list
            threads = qr.create_threads(sess, start=True)
            _join_all(threads)
            assert len(qr.exceptions_raised) == 1
            assert "not in the graph" in str(qr.exceptions_raised[0])


def test_runner_closes_its_queue_when_its_input_queue_closes(graph):
    q0 = nd.FIFOQueue(3, nd.float32)
    enqueue0, close0 = q0.enqueue((10.0,)), q0.close()
    q1 = nd.FIFOQueue(30, nd.float32)
    qr = nd.train.QueueRunner(q1, [q1.enqueue((q0.dequeue(),))])
    dequeue1 = q1.dequeue()
    with _session() as sess:
        threads = qr.create_threads(sess, start=True)
        sess.run(enqueue0)
        sess.run(enqueue0)
        sess.run(close0)
        _join_all(threads)
        assert qr.exceptions_raised == []
        assert [float(sess.run(dequeue1)) for _ in range(2)] == [10.0, 10.0]
        with pytest.raises(errors.OutOfRangeError, match="is closed"):
            sess.run(dequeue1)


def test_a_stopped_coordinator_stops_the_threads_before_any_run(graph):
    var, count = _counter(3)
    qr = nd.train.QueueRunner(nd.FIFOQueue(10, nd.float32), [count])
    coord = nd.train.Coordinator()
    coord.request_stop()
    with _session() as sess:
        sess.run(nd.global_variables_initializer())
        threads = qr.create_threads(sess, coord)
        assert sorted(t.name for t in threads) == [
            "QueueRunnerThread-fifo_queue-CountUpTo:0",
            "QueueRunnerThread-fifo_queue-close_on_stop"]
        for t in threads:
            t.start()
        coord.join(stop_grace_period_secs=JOIN_SECS)
        assert int(sess.run(var)) == 0


def test_errors_are_reported_to_the_coordinator(graph):
    qr = nd.train.QueueRunner(nd.FIFOQueue(10, nd.float32), [_NotAnOp("not an op")])
    coord = nd.train.Coordinator()
    with _session() as sess:
        qr.create_threads(sess, coord, start=True)
        with pytest.raises(ValueError, match="not in the graph"):
            coord.join(stop_grace_period_secs=JOIN_SECS)
    assert qr.exceptions_raised == []  # the coordinator has it


def test_stop_cancels_a_blocked_enqueue(graph):
    queue = nd.FIFOQueue(2, nd.float32)
    qr = nd.train.QueueRunner(queue, [queue.enqueue((10.0,))])
    coord = nd.train.Coordinator()
    with _session() as sess:
        threads = qr.create_threads(sess, coord, start=True)
        sess.run(queue.dequeue())  # the runner is running
        coord.request_stop()
        # The default cancel_op closes the queue and cancels the blocked enqueue.
        coord.join(stop_grace_period_secs=JOIN_SECS)
        assert not any(t.is_alive() for t in threads)


def test_custom_cancel_op_runs_on_stop(graph):
    flag = nd.Variable(0, name="flag")
    queue = nd.FIFOQueue(2, nd.float32)
    qr = nd.train.QueueRunner(queue, [queue.enqueue((1.0,))],
                              cancel_op=flag.assign(7))
    assert qr.cancel_op.name.startswith("Assign")
    coord = nd.train.Coordinator()
    with _session() as sess:
        sess.run(flag.initializer)
        threads = qr.create_threads(sess, coord, start=True)
        coord.request_stop()
        threads[-1].join(JOIN_SECS)  # the close_on_stop thread
        assert int(sess.run(flag)) == 7
        sess.run(queue.close(cancel_pending_enqueues=True))  # free the enqueue
        coord.join(stop_grace_period_secs=JOIN_SECS)


@thread_errors_expected
def test_queue_closed_exception_types_decide_what_is_a_clean_end(graph):
    # Enqueueing into a closed queue is CancelledError: an error by default,
    # a clean end when the runner is told it means "closed".
    for types, expect_error in ((None, True), ((errors.CancelledError,), False)):
        queue = nd.FIFOQueue(5, nd.float32)
        qr = nd.train.QueueRunner(queue, [queue.enqueue((1.0,))],
                                  queue_closed_exception_types=types)
        with _session() as sess:
            sess.run(queue.close())
            threads = qr.create_threads(sess, start=True)
            _join_all(threads)
            assert bool(qr.exceptions_raised) == expect_error
            if expect_error:
                assert isinstance(qr.exceptions_raised[0], errors.CancelledError)
    with pytest.raises(TypeError, match="OpError"):
        nd.train.QueueRunner(queue, [queue.enqueue((1.0,))],
                             queue_closed_exception_types=(ValueError,))


def test_create_threads_twice_per_session_and_once_per_other_session(graph):
    _, count = _counter(3)
    qr = nd.train.QueueRunner(nd.FIFOQueue(10, nd.float32), [count])
    coord = nd.train.Coordinator()
    with _session() as sess, _session() as other:
        threads = qr.create_threads(sess, coord=coord)
        assert qr.create_threads(sess, coord=coord) == []
        assert len(qr.create_threads(other, coord=coord)) == len(threads) == 2


def test_name_is_the_queue_name_and_collections_filter_by_scope(graph):
    with nd.name_scope("scope"):
        queue = nd.FIFOQueue(10, nd.float32, name="queue")
    qr = nd.train.QueueRunner(queue, [nd.no_op()])
    assert qr.name == "scope/queue"
    nd.train.add_queue_runner(qr)
    assert nd.get_collection(nd.GraphKeys.QUEUE_RUNNERS, "scope") == [qr]
    assert nd.get_collection(nd.GraphKeys.QUEUE_RUNNERS, "other") == []


def test_start_queue_runners_runs_the_sessions_graph():
    g = nd.Graph()
    with g.as_default():
        var, count = _counter(3)
        nd.train.add_queue_runner(
            nd.train.QueueRunner(nd.FIFOQueue(10, nd.float32), [count]))
        init = nd.global_variables_initializer()
    with _session(graph=g) as sess:  # g is not the default graph here
        sess.run(init)
        threads = nd.train.start_queue_runners(sess, daemon=False)
        assert threads and not any(t.daemon for t in threads)
        _join_all(threads)
        assert int(sess.run(var)) == 3


def test_start_queue_runners_collection_and_start(graph):
    _, count = _counter(3)
    qr = nd.train.QueueRunner(nd.FIFOQueue(10, nd.float32), [count])
    nd.train.add_queue_runner(qr, collection="mine")
    with _session() as sess:
        sess.run(nd.global_variables_initializer())
        assert nd.train.start_queue_runners(sess) == []
        threads = nd.train.start_queue_runners(sess, start=False,
                                               collection="mine")
        assert len(threads) == 1 and not threads[0].is_alive()
        threads[0].start()
        _join_all(threads)


def test_start_queue_runners_rejects_what_is_not_a_session(graph):
    with pytest.raises(TypeError, match="Session"):
        nd.train.start_queue_runners("NotASession")


def test_start_queue_runners_leaves_a_monitored_session_alone(graph):
    _, count = _counter(3)
    nd.train.add_queue_runner(
        nd.train.QueueRunner(nd.FIFOQueue(10, nd.float32), [count]))
    with nd.train.MonitoredSession() as mon:
        assert nd.train.start_queue_runners(mon) == []


# -- QueueRunnerDef -----------------------------------------------------------------
def test_queue_runner_def_has_tf_field_numbers():
    fields = {f.name: f.number for f in QueueRunnerDef.DESCRIPTOR.fields}
    assert fields == {"queue_name": 1, "enqueue_op_name": 2, "close_op_name": 3,
                      "cancel_op_name": 4, "queue_closed_exception_types": 5}


def test_to_proto_from_proto_round_trip(graph):
    queue = nd.FIFOQueue(10, nd.float32, name="queue")
    enqueue, close, cancel = (nd.no_op(name=n) for n in ("enqueue", "close",
                                                          "cancel"))
    qr = nd.train.QueueRunner(
        queue, [enqueue], close, cancel,
        queue_closed_exception_types=(errors.OutOfRangeError,
                                      errors.CancelledError))
    proto = qr.to_proto()
    assert (proto.queue_name, list(proto.enqueue_op_name), proto.close_op_name,
            proto.cancel_op_name) == ("queue", ["enqueue"], "close", "cancel")
    assert list(proto.queue_closed_exception_types) == [OUT_OF_RANGE, CANCELLED]
    back = nd.train.QueueRunner.from_proto(
        QueueRunnerDef.FromString(proto.SerializeToString()))
    assert back.queue.name == "queue" and back.name == "queue"
    assert back.enqueue_ops == [enqueue]
    assert (back.close_op, back.cancel_op) == (close, cancel)
    assert back.queue_closed_exception_types == (errors.OutOfRangeError,
                                                 errors.CancelledError)
    # A def written before field 5 existed means OUT_OF_RANGE only.
    del proto.queue_closed_exception_types[:]
    legacy = nd.train.QueueRunner.from_proto(proto)
    assert legacy.queue_closed_exception_types == (errors.OutOfRangeError,)


def test_to_proto_export_scope_and_from_proto_import_scope(graph):
    with nd.name_scope("outer"):
        queue = nd.FIFOQueue(10, nd.float32, name="queue")
        qr = nd.train.QueueRunner(queue, [queue.enqueue((1.0,))])
    proto = qr.to_proto(export_scope="outer")
    assert proto.queue_name == "queue"
    assert qr.to_proto(export_scope="elsewhere") is None
    assert proto.enqueue_op_name[0] == qr.enqueue_ops[0].name[len("outer/"):]
    back = nd.train.QueueRunner.from_proto(proto, import_scope="outer")
    assert back.queue.name == "outer/queue"
    assert back.enqueue_ops == qr.enqueue_ops


def test_a_def_drives_threads_like_the_original(graph):
    var, count = _counter(4)
    queue = nd.FIFOQueue(10, nd.float32, name="q")
    back = nd.train.QueueRunner.from_proto(
        nd.train.QueueRunner(queue, [count]).to_proto())
    with _session() as sess:
        sess.run(nd.global_variables_initializer())
        _join_all(back.create_threads(sess, start=True))
        assert back.exceptions_raised == [] and int(sess.run(var)) == 4


# -- Coordinator --------------------------------------------------------------------
def _raise_and_report(coord, go, ex, as_exc_info):
    go.wait(JOIN_SECS)
    try:
        raise ex
    except RuntimeError as e:
        coord.request_stop(sys.exc_info() if as_exc_info else e)


@pytest.mark.parametrize("as_exc_info", [False, True])
def test_coordinator_join_raises_the_first_reported_error(as_exc_info):
    coord = nd.train.Coordinator()
    go1, go2 = threading.Event(), threading.Event()
    threads = [threading.Thread(target=_raise_and_report,
                                args=(coord, go1, RuntimeError("First"), as_exc_info)),
               threading.Thread(target=_raise_and_report,
                                args=(coord, go2, RuntimeError("Late"), as_exc_info))]
    for t in threads:
        t.start()
    go1.set()
    assert coord.wait_for_stop(JOIN_SECS)
    go2.set()
    with pytest.raises(RuntimeError, match="First"):
        coord.join(threads, stop_grace_period_secs=JOIN_SECS)
    # After join, a new report has nobody to see it: request_stop raises it.
    with pytest.raises(RuntimeError, match="Too late"):
        coord.request_stop(RuntimeError("Too late"))
    coord.clear_stop()
    assert not coord.should_stop()
    coord.request_stop(RuntimeError("After clear"))
    with pytest.raises(RuntimeError, match="After clear"):
        coord.raise_requested_exception()


def test_an_error_without_a_message_is_reported_and_logged(caplog):
    # AbortedError(None, None, None) is how programs signal a preemption; the
    # coordinator logs it, and a log handler that formats it must not raise.
    coord = nd.train.Coordinator()
    error = errors.AbortedError(None, None, None)
    assert str(error) == "" and error.message is None
    with caplog.at_level("INFO"):
        coord.request_stop(error)
    assert "AbortedError" in caplog.text
    with pytest.raises(errors.AbortedError):
        coord.join([])


def test_coordinator_clean_stop_types_and_stop_on_exception():
    coord = nd.train.Coordinator(clean_stop_exception_types=(ValueError,))
    with coord.stop_on_exception():
        raise ValueError("clean")
    assert coord.should_stop()
    coord.join([])  # a clean stop is not an error
    coord = nd.train.Coordinator()
    with coord.stop_on_exception():
        raise errors.OutOfRangeError(None, None, "end of input")
    coord.join([])


def test_coordinator_grace_period_and_live_threads():
    coord = nd.train.Coordinator()
    release = threading.Event()
    stuck = threading.Thread(target=release.wait, args=(JOIN_SECS,), daemon=True)
    stuck.start()
    coord.request_stop()
    with pytest.raises(RuntimeError, match="threads still running"):
        coord.join([stuck], stop_grace_period_secs=0.01)
    coord.clear_stop()
    coord.request_stop()
    coord.join([stuck], stop_grace_period_secs=0.01, ignore_live_threads=True)
    release.set()
    stuck.join(JOIN_SECS)


def test_looper_thread_passes_args_and_kwargs():
    def stop_at_zero(coord, n):
        if n[0] == 0:
            coord.request_stop()
        else:
            n[0] -= 1

    for args, kwargs in (((None, [3]), None), ((None,), {"n": [3]})):
        coord = nd.train.Coordinator()
        args = (coord,) + args[1:]
        n = args[1] if len(args) > 1 else kwargs["n"]
        thread = nd.train.LooperThread.loop(coord, 0, target=stop_at_zero,
                                            args=args, kwargs=kwargs)
        coord.join([thread], stop_grace_period_secs=JOIN_SECS)
        assert n == [0]
