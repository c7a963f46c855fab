"""nd.layers as TF1's tf.layers: variable names, defaults, shapes, reuse,
regularisers, dropout/batch-norm training switches, UPDATE_OPS."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def _run(fetches, feed=None):
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        return s.run(fetches, feed)


def test_dense_names_defaults_and_value():
    x = nd.placeholder(nd.float32, [None, 4])
    y = nd.layers.dense(x, 3)
    y2 = nd.layers.dense(x, 2, activation=nd.nn.relu)
    names = [v.op.name for v in nd.trainable_variables()]
    assert names == ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]
    assert y.shape.as_list() == [None, 3] and y2.op.name == "dense_1/Relu"
    xv = np.random.RandomState(0).rand(5, 4).astype(np.float32)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        k, b, k1, _, out, out2 = s.run(nd.trainable_variables() + [y, y2], {x: xv})
    assert np.all(b == 0) and np.abs(k).max() <= np.sqrt(6 / 7)  # glorot_uniform
    np.testing.assert_allclose(out, xv @ k, rtol=1e-5)
    np.testing.assert_allclose(out2, np.maximum(xv @ k1, 0), rtol=1e-5)


def test_dense_reuse_and_name_clash():
    x = nd.placeholder(nd.float32, [None, 4])
    nd.layers.dense(x, 3, name="fc")
    with pytest.raises(ValueError, match="fc/kernel already exists"):
        nd.layers.dense(x, 3, name="fc")
    nd.layers.dense(x, 3, name="fc", reuse=True)
    with nd.variable_scope("fc", reuse=True):
        assert nd.get_variable("kernel") is nd.trainable_variables()[0]
    assert len(nd.trainable_variables()) == 2


def test_dense_class_reused_on_second_call_and_properties():
    layer = nd.layers.Dense(2, name="out")
    a = layer(nd.ones([1, 3]))
    b = layer(nd.zeros([1, 3]))
    assert [v.name for v in layer.variables] == ["out/kernel:0", "out/bias:0"]
    assert layer.trainable_variables == layer.trainable_weights
    assert layer.built and a.shape.as_list() == [1, 2]
    with pytest.raises(ValueError, match="expected axis -1 of input shape to have "
                       "value 3"):
        layer(nd.ones([1, 5]))
    av, bv = _run([a, b])
    np.testing.assert_allclose(bv, [[0, 0]])
    del av


def test_dense_rank3_input_uses_last_axis():
    x = nd.constant(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    y = nd.layers.dense(x, 5, use_bias=False,
                        kernel_initializer=nd.constant_initializer(0.5))
    assert y.shape.as_list() == [2, 3, 5]
    np.testing.assert_allclose(_run(y), np.arange(24).reshape(2, 3, 4).sum(-1,
                               keepdims=True) * 0.5 * np.ones(5))


def test_kernel_regularizer_adds_to_regularization_losses():
    layer = nd.layers.Dense(3, kernel_regularizer=lambda w: 0.1 * nd.reduce_sum(
        nd.square(w)), kernel_initializer=nd.ones_initializer())
    layer(nd.ones([2, 4]))
    layer(nd.ones([2, 4]))  # a second call adds no second loss
    losses = nd.get_collection(nd.GraphKeys.REGULARIZATION_LOSSES)
    assert losses == layer.losses and len(losses) == 1
    assert losses[0].op.name.startswith("dense/kernel/Regularizer")
    assert _run(losses[0]) == pytest.approx(1.2)


def test_conv2d_pool_flatten_shapes_names_and_values():
    x = nd.placeholder(nd.float32, [None, 28, 28, 1])
    h = nd.layers.conv2d(x, 32, 5, padding="same", activation=nd.nn.relu)
    assert h.shape.as_list() == [None, 28, 28, 32] and h.op.name == "conv2d/Relu"
    p = nd.layers.max_pooling2d(h, 2, 2)
    assert p.shape.as_list() == [None, 14, 14, 32]
    v = nd.layers.conv2d(p, 4, [3, 3])  # "valid" by default
    assert v.shape.as_list() == [None, 12, 12, 4]
    f = nd.layers.flatten(v)
    assert f.shape.as_list() == [None, 576]
    assert [w.op.name for w in nd.global_variables()] == [
        "conv2d/kernel", "conv2d/bias", "conv2d_1/kernel", "conv2d_1/bias"]
    assert nd.global_variables()[0].shape.as_list() == [5, 5, 1, 32]


def test_conv2d_matches_numpy_correlation():
    rng = np.random.RandomState(1)
    xv = rng.rand(2, 5, 5, 2).astype(np.float32)
    kv = rng.rand(3, 3, 2, 3).astype(np.float32)
    y = nd.layers.conv2d(nd.constant(xv), 3, 3, strides=2,
                         kernel_initializer=nd.constant_initializer(kv),
                         bias_initializer=nd.constant_initializer(0.5))
    want = np.zeros((2, 2, 2, 3), np.float32)
    for i in range(2):
        for j in range(2):
            patch = xv[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :]
            want[:, i, j, :] = np.einsum("nhwc,hwco->no", patch, kv)
    np.testing.assert_allclose(_run(y), want + 0.5, rtol=1e-5)


def test_pooling_values_and_conv2d_transpose_shape():
    xv = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    mx = nd.layers.max_pooling2d(xv, 2, 2)
    av = nd.layers.average_pooling2d(xv, 2, 2)
    t = nd.layers.conv2d_transpose(nd.constant(xv), 3, 3, strides=2, padding="same")
    t2 = nd.layers.conv2d_transpose(nd.constant(xv), 2, 3, strides=2)
    assert t.shape.as_list() == [1, 8, 8, 3] and t2.shape.as_list() == [1, 9, 9, 2]
    assert nd.global_variables()[0].shape.as_list() == [3, 3, 3, 1]
    m, a, tv = _run([mx, av, t])
    np.testing.assert_allclose(m[0, :, :, 0], [[5, 7], [13, 15]])
    np.testing.assert_allclose(a[0, :, :, 0], [[2.5, 4.5], [10.5, 12.5]])
    assert tv.shape == (1, 8, 8, 3)
    with pytest.raises(ValueError, match="padding"):
        nd.layers.max_pooling2d(xv, 2, 2, padding="full")


def test_dropout_training_switch():
    x = nd.ones([1000])
    off = nd.layers.dropout(x, rate=0.5)
    on = nd.layers.dropout(x, rate=0.5, training=True)
    flag = nd.placeholder(nd.bool, [])
    fed = nd.layers.Dropout(0.5)(x, training=flag)
    with nd.Session() as s:
        o, n = s.run([off, on])
        f_off, f_on = s.run(fed, {flag: False}), s.run(fed, {flag: True})
    np.testing.assert_array_equal(o, 1.0)
    np.testing.assert_array_equal(f_off, 1.0)
    for r in (n, f_on):
        assert set(np.unique(r)) <= {0.0, 2.0} and 300 < (r == 0).sum() < 700


def _bn_oracle(xv, axes, eps=1e-3):
    mean, var = xv.mean(axes), xv.var(axes)
    return (xv - mean) / np.sqrt(var + eps), mean, var


@pytest.mark.parametrize("fused", [None, False])
def test_batch_normalization_training_and_moving_averages(fused):
    rng = np.random.RandomState(2)
    xv = (rng.randn(4, 3, 3, 2) * 3 + 1).astype(np.float32)
    x = nd.placeholder(nd.float32, [None, 3, 3, 2])
    y = nd.layers.batch_normalization(x, training=True, fused=fused)
    names = [v.op.name for v in nd.global_variables()]
    assert names == ["batch_normalization/gamma", "batch_normalization/beta",
                     "batch_normalization/moving_mean",
                     "batch_normalization/moving_variance"]
    assert len(nd.trainable_variables()) == 2
    updates = nd.get_collection(nd.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        out = s.run(y, {x: xv})
        s.run(updates, {x: xv})
        mm, mv = s.run(nd.global_variables()[2:])
    want, mean, var = _bn_oracle(xv, (0, 1, 2))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mm, 0.01 * mean, rtol=1e-5)
    n = xv.size / 2
    batch_var = var * n / (n - 1) if fused is None else var  # fused: unbiased
    np.testing.assert_allclose(mv, 0.99 + 0.01 * batch_var, rtol=1e-5)


def test_batch_normalization_inference_and_training_tensor():
    xv = np.random.RandomState(3).randn(6, 3).astype(np.float32)
    flag = nd.placeholder(nd.bool, [])
    layer = nd.layers.BatchNormalization(momentum=0.5, epsilon=0.01)
    y = layer(xv, training=flag)
    assert not layer.fused
    assert len(layer.updates) == 2 and len(layer.trainable_variables) == 2
    assert len(layer.variables) == 4
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        infer = s.run(y, {flag: False})
        s.run(layer.updates, {flag: False})  # not training: averages unchanged
        assert s.run(layer.moving_mean).tolist() == [0, 0, 0]
        train = s.run(y, {flag: True})
        s.run(layer.updates, {flag: True})
        mm = s.run(layer.moving_mean)
    np.testing.assert_allclose(infer, xv / np.sqrt(1.01), rtol=1e-5)
    np.testing.assert_allclose(train, _bn_oracle(xv, 0, 0.01)[0], rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(mm, 0.5 * xv.mean(0), rtol=1e-5)


def test_layer_subclass_build_and_call():
    class Scale(nd.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_variable("w", [input_shape[-1]],
                                       initializer=nd.constant_initializer(2.0))
            super().build(input_shape)

        def call(self, inputs):
            return inputs * self.w

    layer = Scale()
    y = layer(nd.ones([2, 3]))
    assert layer.name == "scale" and layer.variables[0].op.name == "scale/w"
    np.testing.assert_allclose(_run(y), 2 * np.ones((2, 3)))


def test_non_trainable_layer_variables_stay_out_of_trainables():
    nd.layers.dense(nd.ones([1, 2]), 2, trainable=False)
    assert nd.trainable_variables() == [] and len(nd.global_variables()) == 2


def test_dense_gradient_matches_finite_differences():
    xv = np.random.RandomState(4).rand(3, 4)
    x = nd.constant(xv, dtype=nd.float64)
    y = nd.reduce_sum(nd.square(nd.layers.dense(x, 2, activation=nd.nn.tanh)))
    k = nd.trainable_variables()[0]
    g = nd.gradients(y, [k])[0]
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        kv, gv = s.run([k, g])
        eps, num = 1e-6, np.zeros_like(kv)
        for i in np.ndindex(kv.shape):
            for sign in (1, -1):
                kk = kv.copy()
                kk[i] += sign * eps
                k.load(kk, s)
                num[i] += sign * s.run(y) / (2 * eps)
    np.testing.assert_allclose(gv, num, rtol=1e-5, atol=1e-7)


def test_towers_share_layers_by_reentering_the_scope():
    x = nd.ones([2, 4])
    outs = []
    for tower in range(2):
        with nd.variable_scope("model", reuse=tower > 0):
            outs.append(nd.layers.dense(nd.layers.dense(x, 3), 2))
    with nd.variable_scope("shared", reuse=nd.AUTO_REUSE):
        nd.layers.dense(x, 3, name="fc")
        nd.layers.dense(x, 3, name="fc")
    assert [v.op.name for v in nd.global_variables()] == [
        "model/dense/kernel", "model/dense/bias", "model/dense_1/kernel",
        "model/dense_1/bias", "shared/fc/kernel", "shared/fc/bias"]
    a, b = _run(outs)
    np.testing.assert_allclose(a, b)
    nd.layers.dense(x, 1)
    with nd.variable_scope("dense_1"):
        pass
    nd.layers.dense(x, 1)  # the first name not taken by any scope
    assert [v.op.name for v in nd.global_variables()][-4:] == [
        "dense/kernel", "dense/bias", "dense_2/kernel", "dense_2/bias"]


def test_conv_and_batch_norm_gradients_match_finite_differences():
    rng = np.random.RandomState(5)
    x = nd.constant(rng.rand(3, 5, 5, 2), dtype=nd.float64)
    h = nd.layers.conv2d(x, 2, 3, padding="same", activation=nd.nn.tanh)
    h = nd.layers.batch_normalization(h, training=True, fused=False)
    y = nd.reduce_sum(nd.square(h) * nd.constant(rng.rand(3, 5, 5, 2)))
    params = nd.trainable_variables()  # kernel, bias, gamma, beta
    grads = nd.gradients(y, params)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        for p, g in zip(params, grads):
            value, analytic = s.run([p, g])
            eps, numeric = 1e-6, np.zeros_like(value)
            for i in list(np.ndindex(value.shape))[:6]:
                for sign in (1, -1):
                    shifted = value.copy()
                    shifted[i] += sign * eps
                    p.load(shifted, s)
                    numeric[i] += sign * s.run(y) / (2 * eps)
                p.load(value, s)
                np.testing.assert_allclose(analytic[i], numeric[i], rtol=1e-4,
                                           atol=1e-6, err_msg=p.op.name)


def test_layer_made_under_control_dependencies_initialises_alone():
    x = nd.placeholder(nd.float32, [None, 3])
    counter = nd.Variable(0.0, name="counter")
    step = counter.assign_add(1.0)
    with nd.control_dependencies([step]):
        y = nd.layers.dense(x, 2)  # its variables' initializers wait for nothing
    assert y.op.name == "dense/BiasAdd"
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        assert s.run(counter) == 0.0
        s.run(y, {x: np.ones((1, 3))})
        assert s.run(counter) == 1.0  # the layer's ops do wait for it


def test_separable_conv2d_is_depthwise_then_pointwise():
    rng = np.random.RandomState(6)
    xv = rng.rand(1, 4, 4, 2).astype(np.float32)
    y = nd.layers.separable_conv2d(nd.constant(xv), 3, 3, depth_multiplier=2,
                                   padding="same")
    dw, pw = nd.global_variables()[:2]
    assert [v.op.name for v in nd.global_variables()] == [
        "separable_conv2d/depthwise_kernel", "separable_conv2d/pointwise_kernel",
        "separable_conv2d/bias"]
    assert dw.shape.as_list() == [3, 3, 2, 2] and pw.shape.as_list() == [1, 1, 4, 3]
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        out, dwv, pwv = s.run([y, dw, pw])
    padded = np.pad(xv, [(0, 0), (1, 1), (1, 1), (0, 0)])
    depth = np.zeros((1, 4, 4, 4), np.float32)
    for i in range(4):
        for j in range(4):
            patch = padded[0, i:i + 3, j:j + 3, :]  # [3, 3, 2]
            depth[0, i, j] = np.einsum("hwc,hwcm->cm", patch, dwv).reshape(-1)
    np.testing.assert_allclose(out, depth @ pwv[0, 0], rtol=1e-4, atol=1e-6)
