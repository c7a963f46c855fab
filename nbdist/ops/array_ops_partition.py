"""Ops that split a tensor by a key, join the parts back, or compare sets of
values: ``DynamicPartition``, ``DynamicStitch`` (and ``ParallelDynamicStitch``),
``UniqueWithCounts``, ``ListDiff`` (``setdiff1d``) and ``LowerBound`` /
``UpperBound`` (``searchsorted``).

The kernels are in ``nbdist/executor/kernels/partition_kernels.py``.

>>> import nbdist as nd
>>> parts = nd.dynamic_partition([10, 20, 30, 40], [1, 0, 1, 1], 2)
>>> with nd.Session() as s:
...     [p.tolist() for p in s.run(parts)]
[[20], [10, 30, 40]]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable, register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import INDEX, NUMERIC, check_type, op_scope
from nbdist.framework.ops import Tensor, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A

__all__ = [
    "dynamic_partition",
    "dynamic_stitch",
    "parallel_dynamic_stitch",
    "searchsorted",
    "setdiff1d",
    "unique_with_counts",
]


def _dims_must_match(c, a: TensorShape, b: TensorShape):
    """TF's message when a leading part of ``b`` must equal ``a``."""
    for x, y in zip(a.dims, b.dims):
        if x is not None and y is not None and x != y:
            raise ValueError(f"Dimensions must be equal, but are {x} and {y}")


# -- DynamicPartition -----------------------------------------------------------------
def _partition_infer(c):
    if c.dtype(1) is not dtypes.int32:
        raise TypeError(f"Input 'partitions' of 'DynamicPartition' Op has type "
                        f"{c.dtype(1).name} that does not match expected type of "
                        "int32.")
    data, parts = c.shape(0), c.shape(1)
    n = c.attr("num_partitions")
    if n < 1:
        raise ValueError(f"num_partitions must be at least 1, got {n}")
    if parts.rank is None or data.rank is None:
        return [(c.dtype(0), TensorShape(None))] * n
    if data.rank < parts.rank:
        raise ValueError(f"DynamicPartition: partitions of shape {parts} must be a "
                         f"prefix of data's shape {data}")
    _dims_must_match(c, parts, data[:parts.rank])
    return [(c.dtype(0), TensorShape([None]).concatenate(data[parts.rank:]))] * n


register_op("DynamicPartition", _partition_infer,
            attrs={"T": ("type", None), "num_partitions": ("int", None)},
            num_inputs=2)


def dynamic_partition(data, partitions, num_partitions, name=None):
    """``num_partitions`` tensors: part ``i`` holds the slices of ``data`` whose
    entry in ``partitions`` (a prefix of data's shape) is ``i``, in order."""
    with op_scope(name, "DynamicPartition", [data, partitions]) as (g, scope):
        x = convert_to_tensor(data, name="data")
        p = _int32(partitions, "partitions")
        return g.create_op("DynamicPartition", [x, p],
                           {"T": x.dtype.base_dtype,
                            "num_partitions": int(num_partitions)},
                           name=scope).outputs


@register_gradient("DynamicPartition")
def _partition_grad(op, *grads):
    data, partitions = op.inputs
    n = op.get_attr("num_partitions")
    positions = A.reshape(A.range(A.size(partitions)), A.shape(partitions))
    parts = dynamic_partition(positions, partitions, n)
    stitched = dynamic_stitch(parts, list(grads))
    return [A.reshape(stitched, A.shape(data)), None]


