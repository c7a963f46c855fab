"""``PeerRouter``: how one task reaches each other task of its cluster.

For every peer task the router keeps one ``RoutedWorker``, made on first use
(the task's one cache of peer clients: transports make clients, the router
keeps and closes them):
the peer's protocol client (gRPC) for everything, and the step paths of the
peer paths registered in ``runtime.transports`` (the same-host transport) for
the calls that have a faster way when the peer answers there (RunGraph and
step aborts): a path that does not answer (the peer is on another host, or
its socket answers with another token) leaves the call on the protocol.
Nothing here imports a transport: the server hands the router its protocol's
``connect(task)`` and its peer paths' ``peers`` objects. Every peer client and
the tensor transport go through the router's ``tap.Tap`` and ``faults.Faults``:
steps and tensors, control calls (``"control"`` tap events) and the tasks of a
session's propagated cluster (``address_worker``) alike.

A session's way to its master is chosen here too: ``MasterPath`` tries the
registry's peer paths (backing off while none reaches the master) and says
when the protocol must carry a call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from nbdist import errors
from nbdist.runtime import transports
from nbdist.runtime.faults import Faults
from nbdist.runtime.interfaces import WorkerInterface
from nbdist.runtime.tap import CONTROL, Tap, TapEvent, nbytes_of
from nbdist.runtime.tensor_store import SiblingTensors

__all__ = ["OFF_PATH", "MasterPath", "PeerRouter", "RoutedWorker",
           "StepPath", "TappedTransport"]

_PATH_RETRY_FIRST_S = 1.0  # a session without a peer path looks again after
_PATH_RETRY_MAX_S = 60.0  # ... doubling up to this


class StepPath(Protocol):
    """A peer path's way to one peer's steps."""

    task_name: str

    def start_run_graph(self, session_handle: str, graph_handle: str, step_id: int,
                        feeds: dict, fetch_keys, trace: bool = False,
                        timeout_s: float | None = None,
                        op_timeout_s: float | None = None):
        """``finish()`` (waits for ``run_graph``'s outcome), or None when the
        peer is not reachable this way (nothing was sent)."""
        ...

    def abort_step(self, step_id: int, error: errors.OpError) -> bool:
        """Whether the abort went out this way."""
        ...

    def close(self) -> None: ...


class RoutedWorker:
    """A peer's ``WorkerInterface``: steps over its first answering step path,
    everything else (and steps no path took) through ``client``."""

    def __init__(self, client: WorkerInterface, paths: list[StepPath],
                 tap: Tap | None = None, own_task: str = "",
                 faults: Faults | None = None):
        self.client = client  # the protocol's client of the peer
        self._client = client
        # The peer paths' ways to the peer, in the router's path_peers' order.
        self._paths = self.paths = tuple(paths)
        self.task_name = client.task_name
        self._tap = tap or Tap()
        self._own_task = own_task
        # Injected stragglers and cut links (runtime.faults): off unless set.
        self._faults = faults or Faults(own_task)

    @property
    def incarnation(self):
        return self._client.incarnation

    # Control calls: each passes the fault rules and shows on the tap as a
    # "control" event (for subscribers that asked for those).
    def _control(self, method: str, call, *args, step: int = 0, nbytes: int = 0,
                 **kwargs):
        if self._faults.active:
            self._faults.before_call(self.task_name)
        if not self._tap.listening_control:
            return call(*args, **kwargs)
        start = time.monotonic()
        try:
            return call(*args, **kwargs)
        finally:
            self._tap.emit(TapEvent(CONTROL, self._own_task, self.task_name, step,
                                    nbytes, start, time.monotonic(), method))

    def get_status(self, timeout_s: float | None = None) -> list[tuple[str, int]]:
        return self._control("GetStatus", self._client.get_status, timeout_s)

    def create_worker_session(self, session_handle: str, **propagated) -> None:
        """``propagated``: a propagated cluster's ``server_def``,
        ``master_task``, ... (``GrpcWorkerClient.create_worker_session``)."""
        self._control("CreateWorkerSession", self._client.create_worker_session,
                      session_handle, **propagated)

    def delete_worker_session(self, session_handle: str) -> None:
        self._control("DeleteWorkerSession", self._client.delete_worker_session,
                      session_handle)

    def register_graph(self, session_handle: str, graph_def, config=None) -> str:
        return self._control(
            "RegisterGraph", self._client.register_graph, session_handle, graph_def,
            config, nbytes=graph_def.ByteSize() if self._tap.listening_control else 0)

    def deregister_graph(self, session_handle: str, graph_handle: str) -> None:
        self._control("DeregisterGraph", self._client.deregister_graph,
                      session_handle, graph_handle)

    def start_run_graph(self, *args):
        if self._faults.active and self._paths:
            self._faults.check_link(self.task_name)  # a cut link sends nothing
        for path in self._paths:
            finish = path.start_run_graph(*args)
            if finish is not None:
                if self._faults.active:
                    finish = _delayed(finish, self._faults.delay_of(self.task_name))
                if self._tap.listening:
                    return self._tapped(finish, args[2], args[3], time.monotonic())
                return finish
        return None

    def _tapped(self, finish, step_id: int, feeds: dict, start: float):
        def tapped_finish():
            out, stats = finish()
            self._tap.emit(TapEvent(
                "RunGraph", self._own_task, self.task_name, step_id,
                nbytes_of(feeds.values()) + nbytes_of(out.values()), start,
                time.monotonic()))
            return out, stats
        return tapped_finish

    def run_graph(self, session_handle, graph_handle, step_id, feeds, fetch_keys,
                  trace=False, timeout_s=None, op_timeout_s=None):
        args = (session_handle, graph_handle, step_id, feeds, fetch_keys, trace,
                timeout_s, op_timeout_s)
        finish = self.start_run_graph(*args)
        if finish is not None:
            return finish()
        if self._faults.active:
            self._faults.before_call(self.task_name)
        if not self._tap.listening:
            return self._client.run_graph(*args)
        return self._tapped(lambda: self._client.run_graph(*args), step_id, feeds,
                            time.monotonic())()

    def abort_step(self, step_id: int, error=None) -> None:
        error = error or errors.CancelledError(None, None, "Step was cancelled")
        if self._tap.listening:
            now = time.monotonic()
            self._tap.emit(TapEvent("AbortStep", self._own_task, self.task_name,
                                    step_id, 0, now, now))
        for path in self._paths:
            if path.abort_step(step_id, error):
                return
        self._client.abort_step(step_id, error)

    def cleanup_graph(self, step_id: int) -> None:
        self._control("CleanupGraph", self._client.cleanup_graph, step_id,
                      step=step_id)

    def cleanup_all(self, containers=None) -> None:
        self._control("CleanupAll", self._client.cleanup_all, containers)

    def close(self) -> None:
        for path in self._paths:
            path.close()
        self._client.close()

    def set_faults(self, rules) -> list:
        """The peer's ``WorkerHandler.set_faults`` (``runtime.faults``): not
        subject to this task's rules (a heal must get through a cut link)."""
        return self._client.set_faults(rules)


def _delayed(finish, delay_s: float):
    """``finish`` answering ``delay_s`` later (a slow link's latency)."""
    if not delay_s:
        return finish

    def delayed_finish():
        time.sleep(delay_s)
        return finish()
    return delayed_finish


class TappedTransport(SiblingTensors):
    """A ``TensorTransport`` whose every exchange shows on ``tap``: a ``_Recv``
    whose tensor came along with an earlier one of its step (a sibling) is
    answered here, from the step's extras, without an exchange."""

    def __init__(self, inner, tap: Tap, own_task: str, faults: Faults | None = None):
        self._inner = inner
        self._tap = tap
        self._own_task = own_task
        self._faults = faults or Faults(own_task)

    def _emit(self, kind: str, src: str, step_id: int, value, start: float):
        self._tap.emit(TapEvent(kind, src, self._own_task, step_id,
                                int(getattr(value, "nbytes", 0)), start,
                                time.monotonic()))

    def exchange(self, step, src_task: str, key: str, siblings=()):
        """``inner``'s exchange, through the fault rules and the tap."""
        if self._faults.active:
            self._faults.before_call(src_task)
        if not self._tap.listening:
            return self._inner.exchange(step, src_task, key, siblings)
        start = time.monotonic()
        value, extras = self._inner.exchange(step, src_task, key, siblings)
        self._tap.emit(TapEvent(
            "RecvTensor", src_task, self._own_task, step.step_id,
            int(getattr(value, "nbytes", 0)) + nbytes_of(extras.values()),
            start, time.monotonic()))
        return value, extras

    def recv_collective(self, step, src_task: str, exec_id: int, key: str):
        if self._faults.active:
            self._faults.before_call(src_task)
        if not self._tap.listening:
            return self._inner.recv_collective(step, src_task, exec_id, key)
        start = time.monotonic()
        value = self._inner.recv_collective(step, src_task, exec_id, key)
        self._emit("collective", src_task, exec_id, value, start)
        return value

    def pushes_collectives(self, task: str) -> bool:
        """Whether all-reduce chunks to and from ``task`` are pushed (a peer
        path reaches it) rather than pulled."""
        return self._inner.pushes_collectives(task)

    def push_collective(self, step, dst_task: str, exec_id: int, key: str, value,
                        t0: float, into=None):
        """``finish()`` of an all-reduce chunk pushed to ``dst_task`` (shown on
        the tap as a "collective" event when it was consumed), or None.
        ``into``: where the peer writes its answer (``collective_ring``)."""
        finish = self._inner.push_collective(step, dst_task, exec_id, key, value, t0,
                                             into)
        if not finish or not self._tap.listening:
            return finish
        return _TappedPush(finish, self._tap, self._own_task, dst_task, exec_id,
                           int(getattr(value, "nbytes", 0)))

    def pull(self, ref, timeout_s: float, on_cancel=None):
        if self._faults.active:
            self._faults.before_call(_task_of_device(ref.src_device))
        if not self._tap.listening:
            return self._inner.pull(ref, timeout_s, on_cancel)
        start = time.monotonic()
        value = self._inner.pull(ref, timeout_s, on_cancel)
        self._emit("PullTensor", ref.src_device, ref.step_id, value, start)
        return value

    def close(self) -> None:
        self._inner.close()


class _TappedPush:
    """A pushed chunk's ``finish()`` that shows on the tap when consumed."""

    def __init__(self, finish, tap: Tap, src: str, dst: str, exec_id: int,
                 nbytes: int):
        self._finish, self._tap = finish, tap
        self._event = (src, dst, exec_id, nbytes, time.monotonic())

    def __call__(self):
        done = self._finish()
        src, dst, exec_id, nbytes, start = self._event
        self._tap.emit(TapEvent("collective", src, dst, exec_id, nbytes, start,
                                time.monotonic()))
        return done

    def abandon(self):
        self._finish.abandon()


class PeerRouter:
    """One ``RoutedWorker`` per peer task of ``own_task``: ``connect(task)`` makes
    the protocol's client, ``path_peers`` are the peer paths' per-task channels
    (``transports`` peer paths' ``peers(...)``); ``tap`` sees every call.

    ``connect_address(address)`` (optional) makes the protocol's client of a
    task named by its address: the tasks of a session's propagated cluster
    (``ConfigProto.cluster_def``), reached over the protocol only, through the
    same tap and fault rules (which name such a peer by its address)."""

    def __init__(self, own_task: str, connect: Callable[[str], WorkerInterface],
                 path_peers: list, tap: Tap | None = None,
                 connect_address: Callable[[str], WorkerInterface] | None = None):
        self._own_task = own_task
        self._connect = connect
        self._connect_address = connect_address
        self.path_peers = tuple(path_peers)
        self.tap = tap or Tap()
        # This task's injected faults (runtime.faults), shared by its peers'
        # RoutedWorkers and its tensor transport; a server hands it to its
        # WorkerHandler, which sets it (SetFaults) and slows served steps.
        self.faults = Faults(own_task)
        self._workers: dict[str, WorkerInterface] = {}
        self._by_address: dict[str, RoutedWorker] = {}
        self._lock = threading.Lock()

    def client(self, task: str) -> WorkerInterface:
        """The protocol's client of ``task`` (for its tensor transport): the
        router's, made once with its ``RoutedWorker``."""
        return self.worker(task).client

    def worker(self, task: str) -> RoutedWorker:
        worker = self._workers.get(task)
        if worker is None:
            with self._lock:
                worker = self._workers.get(task)
                if worker is None:
                    worker = self._workers[task] = RoutedWorker(
                        self._connect(task),
                        [p.step_path(task) for p in self.path_peers],
                        self.tap, self._own_task, self.faults)
        return worker

    def address_worker(self, address: str) -> RoutedWorker:
        """The ``RoutedWorker`` of the task at ``address`` (a propagated
        cluster's), made once."""
        worker = self._by_address.get(address)
        if worker is None:
            if self._connect_address is None:
                raise errors.UnimplementedError(
                    None, None, f"{self._own_task} cannot reach tasks by address "
                    f"({address}): its server has no protocol client for them")
            with self._lock:
                worker = self._by_address.get(address)
                if worker is None:
                    worker = self._by_address[address] = RoutedWorker(
                        self._connect_address(address), [], self.tap,
                        self._own_task, self.faults)
        return worker

    def address_client(self, address: str) -> WorkerInterface:
        """The protocol's client of the task at ``address``."""
        return self.address_worker(address).client

    def tensor_transport(self, inner):
        """``inner`` (the protocol's ``TensorTransport``) behind every path's,
        through the tap."""
        # The first path outermost: tried first, the protocol last.
        for i, peers in reversed(list(enumerate(self.path_peers))):
            inner = peers.tensor_transport(
                inner, lambda task, i=i: self.worker(task).paths[i])
        return self.tapped(inner)

    def tapped(self, inner) -> TappedTransport:
        """``inner`` (a ``TensorTransport``; e.g. the protocol's over
        ``address_client``) through this router's tap and fault rules."""
        return TappedTransport(inner, self.tap, self._own_task, self.faults)

    def close(self) -> None:
        """Closes the peers' clients and paths."""
        with self._lock:
            workers = [*self._workers.values(), *self._by_address.values()]
            self._workers, self._by_address = {}, {}
        for worker in workers:
            worker.close()
        for peers in self.path_peers:
            peers.close()


OFF_PATH = object()  # ``MasterPath.call``'s answer when the protocol must carry it


class MasterPath:
    """A session's way to its master over a peer path (same-host, or TCP from
    another host): steps that ask for nothing but a timeout, large feeds and
    fetches. ``call`` tries the path; the session's protocol client carries
    what it does not take (``OFF_PATH``).

    ``address``: the master's; ``secret``: the peer-path secret
    (``auth.peer_path_secret``); ``tls``: the client's TLS configuration or
    None (with TLS and no secret only paths that check certificates serve);
    ``who``: the master as errors name it.

    >>> path = MasterPath("127.0.0.1:1", None, None, "The master at 127.0.0.1:1",
    ...                   paths=[])
    >>> path.call("RunStep", lambda channel: 42) is OFF_PATH  # no path reaches it
    True
    """

    def __init__(self, address: str, secret, tls, who: str, paths=None):
        self._address = address
        self._secret = secret
        self._tls = tls
        self._who = who
        self._paths = paths  # None: the registry's (tests give their own)
        self.channel_now = None  # the open channel, if any
        self.look_at = 0.0  # when to look for a peer path (again)
        self._backoff_s = _PATH_RETRY_FIRST_S

    def channel(self):
        """The master's channel over a peer path, if one reaches it; looked
        for again, less and less often, while none does (a master on another
        host announces its TCP endpoint once registered)."""
        ch = self.channel_now
        if ch is not None or time.monotonic() < self.look_at:
            return ch
        paths = self._paths
        if paths is None:
            paths = transports.peer_paths(
                tls=self._tls is not None and self._secret is None,
                plaintext_ok=self._tls is None)
        for path in paths:
            ch = path.master_channel(self._address, self._secret, tls=self._tls)
            if ch is not None:
                self.channel_now = ch
                return ch
        self.look_at = time.monotonic() + self._backoff_s
        self._backoff_s = min(2 * self._backoff_s, _PATH_RETRY_MAX_S)
        return None

    def call(self, method: str, fn, resend_ok: bool = False):
        """``fn(channel)`` over the peer path, or ``OFF_PATH`` when none
        reaches the master or its connection broke before sending (then, and
        when ``resend_ok``, the protocol carries the call).

        Raises:
          UnavailableError: the connection broke after ``method`` went out
            and it must not run twice (``resend_ok`` False: a step).
        """
        ch = self.channel()
        if ch is None:
            return OFF_PATH
        try:
            return fn(ch)
        except transports.ChannelBroken as e:
            self.drop()
            if e.sent and not resend_ok:  # it may have run: not again
                raise errors.UnavailableError(
                    None, None, f"{self._who} went away during {method} "
                    f"(same-host channel: {e})") from None
            return OFF_PATH

    def drop(self) -> None:
        """Closes the channel (the next call looks for a path again)."""
        ch, self.channel_now = self.channel_now, None
        if ch is not None:
            ch.close()


def _task_of_device(device: str) -> str:
    """``/job:a/replica:0/task:1/device:CPU:0`` -> ``/job:a/replica:0/task:1``."""
    return device.split("/device:", 1)[0]
