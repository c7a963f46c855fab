"""NumPy kernels of ``nbdist.ops.sparse_ops_serialize``: sparse tensors to and
from serialized ``TensorProto`` triples."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, op_error
from nbdist.framework.tensor_util import make_ndarray, make_tensor_proto
from nbdist.ops import sparse_ops_serialize  # noqa: F401  (registers the ops)
from nbdist.proto import tensor_pb2


def _triple(indices, values, shape):
    return np.array([make_tensor_proto(np.asarray(indices, np.int64))
                     .SerializeToString(),
                     make_tensor_proto(np.asarray(values)).SerializeToString(),
                     make_tensor_proto(np.asarray(shape, np.int64))
                     .SerializeToString()], dtype=object)


@register_kernel("SerializeSparse")
def serialize_sparse_kernel(node):
    return lambda step, indices, values, shape: _triple(indices, values, shape)


@register_kernel("SerializeManySparse")
def serialize_many_sparse_kernel(node):
    def compute(step, indices, values, shape):
        ind, vals, dims = np.asarray(indices), np.asarray(values), np.asarray(shape)
        if dims.size < 2:
            raise op_error(node, f"SparseTensor must have rank at least 2, got "
                                 f"dense shape {fmt(dims)}")
        rows = [_triple(ind[ind[:, 0] == b][:, 1:], vals[ind[:, 0] == b], dims[1:])
                for b in range(int(dims[0]))]
        return np.array(rows, dtype=object).reshape(-1, 3)

    return compute


def _parse(node, blob):
    proto = tensor_pb2.TensorProto()
    try:
        proto.ParseFromString(bytes(blob))
    except Exception:  # noqa: BLE001 - any malformed input is the caller's error
        raise op_error(node, "Could not parse serialized_sparse") from None
    return make_ndarray(proto)


@register_kernel("DeserializeManySparse")
def deserialize_many_sparse_kernel(node):
    want = node.attrs["dtype"]

    def compute(step, serialized):
        rows = np.asarray(serialized, dtype=object)
        if rows.ndim != 2 or rows.shape[1] != 3:
            raise op_error(node, f"Serialized sparse should have shape [N, 3], got "
                                 f"{fmt(rows.shape)}")
        parts = [[_parse(node, b) for b in row] for row in rows]
        rank = len(parts[0][2]) if parts else 0
        out_ind, out_val, dims = [], [], np.zeros(rank, np.int64)
        for i, (ind, vals, shape) in enumerate(parts):
            if len(shape) != rank:
                raise op_error(node, f"Inconsistent rank across SparseTensors: rank "
                                     f"prior to SparseTensor[{i}] was: {rank} but "
                                     f"rank of SparseTensor[{i}] is: {len(shape)}")
            if vals.dtype != np.dtype(want.as_numpy_dtype) and want.name != "string":
                raise op_error(node, f"Requested SparseTensor of type {want.name} "
                                     f"but SparseTensor[{i}].values.dtype() == "
                                     f"{vals.dtype}")
            ind = np.asarray(ind, np.int64).reshape(-1, rank)
            out_ind.append(np.concatenate([np.full((ind.shape[0], 1), i), ind], 1))
            out_val.append(vals)
            dims = np.maximum(dims, shape)
        indices = (np.concatenate(out_ind) if out_ind else
                   np.zeros((0, rank + 1), np.int64))
        values = (np.concatenate(out_val) if out_val else
                  np.zeros(0, want.as_numpy_dtype))
        return indices, values, np.concatenate([[len(parts)], dims]).astype(np.int64)

    return compute
