"""``tensorflow.python.ops.math_ops``, forwarded to nbdist's own names."""

from __future__ import annotations

from nbdist.python._forward import forward

__getattr__, __dir__ = forward(__name__, "tensorflow.python.ops.math_ops", [
    "nbdist.ops.math_ops",
    "nbdist.ops.math_ops_elementwise",
    "nbdist.ops.math_ops_reduction",
    "nbdist",
])
