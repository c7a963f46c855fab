"""The in-process transport (dask's ``comm/inproc.py``): servers of one process
talk without sockets, for tests of multi-task graphs in one process.

``nd.Server(cluster, job_name=..., task_index=..., protocol="inproc")`` serves
one task; its target is ``inproc://<its address in the cluster>`` (any
distinct name: nothing listens). A task reaches its peers through the same
``runtime.router.PeerRouter`` (and so the same tap) as a gRPC server, and every
call goes through the peer's ``runtime.service`` handlers, which own what
serving means: only the encoding is gone. Tensors crossing tasks are copied,
as a wire would, so no two tasks share an array.

>>> import nbdist as nd
>>> cluster = {"ps": ["ps0"], "worker": ["w0"]}
>>> ps = nd.Server(cluster, job_name="ps", task_index=0, protocol="inproc")
>>> w = nd.Server(cluster, job_name="worker", task_index=0, protocol="inproc")
>>> with nd.Graph().as_default():
...     with nd.device("/job:ps/task:0"):
...         a = nd.constant(20.0)
...     with nd.device("/job:worker/task:0"):
...         b = a + 1.0
...     with nd.Session(w.target) as sess:
...         print(sess.run(b))
21.0
>>> w.stop(); ps.stop()
"""

from __future__ import annotations

import threading

import numpy as np

from nbdist import errors
from nbdist.executor.limits import Limits
from nbdist.proto import config_pb2, server_def_pb2
from nbdist.runtime import transports
from nbdist.runtime.cluster_spec import ClusterSpec, task_device
from nbdist.runtime.device_attributes import device_counts
from nbdist.runtime.faults import owner_credential
from nbdist.runtime.router import PeerRouter
from nbdist.runtime.server_lib import Server
from nbdist.runtime.service import WorkerHandler, new_request_id
from nbdist.runtime.tensor_store import PulledCollectives
from nbdist.runtime.timeouts import STATUS_TIMEOUT_S, ms_from_seconds, step_time_left
from nbdist.runtime.worker import Worker

__all__ = ["InprocProtocol", "InprocServer"]

_RECV_POLL_S = 0.1  # a waiting pull checks for its step's cancellation this often

# The servers of this process by address: what an inproc "connection" finds.
_servers: dict[str, InprocServer] = {}
_servers_changed = threading.Condition()


def _address(target: str) -> str:
    return target.removeprefix("inproc://")


def _server_at(address: str, timeout_s: float = 0.0) -> InprocServer:
    """The started server at ``address``, waiting up to ``timeout_s`` for it."""
    with _servers_changed:
        if not _servers_changed.wait_for(lambda: address in _servers, timeout_s):
            raise errors.UnavailableError(
                None, None, f"No in-process server at inproc://{address}")
        return _servers[address]


def _copied(value):
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


class InprocWorkerClient:
    """A peer's ``WorkerInterface``: its ``WorkerHandler``, called directly.
    Each call is admitted there and carries a request id, as a remote one
    (``Serving.call``)."""

    def __init__(self, task_name: str, address: str):
        self.task_name = task_name
        self._address = address

    def _handler(self, timeout_s: float = 0.0) -> WorkerHandler:
        return _server_at(self._address, timeout_s).worker_handler

    def _call(self, method: str, fn, *args):
        handler = self._handler()
        return handler.call(method, lambda: fn(handler, *args), new_request_id())

    @property
    def incarnation(self) -> int:
        return self._handler().worker.incarnation

    def get_status(self, timeout_s: float | None = None) -> list[tuple[str, int]]:
        handler = self._handler(timeout_s or STATUS_TIMEOUT_S)
        return handler.call("GetStatus", handler.get_status)

    def create_worker_session(self, session_handle: str) -> None:
        self._call("CreateWorkerSession", WorkerHandler.create_worker_session,
                   session_handle)

    def delete_worker_session(self, session_handle: str) -> None:
        self._call("DeleteWorkerSession", WorkerHandler.delete_worker_session,
                   session_handle)

    def register_graph(self, session_handle: str, graph_def, config=None) -> str:
        cfg = config_pb2.ConfigProto()
        if config is not None:
            cfg.CopyFrom(config)
        return self._call("RegisterGraph", WorkerHandler.register_graph,
                          session_handle, graph_def, cfg)

    def deregister_graph(self, session_handle: str, graph_handle: str) -> None:
        self._call("DeregisterGraph", WorkerHandler.deregister_graph, session_handle,
                   graph_handle)

    def start_run_graph(self, *args):
        return None  # the master calls run_graph from a pool thread

    def run_graph(self, session_handle, graph_handle, step_id, feeds, fetch_keys,
                  trace=False, timeout_s=None, op_timeout_s=None):
        out, stats = self._call(
            "RunGraph", WorkerHandler.run_graph, session_handle, graph_handle,
            step_id, [(k, _copied(v)) for k, v in feeds.items()], fetch_keys, trace,
            ms_from_seconds(timeout_s))
        return {k: _copied(v) for k, v in out.items()}, stats

    def abort_step(self, step_id: int, error=None) -> None:
        self._call("CleanupGraph", WorkerHandler.cleanup_graph, step_id, error)

    def cleanup_graph(self, step_id: int) -> None:
        self._call("CleanupGraph", WorkerHandler.cleanup_graph, step_id)

    def cleanup_all(self, containers=None) -> None:
        self._call("CleanupAll", WorkerHandler.cleanup_all, list(containers or []))

    def set_faults(self, rules, removed: list | None = None) -> list:
        now, before = self._call("SetFaults", WorkerHandler.set_faults, list(rules),
                                 owner_credential())
        if removed is not None:
            removed.extend(before)
        return now

    def close(self) -> None:
        pass


