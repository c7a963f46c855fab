"""``get_current_worker_context()``: the worker context of the calling thread,
set while ``run_distribute_coordinator`` runs a ``worker_fn`` (as TensorFlow's
``distribute_coordinator_context``).

>>> get_current_worker_context() is None
True
"""

from __future__ import annotations

import threading

__all__ = ["get_current_worker_context"]

_worker_context = threading.local()


def get_current_worker_context():
    """The ``_WorkerContext`` of the ``worker_fn`` running in this thread, or None."""
    try:
        return _worker_context.current
    except AttributeError:
        return None
