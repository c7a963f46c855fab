"""``tf.python.training.session_run_hook``, forwarded to nbdist's own names."""

from __future__ import annotations

from nbdist.python._forward import forward

__getattr__, __dir__ = forward(
    __name__, "tensorflow.python.training.session_run_hook", [
    "nbdist.train.hooks",
    "nbdist.train",
    ])
