"""Transport-neutral serving of a task's master and worker.

``MasterHandler`` and ``WorkerHandler`` own everything serving means beyond
bytes: validation, timeouts, per-step and per-graph state, de-duplication of
retried requests (``RecentRequests``), admission control (``Admission``) and
cancel-on-hang-up (``HangupWatch``). Each transport (``runtime/grpc``,
``runtime/samehost``, ``runtime/inproc``) is a codec over them: one set of
handlers per task, shared by all its transports.
"""

from __future__ import annotations

from nbdist.runtime.service.admission import CALL_CLASSES, Admission, CallClass
from nbdist.runtime.service.hangup import HangupWatch
from nbdist.runtime.service.local_master import LocalMaster
from nbdist.runtime.service.master_handler import MasterHandler
from nbdist.runtime.service.recent_requests import RecentRequests
from nbdist.runtime.service.serving import Serving
from nbdist.runtime.service.worker_handler import WorkerHandler

__all__ = ["CALL_CLASSES", "Admission", "CallClass", "HangupWatch", "LocalMaster",
           "MasterHandler", "RecentRequests", "Serving", "WorkerHandler"]
