"""``tensorflow.python.platform.tf_logging``, forwarded to nbdist's own names."""

from __future__ import annotations

from nbdist.python._forward import forward

__getattr__, __dir__ = forward(__name__, "tensorflow.python.platform.tf_logging", [
    "nbdist.compat.tf_logging",
])
