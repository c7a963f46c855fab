"""Learning-rate schedules, ExponentialMovingAverage and the Ftrl/proximal/
Adadelta optimizers of nd.train, against NumPy versions of TF1's formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


STEPS = [0, 1, 5, 9, 10, 11, 25, 40]


def _series(lr, step):
    with nd.Session() as s:
        return [float(s.run(lr, {step: v})) for v in STEPS]


def test_decays_follow_tf1_formulas():
    step = nd.placeholder(nd.int64, [])
    T = nd.train
    cases = {
        "exp": (T.exponential_decay(0.1, step, 10, 0.5),
                lambda s: 0.1 * 0.5 ** (s / 10)),
        "exp_stair": (T.exponential_decay(0.1, step, 10, 0.5, staircase=True),
                      lambda s: 0.1 * 0.5 ** (s // 10)),
        "natural": (T.natural_exp_decay(0.1, step, 10, 0.5),
                    lambda s: 0.1 * math.exp(-0.5 * s / 10)),
        "inverse": (T.inverse_time_decay(0.1, step, 10, 0.5, staircase=True),
                    lambda s: 0.1 / (1 + 0.5 * (s // 10))),
        "poly": (T.polynomial_decay(0.1, step, 10, 0.01, power=2.0),
                 lambda s: 0.09 * (1 - min(s, 10) / 10) ** 2 + 0.01),
        "poly_cycle": (T.polynomial_decay(0.1, step, 10, 0.01, cycle=True),
                       lambda s: 0.09 * (1 - s / (10 * max(1, math.ceil(s / 10))))
                       + 0.01),
        "cosine": (T.cosine_decay(0.1, step, 20, alpha=0.1),
                   lambda s: 0.1 * (0.9 * 0.5 * (1 + math.cos(math.pi * min(s, 20)
                                                              / 20)) + 0.1)),
        "linear_cosine": (T.linear_cosine_decay(0.1, step, 20),
                          lambda s: 0.1 * ((20 - min(s, 20)) / 20 * 0.5 * (
                              1 + math.cos(math.pi * min(s, 20) / 20)) + 0.001)),
        "sgdr": (T.cosine_decay_restarts(0.1, step, 5, t_mul=2.0, m_mul=0.5),
                 _sgdr),
        "sgdr_flat": (T.cosine_decay_restarts(0.1, step, 5, t_mul=1.0),
                      lambda s: 0.1 * 0.5 * (1 + math.cos(math.pi * (s % 5) / 5))),
    }
    for name, (lr, fn) in cases.items():
        assert lr.dtype == nd.float32, name
        np.testing.assert_allclose(_series(lr, step), [fn(s) for s in STEPS],
                                   rtol=1e-5, err_msg=name)


def _sgdr(s, first=5, t_mul=2.0, m_mul=0.5):
    # periods 5, 10, 20 ...: find the one holding step s
    start, length, i = 0, first, 0
    while s >= start + length:
        start, length, i = start + length, length * t_mul, i + 1
    frac = (s - start) / length
    return 0.1 * m_mul ** i * 0.5 * (1 + math.cos(math.pi * frac))


def test_piecewise_constant_boundaries_inclusive():
    step = nd.placeholder(nd.int32, [])
    lr = nd.train.piecewise_constant(step, [5, 10], [1.0, 0.5, 0.1])
    np.testing.assert_allclose(_series(lr, step), [1, 1, 1, .5, .5, .1, .1, .1],
                               rtol=1e-6)
    with pytest.raises(ValueError, match="1 less than the length of values"):
        nd.train.piecewise_constant(step, [5], [1.0, 0.5, 0.1])
    with pytest.raises(ValueError, match="global_step is required"):
        nd.train.exponential_decay(0.1, None, 10, 0.5)


def test_schedule_with_global_step_and_optimizer():
    gs = nd.train.get_or_create_global_step()
    lr = nd.train.exponential_decay(1.0, gs, 1, 0.5, staircase=True)
    v = nd.Variable(0.0)
    train = nd.train.GradientDescentOptimizer(lr).minimize(-v, global_step=gs)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        for _ in range(3):
            s.run(train)
        assert s.run(v) == pytest.approx(1 + 0.5 + 0.25)


def test_exponential_moving_average_shadows():
    v = nd.Variable(10.0, name="v")
    w = nd.Variable([1.0, 2.0], name="w")
    step = nd.Variable(0, trainable=False, name="step")
    ema = nd.train.ExponentialMovingAverage(0.9, num_updates=step)
    update = ema.apply([v, w])
    shadow = ema.average(v)
    assert shadow.op.name == "v/ExponentialMovingAverage"
    assert ema.average_name(w) == "w/ExponentialMovingAverage"
    assert shadow not in nd.trainable_variables()
    assert nd.get_collection(nd.GraphKeys.MOVING_AVERAGE_VARIABLES) == [v, w]
    restore = ema.variables_to_restore()
    assert restore["v/ExponentialMovingAverage"] is v and restore["step"] is step
    with pytest.raises(ValueError, match="already computed"):
        ema.apply([v])
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        assert s.run(shadow) == 10.0
        s.run(v.assign(0.0))
        s.run(update)  # decay = min(0.9, 1/10)
        assert s.run(shadow) == pytest.approx(1.0)
        s.run(step.assign(100))
        s.run(update)
        assert s.run(shadow) == pytest.approx(0.9)


def test_ema_zero_debias_on_tensor():
    x = nd.placeholder(nd.float32, [])
    t = nd.identity(x, name="t")
    ema = nd.train.ExponentialMovingAverage(0.5)
    update = ema.apply([t])
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        s.run(update, {x: 4.0})
        assert s.run(ema.average(t)) == pytest.approx(4.0)  # debiased, not 2.0
        s.run(update, {x: 2.0})
        biased = 0.5 * (0.5 * 4.0) + 0.5 * 2.0
        assert s.run(ema.average(t)) == pytest.approx(biased / (1 - 0.25))


def _run_optimizer(opt, steps=3):
    v0 = nd.Variable([1.0, 2.0], dtype=nd.float64)
    grads = nd.constant([0.1, -0.2], nd.float64)
    train = opt.apply_gradients([(grads, v0)])
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        for _ in range(steps):
            s.run(train)
        return s.run(v0), [x.op.name for x in opt.variables()]


def test_ftrl_matches_numpy():
    got, slots = _run_optimizer(nd.train.FtrlOptimizer(
        3.0, l1_regularization_strength=0.1, l2_regularization_strength=2.0))
    var, acc, lin = np.array([1.0, 2.0]), np.full(2, 0.1), np.zeros(2)
    g = np.array([0.1, -0.2])
    for _ in range(3):
        new_acc = acc + g * g
        lin = lin + g - (np.sqrt(new_acc) - np.sqrt(acc)) / 3.0 * var
        quad = np.sqrt(new_acc) / 3.0 + 2 * 2.0
        var = np.where(np.abs(lin) > 0.1, (np.sign(lin) * 0.1 - lin) / quad, 0.0)
        acc = new_acc
    np.testing.assert_allclose(got, var, rtol=1e-10)
    assert slots == ["Variable/Ftrl", "Variable/Ftrl_1"]


def _prox(prox, lr, l1, l2):
    return np.sign(prox) * np.maximum(np.abs(prox) - lr * l1, 0) / (1 + lr * l2)


def test_proximal_optimizers_match_numpy():
    g = np.array([0.1, -0.2])
    got, _ = _run_optimizer(nd.train.ProximalGradientDescentOptimizer(
        0.5, l1_regularization_strength=0.3, l2_regularization_strength=0.1))
    var = np.array([1.0, 2.0])
    for _ in range(3):
        var = _prox(var - 0.5 * g, 0.5, 0.3, 0.1)
    np.testing.assert_allclose(got, var, rtol=1e-10)

    got, slots = _run_optimizer(nd.train.ProximalAdagradOptimizer(
        0.5, l1_regularization_strength=0.3, l2_regularization_strength=0.1))
    var, acc = np.array([1.0, 2.0]), np.full(2, 0.1)
    for _ in range(3):
        acc = acc + g * g
        lr = 0.5 / np.sqrt(acc)
        var = _prox(var - lr * g, lr, 0.3, 0.1)
    np.testing.assert_allclose(got, var, rtol=1e-10)
    assert slots == ["Variable_1/ProximalAdagrad"]  # second variable of the graph


def test_adadelta_matches_numpy():
    got, slots = _run_optimizer(nd.train.AdadeltaOptimizer(1.0, rho=0.9,
                                                           epsilon=1e-6))
    g = np.array([0.1, -0.2])
    var, acc, acc_u = np.array([1.0, 2.0]), np.zeros(2), np.zeros(2)
    for _ in range(3):
        acc = 0.9 * acc + 0.1 * g * g
        upd = np.sqrt(acc_u + 1e-6) / np.sqrt(acc + 1e-6) * g
        acc_u = 0.9 * acc_u + 0.1 * upd * upd
        var = var - upd
    np.testing.assert_allclose(got, var, rtol=1e-10)
    assert slots == ["Variable/Adadelta", "Variable/Adadelta_1"]


def test_ema_variables_to_restore_with_saver(tmp_path):
    v = nd.Variable(0.0, name="v")
    ema = nd.train.ExponentialMovingAverage(0.5)
    update = ema.apply([v])
    saver = nd.train.Saver()
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        for value in (4.0, 8.0):
            s.run(v.assign(value))
            s.run(update)
        assert s.run(ema.average(v)) == pytest.approx(0.5 * (0.5 * 0 + 2.0) + 4.0)
        path = saver.save(s, str(tmp_path / "model"))
    with nd.Graph().as_default():
        v2 = nd.Variable(0.0, name="v")
        restore = nd.train.ExponentialMovingAverage(0.5).variables_to_restore()
        assert restore == {"v/ExponentialMovingAverage": v2}
        with nd.Session() as s:
            nd.train.Saver(restore).restore(s, path)
            assert s.run(v2) == pytest.approx(5.0)  # the average, not 8.0


def test_ema_under_control_dependencies_and_late_initialisation():
    steps = nd.Variable(0.0, name="steps")
    train = steps.assign_add(1.0)
    w = nd.Variable(nd.random_uniform([3], seed=1), name="w")
    with nd.control_dependencies([train]):  # the usual "EMA after the step"
        ema = nd.train.ExponentialMovingAverage(0.5)
        update = ema.apply([w])
    shadow = ema.average(w)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        assert s.run(steps) == 0.0  # initialising the shadow ran no step
        np.testing.assert_array_equal(s.run(shadow), s.run(w))  # same sample
        s.run(update)
        assert s.run(steps) == 1.0
        s.run(w.assign([1.0, 2.0, 3.0]))
        s.run(nd.variables_initializer([shadow]))  # w is not reset
        np.testing.assert_array_equal(s.run(shadow), [1.0, 2.0, 3.0])
        np.testing.assert_array_equal(s.run(w), [1.0, 2.0, 3.0])
