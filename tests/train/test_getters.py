"""``custom_getter`` and ``caching_device`` of ``variable_scope``/``get_variable``,
composed as TF1 composes them, and tensorpack's ``DistributedReplicatedBuilder``
pattern (tower variables made local by a custom getter, shadows on the ps read
through a caching device) on 1 ps + 2 worker processes.
"""

from __future__ import annotations

import contextlib
import operator
import threading

import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd

GLOBAL, LOCAL = nd.GraphKeys.GLOBAL_VARIABLES, nd.GraphKeys.LOCAL_VARIABLES


def _logging_getter(log, tag):
    def getter(getter, name, *args, **kwargs):
        log.append(("enter", tag, name))
        v = getter(name, *args, **kwargs)
        log.append(("exit", tag, name))
        return v

    return getter


def test_nested_getters_inner_first_wrapping_outer(graph):
    log = []
    with nd.variable_scope("a", custom_getter=_logging_getter(log, "outer")):
        with nd.variable_scope("b", custom_getter=_logging_getter(log, "inner")):
            v = nd.get_variable("w", [2])
        u = nd.get_variable("u", [1])
    assert log == [("enter", "inner", "a/b/w"), ("enter", "outer", "a/b/w"),
                   ("exit", "outer", "a/b/w"), ("exit", "inner", "a/b/w"),
                   ("enter", "outer", "a/u"), ("exit", "outer", "a/u")]
    assert (v.op.name, u.op.name) == ("a/b/w", "a/u")


def test_call_getter_replaces_scope_getter_and_reentry_keeps_it(graph):
    log = []
    with nd.variable_scope("s", custom_getter=_logging_getter(log, "scope")) as scope:
        nd.get_variable("x", [1], custom_getter=_logging_getter(log, "call"))
    assert [e[1] for e in log] == ["call", "call"]
    log.clear()
    with nd.variable_scope(scope):
        nd.get_variable("y", [1])
    assert log == [("enter", "scope", "s/y"), ("exit", "scope", "s/y")]


def test_getter_sees_and_changes_the_arguments(graph):
    seen = {}

    def to_local(getter, name, *args, **kwargs):
        seen.update(kwargs, name=name)
        kwargs["collections"] = [LOCAL]
        kwargs["trainable"] = False
        return getter(name, *args, **kwargs)

    part = nd.fixed_size_partitioner(2)
    with nd.variable_scope("m", custom_getter=to_local, partitioner=part,
                           caching_device="/job:worker/task:0"):
        v = nd.get_variable("emb", [4, 3], dtype=nd.float64)
    assert seen["name"] == "m/emb"
    assert seen["shape"] == [4, 3] and seen["dtype"] == nd.float64
    assert seen["partitioner"] is part
    assert seen["caching_device"] == "/job:worker/task:0"
    assert [s.op.name for s in v] == ["m/emb/part_0", "m/emb/part_1"]
    assert nd.local_variables() == list(v)
    assert nd.global_variables() == [] and nd.trainable_variables() == []


def test_getter_must_be_callable(graph):
    with pytest.raises(ValueError, match="custom_getter must be callable"), \
            nd.variable_scope("s", custom_getter=3):
        pass
    with pytest.raises(ValueError, match="not callable"):
        nd.get_variable("v", [1], custom_getter="nope")


def test_caching_device_places_the_read(graph):
    with nd.device("/job:ps/task:0"):
        with nd.variable_scope("s", caching_device="/job:worker/task:1"):
            v = nd.get_variable("v", [2])
            with nd.variable_scope("inner"):
                w = nd.get_variable("w", [2])  # inherited
            u = nd.get_variable("u", [2], caching_device="/job:worker/task:0")
        plain = nd.get_variable("plain", [2])
        direct = nd.Variable([1.0], name="direct",
                             caching_device=lambda op: "/job:worker/task:2")
    assert {x.device for x in (v, w, u, plain, direct)} == {"/job:ps/task:0"}
    assert v.value().device == "/job:worker/task:1"
    assert w.value().device == "/job:worker/task:1"
    assert u.value().device == "/job:worker/task:0"
    assert direct.value().device == "/job:worker/task:2"
    # Without a caching device the read stays with the variable.
    assert plain.value().op.colocation_groups() == plain.op.colocation_groups()


