"""nd.layers' 3-D layers and SeparableConv1D: TF1's variable names and shapes,
and outputs equal to the nd.nn ops on those variables."""

from __future__ import annotations

import numpy as np

import nbdist as nd


def test_3d_layers_and_separable_conv1d():
    rs = np.random.RandomState(0)
    xv, yv = rs.rand(2, 6, 7, 5, 3), rs.rand(2, 9, 3)
    with nd.Graph().as_default():
        x = nd.placeholder(nd.float64, [None, 6, 7, 5, 3])
        y = nd.placeholder(nd.float64, [None, 9, 3])
        h = nd.layers.conv3d(x, 4, 3, padding="same", activation=nd.nn.relu)
        up = nd.layers.Conv3DTranspose(2, 2, strides=2, padding="same")(h)
        mp = nd.layers.max_pooling3d(h, 2, 2)
        ap = nd.layers.AveragePooling3D([2, 3, 2], 1, padding="same")(h)
        sep = nd.layers.separable_conv1d(y, 5, 3, depth_multiplier=2)
        assert [t.shape.as_list() for t in (h, up, mp, ap, sep)] == [
            [None, 6, 7, 5, 4], [None, 12, 14, 10, 2], [None, 3, 3, 2, 4],
            [None, 6, 7, 5, 4], [None, 7, 5]]
        shapes = {v.op.name: v.shape.as_list() for v in nd.global_variables()}
        assert shapes == {
            "conv3d/kernel": [3, 3, 3, 3, 4], "conv3d/bias": [4],
            "conv3d_transpose/kernel": [2, 2, 2, 2, 4], "conv3d_transpose/bias": [2],
            "separable_conv1d/depthwise_kernel": [3, 3, 2],
            "separable_conv1d/pointwise_kernel": [1, 6, 5],
            "separable_conv1d/bias": [5]}
        v = {k.op.name: k for k in nd.global_variables()}
        ref_h = nd.nn.relu(nd.nn.conv3d(x, v["conv3d/kernel"], [1] * 5, "SAME") +
                           v["conv3d/bias"])
        dw = v["separable_conv1d/depthwise_kernel"]
        ref_sep = nd.squeeze(nd.nn.separable_conv2d(
            nd.expand_dims(y, 1), nd.expand_dims(dw, 0),
            nd.expand_dims(v["separable_conv1d/pointwise_kernel"], 0), [1, 1, 1, 1],
            "VALID"), [1]) + v["separable_conv1d/bias"]
        grads = nd.gradients(nd.reduce_sum(up) + nd.reduce_sum(sep),
                             nd.trainable_variables())
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            feed = {x: xv, y: yv}
            got = s.run([h, ref_h, sep, ref_sep, mp, ap] + grads, feed)
    np.testing.assert_allclose(got[0], got[1])
    np.testing.assert_allclose(got[2], got[3])
    hv = got[0]
    np.testing.assert_allclose(got[4], hv[:, :6, :6, :4].reshape(
        2, 3, 2, 3, 2, 2, 2, 4).max((2, 4, 6)))
    assert all(np.isfinite(g).all() for g in got[6:])
