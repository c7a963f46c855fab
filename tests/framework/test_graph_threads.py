"""Default graphs and default sessions per thread, as TF's ``_DefaultGraphStack``
and ``_DefaultStack`` keep them: each thread has its own stack and its own
global default graph, so threads that build models do not collide."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd
from nbdist.distribute.strategies.distribute_coordinator import (
    run_distribute_coordinator,
)
from nbdist.distribute.strategies.distribute_coordinator_context import (
    get_current_worker_context,
)
from nbdist.framework import ops

_WAIT_S = 60.0


@pytest.fixture(autouse=True)
def fresh_graph(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    nd.reset_default_graph()
    yield
    nd.reset_default_graph()


def _in_thread(fn):
    """``fn()``'s result (or its exception) from a new thread."""
    out: dict = {}

    def body():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised by the caller
            out["error"] = e

    t = threading.Thread(target=body)
    t.start()
    t.join(_WAIT_S)
    assert not t.is_alive()
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_a_new_thread_has_its_own_default_graph_and_no_default_session():
    main_global = nd.get_default_graph()
    inner = nd.Graph()
    with inner.as_default(), nd.Session() as sess:
        seen = _in_thread(lambda: (nd.get_default_graph(), nd.get_default_graph(),
                                   nd.get_default_session(),
                                   ops._default_graph_stack.is_cleared()))
        assert nd.get_default_session() is sess
    graph, again, session, cleared = seen
    assert graph is again  # stable within the thread
    assert graph is not inner and graph is not main_global
    assert session is None and cleared


def test_reset_in_a_thread_leaves_other_threads_graphs_alone():
    main_global = nd.get_default_graph()
    nd.constant(1.0, name="kept")

    def reset():
        nd.constant(2.0, name="mine")
        nd.reset_default_graph()
        return [op.name for op in nd.get_default_graph().get_operations()]

    assert _in_thread(reset) == []
    assert nd.get_default_graph() is main_global
    assert [op.name for op in main_global.get_operations()] == ["kept"]


def test_default_graph_stack_api():
    stack = ops._default_graph_stack
    g = nd.Graph()
    assert stack.get_default() is nd.get_default_graph()
    with g.as_default():
        assert stack.get_default() is g and not stack.is_cleared()
        with pytest.raises(AssertionError, match="nested"):
            nd.reset_default_graph()
    assert stack.is_cleared()
    assert ops._global_default_graph is nd.get_default_graph()


def test_threads_build_and_run_in_their_own_default_graphs():
    n = 6
    built = [threading.Event() for _ in range(n)]
    go = threading.Event()
    results: dict = {}
    errors_seen: list = []

    def body(i):
        try:
            with nd.Session() as sess:
                assert nd.get_default_graph() is sess.graph
                a = nd.constant(1.0, shape=[1, 2])
                b = nd.constant(2.0, shape=[2, 3])
                c = nd.matmul(a, b)
                v = nd.get_variable("v", initializer=c)  # same name in every thread
                built[i].set()
                assert go.wait(_WAIT_S)
                v.initializer.run()
                e = nd.matmul(a, nd.constant(3.0, shape=[2, 3]))
                first = v.eval()
                sess.run(nd.assign(v, e))
                results[i] = (first, v.eval(), len(nd.global_variables()))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors_seen.append(e)
            built[i].set()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for ev in built:
        assert ev.wait(_WAIT_S)
    go.set()
    for t in threads:
        t.join(_WAIT_S)
    assert not errors_seen, errors_seen
    for i in range(n):
        first, second, count = results[i]
        np.testing.assert_allclose(first, [[4.0, 4.0, 4.0]])
        np.testing.assert_allclose(second, [[6.0, 6.0, 6.0]])
        assert count == 1


def test_threads_growing_one_graph_with_their_own_sessions():
    g = nd.Graph()
    n = 5
    built = [threading.Event() for _ in range(n)]
    go = threading.Event()
    results, errors_seen = {}, []

    def body(i):
        try:
            with g.as_default(), nd.Session(graph=g) as sess:
                x = nd.constant(float(i), name=f"x_{i}")
                y = x * 2.0
                built[i].set()
                assert go.wait(_WAIT_S)
                for k in range(5):  # the graph grows while others run
                    y = y + nd.constant(1.0)
                    results[i] = sess.run(y)
                assert k == 4
        except BaseException as e:  # noqa: BLE001 - reported below
            errors_seen.append(e)
            built[i].set()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for ev in built:
        assert ev.wait(_WAIT_S)
    go.set()
    for t in threads:
        t.join(_WAIT_S)
    assert not errors_seen, errors_seen
    assert results == {i: 2.0 * i + 5.0 for i in range(n)}


def test_default_session_stack_is_per_thread():
    nd.constant(1.0)
    with nd.Session() as outer:
        inner_default = _in_thread(lambda: nd.get_default_session())
        assert nd.get_default_session() is outer
    assert inner_default is None


@pytest.fixture
def cluster():
    spec = local_cluster(chief=1, worker=2)
    servers = [nd.Server(spec, job_name=j, task_index=i)
               for j, n in (("chief", 1), ("worker", 2)) for i in range(n)]
    yield spec
    for s in reversed(servers):
        s.stop()


@pytest.mark.parametrize("own_graph", [True, False])
def test_distribute_coordinator_workers_build_the_same_model(cluster, own_graph):
    """As TF's distribute_coordinator_test: each worker thread builds variable
    "x" (in its own Graph().as_default(), or in its thread's default graph)."""
    got, lock = {}, threading.Lock()

    def build_and_run(ctx):
        x = nd.get_variable("x", initializer=10.0 + (ctx.task_id or 0))
        step = x.assign_add(2.0)
        own = nd.ConfigProto(
            device_filters=[f"/job:{ctx.task_type}/task:{ctx.task_id}"])
        with nd.Session(ctx.master_target, config=own) as sess:
            sess.run(x.initializer)
            ctx.wait_for_other_workers()
            sess.run(step)
            value = sess.run(x)
        with lock:
            got[(ctx.task_type, ctx.task_id)] = value

    def worker_fn(strategy):
        ctx = get_current_worker_context()
        if own_graph:
            with nd.Graph().as_default():
                build_and_run(ctx)
        else:
            build_and_run(ctx)

    assert run_distribute_coordinator(worker_fn, None, cluster_spec=cluster) is None
    assert got == {("chief", 0): 12.0, ("worker", 0): 12.0, ("worker", 1): 13.0}
