"""``nd.Server``: one task of a cluster, served by the transport its protocol names.

``Server(...)`` builds the ``Server`` subclass that ``runtime.transports`` has
for ``protocol`` (default ``grpc``), as TF's ``server_lib`` asks a
``ServerFactory``; code above the runtime makes servers through this class and
never imports a transport.

``Server`` is also the shell every transport's server shares: a task's
``Worker`` and ``Master``, the one set of handlers all its transports serve
through (``runtime.service``: one de-duplication window, one ``Admission``,
the router's faults), its ``PeerRouter`` (tap and faults), the in-process
``LocalMaster`` its sessions use, and the start/stop lifecycle. A transport's
subclass adds its listener and codec: ``_start_serving``, ``_stop_listening``
(no new calls) and ``_close_transport`` (after the task's steps ended).
"""

from __future__ import annotations

import threading

from nbdist import errors
from nbdist.proto import server_def_pb2
from nbdist.runtime import transports
from nbdist.runtime.cluster_spec import ClusterSpec
from nbdist.runtime.master import Master
from nbdist.runtime.service import (
    Admission,
    LocalMaster,
    MasterHandler,
    RecentRequests,
    WorkerHandler,
)

STOP_GRACE_S = 1.0  # what in-flight calls get by default when a server stops


class Server:
    """An in-process nbdist server: one task of a cluster.

    ``server_or_cluster_def`` is a ``ServerDef``, ``ClusterDef``,
    ``ClusterSpec`` or dict; ``job_name``/``task_index`` choose this task when
    the cluster has several; ``protocol`` picks the transport (``"grpc"``).
    See the transport's class (``runtime.grpc.server.GrpcServer``) for the rest.

    >>> import nbdist as nd
    >>> server = nd.Server.create_local_server()
    >>> with nd.Session(server.target) as sess:
    ...     sess.run(nd.constant("Hello, distributed!"))
    b'Hello, distributed!'
    >>> server.stop()
    """

    def __new__(cls, server_or_cluster_def=None, job_name=None, task_index=None,
                protocol=None, *args, **kwargs):
        if cls is Server:
            if not protocol and isinstance(server_or_cluster_def,
                                           server_def_pb2.ServerDef):
                protocol = server_or_cluster_def.protocol
            cls = transports.server_class(protocol or None)
        return super().__new__(cls)

    @classmethod
    def create_local_server(cls, config=None, start=True, **kwargs) -> Server:
        """A single-task server on a free port of 127.0.0.1 (job ``localhost``)."""
        return cls({"localhost": ["localhost:0"]}, config=config, start=start,
                   **kwargs)

    # -- the shell: what every transport's server is made of -------------------------
    def _begin(self, task_name: str) -> None:
        """First: the task's name, its admission (a codec may need it before
        the task's runtime exists) and its lifecycle's state."""
        self.task_name = task_name
        self._admission_counts = Admission(task_name)
        self._state_lock = threading.Lock()
        self._started = False
        self._stopped = threading.Event()

    def _serve_task(self, worker, session_config, **master_kwargs) -> None:
        """This task's master over ``worker`` (reaching peers through
        ``self._router``) and the handlers every transport of it serves."""
        self._worker = worker
        self._master = Master(self.task_name, worker, worker_for=self._worker_for,
                              cluster_tasks=self._cluster.task_names,
                              default_config=session_config, **master_kwargs)
        recent = RecentRequests()
        self._worker_handler = WorkerHandler(worker, recent, self._admission_counts,
                                             faults=self._router.faults)
        self._master_handler = MasterHandler(self._master, recent,
                                             self._admission_counts)
        self._local_master = LocalMaster(self._master_handler)

    def _worker_for(self, task: str):
        return self._worker if task == self.task_name else self._router.worker(task)

    def start(self):
        """Starts serving (idempotent). A stopped server cannot restart."""
        with self._state_lock:
            if self._stopped.is_set():
                raise errors.FailedPreconditionError(
                    None, None, f"Server {self.task_name} has been stopped")
            if self._started:
                return
            self._start_serving()
            self._started = True

    def stop(self, grace: float = STOP_GRACE_S):
        """Stops serving: in-flight calls get ``grace`` seconds, this server's
        sessions are closed and its steps cancelled. Idempotent."""
        with self._state_lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
        self._stop_listening()
        self._worker.abort_all_steps(
            errors.CancelledError(None, None, f"Server {self.task_name} stopped"))
        self._worker.collectives.close()
        try:
            self._master.close()
        finally:
            self._close_transport(grace)
            self._router.close()

    def _start_serving(self) -> None:
        """The transport starts taking calls (under the state lock)."""

    def _stop_listening(self) -> None:
        """The transport takes no new calls (its steps are cancelled next)."""

    def _close_transport(self, grace: float) -> None:
        """The transport lets in-flight calls end (``grace`` seconds) and closes."""

    @property
    def target(self) -> str:
        """The session target of this server, e.g. ``grpc://localhost:2222``."""
        return self._target

    @property
    def cluster_spec(self) -> ClusterSpec:
        return self._cluster

    @property
    def master(self):
        """This task's ``runtime.master.Master`` (what its handlers serve)."""
        return self._master

    @property
    def local_master(self) -> LocalMaster:
        """This task's master as sessions of this process reach it: through
        its ``MasterHandler``, with no encoding."""
        return self._local_master

    @property
    def worker_handler(self) -> WorkerHandler:
        return self._worker_handler

    @property
    def master_handler(self) -> MasterHandler:
        return self._master_handler

    @property
    def tap(self):
        """``runtime.tap.Tap`` of this task's calls and tensors to its peers,
        whatever transport they take: ``server.tap.subscribe(fn)``."""
        return self._router.tap

    @property
    def faults(self):
        """``runtime.faults.Faults`` this task injects into its calls (none
        unless set, e.g. by ``%cluster slow``)."""
        return self._router.faults

    def __repr__(self) -> str:
        return f"<nbdist.Server {self.task_name} at {self.target}>"

    def join(self):
        """Blocks until ``stop()`` is called (from another thread or a signal)."""
        # In slices: Ctrl-C may reach another thread first, and Python raises
        # KeyboardInterrupt only when the main thread next wakes.
        while not self._stopped.wait(0.25):
            pass

    @property
    def stopped(self) -> bool:
        """Whether ``stop()`` was called."""
        return self._stopped.is_set()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


__all__ = ["Server"]
