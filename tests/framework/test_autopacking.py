"""TF's autopacking and the conversion of Python iterables.

* A nested list or tuple mixing tensors, variables and numbers converts to a
  tensor wherever one is expected (``reduce_sum``, ``convert_to_tensor``, ops'
  operands) through ``Pack`` ops; the dtype is the tensors', numbers become
  constants of it, a tensor of another dtype is a TypeError, and a ``dtype``
  asked for casts the tensors. Shapes that do not stack are a ValueError.
* Gradients flow through packed inputs.
* ``constant``/``convert_to_tensor`` of ranges, nested tuples and arrays; a
  one-shot iterator (generator, ``map``) is a TypeError, as in TF.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()


def run(x, feed_dict=None):
    with nd.Session() as sess:
        sess.run(nd.global_variables_initializer())
        return sess.run(x, feed_dict)


def test_reduce_sum_of_a_nested_list_of_tensors_and_numbers():
    a, b = nd.constant(1.0), nd.constant(2.0)
    total = nd.reduce_sum([[a, b], [3, 4]], axis=0)
    np.testing.assert_allclose(run(total), [4.0, 6.0])
    assert total.dtype == nd.float32
    types = {op.type for op in nd.get_default_graph().get_operations()}
    assert "Pack" in types


def test_tuples_variables_and_placeholders_pack_too():
    v = nd.Variable(3.0, name="v")
    p = nd.placeholder(nd.float32, [], name="p")
    t = nd.convert_to_tensor(((v, p), (p, 1.5)))
    assert t.shape.as_list() == [2, 2] and t.dtype == nd.float32
    np.testing.assert_allclose(run(t, {p: 5.0}), [[3.0, 5.0], [5.0, 1.5]])


def test_packing_tensors_that_are_not_scalars():
    x = nd.constant([1, 2, 3])
    packed = nd.convert_to_tensor([x, [4, 5, 6], x * 2])
    assert packed.dtype == nd.int32 and packed.shape.as_list() == [3, 3]
    np.testing.assert_array_equal(run(packed), [[1, 2, 3], [4, 5, 6], [2, 4, 6]])


def test_the_dtype_comes_from_the_tensors_and_numbers_follow_it():
    i = nd.constant(7, dtype=nd.int64)
    packed = nd.convert_to_tensor([i, 1, 2])
    assert packed.dtype == nd.int64
    assert run(packed).dtype == np.int64
    h = nd.constant(0.5, dtype=nd.float64)
    assert nd.convert_to_tensor([[1, h], [2, 3]]).dtype == nd.float64


def test_a_requested_dtype_casts_the_tensors():
    a = nd.constant(1.5)
    packed = nd.convert_to_tensor([a, 2], dtype=nd.float64)
    assert packed.dtype == nd.float64
    np.testing.assert_allclose(run(packed), [1.5, 2.0])


def test_mismatched_dtypes_are_a_type_error():
    a = nd.constant(1.0)
    with pytest.raises(TypeError, match="int32"):
        nd.convert_to_tensor([a, nd.constant(1)])
    with pytest.raises(TypeError, match="int32"):
        nd.convert_to_tensor([nd.constant(1), 1.5])  # 1.5 is no int32
    with pytest.raises(TypeError):
        nd.convert_to_tensor([a, "text"])


def test_shapes_that_do_not_stack_are_a_value_error():
    a = nd.constant(1.0)
    with pytest.raises(ValueError):
        nd.convert_to_tensor([[a, a], [a]])
    with pytest.raises(ValueError):
        nd.convert_to_tensor([a, nd.constant([1.0, 2.0])])


def test_names_follow_tf():
    a = nd.constant(1.0)
    assert nd.convert_to_tensor([a, a]).op.name == "packed"
    assert nd.convert_to_tensor([a, 2.0], name="pair").op.name == "pair"
    outer = nd.convert_to_tensor([[a, a], [1.0, 2.0]], name="grid")
    assert outer.op.name == "grid"
    assert [t.op.type for t in outer.op.inputs] == ["Pack", "Const"]


def test_lists_without_tensors_stay_one_constant():
    t = nd.convert_to_tensor([[1, 2], [3, 4]])
    assert t.op.type == "Const" and t.dtype == nd.int32
    # and a Python list still follows the other operand's dtype
    x = nd.constant([1.0, 2.0], dtype=nd.float64)
    assert (x + [1, 2]).dtype == nd.float64


def test_gradients_flow_through_packed_inputs():
    a = nd.Variable(2.0, name="a")
    b = nd.Variable(-1.0, name="b")
    m = nd.convert_to_tensor([[a, b], [a * b, 3.0]])
    loss = nd.reduce_sum(m * m)  # a^2 + b^2 + a^2 b^2 + 9
    ga, gb = nd.gradients(loss, [a, b])
    av, bv = 2.0, -1.0
    np.testing.assert_allclose(run([ga, gb]),
                               [2 * av + 2 * av * bv**2, 2 * bv + 2 * av**2 * bv])


def test_ops_take_packed_operands():
    a = nd.placeholder(nd.float32, [])
    y = nd.matmul([[a, 0.0], [0.0, a]], [[1.0], [2.0]])
    np.testing.assert_allclose(run(y, {a: 3.0}), [[3.0], [6.0]])
    z = nd.add([a, 1.0], [a, a])
    np.testing.assert_allclose(run(z, {a: 2.0}), [4.0, 3.0])


def test_constant_of_ranges_and_nested_tuples():
    np.testing.assert_array_equal(run(nd.constant(range(100), shape=[10, 10])),
                                  np.arange(100).reshape(10, 10))
    t = nd.constant(((1, 2), (3, 4)))
    assert t.dtype == nd.int32
    np.testing.assert_array_equal(run(t), [[1, 2], [3, 4]])
    f = nd.constant((0.5, 1.5), dtype=nd.float64)
    np.testing.assert_array_equal(run(f), [0.5, 1.5])


def test_convert_to_tensor_of_python_iterables():
    r = nd.convert_to_tensor(range(3))
    assert r.dtype == nd.int32
    np.testing.assert_array_equal(run(r), [0, 1, 2])
    np.testing.assert_array_equal(run(nd.convert_to_tensor(range(2, 8, 3))), [2, 5])
    np.testing.assert_array_equal(run(nd.convert_to_tensor(((1.0,), (2.0,)))),
                                  [[1.0], [2.0]])
    np.testing.assert_array_equal(run(nd.reduce_sum(range(5))), 10)


def test_one_shot_iterators_are_a_type_error():
    with pytest.raises(TypeError, match="generator"):
        nd.convert_to_tensor(x for x in range(3))
    with pytest.raises(TypeError, match="map"):
        nd.convert_to_tensor(map(float, [1, 2]))
    with pytest.raises(TypeError):
        nd.constant(x for x in range(3))
