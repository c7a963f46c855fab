"""``tensorflow.python.ops.array_ops``, forwarded to nbdist's own names."""

from __future__ import annotations

from nbdist.python._forward import forward

__getattr__, __dir__ = forward(__name__, "tensorflow.python.ops.array_ops", [
    "nbdist.framework.constant_op",
    "nbdist.ops.array_ops",
    "nbdist.ops.array_ops_creation",
    "nbdist.ops.array_ops_join",
    "nbdist.ops.array_ops_shape",
    "nbdist.ops.array_ops_slicing",
    "nbdist.ops.array_ops_transform",
    "nbdist",
])
