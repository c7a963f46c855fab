"""``tensorflow.python.framework.tensor_shape``, forwarded to nbdist's own names."""

from __future__ import annotations

from nbdist.python._forward import forward

__getattr__, __dir__ = forward(__name__, "tensorflow.python.framework.tensor_shape", [
    "nbdist.framework.tensor_shape",
])
