"""``tf.python.training.basic_session_run_hooks``, forwarded to nbdist's own names."""

from __future__ import annotations

from nbdist.python._forward import forward

__getattr__, __dir__ = forward(
    __name__, "tensorflow.python.training.basic_session_run_hooks", [
    "nbdist.train.hooks",
    "nbdist.train.summary_hooks",
    "nbdist.train",
    ])
