"""Feeding composite tensors, as TF's session_test does: an ``IndexedSlices``
fed an ``IndexedSlicesValue`` or a tuple ``(values, indices, dense_shape)``,
a ``SparseTensor`` (or ``sparse_placeholder``) fed a ``SparseTensorValue`` or a
tuple ``(indices, values, dense_shape)``; each fetched back as its value.
Oracle: the fed arrays (TF 2.21 returns them unchanged)."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist.ops.indexed_slices import IndexedSlicesValue

tf = nd.compat.v1

VALUES = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
INDICES = np.array([0, 3], np.int32)
DENSE = np.array([5, 2], np.int32)


@pytest.mark.parametrize("as_value", [False, True])
def test_feed_indexed_slices(as_value):
    with nd.Graph().as_default():
        ind = nd.IndexedSlices(tf.placeholder(nd.float32, shape=(2, 2)),
                               tf.placeholder(nd.int32, shape=(2,)),
                               tf.placeholder(nd.int32, shape=(2,)))
        feed = (VALUES, INDICES, DENSE)
        if as_value:
            feed = IndexedSlicesValue(*feed)
        doubled = ind.values * 2.0
        with tf.Session() as sess:
            out, d = sess.run([ind, doubled], {ind: feed})
    assert isinstance(out, IndexedSlicesValue)
    np.testing.assert_array_equal(out.values, VALUES)
    np.testing.assert_array_equal(out.indices, INDICES)
    np.testing.assert_array_equal(out.dense_shape, DENSE)
    np.testing.assert_array_equal(d, VALUES * 2)


def test_feed_indexed_slices_without_dense_shape_and_bad_value():
    with nd.Graph().as_default():
        ind = nd.IndexedSlices(tf.placeholder(nd.float32), tf.placeholder(nd.int32))
        with tf.Session() as sess:
            out = sess.run(ind, {ind: (VALUES, INDICES)})
            np.testing.assert_array_equal(out.indices, INDICES)
            assert out.dense_shape is None
            with pytest.raises(TypeError, match="IndexedSlices feed"):
                sess.run(ind, {ind: VALUES})


@pytest.mark.parametrize("as_value", [False, True])
def test_feed_sparse_tensor_and_sparse_placeholder(as_value):
    idx = np.array([[3, 2, 0], [4, 5, 1]], np.int64)
    val = np.array([1.0, 2.0], np.float32)
    shape = np.array([7, 9, 2], np.int64)
    feed = nd.SparseTensorValue(idx, val, shape) if as_value else (idx, val, shape)
    with nd.Graph().as_default():
        sp = tf.sparse_placeholder(nd.float32, shape=shape)
        st = nd.SparseTensor(tf.placeholder(nd.int64), tf.placeholder(nd.float32),
                             tf.placeholder(nd.int64))
        with tf.Session() as sess:
            for t in (sp, st):
                out = sess.run(t, {t: feed})
                np.testing.assert_array_equal(out.indices, idx)
                np.testing.assert_array_equal(out.values, val)
                np.testing.assert_array_equal(out.dense_shape, shape)