# -- DynamicStitch ----------------------------------------------------------------------
def _stitch_infer(c):
    n = c.attr("N")
    if len(c.input_dtypes) != 2 * n:
        raise ValueError(f"{c.op_type} expects 2*N = {2 * n} inputs")
    for i in range(n):
        if c.dtype(i) is not dtypes.int32:
            raise TypeError(f"Tensors in list passed to 'indices' of '{c.op_type}' "
                            f"Op have type {c.dtype(i).name} that does not match "
                            "expected type int32.")
    d = c.dtype(n)
    inner = None
    known_max = -1
    for i in range(n):
        ind, dat = c.shape(i), c.shape(n + i)
        if c.dtype(n + i) is not d:
            raise TypeError(f"{c.op_type}: every data tensor must be {d.name}, got "
                            f"{c.dtype(n + i).name}")
        if ind.rank is None or dat.rank is None:
            continue
        _dims_must_match(c, ind, dat[:ind.rank])
        rest = dat[ind.rank:]
        if inner is None:
            inner = rest
        elif not inner.is_compatible_with(rest):
            raise ValueError(f"{c.op_type}: data[{i}] has inner shape {rest}, "
                             f"others {inner}")
        else:
            inner = inner.merge_with(rest)
        value = c.constant(i)
        if value is None:
            known_max = None
        elif known_max is not None and value.size:
            known_max = max(known_max, int(value.max()))
    first = None if known_max is None else known_max + 1
    if inner is None:
        return [(d, TensorShape(None))]
    return [(d, TensorShape([first]).concatenate(inner))]


for _t in ("DynamicStitch", "ParallelDynamicStitch"):
    register_op(_t, _stitch_infer, attrs={"T": ("type", None), "N": ("int", None)},
                min_inputs=2)


def _int32(value, name):
    """An int32 input: a NumPy int64 array (NumPy's default) converts, as TF
    converts it; a tensor keeps its dtype (an int64 one is TF's TypeError)."""
    if isinstance(value, Tensor):
        return value
    return convert_to_tensor(value, dtype=dtypes.int32, name=name)


def _stitch(op_type, indices, data, name):
    if len(indices) != len(data) or not indices:
        raise ValueError(f"{op_type}: indices and data must be non-empty lists of "
                         f"one length, got {len(indices)} and {len(data)}")
    with op_scope(name, op_type, list(indices) + list(data)) as (g, scope):
        ind = [_int32(i, "indices") for i in indices]
        dat = [convert_to_tensor(x, name="data") for x in data]
        d = dat[0].dtype.base_dtype
        dat = [convert_to_tensor(x, dtype=d) for x in dat]
        return g.create_op(op_type, ind + dat, {"T": d, "N": len(ind)},
                           name=scope).outputs[0]


def dynamic_stitch(indices, data, name=None):
    """Interleaves the ``data`` tensors: ``out[indices[m][i...]] = data[m][i...]``,
    later ones winning where two write one position.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.dynamic_stitch([[0, 2], [1]], [[1, 3], [2]])).tolist()
    [1, 2, 3]
    """
    return _stitch("DynamicStitch", indices, data, name)


def parallel_dynamic_stitch(indices, data, name=None):
    """:func:`dynamic_stitch` (TF leaves the winner of a repeated index open)."""
    return _stitch("ParallelDynamicStitch", indices, data, name)


def _stitch_grad(op, grad):
    n = op.get_attr("N")
    return [None] * n + [A.gather(grad, i) for i in op.inputs[:n]]


register_gradient("DynamicStitch")(_stitch_grad)
register_gradient("ParallelDynamicStitch")(_stitch_grad)


# -- UniqueWithCounts, ListDiff ------------------------------------------------------------
def _vector_infer(c, what):
    for i in range(len(c.input_dtypes)):
        if c.shape(i).rank not in (None, 1):
            raise ValueError(f"{what} expects 1D vectors, got shape {c.shape(i)}")


def _unique_counts_infer(c):
    _vector_infer(c, "unique_with_counts")
    idx = c.attr("out_idx")
    return [(c.dtype(0), TensorShape([None])), (idx, c.shape(0)),
            (idx, TensorShape([None]))]


