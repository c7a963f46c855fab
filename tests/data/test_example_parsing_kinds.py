"""Every feature kind through ``parse_example`` and ``parse_single_example`` gives
the values the Examples hold, with the dtype and shape TF gives (the kernels
read protobuf lists in one C loop, without per-value Python work), and
``decode_raw`` of one record or many, either byte order."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

FEATURES = {
    "f": ([[1.5, -2.0, 3.25], [0.0, 1e-3, 7.0]], nd.float32),
    "i": ([[2**40, -1, 0], [5, 6, 7]], nd.int64),
    "s": ([[b"a", b"", b"\x00z"], [b"q", b"rr", b"sss"]], nd.string),
}


def example(values: dict) -> bytes:
    f = {}
    for key, vals in values.items():
        if isinstance(vals[0], float):
            f[key] = nd.train.Feature(float_list=nd.train.FloatList(value=vals))
        elif isinstance(vals[0], bytes):
            f[key] = nd.train.Feature(bytes_list=nd.train.BytesList(value=vals))
        else:
            f[key] = nd.train.Feature(int64_list=nd.train.Int64List(value=vals))
    return nd.train.Example(features=nd.train.Features(feature=f)).SerializeToString()


SUFFIXES = ("", "_2d", "_var", "_seq")
SERIALIZED = [example({k + x: v[0][b] for k, v in FEATURES.items() for x in SUFFIXES})
              for b in range(2)]


def expected(key, b=None):
    rows, dtype = FEATURES[key]
    want = np.array(rows, dtype=object if dtype == nd.string else dtype.as_numpy_dtype)
    return want if b is None else want[b]


@pytest.mark.parametrize("single", [False, True], ids=["batch", "single"])
def test_fixed_var_and_sequence_features_of_every_kind(single):
    with nd.Graph().as_default():
        spec = {}
        for key, (_, dtype) in FEATURES.items():
            spec[key] = nd.FixedLenFeature([3], dtype)
            spec[key + "_2d"] = nd.FixedLenFeature([1, 3], dtype)
            spec[key + "_var"] = nd.VarLenFeature(dtype)
            spec[key + "_seq"] = nd.FixedLenSequenceFeature([], dtype,
                                                            allow_missing=True)
        spec["missing"] = nd.FixedLenFeature([2], nd.int64, default_value=[4, 5])
        spec["missing_s"] = nd.FixedLenFeature([], nd.string, default_value="d")
        if single:
            parsed = [nd.parse_single_example(s, spec) for s in SERIALIZED]
        else:
            parsed = [nd.parse_example(SERIALIZED, spec)]
        with nd.Session() as sess:
            got = sess.run(parsed)
    batches = [[0], [1]] if single else [[0, 1]]
    for out, rows in zip(got, batches):
        lead = [] if single else [len(rows)]
        for key, (_, dtype) in FEATURES.items():
            want = expected(key)[rows].reshape(lead + [3])
            np_dtype = object if dtype == nd.string else dtype.as_numpy_dtype
            for name, shape in ((key, [3]), (key + "_2d", [1, 3]),
                                (key + "_seq", [3])):
                assert out[name].dtype == np_dtype, name
                assert out[name].shape == tuple(lead + shape), name
                assert out[name].reshape(want.shape).tolist() == want.tolist(), name
            sparse = out[key + "_var"]
            assert sparse.values.dtype == np_dtype
            assert sparse.values.tolist() == want.reshape(-1).tolist()
            index = np.argwhere(np.ones(lead + [3], bool)).tolist()
            assert sparse.indices.tolist() == index
            assert sparse.dense_shape.tolist() == lead + [3]
        assert out["missing"].tolist() == np.broadcast_to(
            [4, 5], lead + [2]).tolist()
        assert out["missing"].dtype == np.int64
        assert np.asarray(out["missing_s"]).reshape(-1).tolist() == [b"d"] * (
            1 if single else 2)


@pytest.mark.parametrize("little_endian", [True, False])
def test_decode_raw_of_one_record_and_of_many(little_endian):
    values = np.array([[1, -2, 300], [7, 8, -9]], np.int32)
    order = "<" if little_endian else ">"
    raw = [v.astype(order + "i4").tobytes() for v in values]
    with nd.Graph().as_default():
        one = nd.decode_raw(raw[0], nd.int32, little_endian=little_endian)
        many = nd.decode_raw(raw, nd.int32, little_endian=little_endian)
        bytes_ = nd.decode_raw(raw[1], nd.uint8)
        with nd.Session() as sess:
            got_one, got_many, got_bytes = sess.run([one, many, bytes_])
    assert got_one.dtype == np.int32 and got_one.tolist() == values[0].tolist()
    assert got_many.tolist() == values.tolist()
    assert got_bytes.tolist() == list(raw[1])
    got_one[0] = 5  # the kernel's output is the caller's to change
