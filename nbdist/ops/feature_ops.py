"""The two transforms TF's feature columns run as ops of their own:
``Bucketize`` (the bucket of each value among sorted boundaries, TF's
``math_ops._bucketize``) and ``SparseCross`` (the hashed cross of sparse and
dense columns, TF's ``sparse.cross_hashed``: the same Fingerprint64 and
FingerprintCat64 scheme, so the same ids as TensorFlow).

===========  ==============================================================
op           inputs -> outputs
===========  ==============================================================
Bucketize    x -> int32 buckets, same shape (attr boundaries)
SparseCross  see nbdist.ops.sparse_ops_cross (nd.sparse.cross_hashed)
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
from nbdist.ops import sparse_ops_cross
from nbdist.ops.math_ops_elementwise import cast

DEFAULT_HASH_KEY = sparse_ops_cross.DEFAULT_HASH_KEY
_BUCKETIZE_TYPES = (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64)


def _bucketize_infer(c):
    if c.dtype(0) not in _BUCKETIZE_TYPES:
        raise TypeError(f"Bucketize ({c.name}) needs int32, int64, float or double "
                        f"input, got {c.dtype(0).name}")
    b = list(c.attr("boundaries"))
    if b != sorted(b):
        raise ValueError(f"Bucketize ({c.name}): Expected sorted boundaries")
    return [(dtypes.int32, c.shape(0))]


register_op("Bucketize", _bucketize_infer,
            attrs={"T": ("type", None), "boundaries": ("list(float)", REQUIRED)},
            num_inputs=1)
NotDifferentiable("Bucketize")


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
    cast_inputs = [
        SparseTensor(x.indices, _int64_or_string(x.values), x.dense_shape)
        if isinstance(x, SparseTensor) else _int64_or_string(convert_to_tensor(x))
        for x in inputs]
    # One SparseCross op in nbdist: nd.sparse.cross_hashed's.
    return sparse_ops_cross.sparse_cross_hashed(cast_inputs, num_buckets,
                                                hash_key, name=name)


__all__ = ["DEFAULT_HASH_KEY", "bucketize", "sparse_cross_hashed"]
