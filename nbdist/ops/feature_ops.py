"""The two transforms TF's feature columns run as ops of their own:
``Bucketize`` (the bucket of each value among sorted boundaries, TF's
``math_ops._bucketize``) and ``SparseCross`` (the hashed cross of sparse and
dense columns, TF's ``sparse.cross_hashed``: the same Fingerprint64 and
FingerprintCat64 scheme, so the same ids as TensorFlow).

===========  ==============================================================
op           inputs -> outputs
===========  ==============================================================
Bucketize    x -> int32 buckets, same shape (attr boundaries)
SparseCross  N indices, N values, N shapes, dense inputs -> indices, int64
             values, shape (attrs hashed_output, num_buckets, hash_key ...)
===========  ==============================================================

>>> import nbdist as nd
>>> from nbdist.ops.feature_ops import bucketize
>>> with nd.Session() as s:
...     s.run(bucketize(nd.constant([-5.0, 0.0, 10.0, 150.0]), [0.0, 10.0, 100.0]))
array([0, 1, 2, 3], dtype=int32)
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.math_ops_elementwise import cast

# TF's sparse_ops._DEFAULT_HASH_KEY: the cross's seed when none is given.
DEFAULT_HASH_KEY = 0xDECAFCAFFE
_BUCKETIZE_TYPES = (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64)


def _bucketize_infer(c):
    if c.dtype(0) not in _BUCKETIZE_TYPES:
        raise TypeError(f"Bucketize ({c.name}) needs int32, int64, float or double "
                        f"input, got {c.dtype(0).name}")
    b = list(c.attr("boundaries"))
    if b != sorted(b):
        raise ValueError(f"Bucketize ({c.name}): Expected sorted boundaries")
    return [(dtypes.int32, c.shape(0))]


def _cross_infer(c):
    n = c.attr("N")
    if c.attr("out_type") is not dtypes.int64 or not c.attr("hashed_output"):
        raise ValueError(f"SparseCross ({c.name}): nbdist crosses hashed int64 "
                         "outputs only (sparse.cross_hashed)")
    for i in range(3 * n, len(c.input_dtypes)):
        if c.shape(i).rank not in (None, 2):
            raise ValueError(f"SparseCross ({c.name}): Dense inputs should be a "
                             f"matrix but received shape {c.shape(i)}")
    return [(dtypes.int64, TensorShape([None, 2])), (dtypes.int64, TensorShape([None])),
            (dtypes.int64, TensorShape([2]))]


register_op("Bucketize", _bucketize_infer,
            attrs={"T": ("type", None), "boundaries": ("list(float)", REQUIRED)},
            num_inputs=1)
register_op("SparseCross", _cross_infer,
            attrs={"N": ("int", 0), "hashed_output": ("bool", REQUIRED),
                   "num_buckets": ("int", REQUIRED), "hash_key": ("int", REQUIRED),
                   "sparse_types": ("list(type)", []),
                   "dense_types": ("list(type)", []),
                   "out_type": ("type", REQUIRED), "internal_type": ("type", REQUIRED)},
            min_inputs=1)
NotDifferentiable("Bucketize")
NotDifferentiable("SparseCross")


def bucketize(input, boundaries, name=None):  # noqa: A002 - TF's name
    """The bucket of each value of ``input``: the number of ``boundaries``
    (sorted floats) it is greater than or equal to, as int32."""
    x = convert_to_tensor(input, name="input")
    b = [float(v) for v in boundaries]
    g = get_default_graph()
    return g.create_op("Bucketize", [x], {"T": x.dtype.base_dtype, "boundaries": b},
                       name=name or "Bucketize").outputs[0]


def _int64_or_string(x):
    """As TF: integer columns cross as int64 (their value is their hash)."""
    dt = x.dtype.base_dtype
    if dt is dtypes.string or dt is dtypes.int64:
        return x
    if not dt.is_integer:
        raise TypeError(f"sparse_cross_hashed: inputs must be strings or integers, "
                        f"got {dt.name}")
    return cast(x, dtypes.int64)


def sparse_cross_hashed(inputs, num_buckets=0, hash_key=None, name=None):
    """The hashed cross of ``inputs`` (``SparseTensor`` s and 2-D dense
    tensors of strings or int64, one row per example): row ``r`` holds one id
    per combination of the rows' values, ``FingerprintCat64`` over the
    values' fingerprints (an int64 value is its own) from ``hash_key``,
    modulo ``num_buckets`` (0: no modulo). TF's ``sparse.cross_hashed``.
    """
    if not isinstance(inputs, (list, tuple)):
        raise TypeError("Inputs must be a list")
    if not inputs:
        raise ValueError("sparse_cross_hashed needs at least one input")
    sparse, dense = [], []
    g = get_default_graph()
    for x in inputs:
        if isinstance(x, SparseTensor):
            sparse.append(SparseTensor(x.indices, _int64_or_string(x.values),
                                       x.dense_shape))
        else:
            dense.append(_int64_or_string(convert_to_tensor(x)))
    op = g.create_op(
        "SparseCross",
        [s.indices for s in sparse] + [s.values for s in sparse]
        + [s.dense_shape for s in sparse] + dense,
        {"N": len(sparse), "hashed_output": True, "num_buckets": int(num_buckets),
         "hash_key": int(DEFAULT_HASH_KEY if hash_key is None else hash_key),
         "sparse_types": [s.dtype.base_dtype for s in sparse],
         "dense_types": [d.dtype.base_dtype for d in dense],
         "out_type": dtypes.int64, "internal_type": dtypes.int64},
        name=name or "SparseCross")
    return SparseTensor(*op.outputs)


__all__ = ["DEFAULT_HASH_KEY", "bucketize", "sparse_cross_hashed"]
