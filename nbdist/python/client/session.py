"""``tensorflow.python.client.session``, forwarded to nbdist's own names."""

from __future__ import annotations

from nbdist.python._forward import forward

__getattr__, __dir__ = forward(__name__, "tensorflow.python.client.session", [
    "nbdist.runtime.session",
    "nbdist",
])
