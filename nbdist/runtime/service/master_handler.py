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
from nbdist.runtime.service.serving import Serving
from nbdist.runtime.service.worker_handler import invalid, step_timeout_ms
from nbdist.runtime.timeouts import clamp_ms

__all__ = ["MasterHandler"]


class MasterHandler(Serving):
    """Serves ``master`` (a ``runtime.master.Master``) to every transport."""

    def __init__(self, master, recent: RecentRequests | None = None,
                 admission: Admission | None = None):
        super().__init__(recent, admission, master.task_name)
        self.master = master
        self._enter = self.admission.enter
        self._master_run_step = master.run_step
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
                 metadata=None, on_hangup: OnHangup | None = None, resolve=None,
                 on_step=None):
        """The fetched values of one step. ``feeds``: ``[(name, value)]`` as they
        came (``resolve(feeds)`` turns pushed references into values), or a
        dict (an in-process client's: no name can come twice); ``options``: a
        ``RunOptions`` (its timeout is clamped and counted from the call's
        arrival, in place) or None; ``on_step(step_id)`` as ``Master.run_step``'s."""
        if type(feeds) is not dict:
            if len({name for name, _ in feeds}) != len(feeds):
                raise invalid("RunStep", "a tensor is fed twice")
            if resolve is not None:
                feeds = resolve(feeds)
            feeds = dict(feeds)
        if options is not None:
            options.timeout_in_ms = step_timeout_ms(options.timeout_in_ms)
        if type(fetches) is not list:
            fetches = list(fetches)
        if type(targets) is not list:
            targets = list(targets)
        if on_hangup is None:  # nobody can go away: no watch to keep
            return self.master.run_step(handle, feeds, fetches, targets, options,
                                        metadata, on_step)
        watch = HangupWatch(
            on_hangup, lambda sid, err: self.master.cancel_step(handle, sid, err))

        def started(step_id):
            watch.started(step_id)
            if on_step is not None:
                on_step(step_id)
        try:
            return self.master.run_step(handle, feeds, fetches, targets, options,
                                        metadata, on_step=started)
        finally:
            watch.finished()

    def run_local_step(self, handle: str, feeds: dict, fetches: list, targets: list,
                       options=None, metadata=None, on_step=None) -> list:
        """``run_step`` for a codec that has nothing to read (``LocalMaster``:
        sessions of this process), in one frame, the hot path: admitted here;
        ``feeds`` a dict; ``options`` the caller's (clamped in a copy)."""
        count = self._enter("RunStep")
        try:
            if options is not None:
                clamped = config_pb2.RunOptions()
                clamped.CopyFrom(options)
                clamped.timeout_in_ms = step_timeout_ms(options.timeout_in_ms)
                options = clamped
            return self._master_run_step(handle, feeds, fetches, targets, options,
                                         metadata, on_step)
        finally:
            count.leave()

    def take_pushed(self, ref):
        """A large feed pushed ahead of its step (``PushedTensors.take``)."""
        return self.pushed.take(ref.key, ref.step_id)

    def admit_push(self, nbytes: int, client: str) -> None:
        self.pushed.admit(nbytes, client)

    def push(self, push_id: int, value, client: str) -> str:
        if not push_id:
            raise invalid("PushTensors", "push_id must be nonzero")
        return self.pushed.put(push_id, value, client)

    def list_devices(self, device_filters=(), session_handle: str = "",
                     config=None) -> list:
        """``(name, type, incarnation)`` of the devices a session may use: the
        open session ``session_handle``'s, else those of ``config`` (an
        in-process client's whole ``ConfigProto``), else of the master's
        default config with ``device_filters``."""
        cfg = config
        if cfg is None and device_filters:
            cfg = config_pb2.ConfigProto()
            cfg.CopyFrom(self.master.default_config)
            del cfg.device_filters[:]
            cfg.device_filters.extend(device_filters)
        return self.master.list_devices(cfg, session_handle)

    def reset(self, containers, device_filters) -> None:
        self.master.reset(list(containers), list(device_filters))
