"""Optimizer updates written into a variable's array in place (issue 11): only
when nothing else refers to it, so no value already read, fetched or in flight
ever changes afterwards. Oracle: the same training written in NumPy."""

from __future__ import annotations

import threading
import weakref

import numpy as np
import pytest

import nbdist as nd


def _resource(sess, name):
    for _dev, _container, res_name, res in sess._master.local_worker.variables():
        if res_name == name:
            return res
    raise AssertionError(f"no variable {name}")


def _mlp_numpy(xs, labels, params, lr, steps, momentum=None):
    """The MLP step of bench_local in float32 NumPy; returns the parameters."""
    p = {k: v.copy() for k, v in params.items()}
    acc = {k: np.zeros_like(v) for k, v in p.items()}
    n = xs.shape[0]
    for _ in range(steps):
        hp = xs @ p["w1"] + p["b1"]
        h = np.maximum(hp, 0)
        lo = h @ p["w2"] + p["b2"]
        e = np.exp(lo - lo.max(axis=1, keepdims=True))
        sm = e / e.sum(axis=1, keepdims=True)
        dlo = (sm - np.eye(lo.shape[1], dtype=np.float32)[labels]) / n
        dh = (dlo @ p["w2"].T) * (hp > 0)
        grads = {"w1": xs.T @ dh, "b1": dh.sum(axis=0), "w2": h.T @ dlo,
                 "b2": dlo.sum(axis=0)}
        for k, g in grads.items():
            if momentum is None:
                p[k] = p[k] - np.float32(lr) * g
            else:
                acc[k] = acc[k] * np.float32(momentum) + g
                p[k] = p[k] - acc[k] * np.float32(lr)
    return p


@pytest.mark.parametrize("momentum", [None, 0.9])
def test_mlp_training_matches_numpy(momentum):
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((32, 20)).astype(np.float32)
    labels = rng.integers(0, 5, 32)
    params = {"w1": (rng.standard_normal((20, 16)) * 0.3).astype(np.float32),
              "b1": np.zeros(16, np.float32),
              "w2": (rng.standard_normal((16, 5)) * 0.3).astype(np.float32),
              "b2": np.zeros(5, np.float32)}
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float32, [None, 20])
        y = nd.placeholder(nd.int64, [None])
        v = {k: nd.Variable(a, name=k) for k, a in params.items()}
        h = nd.nn.relu(nd.matmul(x, v["w1"]) + v["b1"])
        logits = nd.matmul(h, v["w2"]) + v["b2"]
        loss = nd.reduce_mean(nd.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        opt = (nd.train.GradientDescentOptimizer(0.5) if momentum is None
               else nd.train.MomentumOptimizer(0.5, momentum))
        train = opt.minimize(loss)
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            arrays = {k: weakref.ref(_resource(s, k).value) for k in params}
            for _ in range(6):
                s.run(train, {x: xs, y: labels})
            got = s.run(v)
            # Nothing held the arrays between steps: they were updated in place.
            assert all(_resource(s, k).value is arrays[k]() for k in params)
    want = _mlp_numpy(xs, labels, params, 0.5, 6, momentum)
    for k in params:
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-6)


def test_fetched_value_never_changes_after_later_updates():
    g = nd.Graph()
    with g.as_default():
        v = nd.Variable(np.ones((4, 3), np.float32))
        step = nd.train.GradientDescentOptimizer(0.5).apply_gradients(
            [(nd.constant(np.ones((4, 3), np.float32)), v)])
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            _, held = s.run([step, v.read_value()])
            held_copy = held.copy()
            for _ in range(3):
                s.run(step)
            np.testing.assert_array_equal(held, held_copy)
            np.testing.assert_allclose(s.run(v), np.full((4, 3), -1.0), atol=1e-6)


def test_value_read_earlier_in_the_step_keeps_its_value():
    # ``early`` reads the array before the update (control dependency) and
    # ``late`` hands that same array on after it: the update must not write into
    # an array the step still holds.
    g = nd.Graph()
    with g.as_default():
        v = nd.Variable(np.ones(3, np.float32))
        accum_var = nd.Variable(np.ones(3, np.float32))
        early = nd.identity(v)
        grad = nd.constant(np.full(3, 2.0, np.float32))
        with nd.control_dependencies([early]):
            gd = nd.train.GradientDescentOptimizer(0.25).apply_gradients(
                [(grad, v)])
            mom = nd.train.MomentumOptimizer(0.25, 0.5).apply_gradients(
                [(grad, accum_var)])
        with nd.control_dependencies([gd, mom]):
            late = nd.identity(early)
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            before = _resource(s, v.op.name).value
            out = s.run(late)
            np.testing.assert_array_equal(out, np.ones(3, np.float32))
            np.testing.assert_array_equal(before, np.ones(3, np.float32))
            np.testing.assert_allclose(s.run(v), np.full(3, 0.5), atol=1e-6)
            np.testing.assert_allclose(s.run(accum_var), np.full(3, 0.5), atol=1e-6)


def test_array_held_outside_a_step_is_copied_not_written():
    g = nd.Graph()
    with g.as_default():
        v = nd.Variable(np.zeros(5, np.float32))
        step = nd.train.GradientDescentOptimizer(1.0).apply_gradients(
            [(nd.constant(np.ones(5, np.float32)), v)])
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            res = _resource(s, v.op.name)
            # A reader holding the array, a view of it, a buffer export of it.
            for holder in (lambda a: a, lambda a: a[1:], memoryview):
                held = holder(res.read())
                snapshot = np.array(held, copy=True)
                old = res.value
                s.run(step)
                np.testing.assert_array_equal(np.asarray(held), snapshot)
                assert res.value is not old
                del held, old
            s.run(step)  # nothing holds it now: in place
            np.testing.assert_allclose(s.run(v), np.full(5, -4.0), atol=1e-6)
            assert not res.value.flags.writeable


def test_concurrent_readers_never_see_a_value_change():
    g = nd.Graph()
    with g.as_default():
        v = nd.Variable(np.zeros(1 << 20, np.float32))
        step = nd.train.GradientDescentOptimizer(1.0).apply_gradients(
            [(nd.constant(np.ones(1 << 20, np.float32)), v)])
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            res = _resource(s, v.op.name)
            done = threading.Event()
            bad = []

            def reader():
                for _ in range(2000):
                    if done.is_set():
                        return
                    a = res.read()
                    first = a.copy()
                    if first.min() != first.max():  # a torn read
                        bad.append("torn")
                    for _ in range(3):
                        if not np.array_equal(a, first):
                            bad.append("changed")

            t = threading.Thread(target=reader)
            t.start()
            for _ in range(100):
                s.run(step)
            done.set()
            t.join(timeout=60)
            assert not t.is_alive()
            assert bad == []
            np.testing.assert_array_equal(s.run(v), np.full(1 << 20, -100.0))
