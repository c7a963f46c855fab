"""More of TF1's names (issue 34): ``nn.with_space_to_batch``,
``nn.ctc_unique_labels`` (values checked with TF 2.21), ``saved_model.Asset``
and ``saved_model.SaveOptions``. Oracles: nbdist's dilated ``conv2d`` (itself
checked against NumPy) and TF's documented results."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

tf = nd.compat.v1
RNG = np.random.RandomState(1)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with nd.Graph().as_default():
        yield


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_with_space_to_batch_is_a_dilated_op(padding):
    x = RNG.rand(2, 7, 6, 3).astype(np.float32)
    w = RNG.rand(3, 2, 3, 4).astype(np.float32)

    def conv(v, num_spatial_dims, pad):
        assert num_spatial_dims == 2 and pad == "VALID"
        return tf.nn.conv2d(v, w, [1, 1, 1, 1], pad)

    got = tf.nn.with_space_to_batch(x, [2, 3], padding, conv, filter_shape=[3, 2])
    want = tf.nn.conv2d(x, w, [1, 1, 1, 1], padding, dilations=[1, 2, 3, 1])
    with nd.Session() as s:
        g, wv = s.run([got, want])
    np.testing.assert_allclose(g, wv, rtol=1e-5)


def test_with_space_to_batch_channels_first_and_errors():
    x = RNG.rand(1, 2, 6, 6).astype(np.float32)  # NCHW

    def pool_sum(v, n, pad):  # a 2x2 window sum over H, W (NCHW)
        return v[:, :, :-1, :-1] + v[:, :, 1:, :-1] + v[:, :, :-1, 1:] + v[:, :, 1:, 1:]

    got = tf.nn.with_space_to_batch(x, [2, 2], "VALID", pool_sum, data_format="NCHW")
    with nd.Session() as s:
        g = s.run(got)
    want = x[:, :, :-2, :-2] + x[:, :, 2:, :-2] + x[:, :, :-2, 2:] + x[:, :, 2:, 2:]
    np.testing.assert_allclose(g, want, rtol=1e-6)
    with pytest.raises(ValueError, match="filter_shape"):
        tf.nn.with_space_to_batch(x, [2, 2], "SAME", pool_sum, data_format="NCHW")


def test_ctc_unique_labels_as_tf():
    u, i = tf.nn.ctc_unique_labels(nd.constant([[3, 4, 4, 3, 0], [1, 1, 2, 0, 0]],
                                               nd.int64))
    with nd.Session() as s:
        uv, iv = s.run([u, i])
    # TF 2.21's result for the same labels.
    assert uv.tolist() == [[3, 4, 0, 0, 0], [1, 2, 0, 0, 0]]
    assert iv.tolist() == [[0, 1, 1, 0, 2], [0, 0, 1, 2, 2]]
    assert uv.dtype == np.int64 and iv.dtype == np.int32


def test_saved_model_asset_and_save_options():
    asset = tf.saved_model.Asset("/data/vocab.txt")
    assert asset.asset_path.op.name == "asset_path"
    with nd.Session() as s:
        assert s.run(asset.asset_path) == b"/data/vocab.txt"
    options = tf.saved_model.SaveOptions(namespace_whitelist=["Custom"],
                                         save_debug_info=True)
    assert options.namespace_whitelist == ["Custom"] and options.save_debug_info