def test_caching_device_read_runs_there(servers):
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.Graph().as_default() as g:
        with nd.device("/job:ps/task:0"):
            v = nd.get_variable("v", initializer=np.ones(3, np.float32),
                                caching_device="/job:worker/task:0")
        with nd.device("/job:worker/task:0"):
            total = nd.reduce_sum(v)
    meta = nd.RunMetadata()
    with nd.Session(worker.target, graph=g) as s:
        s.run(v.initializer)
        assert float(s.run(total, options=nd.RunOptions(
            trace_level=nd.RunOptions.FULL_TRACE), run_metadata=meta)) == 3.0
    where = {ns.node_name: dev.device for dev in meta.step_stats.dev_stats
             for ns in dev.node_stats}
    assert "/job:worker/replica:0/task:0" in where["v/read"]
    assert "/job:ps/replica:0/task:0" in where["v"]


# -- tensorpack's DistributedReplicatedBuilder, as tensorpack writes it -------------------
def _replace_global_by_local(kwargs):
    if "collections" in kwargs:
        collections = kwargs["collections"]
    if not collections:
        collections = {GLOBAL}
    else:
        collections = set(collections.copy())
    collections.remove(GLOBAL)
    collections.add(LOCAL)
    kwargs["collections"] = list(collections)


@contextlib.contextmanager
def custom_getter_scope(custom_getter):
    scope = nd.get_variable_scope()
    with nd.variable_scope(scope, custom_getter=custom_getter,
                           auxiliary_name_scope=False):
        yield


@contextlib.contextmanager
def override_to_local_variable(enable=True):
    if enable:
        def custom_getter(getter, name, *args, **kwargs):
            _replace_global_by_local(kwargs)
            return getter(name, *args, **kwargs)

        with custom_getter_scope(custom_getter):
            yield
    else:
        yield


class OverrideCachingDevice:
    """Variable reads cached on the least-loaded device (TF benchmarks')."""

    def __init__(self, devices, device_for_small_variables,
                 small_variable_size_threshold):
        self.devices = devices
        self.sizes = [0] * len(self.devices)
        self.device_for_small_variables = device_for_small_variables
        self.small_variable_size_threshold = small_variable_size_threshold

    def __call__(self, getter, *args, **kwargs):
        size = nd.TensorShape(kwargs["shape"]).num_elements()
        if size is None or not kwargs.get("trainable", True):
            _replace_global_by_local(kwargs)
            return getter(*args, **kwargs)
        if size < self.small_variable_size_threshold:
            device_name = self.device_for_small_variables
        else:
            device_index, _ = min(enumerate(self.sizes), key=operator.itemgetter(1))
            device_name = self.devices[device_index]
            self.sizes[device_index] += size
        kwargs["caching_device"] = device_name
        return getter(*args, **kwargs)


DIM, OUT, BATCH, LR, NUM_WORKERS = 5, 3, 8, 0.1, 2
PS = "/job:ps/task:0"
W0 = np.linspace(-1, 1, DIM * OUT, dtype=np.float32).reshape(DIM, OUT)
B0 = np.array([0.5, -0.5, 0.25], np.float32)


def _batch(i):
    rng = np.random.default_rng(i)
    return (rng.standard_normal((BATCH, DIM)).astype(np.float32),
            rng.standard_normal((BATCH, OUT)).astype(np.float32))


def _build_worker(i):
    worker = f"/job:worker/task:{i}"
    m = {}
    with custom_getter_scope(OverrideCachingDevice([worker], worker, 4)):
        # One tower per worker; its variables are local (tensorpack's towers).
        with override_to_local_variable(), nd.device(worker), \
                nd.variable_scope("tower0"):
            w = nd.get_variable("w", [DIM, OUT], initializer=nd.constant_initializer(W0))
            b = nd.get_variable("b", [OUT], initializer=nd.constant_initializer(B0))
            m["x"] = nd.placeholder(nd.float32, [None, DIM])
            m["y"] = nd.placeholder(nd.float32, [None, OUT])
            loss = nd.reduce_mean(nd.square(nd.matmul(m["x"], w) + b - m["y"]))
            grads = nd.gradients(loss, [w, b])
        grad_vars = [(g / float(NUM_WORKERS), v) for g, v in zip(grads, [w, b])]
        # _apply_shadow_vars: the global copies on the ps.
        with nd.device(PS):
            shadows = []
            for _g, var in grad_vars:
                my_name = "/".join(var.op.name.split("/")[1:])
                shadows.append(nd.get_variable(my_name, var.shape,
                                               dtype=var.dtype.base_dtype,
                                               initializer=var.initial_value,
                                               trainable=True))
    m.update(local=[w, b], shadows=shadows)
    # _apply_gradients_and_copy
    copies = []
    with nd.name_scope("apply_gradients"):
        for vid, ((g, local), shadow) in enumerate(zip(grad_vars, shadows)):
            with nd.device(PS):
                apply = nd.train.GradientDescentOptimizer(LR).apply_gradients(
                    [(g, shadow)])
            barrier = nd.train.queue_barrier(
                NUM_WORKERS, i, name=f"param_update_barrier_{vid}", device=PS,
                dependencies=[apply])
            # The read waits on the ps itself (see examples/replicated_variables.py);
            # .op: nd.colocate_with(variable) follows its (cached) snapshot.
            with nd.control_dependencies([barrier]), nd.colocate_with(shadow.op):
                updated = shadow.read_value()
            with nd.device(worker):
                copies.append(local.assign(updated))
    m["train_op"] = nd.train.queue_barrier(NUM_WORKERS, i, name="post_copy_barrier",
                                           device=PS, dependencies=copies)
    # _get_initial_sync_op: the local copies from the shadows, by name.
    local_by_name = {v.op.name: v for v in nd.local_variables()}
    m["initial_sync"] = nd.group(*[
        local_by_name[f"tower0/{s.op.name}"].assign(s.read_value())
        for s in shadows])
    with nd.device(worker):
        m["shadow_total"] = nd.add_n([nd.reduce_sum(s) for s in shadows])
    return m


