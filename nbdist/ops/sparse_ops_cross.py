"""Feature crosses and counts into ``SparseTensor`` s: ``SparseCross``
(``nd.sparse.cross`` / ``cross_hashed``: per batch row, every combination of one
feature from each input, joined by "_X_" or hashed as TF's
``FingerprintCat64`` of ``Fingerprint64`` s) and ``SparseBincount``
(``nd.sparse.bincount``).

The kernels are in ``nbdist/executor/kernels/sparse_cross_kernels.py``.

>>> import nbdist as nd
>>> a = nd.SparseTensor([[0, 0], [1, 0]], ["a", "b"], [2, 1])
>>> with nd.Session() as s:
...     s.run(nd.sparse.cross([a, nd.constant([["x"], ["y"]])])).values.tolist()
[b'a_X_x', b'b_X_y']
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.sparse_tensor import SparseTensor, is_sparse
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A
from nbdist.ops.math_ops_elementwise import cast

__all__: list[str] = []

DEFAULT_HASH_KEY = 0xDECAFCAFFE  # TF's default key of sparse_cross_hashed


def _cross_infer(c):
    out = dtypes.int64 if c.attr("hashed_output") else dtypes.string
    return [(dtypes.int64, TensorShape([None, 2])), (out, TensorShape([None])),
            (dtypes.int64, TensorShape([2]))]


register_op("SparseCross", _cross_infer,
            attrs={"N": ("int", 0),
                   "hashed_output": ("bool", False), "num_buckets": ("int", 0),
                   "hash_key": ("int", DEFAULT_HASH_KEY),
                   "sparse_types": ("list(type)", []),
                   "dense_types": ("list(type)", []),
                   # TF's attrs, so that TF imports the node (SavedModels).
                   "out_type": ("type", dtypes.int64),
                   "internal_type": ("type", dtypes.int64)}, min_inputs=1)
NotDifferentiable("SparseCross")


def _cross(inputs, hashed, num_buckets, hash_key, name):
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError("Inputs must be a list")
    sparse = [x for x in inputs if is_sparse(x)]
    dense = [convert_to_tensor(x) for x in inputs if not is_sparse(x)]
    for t in [s.values for s in sparse] + dense:
        if t.dtype.base_dtype not in (dtypes.string, dtypes.int64, dtypes.int32):
            raise TypeError(f"cross: features must be strings or integers, got "
                            f"{t.dtype.name}")
    # As TF's wrapper: integer features cross as int64 (TF's kernel takes
    # int64 and string only).
    sparse = [s if s.dtype.base_dtype in (dtypes.string, dtypes.int64) else
              SparseTensor(s.indices, cast(s.values, dtypes.int64), s.dense_shape)
              for s in sparse]
    dense = [d if d.dtype.base_dtype in (dtypes.string, dtypes.int64) else
             cast(d, dtypes.int64) for d in dense]
    internal = dtypes.string if all(
        t.dtype.base_dtype == dtypes.string
        for t in [s.values for s in sparse] + dense) else dtypes.int64
    with op_scope(name, "SparseCross", [s.values for s in sparse] + dense) as (
            g, scope):
        # TF crosses the sparse inputs before the dense ones.
        op = g.create_op(
            "SparseCross",
            [s.indices for s in sparse] + [s.values for s in sparse]
            + [s.dense_shape for s in sparse] + dense,
            {"N": len(sparse), "hashed_output": bool(hashed),
             "out_type": dtypes.int64 if hashed else dtypes.string,
             "internal_type": internal,
             "num_buckets": int(num_buckets), "hash_key": int(hash_key),
             "sparse_types": [s.dtype.base_dtype for s in sparse],
             "dense_types": [d.dtype.base_dtype for d in dense]}, name=scope)
        return SparseTensor(*op.outputs)


def sparse_cross(inputs, name=None, separator=None):
    """The crosses of the string or integer features of ``inputs`` (sparse or
    dense, one row per batch entry) joined by "_X_"."""
    if separator not in (None, "_X_"):
        raise NotImplementedError("cross supports the separator '_X_' only")
    return _cross(inputs, False, 0, 0, name)


def sparse_cross_hashed(inputs, num_buckets=0, hash_key=None, name=None):
    """:func:`sparse_cross` with each cross hashed to an int64 (modulo
    ``num_buckets`` when positive), as TF hashes them."""
    return _cross(inputs, True, num_buckets,
                  DEFAULT_HASH_KEY if hash_key is None else hash_key, name)


def _bincount_infer(c):
    out = c.dtype(3) if c.attr("has_weights") else c.dtype(1)
    return [(dtypes.int64, TensorShape([None, None])), (out, TensorShape([None])),
            (dtypes.int64, TensorShape([None]))]


register_op("SparseBincount", _bincount_infer,
            attrs={"axis": ("int", 0), "minlength": ("int", -1),
                   "maxlength": ("int", -1), "binary_output": ("bool", False),
                   "has_weights": ("bool", False)}, num_inputs=4)
NotDifferentiable("SparseBincount")


def sparse_bincount(values, weights=None, axis=0, minlength=None, maxlength=None,
                    binary_output=False, name=None):
    """How often each value of the integer ``values`` (dense or sparse) occurs,
    over everything (``axis=0``) or per row (``axis=-1``), as a
    ``SparseTensor``; with ``weights`` their sums, with ``binary_output`` 1s."""
    if axis not in (0, -1):
        raise ValueError(f"Unsupported axis value {axis}. Only 0 and -1 are "
                         "currently supported.")
    with op_scope(name, "count", [values, weights]) as (g, scope):
        if is_sparse(values):
            sp = values
        else:
            x = convert_to_tensor(values, name="values")
            everywhere = A.where(A.ones_like(x, dtype=dtypes.bool))
            sp = SparseTensor(everywhere, A.reshape(x, [-1]),
                              A.shape(x, out_type=dtypes.int64))
        if weights is None:
            w = A.zeros([0], dtype=sp.dtype.base_dtype)
        else:
            w = A.reshape(convert_to_tensor(weights, name="weights"), [-1])
        op = g.create_op("SparseBincount", [sp.indices, sp.values, sp.dense_shape, w],
                         {"axis": int(axis), "binary_output": bool(binary_output),
                          "minlength": -1 if minlength is None else int(minlength),
                          "maxlength": -1 if maxlength is None else int(maxlength),
                          "has_weights": weights is not None}, name=scope)
        return SparseTensor(*op.outputs)
