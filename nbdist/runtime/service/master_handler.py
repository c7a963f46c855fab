"""``MasterHandler``: what serving a ``Master`` means, whatever the transport
(see ``worker_handler`` for what a handler owns and a codec does not): a tensor
fed twice is refused, a session's ``operation_timeout_in_ms`` and a step's
``timeout_in_ms`` are clamped (the latter counted from the call's arrival), a
client's large feeds wait in the task's ``PushedTensors`` for the step naming
them, and a step whose client went away is cancelled.
"""

from __future__ import annotations

from nbdist.proto import config_pb2
from nbdist.runtime.service.admission import Admission
from nbdist.runtime.service.hangup import HangupWatch, OnHangup
from nbdist.runtime.service.recent_requests import RecentRequests
from nbdist.runtime.service.worker_handler import invalid, step_timeout_ms
from nbdist.runtime.timeouts import clamp_ms

__all__ = ["MasterHandler"]


class MasterHandler:
    """Serves ``master`` (a ``runtime.master.Master``) to every transport."""

    def __init__(self, master, recent: RecentRequests | None = None,
                 admission: Admission | None = None):
        self.master = master
        self.recent = recent or RecentRequests()
        self.admission = admission or Admission(master.task_name)
        # Large fetches are parked on, and large feeds pushed to, the master's task.
        self.parked = master.local_worker.parked
        self.pushed = master.local_worker.pushed

    @property
    def task_name(self) -> str:
        return self.master.task_name

    def create_session(self, graph_def, config) -> tuple[str, int]:
        cfg = config_pb2.ConfigProto()
        if config is not None:
            cfg.CopyFrom(config)
        cfg.auth_token = ""
        cfg.operation_timeout_in_ms = clamp_ms(cfg.operation_timeout_in_ms)
        return self.master.create_session(graph_def, cfg)

    def extend_session(self, handle: str, graph_def, current_version: int) -> int:
        return self.master.extend_session(handle, graph_def, current_version)

    def close_session(self, handle: str) -> None:
        self.master.close_session(handle)

    def run_step(self, handle: str, feeds, fetches, targets, options=None,
                 metadata=None, on_hangup: OnHangup | None = None, resolve=None):
        """The fetched values of one step. ``feeds``: ``[(name, value)]`` as they
        came (``resolve(feeds)`` turns pushed references into values);
        ``options``: a ``RunOptions`` (its timeout is clamped and counted from
        the call's arrival, in place) or None."""
        if len({name for name, _ in feeds}) != len(feeds):
            raise invalid("RunStep", "a tensor is fed twice")
        if resolve is not None:
            feeds = resolve(feeds)
        if options is not None:
            options.timeout_in_ms = step_timeout_ms(options.timeout_in_ms)
        watch = HangupWatch(
            on_hangup, lambda sid, err: self.master.cancel_step(handle, sid, err))
        try:
            return self.master.run_step(handle, dict(feeds), list(fetches),
                                        list(targets), options, metadata,
                                        on_step=watch.started)
        finally:
            watch.finished()

    def take_pushed(self, ref):
        """A large feed pushed ahead of its step (``PushedTensors.take``)."""
        return self.pushed.take(ref.key, ref.step_id)

    def admit_push(self, nbytes: int, client: str) -> None:
        self.pushed.admit(nbytes, client)

    def push(self, push_id: int, value, client: str) -> str:
        if not push_id:
            raise invalid("PushTensors", "push_id must be nonzero")
        return self.pushed.put(push_id, value, client)

    def list_devices(self, device_filters=(), session_handle: str = "") -> list:
        cfg = None
        if device_filters:
            cfg = config_pb2.ConfigProto()
            cfg.CopyFrom(self.master.default_config)
            del cfg.device_filters[:]
            cfg.device_filters.extend(device_filters)
        return self.master.list_devices(cfg, session_handle)

    def reset(self, containers, device_filters) -> None:
        self.master.reset(list(containers), list(device_filters))
