"""Optimizers: kernels against hand-written NumPy updates, slots, global step,
an MLP trained with each optimizer, and Adam step for step against NumPy."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import nbdist as nd
from nbdist.ops import training_ops


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()
    yield
    nd.reset_default_graph()  # leave no ps-placed ops to later test files


# -- hand-written NumPy references (textbook forms, not the kernels' code) ------
def np_gd(var, g, lr):
    return var - lr * g


def np_momentum(var, acc, g, lr, mu, nesterov=False):
    acc = mu * acc + g
    if nesterov:
        return var - lr * g - lr * mu * acc, acc
    return var - lr * acc, acc


def np_adagrad(var, acc, g, lr):
    acc = acc + g ** 2
    return var - lr * g / np.sqrt(acc), acc


def np_adam(var, m, v, g, t, lr, b1, b2, eps, nesterov=False, powers=None):
    """Step t (1-based); TF's form: epsilon added to sqrt(v), not sqrt(v_hat).

    ``powers``: (beta1**t, beta2**t) when given (TF keeps them in float32
    variables), else computed in float64.
    """
    b1p, b2p = powers if powers is not None else (b1 ** t, b2 ** t)
    lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g ** 2
    num = (b1 * m + (1 - b1) * g) if nesterov else m
    return var - lr_t * num / (np.sqrt(v) + eps), m, v


def np_rmsprop(var, ms, mom, g, lr, rho, mu, eps):
    ms = rho * ms + (1 - rho) * g ** 2
    mom = mu * mom + lr * g / np.sqrt(ms + eps)
    return var - mom, ms, mom


def np_centered_rmsprop(var, mg, ms, mom, g, lr, rho, mu, eps):
    ms = rho * ms + (1 - rho) * g ** 2
    mg = rho * mg + (1 - rho) * g
    mom = mu * mom + lr * g / np.sqrt(ms - mg ** 2 + eps)
    return var - mom, mg, ms, mom


# -- each optimizer's kernel, a few steps, against the reference ----------------
V0 = np.array([0.5, -1.0, 2.0, 0.0, 3.0])
STEPS = 4


def _grads(dtype):
    rng = np.random.RandomState(7)
    return [rng.randn(5).astype(dtype) for _ in range(STEPS)]


def _run_steps(opt, dtype, slot_names):
    """Applies STEPS fed gradients to a variable; returns [(var, slots...)]."""
    nd_dtype = nd.as_dtype(dtype)
    var = nd.Variable(V0.astype(dtype), name="var")
    g = nd.placeholder(nd_dtype, [5], name="g")
    train = opt.apply_gradients([(g, var)])
    slots = [opt.get_slot(var, n) for n in slot_names]
    assert all(s is not None for s in slots), slot_names
    out = []
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        for grad in _grads(dtype):
            s.run(train, {g: grad})
            out.append(s.run([var] + slots))
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradient_descent_kernel(dtype):
    got = _run_steps(nd.train.GradientDescentOptimizer(0.1), dtype, [])
    var = V0.copy()
    for (v,), g in zip(got, _grads(dtype)):
        var = np_gd(var, g, 0.1)
        assert v.dtype == dtype
        np.testing.assert_allclose(v, var, rtol=0, atol=1e-6)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_kernel(nesterov):
    opt = nd.train.MomentumOptimizer(0.05, 0.9, use_nesterov=nesterov)
    got = _run_steps(opt, np.float64, ["momentum"])
    var, acc = V0.copy(), np.zeros(5)
    for (v, a), g in zip(got, _grads(np.float64)):
        var, acc = np_momentum(var, acc, g, 0.05, 0.9, nesterov)
        np.testing.assert_allclose(a, acc, rtol=0, atol=1e-6)
        np.testing.assert_allclose(v, var, rtol=0, atol=1e-6)


def test_adagrad_kernel():
    opt = nd.train.AdagradOptimizer(0.3, initial_accumulator_value=0.2)
    got = _run_steps(opt, np.float64, ["accumulator"])
    var, acc = V0.copy(), np.full(5, 0.2)
    for (v, a), g in zip(got, _grads(np.float64)):
        var, acc = np_adagrad(var, acc, g, 0.3)
        np.testing.assert_allclose(a, acc, rtol=0, atol=1e-6)
        np.testing.assert_allclose(v, var, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_adam_kernel(dtype):
    opt = nd.train.AdamOptimizer(0.1, beta1=0.8, beta2=0.95, epsilon=1e-3)
    got = _run_steps(opt, dtype, ["m", "v"])
    var, m, v = V0.copy(), np.zeros(5), np.zeros(5)
    for t, ((vv, mm, v2), g) in enumerate(zip(got, _grads(dtype)), 1):
        var, m, v = np_adam(var, m, v, g.astype(np.float64), t, 0.1, 0.8, 0.95, 1e-3)
        tol = 1e-6 if dtype == np.float64 else 2e-6
        np.testing.assert_allclose(mm, m, rtol=0, atol=tol)
        np.testing.assert_allclose(v2, v, rtol=0, atol=tol)
        np.testing.assert_allclose(vv, var, rtol=0, atol=tol)


def test_adam_beta_powers_advance_once_per_step():
    opt = nd.train.AdamOptimizer(0.1, beta1=0.5, beta2=0.25)
    var = nd.Variable(V0, name="var")
    train = opt.apply_gradients([(nd.constant(np.ones(5)), var)])
    b1, b2 = opt._get_beta_accumulators()
    assert (b1.op.name, b2.op.name) == ("beta1_power", "beta2_power")
    assert b1.dtype.base_dtype is nd.float32  # as TF: from the Python float
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        for t in range(1, 4):
            s.run(train)
            assert s.run(b1) == np.float32(0.5 ** (t + 1))
            assert s.run(b2) == np.float32(0.25 ** (t + 1))


def test_adam_nesterov_op():
    var = nd.Variable(V0, name="var")
    m = nd.Variable(np.zeros(5), name="m", trainable=False)
    v = nd.Variable(np.zeros(5), name="v", trainable=False)
    g = nd.placeholder(nd.float64, [5])
    t = nd.placeholder(nd.float64, [])
    b1p, b2p = nd.pow(nd.constant(0.9, nd.float64), t), nd.pow(
        nd.constant(0.999, nd.float64), t)
    up = training_ops.apply_adam(var, m, v, b1p, b2p, 0.01, 0.9, 0.999, 1e-8, g,
                                 use_nesterov=True)
    ref = (V0.copy(), np.zeros(5), np.zeros(5))
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        for step, grad in enumerate(_grads(np.float64), 1):
            out = s.run(up, {g: grad, t: step})
            ref = np_adam(*ref, grad, step, 0.01, 0.9, 0.999, 1e-8, nesterov=True)
            np.testing.assert_allclose(out, ref[0], rtol=0, atol=1e-6)
            np.testing.assert_allclose(s.run(m), ref[1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("momentum", [0.0, 0.7])
def test_rmsprop_kernel(momentum):
    opt = nd.train.RMSPropOptimizer(0.01, decay=0.8, momentum=momentum, epsilon=1e-4)
    got = _run_steps(opt, np.float64, ["rms", "momentum"])
    var, ms, mom = V0.copy(), np.ones(5), np.zeros(5)
    for (v, r, mo), g in zip(got, _grads(np.float64)):
        var, ms, mom = np_rmsprop(var, ms, mom, g, 0.01, 0.8, momentum, 1e-4)
        np.testing.assert_allclose(r, ms, rtol=0, atol=1e-6)
        np.testing.assert_allclose(mo, mom, rtol=0, atol=1e-6)
        np.testing.assert_allclose(v, var, rtol=0, atol=1e-6)


def test_centered_rmsprop_kernel():
    opt = nd.train.RMSPropOptimizer(0.01, decay=0.8, momentum=0.5, epsilon=1e-4,
                                    centered=True)
    got = _run_steps(opt, np.float64, ["mg", "rms", "momentum"])
    var, mg, ms, mom = V0.copy(), np.zeros(5), np.ones(5), np.zeros(5)
    for (v, a, r, mo), g in zip(got, _grads(np.float64)):
        var, mg, ms, mom = np_centered_rmsprop(var, mg, ms, mom, g, 0.01, 0.8, 0.5,
                                               1e-4)
        np.testing.assert_allclose(a, mg, rtol=0, atol=1e-6)
        np.testing.assert_allclose(r, ms, rtol=0, atol=1e-6)
        np.testing.assert_allclose(v, var, rtol=0, atol=1e-6)


def test_training_op_shape_and_dtype_checks():
    var = nd.Variable(np.zeros(3, np.float32), name="var")
    with pytest.raises(ValueError, match="ApplyGradientDescent"):
        training_ops.apply_gradient_descent(var, 0.1, np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="scalar"):
        training_ops.apply_gradient_descent(var, [0.1, 0.2], np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="variable"):
        training_ops.apply_gradient_descent(nd.constant([1.0]), 0.1, [1.0])
    i = nd.Variable([1, 2], name="ints")
    with pytest.raises(TypeError, match="floating"):
        training_ops.apply_gradient_descent(i, 1, [1, 1])


def test_update_replaces_arrays_never_writes_in_place():
    var = nd.Variable(np.zeros(3), name="var")
    up = training_ops.apply_gradient_descent(var, 1.0, np.ones(3))
    with nd.Session() as s:
        s.run(var.initializer)
        before = s.run(var)
        s.run(up)
        np.testing.assert_array_equal(before, [0, 0, 0])
        np.testing.assert_array_equal(s.run(var), [-1, -1, -1])


def test_concurrent_updates_are_atomic():
    """Many threads running a train op at once lose no update."""
    var = nd.Variable(np.zeros(4), name="var")
    opt = nd.train.MomentumOptimizer(1.0, 0.0)  # var -= grad each step
    train = opt.apply_gradients([(nd.constant(np.ones(4)), var)])
    threads, per_thread = 8, 25
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())

        def worker():
            for _ in range(per_thread):
                s.run(train)

        ts = [threading.Thread(target=worker) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        np.testing.assert_array_equal(s.run(var), np.full(4, -threads * per_thread))


# -- slots, names, placement, errors -------------------------------------------
@pytest.mark.parametrize("opt,names", [
    (lambda: nd.train.MomentumOptimizer(0.1, 0.9), ["w/Momentum"]),
    (lambda: nd.train.AdagradOptimizer(0.1), ["w/Adagrad"]),
    (lambda: nd.train.AdamOptimizer(), ["beta1_power", "beta2_power", "w/Adam",
                                        "w/Adam_1"]),
    (lambda: nd.train.RMSPropOptimizer(0.1), ["w/RMSProp", "w/RMSProp_1"]),
    (lambda: nd.train.RMSPropOptimizer(0.1, centered=True),
     ["w/RMSProp", "w/RMSProp_1", "w/RMSProp_2"]),
    (lambda: nd.train.GradientDescentOptimizer(0.1), []),
])
def test_slot_names_and_placement(opt, names):
    with nd.device("/job:ps/task:1"):
        w = nd.Variable(np.ones((2, 2), np.float32), name="w")
    opt = opt()
    with nd.device("/job:worker/task:0"):
        train = opt.apply_gradients([(nd.constant(np.ones((2, 2), np.float32)), w)])
    got = opt.variables()
    assert [v.op.name for v in got] == names
    for v in got:
        assert not v.trainable
        assert v in nd.global_variables()
        assert v not in nd.trainable_variables()
        assert v.device == w.device == "/job:ps/task:1"
        assert v.op.colocation_groups() == [b"loc:@w"]
    # the update op runs where the variable lives
    (update,) = [op for op in nd.get_default_graph().get_operations()
                 if op.type.startswith("Apply")]
    assert update.colocation_groups() == [b"loc:@w"]
    assert update.device == w.device
    assert train.name == opt.get_name()
    assert train in nd.get_collection(nd.GraphKeys.TRAIN_OP)


def test_get_slot_and_slot_names():
    w = nd.Variable(np.ones(2, np.float32), name="w")
    other = nd.Variable(np.ones(2, np.float32), name="other")
    opt = nd.train.AdamOptimizer()
    opt.apply_gradients([(nd.constant(np.ones(2, np.float32)), w)])
    assert opt.get_slot_names() == ["m", "v"]
    assert opt.get_slot(w, "m").op.name == "w/Adam"
    assert opt.get_slot(w, "v").op.name == "w/Adam_1"
    assert opt.get_slot(other, "m") is None
    assert opt.get_slot(w, "nope") is None


def test_slot_of_scoped_variable_and_second_optimizer():
    with nd.variable_scope("layer"):
        w = nd.get_variable("w", [2], initializer=nd.zeros_initializer())
    grad = nd.constant(np.ones(2, np.float32))
    a, b = nd.train.MomentumOptimizer(0.1, 0.9), nd.train.MomentumOptimizer(0.1, 0.9)
    with nd.name_scope("train"):
        a.apply_gradients([(grad, w)])
        b.apply_gradients([(grad, w)])
    assert a.get_slot(w, "momentum").op.name == "layer/w/Momentum"
    assert b.get_slot(w, "momentum").op.name == "layer/w/Momentum_1"


def test_uninitialised_slot_raises_naming_it():
    w = nd.Variable(np.ones(2, np.float32), name="w")
    opt = nd.train.MomentumOptimizer(0.1, 0.9)
    train = opt.apply_gradients([(nd.constant(np.ones(2, np.float32)), w)])
    with nd.Session() as s:
        s.run(w.initializer)  # not the slot
        with pytest.raises(nd.errors.FailedPreconditionError, match="w/Momentum"):
            s.run(train)
        np.testing.assert_array_equal(s.run(w), [1, 1])  # nothing half-applied


def test_no_gradients_errors():
    w = nd.Variable(np.ones(2, np.float32), name="w")
    unrelated = nd.Variable(np.ones(2, np.float32), name="unrelated")
    loss = nd.reduce_sum(w * w)
    opt = nd.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.apply_gradients([(None, w)])
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.minimize(loss, var_list=[unrelated])
    with pytest.raises(ValueError, match="No variables provided"):
        opt.apply_gradients([])
    with pytest.raises(ValueError, match="No variables to optimize"):
        opt.compute_gradients(loss, var_list=[])
    with pytest.raises(ValueError, match="Invalid type"):
        opt.compute_gradients(nd.constant(1))


def test_compute_gradients_pairs():
    w = nd.Variable(np.array([1.0, 2.0], np.float32), name="w")
    frozen = nd.Variable(np.array([1.0, 2.0], np.float32), name="frozen",
                         trainable=False)
    unused = nd.Variable(np.array([1.0], np.float32), name="unused")
    loss = nd.reduce_sum(w * w * frozen)
    opt = nd.train.GradientDescentOptimizer(0.1)
    gv = opt.compute_gradients(loss)
    assert [v for _, v in gv] == [w, unused]
    assert gv[1][0] is None
    for gate in (opt.GATE_NONE, opt.GATE_OP, opt.GATE_GRAPH):
        (g, _), = opt.compute_gradients(loss, var_list=[w], gate_gradients=gate)
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            np.testing.assert_allclose(s.run(g), [2.0, 8.0])


def test_hyperparameters_as_tensors():
    w = nd.Variable(np.array([1.0, 2.0]), name="w")  # float64
    lr = nd.placeholder(nd.float32, [])  # cast to the variable's dtype
    opt = nd.train.MomentumOptimizer(lr, nd.constant(0.5, nd.float64))
    train = opt.minimize(nd.reduce_sum(w * w))
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        s.run(train, {lr: 0.25})
        np.testing.assert_allclose(s.run(w), [0.5, 1.0])
        s.run(train, {lr: 0.0})
        np.testing.assert_allclose(s.run(w), [0.5, 1.0])


# -- global step ---------------------------------------------------------------
def test_global_step_helpers():
    assert nd.train.get_global_step() is None
    gs = nd.train.get_or_create_global_step()
    assert gs.op.name == "global_step"
    assert gs.dtype.base_dtype is nd.int64 and gs.shape.as_list() == []
    assert not gs.trainable
    assert nd.get_collection(nd.GraphKeys.GLOBAL_STEP) == [gs]
    assert gs in nd.global_variables()
    assert nd.train.get_global_step() is gs
    assert nd.train.get_or_create_global_step() is gs
    with pytest.raises(ValueError, match="already exists"):
        nd.train.create_global_step()
    with nd.Session() as s:
        s.run(gs.initializer)
        assert nd.train.global_step(s, gs) == 0
    g2 = nd.Graph()
    gs2 = nd.train.create_global_step(g2)
    assert gs2.graph is g2 and nd.train.get_global_step(g2) is gs2


def test_minimize_increments_global_step_once_per_step():
    w = nd.Variable(np.array([1.0, -1.0], np.float32), name="w")
    b = nd.Variable(np.float32(0.5), name="b")
    loss = nd.reduce_sum(nd.square(w - b))
    gs = nd.train.get_or_create_global_step()
    train = nd.train.AdamOptimizer(0.01).minimize(loss, global_step=gs)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        for step in range(1, 6):
            s.run(train)
            assert s.run(gs) == step
    assert train.type == "AssignAdd" and train.name == "Adam"


# -- an MLP 784-256-10 trained with each optimizer ------------------------------
def _data(dtype, n=512, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, 784).astype(dtype)
    teacher = rng.randn(784, 10)
    labels = np.argmax(x @ teacher, axis=1)
    y = np.eye(10, dtype=dtype)[labels]
    return x, y


def _init_weights(dtype, seed=1):
    rng = np.random.RandomState(seed)
    return [(rng.randn(784, 256) * np.sqrt(2 / 784)).astype(dtype),
            np.zeros(256, dtype),
            (rng.randn(256, 10) * np.sqrt(1 / 256)).astype(dtype),
            np.zeros(10, dtype)]


def _mlp(nd_dtype, initial=None, initializer=None):
    x = nd.placeholder(nd_dtype, [None, 784], name="x")
    y = nd.placeholder(nd_dtype, [None, 10], name="y")
    shapes = [[784, 256], [256], [256, 10], [10]]
    names = ["w1", "b1", "w2", "b2"]
    if initial is not None:
        params = [nd.Variable(v, name=n) for v, n in zip(initial, names)]
    else:
        params = [nd.get_variable(n, s, dtype=nd_dtype,
                                  initializer=initializer if n[0] == "w"
                                  else nd.zeros_initializer())
                  for n, s in zip(names, shapes)]
    w1, b1, w2, b2 = params
    h = nd.nn.relu(nd.nn.bias_add(nd.matmul(x, w1), b1))
    logits = nd.nn.bias_add(nd.matmul(h, w2), b2)
    loss = nd.reduce_mean(
        nd.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    return x, y, params, loss


OPTIMIZERS = {
    "GradientDescent": lambda: nd.train.GradientDescentOptimizer(0.1),
    "Momentum": lambda: nd.train.MomentumOptimizer(0.02, 0.9),
    "Nesterov": lambda: nd.train.MomentumOptimizer(0.02, 0.9, use_nesterov=True),
    "Adagrad": lambda: nd.train.AdagradOptimizer(0.05),
    "Adam": lambda: nd.train.AdamOptimizer(0.001),
    "RMSProp": lambda: nd.train.RMSPropOptimizer(0.05),
    "RMSPropCentered": lambda: nd.train.RMSPropOptimizer(0.02, momentum=0.5,
                                                         centered=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_mlp_loss_falls(name):
    """30 steps of batch 64 on synthetic data: the loss on all 512 examples
    must fall below 0.8 x its initial value."""
    xs, ys = _data(np.float32)
    x, y, _params, loss = _mlp(nd.float32, initial=_init_weights(np.float32))
    gs = nd.train.get_or_create_global_step()
    train = OPTIMIZERS[name]().minimize(loss, global_step=gs)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        initial = s.run(loss, {x: xs, y: ys})
        for step in range(30):
            i = (step * 64) % len(xs)
            s.run(train, {x: xs[i:i + 64], y: ys[i:i + 64]})
        final = s.run(loss, {x: xs, y: ys})
        assert s.run(gs) == 30
    assert np.isfinite(final)
    assert final < 0.8 * initial, (name, initial, final)


def _np_mlp_grads(params, x, y):
    w1, b1, w2, b2 = params
    z1 = x @ w1 + b1
    h = np.maximum(z1, 0)
    logits = h @ w2 + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    dlogits = (p - y) / len(x)
    dh = dlogits @ w2.T
    dz1 = dh * (z1 > 0)
    return [x.T @ dz1, dz1.sum(0), h.T @ dlogits, dlogits.sum(0)]


def test_adam_mlp_matches_numpy_adam():
    """Three Adam steps of the MLP (float64, random initial values fetched from
    the session) equal a hand-written NumPy Adam with hand-written backprop."""
    xs, ys = _data(np.float64, n=192)
    x, y, params, loss = _mlp(
        nd.float64, initializer=nd.random_normal_initializer(stddev=0.05, seed=3))
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    opt = nd.train.AdamOptimizer(lr, b1, b2, eps)
    train = opt.minimize(loss)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        ref = s.run(params)
        assert np.std(ref[0]) > 0.04  # really random, not zeros
        ms = [np.zeros_like(p) for p in ref]
        vs = [np.zeros_like(p) for p in ref]
        # TF keeps beta1**t and beta2**t in float32 variables (the Python floats
        # make float32 variables) and casts them to the variables' dtype.
        b1p, b2p = np.float32(b1), np.float32(b2)
        for t in range(1, 4):
            bx, by = xs[(t - 1) * 64:t * 64], ys[(t - 1) * 64:t * 64]
            grads = _np_mlp_grads(ref, bx, by)
            for i, g in enumerate(grads):
                ref[i], ms[i], vs[i] = np_adam(
                    ref[i], ms[i], vs[i], g, t, lr, b1, b2, eps,
                    powers=(np.float64(b1p), np.float64(b2p)))
            b1p, b2p = b1p * np.float32(b1), b2p * np.float32(b2)
            s.run(train, {x: bx, y: by})
            got = s.run(params)
            for i in range(4):
                np.testing.assert_allclose(got[i], ref[i], rtol=0, atol=1e-6)
            got_m = s.run([opt.get_slot(p, "m") for p in params])
            for i in range(4):
                np.testing.assert_allclose(got_m[i], ms[i], rtol=0, atol=1e-6)


# -- on a cluster: the update runs where the variable lives ---------------------
def test_updates_run_on_the_parameter_server(servers):
    from helpers import local_cluster

    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        w = nd.Variable(np.array([1.0, 2.0], np.float32), name="w")
    with nd.device("/job:worker/task:0"):
        loss = nd.reduce_sum(nd.square(w))
        gs = nd.train.get_or_create_global_step()
        opt = nd.train.AdamOptimizer(0.1)
        train = opt.minimize(loss, global_step=gs)
    assert {v.device for v in opt.variables()} == {"/job:ps/task:0"}
    md = nd.RunMetadata()
    with nd.Session(worker.target) as s:
        s.run(nd.global_variables_initializer())
        s.run(train, options=nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE),
              run_metadata=md)
        np.testing.assert_allclose(s.run(w), [0.9, 1.9], rtol=1e-6)
        assert s.run(gs) == 1
    ran_on = {}
    for dev in md.step_stats.dev_stats:
        for n in dev.node_stats:
            ran_on[n.node_name] = dev.device
    for name in ("Adam/update_w/ApplyAdam", "Adam/Assign", "Adam/Assign_1"):
        assert "/job:ps/" in ran_on[name], (name, ran_on.get(name))
