"""``WorkerHandler``: what serving a ``Worker`` means, whatever the transport.

A transport is a codec: it decodes a call into these methods' arguments and
encodes their answers. The handler owns the rest, once: validation (a tensor
sent twice, an empty session handle), timeouts (milliseconds to seconds,
clamped to ``timeouts.UNBOUNDED_S``; a step's timeout counts from its call's
arrival, ``admission.queued_s``), per-graph state (each registered graph's
``operation_timeout_in_ms``), per-step state (steps their master cancelled: a
RunGraph arriving after its CleanupGraph fails at once), de-duplication
(``recent``: one ``RecentRequests`` for every transport of the task) and
cancel-on-hang-up (``on_hangup``, see ``hangup.HangupWatch``).
"""

from __future__ import annotations

import collections
import threading

from nbdist import errors
from nbdist.runtime.faults import Faults
from nbdist.runtime.service.admission import Admission, queued_s
from nbdist.runtime.service.hangup import HangupWatch, OnHangup
from nbdist.runtime.service.recent_requests import RECENT_REQUESTS, RecentRequests
from nbdist.runtime.service.serving import Serving
from nbdist.runtime.timeouts import (
    clamp_ms,
    left_or_unbounded,
    seconds_as_ms,
    seconds_from_ms,
)
from nbdist.runtime.worker import kept_error

__all__ = ["PARKED_WAIT_S", "WorkerHandler", "invalid", "step_timeout_ms"]

# A parked tensor is there before its reference is announced, or gone: wait briefly.
PARKED_WAIT_S = 5.0


def invalid(what: str, detail) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        None, None, f"Malformed {what} request: {detail}")


def step_timeout_ms(timeout_ms: int) -> int:
    """A step's ``timeout_in_ms`` as it is to be run: clamped to a week, and
    counted from its call's arrival (the time it waited for a thread is taken
    off)."""
    timeout_ms = clamp_ms(timeout_ms)
    if timeout_ms > 0:
        timeout_ms = max(1, timeout_ms - int(seconds_as_ms(queued_s())))
    return timeout_ms


def is_parked_key(key: str) -> bool:
    parts = key.split(";")
    return len(parts) == 5 and parts[3].startswith("_park/")


