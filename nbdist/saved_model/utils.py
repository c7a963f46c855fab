"""``build_tensor_info`` and back (TF's ``saved_model.utils``)."""

from __future__ import annotations

from nbdist.framework.ops import get_default_graph
from nbdist.proto import meta_graph_pb2, tensor_shape_pb2

__all__ = ["build_tensor_info", "get_tensor_from_tensor_info"]


def build_tensor_info(tensor) -> meta_graph_pb2.TensorInfo:
    """The ``TensorInfo`` of a graph tensor: its name, dtype and static shape.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     x = nd.placeholder(nd.float32, [None, 3], name="x")
    ...     info = nd.saved_model.utils.build_tensor_info(x)
    >>> info.name, [d.size for d in info.tensor_shape.dim]
    ('x:0', [-1, 3])
    """
    info = meta_graph_pb2.TensorInfo(
        name=tensor.name, dtype=tensor.dtype.base_dtype.as_datatype_enum)
    shape = tensor.shape
    if shape.rank is None:
        info.tensor_shape.unknown_rank = True
    else:
        info.tensor_shape.dim.extend(
            tensor_shape_pb2.TensorShapeProto.Dim(size=-1 if d is None else int(d))
            for d in shape.as_list())
    return info


def get_tensor_from_tensor_info(tensor_info, graph=None, import_scope=None):
    """The tensor of ``graph`` (the default graph) a ``TensorInfo`` names."""
    if tensor_info.WhichOneof("encoding") != "name":
        raise ValueError(f"Invalid TensorInfo.encoding: "
                         f"{tensor_info.WhichOneof('encoding')} (only dense "
                         "tensors are supported)")
    graph = graph or get_default_graph()
    pre = (import_scope + "/") if import_scope else ""
    return graph.get_tensor_by_name(pre + tensor_info.name)
