"""``PeerRouter``: how one task reaches each other task of its cluster.

For every peer task the router keeps one ``RoutedWorker``, made on first use:
the peer's protocol client (gRPC) for everything, and the step paths of the
peer paths registered in ``runtime.transports`` (the same-host transport) for
the calls that have a faster way when the peer answers there (RunGraph and
step aborts): a path that does not answer (the peer is on another host, or
its socket answers with another token) leaves the call on the protocol.
Nothing here imports a transport: the server hands the router its protocol's
``connect(task)`` and its peer paths' ``peers`` objects.
"""

from __future__ import annotations

import threading
from typing import Callable, Protocol

from nbdist import errors
from nbdist.runtime.interfaces import WorkerInterface

__all__ = ["PeerRouter", "RoutedWorker", "StepPath"]


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


class RoutedWorker:
    """A peer's ``WorkerInterface``: steps over its first answering step path,
    everything else (and steps no path took) through ``client``."""

    def __init__(self, client: WorkerInterface, paths: list[StepPath]):
        self._client = client
        self._paths = paths
        self.task_name = client.task_name

    @property
    def incarnation(self):
        return self._client.incarnation

    def get_status(self, timeout_s: float | None = None) -> list[tuple[str, int]]:
        return self._client.get_status(timeout_s)

    def create_worker_session(self, session_handle: str) -> None:
        self._client.create_worker_session(session_handle)

    def delete_worker_session(self, session_handle: str) -> None:
        self._client.delete_worker_session(session_handle)

    def register_graph(self, session_handle: str, graph_def, config=None) -> str:
        return self._client.register_graph(session_handle, graph_def, config)

    def deregister_graph(self, session_handle: str, graph_handle: str) -> None:
        self._client.deregister_graph(session_handle, graph_handle)

    def start_run_graph(self, *args):
        for path in self._paths:
            finish = path.start_run_graph(*args)
            if finish is not None:
                return finish
        return None

    def run_graph(self, session_handle, graph_handle, step_id, feeds, fetch_keys,
                  trace=False, timeout_s=None, op_timeout_s=None):
        args = (session_handle, graph_handle, step_id, feeds, fetch_keys, trace,
                timeout_s, op_timeout_s)
        finish = self.start_run_graph(*args)
        return finish() if finish is not None else self._client.run_graph(*args)

    def abort_step(self, step_id: int, error=None) -> None:
        error = error or errors.CancelledError(None, None, "Step was cancelled")
        for path in self._paths:
            if path.abort_step(step_id, error):
                return
        self._client.abort_step(step_id, error)

    def cleanup_graph(self, step_id: int) -> None:
        self._client.cleanup_graph(step_id)

    def cleanup_all(self, containers=None) -> None:
        self._client.cleanup_all(containers)

    def close(self) -> None:
        self._client.close()


class PeerRouter:
    """One ``RoutedWorker`` per peer task of ``own_task``: ``connect(task)`` makes
    the protocol's client, ``path_peers`` are the peer paths' per-task channels
    (``transports`` peer paths' ``peers(...)``)."""

    def __init__(self, own_task: str, connect: Callable[[str], WorkerInterface],
                 path_peers: list):
        self._own_task = own_task
        self._connect = connect
        self.path_peers = tuple(path_peers)
        self._workers: dict[str, WorkerInterface] = {}
        self._lock = threading.Lock()

    def worker(self, task: str) -> WorkerInterface:
        worker = self._workers.get(task)
        if worker is None:
            with self._lock:
                worker = self._workers.get(task)
                if worker is None:
                    client = self._connect(task)
                    worker = client if not self.path_peers else RoutedWorker(
                        client, [p.step_path(task) for p in self.path_peers])
                    self._workers[task] = worker
        return worker

    def tensor_transport(self, inner):
        """``inner`` (the protocol's ``TensorTransport``) behind every path's."""
        for peers in self.path_peers:
            inner = peers.tensor_transport(inner)
        return inner

    def close(self) -> None:
        with self._lock:
            self._workers.clear()
        for peers in self.path_peers:
            peers.close()