def _oracle():
    w, b = W0.astype(np.float64), B0.astype(np.float64)
    gw, gb = np.zeros_like(w), np.zeros_like(b)
    for i in range(NUM_WORKERS):
        x, y = (a.astype(np.float64) for a in _batch(i))
        r = 2 * (x @ w + b - y) / (BATCH * OUT)
        gw += x.T @ r / NUM_WORKERS
        gb += r.sum(0) / NUM_WORKERS
    return w - LR * gw, b - LR * gb


@pytest.mark.slow
def test_tensorpack_distributed_replicated_on_processes(spawn):
    cluster = local_cluster(ps=1, worker=NUM_WORKERS)
    spawn("ps", 0, cluster)
    for i in range(NUM_WORKERS):
        spawn("worker", i, cluster)
    graphs, models = [], []
    for i in range(NUM_WORKERS):
        g = nd.Graph()
        with g.as_default():
            m = _build_worker(i)
            m["global_init"] = nd.global_variables_initializer()
            m["local_init"] = nd.local_variables_initializer()
        graphs.append(g)
        models.append(m)
    m0 = models[0]
    # The getters composed: tower variables local, shadows global on the ps,
    # read through this worker (the caching device).
    assert [v.op.name for v in graphs[0].get_collection(LOCAL)] == ["tower0/w",
                                                                    "tower0/b"]
    assert [v.op.name for v in graphs[0].get_collection(GLOBAL)] == ["w", "b"]
    assert [s.device for s in m0["shadows"]] == [PS, PS]
    assert [s.value().device for s in m0["shadows"]] == ["/job:worker/task:0"] * 2
    assert [s.value().device for s in models[1]["shadows"]] == (
        ["/job:worker/task:1"] * 2)

    sessions = [nd.Session(f"grpc://{cluster['worker'][i]}", graph=graphs[i],
                           config=nd.ConfigProto(
                               device_filters=["/job:ps", f"/job:worker/task:{i}"],
                               operation_timeout_in_ms=60_000))
                for i in range(NUM_WORKERS)]
    try:
        sessions[0].run(m0["global_init"])
        for s, m in zip(sessions, models):
            s.run(m["local_init"])
            s.run(m["initial_sync"])
        errors = []

        def step(i):
            try:
                x, y = _batch(i)
                sessions[i].run(models[i]["train_op"],
                                {models[i]["x"]: x, models[i]["y"]: y})
            except BaseException as e:  # noqa: BLE001 - re-raised below
                errors.append(e)

        threads = [threading.Thread(target=step, args=(i,)) for i in range(NUM_WORKERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a sync step hung"
        if errors:
            raise errors[0]
        seen = [s.run(m["shadows"] + m["local"] + [m["shadow_total"]])
                for s, m in zip(sessions, models)]
    finally:
        for s in sessions:
            s.close()
    w, b = _oracle()
    for values in seen:
        sw, sb, lw, lb, total = values
        np.testing.assert_allclose(sw, w, atol=1e-6)
        np.testing.assert_allclose(sb, b, atol=1e-6)
        np.testing.assert_array_equal(lw, sw)  # the copy back to the tower
        np.testing.assert_array_equal(lb, sb)
        np.testing.assert_allclose(total, sw.sum() + sb.sum(), rtol=1e-6)
    np.testing.assert_array_equal(seen[0][0], seen[1][0])
    np.testing.assert_array_equal(seen[0][1], seen[1][1])
