"""TF's unsigned and complex dtypes: ``uint16``, ``uint32``, ``uint64``,
``complex64``, ``complex128`` with TF's enum numbers and properties; constants,
feeds, fetches and casts of them (also over gRPC); ``nd.complex``, ``real``,
``imag``, ``conj``, ``angle``, ``abs`` of complex tensors, arithmetic on complex
tensors, and the gradients of the ops linear in their inputs."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist.framework import tensor_util


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()


def run(fetches, feed_dict=None, target=""):
    with nd.Session(target) as sess:
        return sess.run(fetches, feed_dict)


def test_enum_numbers_and_properties_are_tfs():
    enums = {nd.complex64: 8, nd.uint16: 17, nd.complex128: 18, nd.uint32: 22,
             nd.uint64: 23}
    for dtype, enum in enums.items():
        assert dtype.as_datatype_enum == enum
        assert nd.as_dtype(enum) is dtype
        assert nd.as_dtype(dtype.name) is dtype
        assert nd.as_dtype(dtype.as_numpy_dtype) is dtype
        assert dtype._as_ref.base_dtype is dtype
        assert dtype._as_ref.as_datatype_enum == enum + 100
    assert nd.uint32.is_integer and nd.uint32.is_unsigned and not nd.int32.is_unsigned
    assert nd.uint64.max == 2**64 - 1 and nd.uint16.min == 0
    assert nd.complex64.is_complex and not nd.complex64.is_floating
    assert nd.complex64.real_dtype is nd.float32
    assert nd.complex128.real_dtype is nd.float64
    assert nd.float32.real_dtype is nd.float32
    assert nd.complex128.size == 16
    assert nd.compat.v1.complex64 is nd.complex64


def test_python_complex_values_are_complex128_as_in_tf():
    assert nd.constant(1 + 2j).dtype is nd.complex128
    assert nd.constant([1j, 2]).dtype is nd.complex128
    assert nd.constant(np.complex64(1j)).dtype is nd.complex64
    assert nd.constant(np.uint32(5)).dtype is nd.uint32


def test_constants_feeds_and_fetches_keep_value_and_dtype():
    u64 = np.array([0, 2**64 - 1], np.uint64)
    c64 = np.array([1 + 2j, -3.5j], np.complex64)
    p = nd.placeholder(nd.complex128, [2])
    fetched = run([nd.constant(u64), nd.constant(c64),
                   nd.constant([1, 2, 3], dtype=nd.uint16),
                   nd.constant(7, dtype=nd.uint32, shape=[2]),
                   nd.identity(p)], {p: [1j, 2 - 1j]})
    np.testing.assert_array_equal(fetched[0], u64)
    assert fetched[0].dtype == np.uint64
    np.testing.assert_array_equal(fetched[1], c64)
    assert fetched[1].dtype == np.complex64
    np.testing.assert_array_equal(fetched[2], np.array([1, 2, 3], np.uint16))
    np.testing.assert_array_equal(fetched[3], np.array([7, 7], np.uint32))
    np.testing.assert_array_equal(fetched[4], [1j, 2 - 1j])
    assert fetched[4].dtype == np.complex128


@pytest.mark.parametrize("value,dtype", [
    (np.array([1 + 2j, 3j], np.complex64), nd.complex64),
    (np.array([[1 - 1j]], np.complex128), nd.complex128),
    (np.array([2**31, 5], np.uint32), nd.uint32),
    (np.array([2**63 + 1], np.uint64), nd.uint64),
    (np.array([65535], np.uint16), nd.uint16),
])
def test_tensor_protos_round_trip(value, dtype):
    proto = tensor_util.make_tensor_proto(value)
    assert proto.dtype == dtype.as_datatype_enum
    np.testing.assert_array_equal(tensor_util.make_ndarray(proto), value)
    # A single value fills a shape through the typed *_val fields.
    filled = tensor_util.make_tensor_proto(value.ravel()[:1], dtype=dtype,
                                           shape=[3])
    np.testing.assert_array_equal(tensor_util.make_ndarray(filled),
                                  np.repeat(value.ravel()[:1], 3))


def test_complex_and_unsigned_values_travel_over_grpc():
    server = nd.Server.create_local_server()
    try:
        z = nd.complex(nd.constant([1.0, 2.0], nd.float64), nd.constant([3.0, -4.0],
                                                                         nd.float64))
        u = nd.constant(np.array([2**64 - 2], np.uint64))
        zv, uv = run([z, u], target=server.target)
    finally:
        server.stop()
    np.testing.assert_array_equal(zv, np.array([1 + 3j, 2 - 4j]))
    assert zv.dtype == np.complex128
    assert uv.dtype == np.uint64 and int(uv[0]) == 2**64 - 2


def test_complex_parts_conjugate_angle_and_abs():
    re = np.array([3.0, 0.0, -1.0], np.float32)
    im = np.array([4.0, -2.0, 0.0], np.float32)
    z = nd.complex(re, im)
    assert z.dtype is nd.complex64
    for t in (nd.real(z), nd.imag(z), nd.abs(z), nd.angle(z)):
        assert t.dtype is nd.float32
    assert nd.conj(z).dtype is nd.complex64
    expect = re + 1j * im
    zv, rv, iv, cv, av, gv = run([z, nd.real(z), nd.imag(z), nd.conj(z), nd.abs(z),
                                  nd.angle(z)])
    np.testing.assert_array_equal(zv, expect)
    np.testing.assert_array_equal(rv, re)
    np.testing.assert_array_equal(iv, im)
    np.testing.assert_array_equal(cv, np.conj(expect))
    np.testing.assert_allclose(av, np.abs(expect), rtol=1e-6)
    np.testing.assert_allclose(gv, np.angle(expect), rtol=1e-6)
    assert nd.complex(np.float64(1.0), np.float64(2.0)).dtype is nd.complex128


def test_real_inputs_and_bad_parts():
    x = nd.constant([1.0, -2.0])
    assert nd.real(x) is x and nd.conj(x) is x
    np.testing.assert_array_equal(run(nd.imag(x)), [0.0, 0.0])
    np.testing.assert_array_equal(run(nd.abs(x)), [1.0, 2.0])
    np.testing.assert_allclose(run(nd.angle(x)), [0.0, np.pi])
    with pytest.raises(TypeError, match="real.*imag"):
        nd.complex(nd.constant(1.0), nd.constant(1.0, nd.float64))
    with pytest.raises(TypeError, match="real.*imag"):
        nd.complex(nd.constant(1), nd.constant(1))


def test_casts_to_and_from_complex_and_unsigned():
    z = nd.constant([1.5 + 2j, -3 - 1j], nd.complex64)
    ints = nd.constant([1, 2], nd.int32)
    out = run([nd.cast(z, nd.float32), nd.cast(ints, nd.complex64),
               nd.cast(nd.constant([3.0, 7.9]), nd.uint16),
               nd.cast(nd.constant([5], nd.uint64), nd.float64),
               nd.cast(z, nd.complex128)])
    np.testing.assert_array_equal(out[0], [1.5, -3.0])  # TF keeps the real part
    np.testing.assert_array_equal(out[1], [1 + 0j, 2 + 0j])
    assert out[1].dtype == np.complex64
    np.testing.assert_array_equal(out[2], np.array([3, 7], np.uint16))
    np.testing.assert_array_equal(out[3], [5.0])
    assert out[4].dtype == np.complex128


def test_complex_arithmetic():
    a_v = np.array([1 + 2j, 3 - 1j], np.complex64)
    b_v = np.array([2j, 1 + 1j], np.complex64)
    a, b = nd.constant(a_v), nd.constant(b_v)
    got = run([a + b, a - b, a * b, a / b, -a, nd.square(a), nd.add_n([a, b, a])])
    for g, e in zip(got, [a_v + b_v, a_v - b_v, a_v * b_v, a_v / b_v, -a_v,
                          a_v * a_v, 2 * a_v + b_v]):
        np.testing.assert_allclose(g, e, rtol=1e-6)
        assert g.dtype == np.complex64


def test_complex_reductions():
    v = np.array([[1 + 2j, 3 - 1j], [2j, 1]], np.complex64)
    a = nd.constant(v)
    total, mean0, prod1 = run([nd.reduce_sum(a), nd.reduce_mean(a, axis=0),
                               nd.reduce_prod(a, axis=1)])
    np.testing.assert_allclose(total, v.sum(), rtol=1e-6)
    np.testing.assert_allclose(mean0, v.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(prod1, v.prod(axis=1), rtol=1e-6)
    with pytest.raises(TypeError, match="complex64"):
        nd.reduce_max(a)  # complex values have no order


def test_gradients_through_complex_parts():
    x = nd.constant([1.0, 2.0])
    y = nd.constant(3.0)
    z = nd.complex(x, y)  # y broadcasts
    w = nd.constant([1.0, 5.0])
    loss = nd.reduce_sum(nd.real(z) * 2.0 + nd.imag(nd.conj(z)) * w)
    gx, gy = nd.gradients(loss, [x, y])
    gxv, gyv = run([gx, gy])
    # d/dx = 2 per element; d/dy = sum(-w) since imag(conj(z)) = -y
    np.testing.assert_allclose(gxv, [2.0, 2.0])
    np.testing.assert_allclose(gyv, -6.0)
    # through a complex sum: real(sum(3 z)) = 3 sum(x)
    s = nd.real(nd.reduce_sum(z * nd.constant(3 + 0j, nd.complex64)))
    gx2, gy2 = run(nd.gradients(s, [x, y]))
    np.testing.assert_allclose(gx2, [3.0, 3.0])
    np.testing.assert_allclose(gy2, 0.0)
