"""``Serving``: what both handlers of a task share, whatever the codec: the
task's one de-duplication window (``recent``) and its one ``Admission``.

Keys are ``(method, request_id)`` with the gRPC method's name (``"RunStep"``,
``"RunGraph"``, ...) on every transport, so a retry that comes back another
way is caught. A codec that admits its calls itself before reading them
(gRPC's pools, the framed codecs) asks only ``once``; a codec that reads
nothing (the in-process transport) asks ``call``, which admits too.

>>> from nbdist.runtime.service import Admission, RecentRequests
>>> serving = Serving(RecentRequests(), Admission("/job:w/replica:0/task:0"))
>>> runs = []
>>> serving.call("RegisterGraph", lambda: runs.append(1) or "g1", rid=5)
'g1'
>>> serving.call("RegisterGraph", lambda: runs.append(1) or "g2", rid=5)
'g1'
>>> len(runs), serving.admission.class_of("RegisterGraph").in_flight
(1, 0)
"""

from __future__ import annotations

import random

from nbdist.runtime.service.admission import Admission
from nbdist.runtime.service.recent_requests import RecentRequests

__all__ = ["Serving", "new_request_id"]


def new_request_id() -> int:
    """A request id for a call (nonzero; random, as gRPC clients' are)."""
    return random.getrandbits(62) | 1


class Serving:
    """A task's de-duplication window and admission (shared by its handlers)."""

    def __init__(self, recent: RecentRequests | None, admission: Admission | None,
                 task_name: str = ""):
        self.recent = recent if recent is not None else RecentRequests()
        self.admission = admission if admission is not None else Admission(task_name)

    def once(self, method: str, rid: int, fn, size_of=None):
        """``fn()``, run once per nonzero request id ``rid`` of ``method``: a
        retry gets the first answer (or error) instead of a second run."""
        if not rid:
            return fn()
        return self.recent.run((method, rid), fn, size_of)

    def call(self, method: str, fn, rid: int = 0, size_of=None):
        """``fn()`` admitted in ``method``'s class (``ResourceExhaustedError``
        when it is full) and run once per ``rid``: a whole call, for a codec
        that has nothing to read before admitting it."""
        count = self.admission.enter(method)
        try:
            return self.once(method, rid, fn, size_of)
        finally:
            count.leave()
