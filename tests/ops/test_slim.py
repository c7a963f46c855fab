"""nd.contrib.slim / contrib.layers / contrib.framework as TF1's: arg_scope,
slim layer scopes and variable names, model variables, regularizers,
initializers, batch_norm update collections, create_train_op, prefetch_queue."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

slim = nd.contrib.slim


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def test_arg_scope_defaults_nesting_and_errors():
    @slim.add_arg_scope
    def f(x, a=1, b=2):
        return x, a, b

    with slim.arg_scope([f], a=10) as outer:
        assert f(0) == (0, 10, 2)
        with slim.arg_scope([f], b=20):
            assert f(0) == (0, 10, 20) and f(0, a=3) == (0, 3, 20)
        assert f(0) == (0, 10, 2)
    assert f(0) == (0, 1, 2)
    with slim.arg_scope(outer):
        assert f(0) == (0, 10, 2)
    assert slim.has_arg_scope(f) and slim.arg_scoped_arguments(f) == ["a", "b"]

    def plain(x, a=1):
        return x

    with pytest.raises(ValueError, match="not decorated with @add_arg_scope"):
        with slim.arg_scope([plain], a=2):
            pass


def test_slim_network_names_shapes_and_collections():
    x = nd.placeholder(nd.float32, [None, 28, 28, 1])
    with slim.arg_scope([slim.conv2d, slim.fully_connected],
                        weights_regularizer=slim.l2_regularizer(0.01)):
        net = slim.conv2d(x, 8, [5, 5], scope="conv1")
        assert net.shape.as_list() == [None, 28, 28, 8]  # SAME by default
        assert net.op.name == "conv1/Relu"
        net = slim.max_pool2d(net, [2, 2], scope="pool1")
        assert net.shape.as_list() == [None, 14, 14, 8]
        net = slim.repeat(net, 2, slim.conv2d, 4, [3, 3], scope="conv2")
        net = slim.stack(net, slim.fully_connected, [6, 5], scope="fc")
        assert net.shape.as_list() == [None, 14, 14, 5]
        net = slim.flatten(net)
        logits = slim.fully_connected(net, 10, activation_fn=None, scope="logits")
    assert logits.op.name == "logits/BiasAdd"
    names = [v.op.name for v in slim.get_model_variables()]
    assert names == ["conv1/weights", "conv1/biases", "conv2/conv2_1/weights",
                     "conv2/conv2_1/biases", "conv2/conv2_2/weights",
                     "conv2/conv2_2/biases", "fc/fc_1/weights", "fc/fc_1/biases",
                     "fc/fc_2/weights", "fc/fc_2/biases", "logits/weights",
                     "logits/biases"]
    assert len(nd.get_collection(nd.GraphKeys.REGULARIZATION_LOSSES)) == 6
    assert [v.op.name for v in slim.get_variables("conv2", suffix="weights")] == [
        "conv2/conv2_1/weights", "conv2/conv2_2/weights"]
    restore = slim.get_variables_to_restore(exclude=["logits", "fc"])
    assert [v.op.name for v in restore][-1] == "conv2/conv2_2/biases"
    assert slim.get_unique_variable("conv1/weights") is slim.get_model_variables()[0]


def test_fully_connected_values_and_reuse():
    xv = np.random.RandomState(0).rand(3, 4).astype(np.float32)
    y = slim.fully_connected(xv, 2, weights_initializer=nd.constant_initializer(0.5),
                             biases_initializer=nd.constant_initializer(1.0),
                             scope="fc")
    y2 = slim.fully_connected(xv, 2, reuse=True, scope="fc")
    assert len(nd.trainable_variables()) == 2
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        a, b = s.run([y, y2])
    want = np.maximum(xv.sum(1, keepdims=True) * 0.5 + 1.0, 0) * np.ones((1, 2))
    np.testing.assert_allclose(a, want, rtol=1e-6)
    np.testing.assert_allclose(b, want, rtol=1e-6)
    with pytest.raises(ValueError, match="num_outputs"):
        slim.fully_connected(xv, 2.5)


def test_regularizers_values_and_apply_regularization():
    w = nd.constant([[1.0, -2.0], [3.0, 0.5]])
    l1 = slim.l1_regularizer(0.1)(w)
    l2 = slim.l2_regularizer(0.1)(w)
    both = slim.l1_l2_regularizer(0.1, 0.1)(w)
    assert slim.l2_regularizer(0.0)(w) is None
    with pytest.raises(ValueError, match="less than 0"):
        slim.l2_regularizer(-1.0)
    with pytest.raises(ValueError, match="integer"):
        slim.l2_regularizer(1)
    total = slim.apply_regularization(slim.l2_regularizer(1.0), [w, w])
    assert nd.get_collection(nd.GraphKeys.REGULARIZATION_LOSSES) == [total]
    with pytest.raises(ValueError, match="No weights to regularize"):
        slim.apply_regularization(slim.l2_regularizer(1.0))
    with nd.Session() as s:
        got = s.run([l1, l2, both, total])
    wv = np.array([[1.0, -2.0], [3.0, 0.5]])
    want = [0.1 * np.abs(wv).sum(), 0.1 * (wv ** 2).sum() / 2]
    np.testing.assert_allclose(got, want + [sum(want), (wv ** 2).sum()], rtol=1e-6)


def test_initializer_statistics():
    shape = [3, 3, 64, 128]
    fan_in, fan_out = 9 * 64, 9 * 128
    xu = slim.xavier_initializer(seed=1)(shape)
    xn = slim.xavier_initializer(uniform=False, seed=2)(shape)
    he = slim.variance_scaling_initializer(seed=3)(shape)
    with nd.Session() as s:
        xu, xn, he = s.run([xu, xn, he])
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    assert np.abs(xu).max() <= limit and np.abs(xu).max() > 0.99 * limit
    assert xn.std() == pytest.approx(np.sqrt(2.0 / (fan_in + fan_out)), rel=0.05)
    stddev = np.sqrt(1.3 * 2.0 / fan_in)  # truncated at 2 stddevs
    assert np.abs(he).max() <= 2 * stddev
    assert he.std() == pytest.approx(np.sqrt(2.0 / fan_in), rel=0.05)


@pytest.mark.parametrize("collections", ["default", None])
def test_batch_norm_update_collections(collections):
    xv = np.random.RandomState(1).randn(8, 2, 2, 3).astype(np.float32) + 2
    kwargs = {} if collections == "default" else {"updates_collections": None}
    y = slim.batch_norm(nd.constant(xv), decay=0.5, is_training=True, **kwargs)
    names = [v.op.name for v in slim.get_model_variables()]
    assert names == ["BatchNorm/beta", "BatchNorm/moving_mean",
                     "BatchNorm/moving_variance"]  # no gamma: scale=False
    updates = nd.get_collection(nd.GraphKeys.UPDATE_OPS)
    assert len(updates) == (2 if collections == "default" else 0)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        out = s.run([y] + updates)[0]
        mean = s.run(nd.global_variables()[1])
    mu, var = xv.mean((0, 1, 2)), xv.var((0, 1, 2))
    np.testing.assert_allclose(out, (xv - mu) / np.sqrt(var + 1e-3), rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(mean, 0.5 * mu, rtol=1e-5)


def test_dropout_is_training_default_true():
    x = nd.ones([1000])
    on = slim.dropout(x, 0.5)
    off = slim.dropout(x, 0.5, is_training=False)
    with nd.Session() as s:
        a, b = s.run([on, off])
    assert 300 < (a == 0).sum() < 700 and np.all(b == 1)


def test_create_train_op_runs_updates_and_steps():
    x = nd.placeholder(nd.float32, [None, 2])
    y = nd.placeholder(nd.float32, [None, 1])
    h = slim.batch_norm(x, is_training=True, decay=0.0, scale=True)
    pred = slim.fully_connected(h, 1, activation_fn=None, scope="out")
    slim.losses.mean_squared_error(pred, y)
    total = slim.losses.get_total_loss()
    train = slim.learning.create_train_op(total, nd.train.GradientDescentOptimizer(
        0.1), clip_gradient_norm=5.0)
    gs = slim.get_global_step()
    rng = np.random.RandomState(2)
    xv = rng.randn(16, 2).astype(np.float32) * 3 + 1
    yv = (xv @ [[1.0], [-2.0]]).astype(np.float32)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        losses = [s.run(train, {x: xv, y: yv}) for _ in range(30)]
        mm = s.run(slim.get_variables_by_name("moving_mean")[0])
        assert s.run(gs) == 30
    np.testing.assert_allclose(mm, xv.mean(0), rtol=1e-5)  # decay 0: last batch
    assert losses[-1] < 0.1 * losses[0]


def test_prefetch_queue_feeds_batches():
    counter = nd.Variable(0, name="counter")
    value = nd.assign_add(counter, 1)
    queue = slim.prefetch_queue.prefetch_queue([value], capacity=4)
    batch = queue.dequeue()
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        coord = nd.train.Coordinator()
        threads = nd.train.start_queue_runners(s, coord=coord)
        got = [int(s.run(batch)) for _ in range(5)]
        coord.request_stop()
        s.run(queue.close(cancel_pending_enqueues=True))
        coord.join(threads, stop_grace_period_secs=30)
    assert got == sorted(got) and len(set(got)) == 5


def test_conv2d_with_batch_norm_normalizer_and_learning_train(tmp_path):
    x = nd.constant(np.random.RandomState(3).rand(4, 6, 6, 2).astype(np.float32))
    net = slim.conv2d(x, 3, [3, 3], normalizer_fn=slim.batch_norm,
                      normalizer_params={"is_training": True, "scale": True},
                      scope="conv")
    names = [v.op.name for v in slim.get_model_variables()]
    assert names == ["conv/weights", "conv/BatchNorm/gamma", "conv/BatchNorm/beta",
                     "conv/BatchNorm/moving_mean", "conv/BatchNorm/moving_variance"]
    assert net.op.name == "conv/Relu"  # no biases with a normalizer
    loss = nd.reduce_mean(nd.square(net - 1.0))
    slim.losses.add_loss(loss)
    train_op = slim.learning.create_train_op(slim.losses.get_total_loss(),
                                             nd.train.AdamOptimizer(0.1))
    final = slim.learning.train(train_op, str(tmp_path), number_of_steps=15,
                                save_summaries_secs=None, save_interval_secs=None)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        first = s.run(loss)
    assert final < first
    assert nd.train.latest_checkpoint(str(tmp_path)) is not None


def test_layer_norm():
    xv = np.random.RandomState(4).randn(3, 2, 5).astype(np.float32) * 4 + 1
    y = slim.layer_norm(xv)
    assert [v.op.name for v in slim.get_model_variables()] == [
        "LayerNorm/beta", "LayerNorm/gamma"]
    assert slim.get_model_variables()[0].shape.as_list() == [5]
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        out = s.run(y)
    mu = xv.mean((1, 2), keepdims=True)
    var = xv.var((1, 2), keepdims=True)
    np.testing.assert_allclose(out, (xv - mu) / np.sqrt(var + 1e-12), rtol=1e-4,
                               atol=1e-5)
