"""Tests for nbdist.framework.tensor_util (NumPy <-> TensorProto)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nbdist.framework import tensor_util as tu
from nbdist.proto import tensor_pb2, tensor_shape_pb2, types_pb2

NUMERIC = {
    np.float16: types_pb2.DT_HALF,
    np.float32: types_pb2.DT_FLOAT,
    np.float64: types_pb2.DT_DOUBLE,
    np.int8: types_pb2.DT_INT8,
    np.int16: types_pb2.DT_INT16,
    np.int32: types_pb2.DT_INT32,
    np.int64: types_pb2.DT_INT64,
    np.uint8: types_pb2.DT_UINT8,
    np.bool_: types_pb2.DT_BOOL,
}
SHAPES = [(), (0,), (1,), (5,), (2, 3), (3, 0, 2), (2, 1, 2, 2)]


def _roundtrip(value, **kwargs):
    proto = tu.make_tensor_proto(value, **kwargs)
    wire = tensor_pb2.TensorProto.FromString(proto.SerializeToString())
    return proto, tu.make_ndarray(wire)


# --- dtype tables -------------------------------------------------------------


@pytest.mark.parametrize("np_type,enum", NUMERIC.items())
def test_dtype_tables(np_type, enum):
    assert tu.dtype_enum_from_numpy(np_type) == enum
    assert tu.dtype_enum_from_numpy(np.dtype(np_type).newbyteorder(">")) == enum
    assert tu.numpy_dtype_from_enum(enum) == np.dtype(np_type)
    assert tu.numpy_dtype_from_enum(enum + 100) == np.dtype(np_type)  # ref type


@pytest.mark.parametrize("np_type", [object, np.str_, np.bytes_, "U5", "S3"])
def test_string_dtypes(np_type):
    assert tu.dtype_enum_from_numpy(np_type) == types_pb2.DT_STRING
    assert tu.numpy_dtype_from_enum(types_pb2.DT_STRING) == np.dtype(object)


@pytest.mark.parametrize("bad", ["datetime64[s]", "timedelta64[s]", np.clongdouble,
                                 "V8"])
def test_dtype_enum_from_numpy_rejects(bad):
    with pytest.raises(ValueError, match="unsupported dtype"):
        tu.dtype_enum_from_numpy(bad)


@pytest.mark.parametrize(
    "enum", [types_pb2.DT_INVALID, types_pb2.DT_RESOURCE, types_pb2.DT_RESOURCE_REF]
)
def test_numpy_dtype_from_enum_rejects(enum):
    with pytest.raises(ValueError, match="DT_"):
        tu.numpy_dtype_from_enum(enum)


# --- numeric round trips ------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("np_type", NUMERIC, ids=lambda t: np.dtype(t).name)
def test_numeric_roundtrip(np_type, shape):
    rng = np.random.default_rng(0)
    value = (rng.standard_normal(shape) * 50).astype(np_type)
    proto, back = _roundtrip(value)
    assert proto.dtype == NUMERIC[np_type]
    assert tu.shape_from_proto(proto.tensor_shape) == shape
    assert proto.tensor_content == value.astype(value.dtype.newbyteorder("<")).tobytes()
    assert back.dtype == value.dtype
    assert back.shape == shape
    np.testing.assert_array_equal(back, value)


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        dtype=st.sampled_from([np.dtype(t) for t in NUMERIC]),
        shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
    )
)
def test_numeric_roundtrip_hypothesis(value):
    _, back = _roundtrip(value)
    assert back.dtype == value.dtype and back.shape == value.shape
    np.testing.assert_array_equal(back, value)  # NaNs compare equal here


def test_big_endian_and_non_contiguous_inputs():
    value = np.arange(12, dtype=">f8").reshape(3, 4).T
    _, back = _roundtrip(value)
    np.testing.assert_array_equal(back, value)
    assert back.dtype == np.float64


def test_decoded_content_is_read_only_view():
    proto = tu.make_tensor_proto(np.arange(4, dtype=np.int32))
    back = tu.make_ndarray(proto)
    assert not back.flags.writeable
    copy = back.copy()
    copy[0] = 9
    assert copy[0] == 9


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, -0.0])
def test_special_floats(value):
    for t in (np.float16, np.float32, np.float64):
        _, back = _roundtrip(np.array([value], dtype=t))
        np.testing.assert_array_equal(back, np.array([value], dtype=t))
        assert np.signbit(back[0]) == np.signbit(value)


# --- Python values follow TF's inference -----------------------------------


@pytest.mark.parametrize(
    "value,enum,np_type",
    [
        (1.5, types_pb2.DT_FLOAT, np.float32),
        (3, types_pb2.DT_INT32, np.int32),
        (2**31 - 1, types_pb2.DT_INT32, np.int32),
        (-(2**31), types_pb2.DT_INT32, np.int32),
        (2**31, types_pb2.DT_INT64, np.int64),
        (-(2**40), types_pb2.DT_INT64, np.int64),
        (True, types_pb2.DT_BOOL, np.bool_),
        ([1.0, 2.0], types_pb2.DT_FLOAT, np.float32),
        ([[1, 2], [3, 2**33]], types_pb2.DT_INT64, np.int64),
        ([1, 2.5], types_pb2.DT_FLOAT, np.float32),
        ([True, False], types_pb2.DT_BOOL, np.bool_),
        (np.float64(2.5), types_pb2.DT_DOUBLE, np.float64),  # NumPy keeps dtype
        (np.int64(3), types_pb2.DT_INT64, np.int64),
    ],
)
def test_python_inference(value, enum, np_type):
    proto, back = _roundtrip(value)
    assert proto.dtype == enum
    assert back.dtype == np.dtype(np_type)
    np.testing.assert_array_equal(back, np.asarray(value, dtype=np_type))


def test_python_scalar_is_rank0():
    proto, back = _roundtrip(7)
    assert tu.shape_from_proto(proto.tensor_shape) == ()
    assert back.shape == () and back[()] == 7


def test_empty_list():
    proto, back = _roundtrip([])
    assert proto.dtype == types_pb2.DT_FLOAT
    assert back.shape == (0,)
    _, back = _roundtrip([], dtype=types_pb2.DT_STRING)
    assert back.shape == (0,) and back.dtype == object


# --- explicit dtype and shape ---------------------------------------------


def test_explicit_dtype_forms():
    class FakeDType:
        as_datatype_enum = types_pb2.DT_INT16

    for dtype in (np.int16, "int16", types_pb2.DT_INT16, FakeDType(), 105):
        proto, back = _roundtrip([1, 2], dtype=dtype)
        assert proto.dtype == types_pb2.DT_INT16
        assert back.dtype == np.int16


def test_explicit_dtype_casts_arrays_like_tf():
    _, back = _roundtrip(np.array([1.7, -2.2]), dtype=np.int32)
    np.testing.assert_array_equal(back, [1, -2])


@pytest.mark.parametrize(
    "value,dtype",
    [
        (1.5, np.int32),
        ([1, 2.5], types_pb2.DT_INT64),
        (300, np.int8),
        (-1, np.uint8),
        (1, np.bool_),
        ("a", np.float32),
        (1, types_pb2.DT_STRING),
        (np.array(["1"]), np.int32),
        (np.array([1]), types_pb2.DT_STRING),
    ],
)
def test_explicit_dtype_rejects_incompatible(value, dtype):
    with pytest.raises(TypeError):
        tu.make_tensor_proto(value, dtype=dtype)


def test_shape_reshapes():
    _, back = _roundtrip([1, 2, 3, 4, 5, 6], shape=(2, 3))
    np.testing.assert_array_equal(back, [[1, 2, 3], [4, 5, 6]])


@pytest.mark.parametrize("np_type", [*NUMERIC, object], ids=str)
def test_single_value_fills_shape(np_type):
    value = "s" if np_type is object else np.array(1, dtype=np_type)
    proto, back = _roundtrip(value, shape=[3, 2])
    assert not proto.tensor_content  # stored once in a typed *_val field
    assert back.shape == (3, 2)
    expected = b"s" if np_type is object else np.array(1, dtype=np_type)
    assert all(v == expected for v in back.flat)
    assert back.dtype == (np.dtype(object) if np_type is object else np_type)


def test_fill_accepts_tensor_shape_like():
    class FakeShape:
        def as_list(self):
            return [2, 2]

    _, back = _roundtrip(0.5, shape=FakeShape())
    np.testing.assert_array_equal(back, np.full((2, 2), 0.5, np.float32))


@pytest.mark.parametrize("shape", [(4,), (2, None), (-1,)])
def test_bad_shape(shape):
    with pytest.raises(ValueError):
        tu.make_tensor_proto([1, 2, 3], shape=shape)


def test_shape_with_zero_elements():
    _, back = _roundtrip([], dtype=np.float32, shape=(0, 3))
    assert back.shape == (0, 3)


# --- typed *_val decoding ---------------------------------------------------


def _proto(dtype, shape, **vals):
    p = tensor_pb2.TensorProto(dtype=dtype, tensor_shape=tu.shape_to_proto(shape))
    for field, values in vals.items():
        getattr(p, field).extend(values)
    return p


@pytest.mark.parametrize(
    "dtype,field,values,np_type",
    [
        (types_pb2.DT_FLOAT, "float_val", [1.5, 2.5], np.float32),
        (types_pb2.DT_DOUBLE, "double_val", [1.5, 2.5], np.float64),
        (types_pb2.DT_INT32, "int_val", [1, -2], np.int32),
        (types_pb2.DT_INT16, "int_val", [1, -2], np.int16),
        (types_pb2.DT_INT8, "int_val", [1, -2], np.int8),
        (types_pb2.DT_UINT8, "int_val", [1, 255], np.uint8),
        (types_pb2.DT_INT64, "int64_val", [2**40, -3], np.int64),
        (types_pb2.DT_BOOL, "bool_val", [True, False], np.bool_),
        (types_pb2.DT_STRING, "string_val", [b"a", b"bc"], object),
    ],
)
def test_typed_values(dtype, field, values, np_type):
    back = tu.make_ndarray(_proto(dtype, (2,), **{field: values}))
    assert back.dtype == np.dtype(np_type)
    assert back.tolist() == values
    # A single value fills the whole shape.
    back = tu.make_ndarray(_proto(dtype, (2, 3), **{field: values[:1]}))
    assert back.shape == (2, 3)
    assert all(v == values[0] for v in back.flat)
    # Fewer values: padded with the last one (as TF).
    back = tu.make_ndarray(_proto(dtype, (4,), **{field: values}))
    assert back.tolist() == values + [values[-1]] * 2
    # No values: zeros (empty strings).
    back = tu.make_ndarray(_proto(dtype, (2,)))
    assert back.tolist() == ([b"", b""] if np_type is object else [0, 0])


def test_half_val():
    bits = np.array([1.5, -2.0], dtype=np.float16).view(np.uint16).tolist()
    back = tu.make_ndarray(_proto(types_pb2.DT_HALF, (2,), half_val=bits))
    assert back.dtype == np.float16
    np.testing.assert_array_equal(back, [1.5, -2.0])


def test_ref_dtype_proto_decodes():
    back = tu.make_ndarray(_proto(types_pb2.DT_FLOAT_REF, (), float_val=[2.0]))
    assert back.dtype == np.float32 and back == 2.0


# --- strings -------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,expected",
    [
        (
            "héllo wörld ☃ 日本",
            b"h\xc3\xa9llo w\xc3\xb6rld \xe2\x98\x83 \xe6\x97\xa5\xe6\x9c\xac",
        ),
        (b"raw\x00\xff", b"raw\x00\xff"),
        ("", b""),
    ],
)
def test_string_scalar(value, expected):
    proto, back = _roundtrip(value)
    assert proto.dtype == types_pb2.DT_STRING
    assert list(proto.string_val) == [expected]
    assert back.shape == () and back.dtype == object
    assert back[()] == expected


@pytest.mark.parametrize(
    "value",
    [
        [["a", "é"], ["ü", "日"]],
        np.array(["ab", "ç"]),
        np.array([b"x\x00", b"y"], dtype=object),
        np.array([b"a", b"bc"]),
        [b"a\x00", "b"],
    ],
)
def test_string_arrays(value):
    _, back = _roundtrip(value)
    expected = [
        v.encode() if isinstance(v, str) else bytes(v)
        for v in np.asarray(value, dtype=object).flat
    ]
    assert back.dtype == object
    assert back.shape == np.shape(value)
    assert list(back.flat) == expected
    assert all(type(v) is bytes for v in back.flat)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(), min_size=0, max_size=6))
def test_string_roundtrip_hypothesis(texts):
    _, back = _roundtrip(texts, dtype=types_pb2.DT_STRING)
    assert [v.decode("utf-8") for v in back.flat] == texts


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(), min_size=1, max_size=6))
def test_bytes_roundtrip_hypothesis(blobs):
    _, back = _roundtrip(blobs)
    assert list(back.flat) == blobs


# --- errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,match",
    [
        (np.array(["2020-01-01"], dtype="datetime64[D]"), "datetime64"),
        (np.array([1], dtype="timedelta64[s]"), "timedelta64"),
        ([1, None], "NoneType"),
        (np.array([1, "a"], dtype=object), "int"),
        (object(), "object"),
        ([[1], [1, 2]], "rectangular"),
        ([2**70], "int"),
    ],
)
def test_unsupported_values(value, match):
    with pytest.raises(ValueError, match=match):
        tu.make_tensor_proto(value)


def test_unsupported_dtype_argument():
    with pytest.raises(ValueError, match="datetime64"):
        tu.make_tensor_proto([1], dtype="datetime64[s]")
    with pytest.raises(ValueError, match="DT_RESOURCE"):
        tu.make_tensor_proto([1], dtype=types_pb2.DT_RESOURCE)


def test_make_ndarray_rejects_malformed():
    ok = tu.make_tensor_proto(np.arange(4, dtype=np.int32))
    short = tensor_pb2.TensorProto()
    short.CopyFrom(ok)
    short.tensor_content = short.tensor_content[:-1]
    with pytest.raises(ValueError, match="needs 16"):
        tu.make_ndarray(short)
    with pytest.raises(ValueError, match="fully defined"):
        tu.make_ndarray(_proto(types_pb2.DT_FLOAT, (None, 2), float_val=[1.0]))
    unknown = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
    unknown.tensor_shape.unknown_rank = True
    with pytest.raises(ValueError, match="fully defined"):
        tu.make_ndarray(unknown)
    with pytest.raises(ValueError, match="3 values"):
        tu.make_ndarray(_proto(types_pb2.DT_FLOAT, (2,), float_val=[1, 2, 3]))
    with pytest.raises(ValueError, match="out of range"):
        tu.make_ndarray(_proto(types_pb2.DT_INT8, (1,), int_val=[300]))
    with pytest.raises(ValueError, match="0 and 1"):
        tu.make_ndarray(
            tensor_pb2.TensorProto(
                dtype=types_pb2.DT_BOOL,
                tensor_shape=tu.shape_to_proto([2]),
                tensor_content=b"\x01\x02",
            )
        )
    with pytest.raises(ValueError, match="DT_RESOURCE"):
        tu.make_ndarray(tensor_pb2.TensorProto(dtype=types_pb2.DT_RESOURCE))
    with pytest.raises(ValueError, match="DT_INVALID"):
        tu.make_ndarray(tensor_pb2.TensorProto())


def test_huge_single_value_fill_does_not_allocate():
    back = tu.make_ndarray(_proto(types_pb2.DT_FLOAT, (10**6, 10**6), float_val=[1]))
    assert back.shape == (10**6, 10**6)
    assert back.strides == (0, 0)


# --- shapes -------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [None, (), (3,), (2, None), (None,), (0, 4, 1), (None, None, 7)]
)
def test_shape_roundtrip(shape):
    proto = tu.shape_to_proto(shape)
    assert isinstance(proto, tensor_shape_pb2.TensorShapeProto)
    assert proto.unknown_rank == (shape is None)
    wire = tensor_shape_pb2.TensorShapeProto.FromString(proto.SerializeToString())
    assert tu.shape_from_proto(wire) == shape


def test_shape_to_proto_forms():
    assert [d.size for d in tu.shape_to_proto([2, None, -1]).dim] == [2, -1, -1]
    assert [d.size for d in tu.shape_to_proto(5).dim] == [5]
    assert [d.size for d in tu.shape_to_proto(np.array([2, 3])).dim] == [2, 3]

    class FakeShape:
        def __init__(self, dims):
            self.dims = dims

    assert tu.shape_to_proto(FakeShape(None)).unknown_rank
    assert [d.size for d in tu.shape_to_proto(FakeShape([1, None])).dim] == [1, -1]
    with pytest.raises(ValueError):
        tu.shape_to_proto([3, -2])
    bad = tensor_shape_pb2.TensorShapeProto()
    bad.dim.add(size=-5)
    with pytest.raises(ValueError):
        tu.shape_from_proto(bad)
