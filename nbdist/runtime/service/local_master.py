"""``LocalMaster``: a master of this process as its sessions reach it, through
its task's ``MasterHandler`` (the in-process codec of the MasterService).

``Session("")`` and a session on a server of this process take the same path
as a remote session's calls, minus the encoding: the handler's validation,
timeouts, admission and request ids (a full step class refuses an in-process
RunStep with the words it refuses a remote one). Nothing is copied: values go and come as
they are, as ``Master.run_step``'s.

>>> from nbdist.runtime.master import Master
>>> from nbdist.runtime.worker import Worker
>>> import nbdist as nd
>>> task = "/job:localhost/replica:0/task:0"
>>> local = LocalMaster(MasterHandler(Master(task, Worker(task))))
>>> g = nd.Graph()
>>> with g.as_default():
...     y = nd.constant(2.0) * 21.0
>>> handle, _ = local.create_session(g.as_graph_def())
>>> float(local.run_step(handle, {}, [y.name], [])[0])
42.0
>>> local.close()
"""

from __future__ import annotations

from nbdist.runtime.service.master_handler import MasterHandler
from nbdist.runtime.service.serving import new_request_id

__all__ = ["LocalMaster"]


class LocalMaster:
    """``MasterInterface`` over ``handler`` (a ``MasterHandler``) in process."""

    __slots__ = ("handler", "master", "run_step")

    def __init__(self, handler: MasterHandler):
        self.handler = handler
        self.master = handler.master
        # ``run_step(handle, feeds, fetches, targets, options=None,
        # metadata=None, on_step=None)``: the handler's own, admitted, with no
        # frame of this class's between (a no-op step is ~8 us here). No
        # request id: nothing retries an in-process step, and keeping its
        # answer would hold the caller's fetched arrays.
        self.run_step = handler.run_local_step

    @property
    def task_name(self) -> str:
        return self.master.task_name

    @property
    def local_worker(self):
        """The master task's own ``Worker`` (its variables, its devices)."""
        return self.master.local_worker

    def create_session(self, graph_def, config=None) -> tuple[str, int]:
        return self.handler.call("CreateSession", lambda: self.handler.create_session(
            graph_def, config), new_request_id())

    def extend_session(self, handle: str, graph_def, current_version: int) -> int:
        return self.handler.call("ExtendSession", lambda: self.handler.extend_session(
            handle, graph_def, current_version), new_request_id())

    def cancel_step(self, handle: str, step_id: int, error=None) -> None:
        self.master.cancel_step(handle, step_id, error)

    def close_session(self, handle: str) -> None:
        self.handler.call("CloseSession", lambda: self.handler.close_session(handle),
                          new_request_id())

    def list_devices(self, config=None, session_handle: str = "") -> list:
        return self.handler.call("ListDevices", lambda: self.handler.list_devices(
            session_handle=session_handle, config=config))

    def reset(self, containers=None, device_filters=None, timeout_s=None) -> None:
        self.handler.call("Reset", lambda: self.handler.reset(
            containers or [], device_filters or []), new_request_id())

    def close(self) -> None:
        """Closes the master's sessions (for a master this client owns)."""
        self.master.close()