def _list_diff_infer(c):
    _vector_infer(c, "setdiff1d")
    if c.dtype(0) is not c.dtype(1):
        raise TypeError(f"setdiff1d: x ({c.dtype(0).name}) and y "
                        f"({c.dtype(1).name}) must have one dtype")
    return [(c.dtype(0), TensorShape([None])),
            (c.attr("out_idx"), TensorShape([None]))]


_SET_ATTRS = {"T": ("type", None), "out_idx": ("type", dtypes.int32)}
register_op("UniqueWithCounts", _unique_counts_infer, attrs=_SET_ATTRS, num_inputs=1)
register_op("ListDiff", _list_diff_infer, attrs=_SET_ATTRS, num_inputs=2)
NotDifferentiable("UniqueWithCounts")
NotDifferentiable("ListDiff")


def unique_with_counts(x, out_idx=dtypes.int32, name=None):
    """(y, idx, count): the distinct elements of the vector ``x`` in order of
    first appearance, each element's position in ``y``, and how often each
    distinct element occurs."""
    with op_scope(name, "UniqueWithCounts", [x]) as (g, scope):
        t = convert_to_tensor(x, name="x")
        return tuple(g.create_op("UniqueWithCounts", [t],
                                 {"T": t.dtype.base_dtype,
                                  "out_idx": dtypes.as_dtype(out_idx)},
                                 name=scope).outputs)


def setdiff1d(x, y, index_dtype=dtypes.int32, name=None):
    """(out, idx): the elements of ``x`` not in ``y`` (repeats kept, in order)
    and their positions in ``x``."""
    with op_scope(name, "ListDiff", [x, y]) as (g, scope):
        a = convert_to_tensor(x, name="x")
        b = convert_to_tensor(y, dtype=a.dtype.base_dtype, name="y")
        return tuple(g.create_op("ListDiff", [a, b],
                                 {"T": a.dtype.base_dtype,
                                  "out_idx": dtypes.as_dtype(index_dtype)},
                                 name=scope).outputs)


# -- LowerBound, UpperBound ----------------------------------------------------------------
def _bound_infer(c):
    check_type(c, 0, NUMERIC, "sorted_inputs")
    if c.dtype(0) is not c.dtype(1):
        raise TypeError(f"Input 'values' of '{c.op_type}' Op has type "
                        f"{c.dtype(1).name} that does not match type "
                        f"{c.dtype(0).name} of argument 'sorted_inputs'.")
    s, v = c.shape(0), c.shape(1)
    if s.rank is not None and v.rank is not None:
        if s.rank != v.rank:
            raise ValueError(f"{c.op_type}: sorted_inputs {s} and values {v} must "
                             "have one rank")
        _dims_must_match(c, s[:-1], v[:-1])
    return [(c.attr("out_type"), v)]


for _t in ("LowerBound", "UpperBound"):
    register_op(_t, _bound_infer, attrs={"T": ("type", None),
                                         "out_type": ("type", dtypes.int32)},
                num_inputs=2)
    NotDifferentiable(_t)


def searchsorted(sorted_sequence, values, side="left", out_type=dtypes.int32,
                 name=None):
    """For each of ``values`` the position in the innermost dimension of
    ``sorted_sequence`` where it would be inserted to keep it sorted (before
    equal elements with ``side="left"``, after them with ``"right"``).

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.searchsorted([1, 3, 3, 7], [3, 8])).tolist()
    [1, 4]
    """
    if side not in ("left", "right"):
        raise ValueError(f"side must be either 'right' or 'left'. Saw: {side}.")
    op_type = "LowerBound" if side == "left" else "UpperBound"
    with op_scope(name, "SearchSorted", [sorted_sequence, values]) as (g, scope):
        s = convert_to_tensor(sorted_sequence, name="sorted_sequence")
        v = convert_to_tensor(values, name="values")
        if out_type not in INDEX:
            raise TypeError(f"out_type must be int32 or int64, got {out_type}")
        return g.create_op(op_type, [s, v], {"T": s.dtype.base_dtype,
                                             "out_type": out_type},
                           name=scope).outputs[0]