class InprocTensorTransport(PulledCollectives):
    """``TensorTransport`` over the peers' handlers: ``peer(task)`` is the
    ``InprocWorkerClient`` of a task of the cluster."""

    def __init__(self, address_of):
        self._address_of = address_of

    def _recv(self, step, src_task: str, step_id: int, key: str, siblings=()):
        handler = _server_at(self._address_of(src_task)).worker_handler
        while True:  # bounded by the step's time: a pending pull comes back
            if step.cancelled:
                step.check()
            left = step_time_left(step)
            value = handler.call("RecvTensorUnary", lambda left=left: (
                handler.recv_tensor(step_id, key, left, min(_RECV_POLL_S, left),
                                    siblings=siblings)))
            if value is not None:
                return _copied(value)
            if left <= _RECV_POLL_S:
                raise errors.DeadlineExceededError(
                    None, None, f"Timed out waiting for tensor {key[:200]} from "
                    f"{src_task}")

    def recv(self, step, src_task: str, key: str, siblings=()):
        value, extras = self.exchange(step, src_task, key, siblings)
        if extras:
            raise errors.InternalError(None, None, "recv with siblings: use the "
                                       "router's transport, which keeps them")
        return value

    def exchange(self, step, src_task: str, key: str, siblings=()):
        """``(value of key, {sibling: value} already sent)``: as a remote
        pull, the ready siblings come along."""
        value = self._recv(step, src_task, step.step_id, key, siblings)
        extras = {}
        if siblings:
            handler = _server_at(self._address_of(src_task)).worker_handler
            taken = handler.call("RecvTensorUnary", lambda: handler.take_siblings(
                step.step_id, key, siblings))
            extras = {k: _copied(v) for k, v in taken.items()}
        return value, extras

    def recv_collective(self, step, src_task: str, exec_id: int, key: str):
        return self._recv(step, src_task, exec_id, key)

    def pull(self, ref, timeout_s: float, on_cancel=None):
        from_task = ref.src_device.split("/device:")[0]
        handler = _server_at(self._address_of(from_task)).worker_handler
        return _copied(handler.call("RecvTensor", lambda: handler.recv_tensor(
            ref.step_id, ref.key, timeout_s)))

    def close(self) -> None:
        pass


def _task_of(sd_or_cluster, job_name, task_index) -> tuple[ClusterSpec, str, int]:
    if isinstance(sd_or_cluster, server_def_pb2.ServerDef):
        return (ClusterSpec(sd_or_cluster.cluster), job_name or sd_or_cluster.job_name,
                task_index if task_index is not None else sd_or_cluster.task_index)
    cluster = ClusterSpec(sd_or_cluster)
    if job_name is None:
        if len(cluster.jobs) != 1:
            raise ValueError("Must specify an explicit `job_name`.")
        job_name = cluster.jobs[0]
    if task_index is None:
        indices = cluster.task_indices(job_name)
        if len(indices) != 1:
            raise ValueError("Must specify an explicit `task_index`.")
        task_index = indices[0]
    return cluster, job_name, task_index


class InprocServer(Server):
    """``nd.Server(..., protocol="inproc")``: one task, reached by the other
    servers and sessions of this process without sockets (the shell is
    ``server_lib.Server``'s; this transport adds only its registry of servers)."""

    def __init__(self, server_or_cluster_def, job_name=None, task_index=None,
                 protocol=None, config=None, start=True):
        cluster, job_name, task_index = _task_of(server_or_cluster_def, job_name,
                                                 task_index)
        self._begin(task_device(job_name, task_index))
        self._cluster = cluster
        self._address = cluster.task_address(job_name, task_index)
        self._target = "inproc://" + self._address
        session_config = config_pb2.ConfigProto()
        if config is not None:
            session_config.CopyFrom(config)
        self._router = PeerRouter(self.task_name, self._connect, [])
        worker = Worker(
            self.task_name,
            **device_counts(session_config),
            transport=self._router.tensor_transport(
                InprocTensorTransport(self._address_of)),
            limits=Limits.from_config(session_config))
        self._serve_task(worker, session_config)
        if start:
            self.start()

    def _address_of(self, task: str) -> str:
        job, _, index = task.removeprefix("/job:").partition("/replica:0/task:")
        return self._cluster.task_address(job, int(index))

    def _connect(self, task: str) -> InprocWorkerClient:
        return InprocWorkerClient(task, self._address_of(task))

    def _start_serving(self):
        with _servers_changed:
            if self._address in _servers:
                raise errors.UnknownError(
                    None, None, f"inproc://{self._address} is already served "
                    "in this process")
            _servers[self._address] = self
            _servers_changed.notify_all()

    def _stop_listening(self):
        with _servers_changed:
            if _servers.get(self._address) is self:
                del _servers[self._address]


class InprocProtocol:
    """``inproc://name`` targets: a server of this process, its master."""

    server_class = InprocServer

    @staticmethod
    def connect_master(target: str, config=None):
        return _server_at(_address(target)).local_master, False

    @staticmethod
    def connect_worker(task: str, address: str, token=None, tls=None):
        return InprocWorkerClient(task, _address(address))

    @staticmethod
    def connect_coordination(target: str, token=None, tls=None, config=None,
                             task=None):
        raise errors.UnimplementedError(
            None, None, "The in-process transport has no coordination service")


transports.register_protocol("inproc", InprocProtocol())
