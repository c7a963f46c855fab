"""Transport-neutral serving of a task's master and worker.

``MasterHandler`` and ``WorkerHandler`` own everything serving means beyond
bytes: validation, timeouts, per-step and per-graph state, de-duplication of
retried requests (``RecentRequests``), admission control (``Admission``) and
cancel-on-hang-up (``HangupWatch``). Each transport (``runtime/grpc``,
``runtime/samehost``, ``runtime/inproc``) is a codec over them: one set of
handlers per task (``server_lib.Server`` makes it), shared by all its
transports. What a codec does with them (``Serving``, both handlers' base):

* **Admission, once per call.** A codec that can refuse before it reads a
  request does (gRPC's interceptor and pools; a framed codec per frame):
  ``handler.admission.enter(method)`` (``leave()`` the count when the call
  ends), or ``admit(method)``, then calls the handler's methods bare. A codec
  with nothing to read (the in-process transport, ``LocalMaster``) calls
  ``handler.call(method, fn, rid)``, which admits. Never both: a call counted
  twice halves its class's bound.
* **De-duplication, one key space.** ``handler.once(method, rid, fn)`` (inside
  ``call``): keys are ``(method, request_id)`` with the gRPC method's name on
  every transport, and what is kept is the handler's answer (``fn()``'s,
  before encoding), so a retry that comes back by another transport gets the
  first answer and encodes it itself. Every client sends request ids for the
  calls gRPC's do (sessions, graphs, RunStep, RunGraph).
* **Sessions of this process** reach a master through ``LocalMaster`` (its
  ``MasterHandler``, no encoding), as remote sessions reach it by RPC.
"""

from __future__ import annotations

from nbdist.runtime.service.admission import CALL_CLASSES, Admission, CallClass
from nbdist.runtime.service.hangup import HangupWatch
from nbdist.runtime.service.local_master import LocalMaster
from nbdist.runtime.service.master_handler import MasterHandler
from nbdist.runtime.service.recent_requests import RecentRequests
from nbdist.runtime.service.serving import Serving, new_request_id
from nbdist.runtime.service.worker_handler import WorkerHandler

__all__ = ["CALL_CLASSES", "Admission", "CallClass", "HangupWatch", "LocalMaster",
           "MasterHandler", "RecentRequests", "Serving", "WorkerHandler",
           "new_request_id"]
