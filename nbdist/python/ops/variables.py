"""``tensorflow.python.ops.variables``, forwarded to nbdist's own names."""

from __future__ import annotations

from nbdist.python._forward import forward

__getattr__, __dir__ = forward(__name__, "tensorflow.python.ops.variables", [
    "nbdist.ops.variables",
    "nbdist",
])