class WorkerHandler(Serving):
    """Serves ``worker`` (a ``runtime.worker.Worker``) to every transport.
    ``faults``: the task's injected faults (``runtime.faults.Faults``, its
    router's, so that SetFaults reaches every call the task makes); else
    its own."""

    def __init__(self, worker, recent: RecentRequests | None = None,
                 admission: Admission | None = None, faults: Faults | None = None):
        super().__init__(recent, admission, worker.task_name)
        self.worker = worker
        self.faults = faults if faults is not None else Faults(worker.task_name)
        self._lock = threading.Lock()
        self._op_timeouts: dict[str, float | None] = {}
        # Steps cancelled by their master; a RunGraph arriving late fails at once.
        self._cancelled: collections.OrderedDict = collections.OrderedDict()

    @property
    def task_name(self) -> str:
        return self.worker.task_name

    # -- sessions and graphs -----------------------------------------------------
    def get_status(self) -> list[tuple[str, int]]:
        return self.worker.get_status()

    def create_worker_session(self, session_handle: str, server_def=None,
                              master_task: str = "", master_incarnation: int = 0,
                              isolate_session_state: bool = False) -> None:
        """Starts a session (``Worker.create_worker_session``: a ``server_def``
        with a cluster is a propagated one)."""
        if not session_handle:
            raise invalid("CreateWorkerSession", "empty session_handle")
        if server_def is not None and server_def.cluster.job:
            self.worker.create_worker_session(session_handle, server_def,
                                              master_task, master_incarnation,
                                              isolate_session_state)
        else:
            self.worker.create_worker_session(session_handle)

    def delete_worker_session(self, session_handle: str) -> None:
        self.worker.delete_worker_session(session_handle)
        prefix = session_handle + "/"
        with self._lock:
            for h in [h for h in self._op_timeouts if h.startswith(prefix)]:
                del self._op_timeouts[h]

    def register_graph(self, session_handle: str, graph_def, config) -> str:
        """``config``: a ``ConfigProto`` (its ``operation_timeout_in_ms`` is
        clamped in place) or None."""
        if config is not None:
            config.operation_timeout_in_ms = clamp_ms(config.operation_timeout_in_ms)
        handle = self.worker.register_graph(session_handle, graph_def, config)
        ms = config.operation_timeout_in_ms if config is not None else 0
        with self._lock:
            self._op_timeouts[handle] = seconds_from_ms(ms)
        return handle

    def deregister_graph(self, session_handle: str, graph_handle: str) -> None:
        self.worker.deregister_graph(session_handle, graph_handle)
        with self._lock:
            self._op_timeouts.pop(graph_handle, None)

    # -- steps -----------------------------------------------------------------
    def run_graph(self, session_handle: str, graph_handle: str, step_id: int,
                  feeds, fetch_keys, trace: bool = False, timeout_ms: int = 0,
                  on_hangup: OnHangup | None = None, resolve=None):
        """``(outputs, stats)`` of one step of a registered graph. ``feeds``:
        ``[(key, value)]`` as they came (``resolve(feeds)`` turns references
        into values, after the step is known not to be cancelled already);
        ``timeout_ms`` the step's own."""
        with self._lock:
            cancelled = self._cancelled.get(step_id)
        if cancelled is not None:
            raise cancelled
        if resolve is not None:
            feeds = resolve(feeds)
        feed_dict = dict(feeds)
        if len(feed_dict) != len(feeds):
            raise invalid("RunGraph", "a tensor is sent twice")
        timeout_s = seconds_from_ms(step_timeout_ms(timeout_ms))
        if self.faults.active:
            self.faults.before_serving()  # a slowed task is slow at its steps too
        # The master went away mid-step (its call ended): cancel.
        watch = HangupWatch(on_hangup, self.worker.abort_step, "master")
        watch.started(step_id)
        try:
            return self.worker.run_graph(
                session_handle, graph_handle, step_id, feed_dict, list(fetch_keys),
                trace, timeout_s, self._op_timeouts.get(graph_handle))
        finally:
            watch.finished()

    def cleanup_graph(self, step_id: int, error: errors.OpError | None = None) -> None:
        """Cancels ``step_id`` here, now or when its RunGraph arrives."""
        err = kept_error(error) if error is not None else errors.CancelledError(
            None, None, f"Step {step_id:x} was cancelled on {self.task_name} by "
            "its master")
        with self._lock:
            self._cancelled[step_id] = err
            while len(self._cancelled) > RECENT_REQUESTS:
                self._cancelled.popitem(last=False)
        self.worker.abort_step(step_id, err)

    def cleanup_all(self, containers) -> None:
        self.worker.cleanup_all(list(containers))

    # -- injected faults ----------------------------------------------------------------
    def set_faults(self, rules, owner: str) -> tuple[list, list]:
        """Replaces this task's injected faults (``runtime.faults.FaultRule``
        tuples; ``[]`` heals) for the cluster's ``owner`` (its credential);
        returns ``(the rules now in force, the rules removed)``."""
        return self.faults.replace(rules, owner)

    # -- tensors ------------------------------------------------------------------
    def recv_tensor(self, step_id: int, key: str, timeout_s: float,
                    wait_s: float | None = None, is_cancelled=None, siblings=()):
        """The value this task sends as ``key`` in ``step_id``; None (pending)
        when ``wait_s`` passed first. ``timeout_s``: what the caller has left.
        A parked tensor is there or gone: ``NotFoundError`` after
        ``PARKED_WAIT_S``. ``siblings``: what ``take_siblings`` is asked for
        next (awaited together with ``key``)."""
        polling = wait_s is not None and wait_s < timeout_s
        timeout = wait_s if polling else timeout_s
        parked = is_parked_key(key)
        if parked:  # parked before it was announced: there, or gone
            timeout = min(timeout, PARKED_WAIT_S)
        try:
            return self.worker.recv_tensor(step_id, key, timeout,
                                           is_cancelled or _never,
                                           () if parked else siblings)
        except errors.DeadlineExceededError:
            if parked:
                raise errors.NotFoundError(
                    None, None, f"Tensor {key[:200]} is not parked on "
                    f"{self.task_name} (already pulled, or expired)") from None
            if polling:
                return None
            raise

    def answer_pull(self, step_id: int, key: str, siblings, timeout_s: float,
                    answer, is_cancelled=None) -> bool:
        """``Worker.answer_pull``: whether the pull of ``key`` with its
        ``siblings`` was answered by ``answer(value, extras)`` in the thread
        that sent the last of them (never for a parked tensor)."""
        if is_parked_key(key):
            return False
        return self.worker.answer_pull(step_id, key, siblings, timeout_s,
                                       is_cancelled or _never, answer)

    def take_siblings(self, step_id: int, key: str, siblings) -> dict:
        return self.worker.take_siblings(step_id, key, list(siblings))

    def park(self, value) -> tuple[str, int]:
        return self.worker.parked.park(value)

    def pull(self, ref, timeout_s: float, on_cancel=None):
        """A tensor a peer parked for this task (a large feed of a step)."""
        return self.worker.pull(ref, timeout_s, on_cancel)

    def push_collective(self, exec_id: int, key: str, value, meta: dict,
                        timeout_ms: int, on_hangup: OnHangup | None = None) -> None:
        """A peer's all-reduce chunk ``key`` of execution ``exec_id``, left for
        this task's collective until it consumed it (``CollectiveMailbox.
        deliver``: its error is raised here); withdrawn (``CancelledError``)
        when the pusher hangs up (``on_hangup``). ``timeout_ms``: what is left
        of the pusher's step (0: no deadline)."""
        if not key:
            raise invalid("PushCollective", "a chunk needs its key")
        mailbox = self.worker.collectives.mailbox
        hung = threading.Event()

        def hang_up():
            hung.set()
            mailbox.poke()

        if on_hangup is not None and not on_hangup(hang_up):
            hung.set()
        mailbox.deliver(exec_id, key, value, meta,
                        left_or_unbounded(seconds_from_ms(timeout_ms)), hung)


def _never() -> bool:
    return False
