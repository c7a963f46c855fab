"""``tensorflow.python.ops.array_ops``, forwarded to nbdist's own names."""

from __future__ import annotations

from nbdist.python._forward import forward

__getattr__, __dir__ = forward(__name__, "tensorflow.python.ops.array_ops", [
    "nbdist.graph.array_ops",
    "nbdist.graph.array_ops_more",
    "nbdist.graph.array_ops_creation",
    "nbdist.graph.array_ops_join",
    "nbdist.graph.array_ops_shape",
    "nbdist.graph.array_ops_slicing",
    "nbdist.graph.array_ops_transform",
    "nbdist",
])
