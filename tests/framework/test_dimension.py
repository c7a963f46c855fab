"""TF1's ``Dimension``: what ``x.get_shape()[i]`` is in a TF1 program.

Behaviours (as TF's ``tensor_shape_test.py`` and TF 2.21 with
``disable_v2_tensorshape()`` show them; checked in /work/tfvenv):
* ``.value`` is an int or None; ``str`` is the number or ``?``; ``int()`` and
  ``__index__`` give the int (``range``, NumPy shapes, list indexing).
* ``+ - * // %`` with ints, Dimensions and None: an unknown operand gives an
  unknown Dimension; ``/`` is a TypeError that says to use ``//``.
* Comparisons with ints and Dimensions are bools; with an unknown one, None.
* ``merge_with``, ``is_compatible_with``, ``assert_is_compatible_with``,
  ``as_dimension``; negative, float and string values are rejected.
* ``hash(Dimension(3)) == hash(3)`` (TF's Dimension is unhashable; nbdist lets
  a Dimension find its int in a dict or set).
* ``TensorShape``: ``shape[i]``, ``iter(shape)`` and ``.dims`` give Dimensions,
  ``as_list()`` ints and None; ``enable_v2_tensorshape()`` makes indexing and
  iteration give ints; ``dimension_value``/``dimension_at_index`` work in both.
* A program's Dimensions go wherever ints went: reshape/zeros/range/slicing/
  split/random shapes/get_variable, and TF's CIFAR-10 idiom
  ``reshape.get_shape()[1].value``.
"""

from __future__ import annotations

import operator
import pickle

import numpy as np
import pytest

import nbdist as nd

tf = nd.compat.v1
D = tf.Dimension


@pytest.fixture(autouse=True)
def tf1_shapes():
    nd.reset_default_graph()
    yield
    tf.disable_v2_tensorshape()


def test_value_str_int_index():
    assert D(12).value == 12 and D(None).value is None
    assert (str(D(12)), str(D(None)), repr(D(None))) == ("12", "?", "Dimension(None)")
    assert int(D(3)) == 3 and float(D(3)) == 3.0
    assert list(range(D(3))) == [0, 1, 2] and ["a", "b"][D(1)] == "b"
    assert np.zeros((D(2), D(3))).shape == (2, 3)
    assert D(D(4)).value == 4 and D(True).value == 1
    with pytest.raises(TypeError):
        int(D(None))
    with pytest.raises(ValueError, match="must be >= 0"):
        D(-1)
    for bad in (2.5, "a"):
        with pytest.raises(TypeError, match="must be integer or None"):
            D(bad)


@pytest.mark.parametrize("op,a,b,want", [
    (operator.add, 3, 4, 7), (operator.sub, 7, 3, 4), (operator.mul, 3, 4, 12),
    (operator.floordiv, 7, 2, 3), (operator.mod, 7, 3, 1)])
def test_arithmetic_known_and_unknown(op, a, b, want):
    for x, y in ((D(a), b), (a, D(b)), (D(a), D(b))):
        got = op(x, y)
        assert isinstance(got, D) and got.value == want
    for x, y in ((D(a), None), (D(None), b), (a, D(None)), (D(a), D(None))):
        assert op(x, y).value is None


def test_true_division_and_unsupported_operands():
    with pytest.raises(TypeError, match="please use // instead"):
        D(6) / 2
    with pytest.raises(TypeError):
        D(6) + "x"


def test_comparisons_known_and_unknown():
    assert D(3) == 3 and D(3) == D(3) and D(3) != 4 and not (D(3) != 3)
    assert D(3) < 4 and D(3) <= D(3) and D(4) > 3 and D(4) >= D(4)
    for result in (D(None) == 3, D(3) == None, D(3) != D(None),  # noqa: E711
                   D(None) < 4, D(3) >= D(None)):
        assert result is None
    assert max(D(3), D(4)).value == 4
    assert not D(0) and D(1) and not D(None)


def test_hash_is_the_ints():
    assert hash(D(3)) == hash(3) and {3: "three"}[D(3)] == "three"
    assert D(3) in {3} and 3 in {D(3)}


def test_merge_and_compatibility():
    assert D(3).merge_with(None).value == 3 and D(None).merge_with(4).value == 4
    assert D(3).merge_with(D(3)).value == 3 and D(None).merge_with(None).value is None
    assert D(3).is_compatible_with(None) and D(None).is_compatible_with(D(5))
    assert D(3).is_compatible_with(3) and not D(3).is_compatible_with(4)
    D(3).assert_is_compatible_with(D(None))
    for call in (lambda: D(3).merge_with(4), lambda: D(3).assert_is_compatible_with(4)):
        with pytest.raises(ValueError, match="Dimensions 3 and 4 are not compatible"):
            call()
    d = D(5)
    from nbdist.python.framework.tensor_shape import as_dimension
    assert as_dimension(d) is d and as_dimension(7).value == 7


