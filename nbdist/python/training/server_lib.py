"""``tensorflow.python.training.server_lib``, forwarded to nbdist's own names."""

from __future__ import annotations

from nbdist.python._forward import forward

__getattr__, __dir__ = forward(__name__, "tensorflow.python.training.server_lib", [
    "nbdist.runtime.server_lib",
    "nbdist.runtime.cluster_spec",
    "nbdist.train",
])
