"""``tensorflow.core.framework``: each ``*_pb2`` module here is nbdist's own
(the same module object; see ``nbdist.core``)."""

from __future__ import annotations

from nbdist.python._forward import alias_modules

alias_modules(__name__, {
    "attr_value_pb2": "nbdist.proto.attr_value_pb2",
    "device_attributes_pb2": "nbdist.proto.device_attributes_pb2",
    "function_pb2": "nbdist.proto.function_pb2",
    "graph_pb2": "nbdist.proto.graph_pb2",
    "node_def_pb2": "nbdist.proto.node_def_pb2",
    "step_stats_pb2": "nbdist.proto.step_stats_pb2",
    "summary_pb2": "nbdist.proto.summary_pb2",
    "tensor_pb2": "nbdist.proto.tensor_pb2",
    "tensor_shape_pb2": "nbdist.proto.tensor_shape_pb2",
    "types_pb2": "nbdist.proto.types_pb2",
    "variable_pb2": "nbdist.proto.variable_pb2",
    "versions_pb2": "nbdist.proto.versions_pb2",
})