def test_tensor_shape_gives_dimensions_and_as_list_ints():
    s = tf.TensorShape([None, 784])
    assert repr(s[0]) == "Dimension(None)" and s[1].value == 784
    assert [repr(d) for d in s] == ["Dimension(None)", "Dimension(784)"]
    assert [d.value for d in s.dims] == [None, 784] and s.as_list() == [None, 784]
    assert s[1:].as_list() == [784] and tf.TensorShape(None)[3].value is None
    assert tf.TensorShape([D(2), None]) == tf.TensorShape([2, None])
    assert pickle.loads(pickle.dumps(s)) == s
    assert pickle.loads(pickle.dumps(D(4))) == 4
    assert tf.dimension_value(s[1]) == 784 and tf.dimension_value(None) is None
    assert tf.dimension_value(5) == 5
    assert tf.dimension_at_index(s, 1).value == 784
    assert tf.dimension_at_index(tf.TensorShape(None), 5).value is None
    assert nd.compat.dimension_value(s[0]) is None


def test_v2_tensorshape_switch():
    s = tf.TensorShape([2, None])
    tf.enable_v2_tensorshape()
    assert s[0] == 2 and type(s[0]) is int and s[1] is None and list(s) == [2, None]
    assert tf.dimension_value(s[0]) == 2
    tf.disable_v2_tensorshape()
    assert isinstance(s[0], D) and isinstance(list(s)[1], D)


def test_cifar10_idiom_reshape_get_shape_value():
    batch = 3
    images = tf.placeholder(tf.float32, [batch, 4, 4, 2])
    reshape = tf.reshape(images, [batch, -1])
    dim = reshape.get_shape()[1].value
    assert dim == 32
    weights = tf.get_variable("weights", [dim, 5],
                              initializer=tf.constant_initializer(0.5))
    local3 = tf.matmul(reshape, weights)
    x = np.arange(batch * 32, dtype=np.float32).reshape(batch, 4, 4, 2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(local3, {images: x})
    np.testing.assert_allclose(got, x.reshape(batch, 32) @ np.full((32, 5), 0.5))


def test_dimensions_go_where_ints_went():
    x = tf.placeholder(tf.float32, [None, 6])
    d, half = x.get_shape()[1], x.get_shape()[1] // 2
    flat = tf.reshape(x, [-1, half, 2])
    assert flat.shape.as_list() == [None, 3, 2]
    assert tf.zeros([d, 2]).shape.as_list() == [6, 2]
    assert tf.slice(x, [0, 0], [-1, half]).shape.as_list() == [None, 3]
    assert x[:, :half].shape.as_list() == [None, 3]
    assert [t.shape.as_list() for t in tf.split(x, half, axis=1)] == [[None, 2]] * 3
    assert tf.random_uniform([d]).shape.as_list() == [6]
    assert tf.get_variable("v", [d, 2]).shape.as_list() == [6, 2]
    assert tf.placeholder(tf.float32, [None, d]).shape.as_list() == [None, 6]
    rng = tf.range(d)
    feed = np.arange(12, dtype=np.float32).reshape(2, 6)
    with tf.Session() as sess:
        got_rng, got_half = sess.run([rng, x[:, :half]], {x: feed})
    np.testing.assert_array_equal(got_rng, np.arange(6))
    np.testing.assert_array_equal(got_half, feed[:, :3])
    with pytest.raises(ValueError, match="Cannot convert an unknown Dimension"):
        tf.constant(x.get_shape()[0])


def test_a_single_dimension_is_a_shape_of_rank_one():
    # A custom RNN cell whose state_size is ``inputs.shape[-1]`` (a Dimension):
    # its zero state is TensorShape(state_size), as TF takes a single dimension.
    assert nd.TensorShape(nd.Dimension(3)).as_list() == [3]
    assert nd.TensorShape(nd.Dimension(None)).as_list() == [None]
    assert nd.TensorShape(np.int64(2)).as_list() == [2]
    x = nd.placeholder(nd.float32, [2, 5, 4])

    class Cell(nd.nn.rnn_cell.RNNCell):
        state_size = output_size = x.shape[-1]

        def call(self, inputs, state):
            return inputs + state, inputs + state

    _out, state = nd.nn.dynamic_rnn(Cell(), x, dtype=nd.float32)
    value = np.arange(40, dtype=np.float32).reshape(2, 5, 4)
    with nd.Session() as s:
        np.testing.assert_allclose(s.run(state, {x: value}), value.sum(axis=1))
