"""``SparseTensor`` s as strings: ``SerializeSparse`` (one sparse tensor as 3
serialized ``TensorProto`` s: indices, values, dense shape),
``SerializeManySparse`` (each row of a batch as such a triple) and
``DeserializeManySparse`` (the triples back into one batch), so a sparse tensor
can travel where only dense tensors go (queues, ``train.batch``).

The kernels are in ``nbdist/executor/kernels/sparse_serialize_kernels.py``.

>>> import nbdist as nd
>>> sp = nd.SparseTensor([[0, 0], [1, 2]], [1.0, 2.0], [2, 3])
>>> back = nd.deserialize_many_sparse(nd.serialize_many_sparse(sp), nd.float32)
>>> with nd.Session() as s:
...     s.run(back).indices.tolist()
[[0, 0], [1, 2]]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import op_scope
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.sparse_ops import _sparse

__all__ = ["deserialize_many_sparse", "serialize_many_sparse", "serialize_sparse"]


def _out_type(c):
    out = c.attr("out_type")
    if out is not dtypes.string:
        raise TypeError(f"out_type must be string, got {out.name}")
    return out


register_op("SerializeSparse", lambda c: [(_out_type(c), TensorShape([3]))],
            attrs={"T": ("type", None), "out_type": ("type", dtypes.string)},
            num_inputs=3)
register_op("SerializeManySparse",
            lambda c: [(_out_type(c), TensorShape([None, 3]))],
            attrs={"T": ("type", None), "out_type": ("type", dtypes.string)},
            num_inputs=3)


def _deserialize_infer(c):
    s = c.shape(0)
    if s.rank not in (None, 2) or (s.rank == 2 and s[1] not in (None, 3)):
        raise ValueError(f"serialized_sparse must be a [N, 3] matrix, got {s}")
    return [(dtypes.int64, TensorShape([None, None])),
            (c.attr("dtype"), TensorShape([None])),
            (dtypes.int64, TensorShape([None]))]


register_op("DeserializeManySparse", _deserialize_infer,
            attrs={"dtype": ("type", None)}, num_inputs=1)
for _t in ("SerializeSparse", "SerializeManySparse", "DeserializeManySparse"):
    NotDifferentiable(_t)


def _serialize(op_type, sp_input, name, out_type):
    sp = _sparse(sp_input, op_type)
    with op_scope(name, op_type, [sp.values]) as (g, scope):
        return g.create_op(op_type, [sp.indices, sp.values, sp.dense_shape],
                           {"T": sp.dtype.base_dtype,
                            "out_type": dtypes.as_dtype(out_type)},
                           name=scope).outputs[0]


def serialize_sparse(sp_input, name=None, out_type=dtypes.string):
    """``sp_input`` as a string vector of 3 serialized ``TensorProto`` s."""
    return _serialize("SerializeSparse", sp_input, name, out_type)


def serialize_many_sparse(sp_input, name=None, out_type=dtypes.string):
    """Each row of the rank >= 2 ``sp_input`` (its first dimension is the
    batch) as a row of 3 serialized ``TensorProto`` s: an ``[N, 3]`` string
    matrix."""
    return _serialize("SerializeManySparse", sp_input, name, out_type)


def deserialize_many_sparse(serialized_sparse, dtype, rank=None, name=None):
    """The ``SparseTensor`` whose row ``i`` is the one serialized in row ``i``
    of ``serialized_sparse``; its dense shape is the largest of theirs."""
    from nbdist.framework.ops import convert_to_tensor

    with op_scope(name, "DeserializeManySparse", [serialized_sparse]) as (g, scope):
        s = convert_to_tensor(serialized_sparse, dtype=dtypes.string,
                              name="serialized_sparse")
        op = g.create_op("DeserializeManySparse", [s],
                         {"dtype": dtypes.as_dtype(dtype)}, name=scope)
        indices, values, shape = op.outputs
        if rank is not None:
            indices.set_shape([None, rank])
            shape.set_shape([rank])
        return SparseTensor(indices, values, shape)
