"""The gRPC ``TensorTransport``: tensors from the other tasks of a cluster.

``GrpcPeers`` knows the other tasks' addresses and makes a ``GrpcWorkerClient``
for one (``client(task)``: a new one per call, cached by the server's
``runtime.router.PeerRouter``, the one cache of a task's peer clients). The
master reaches remote workers through the router, and ``GrpcTensorTransport``
pulls tensors through the router's clients: ``RecvTensorUnary`` for small
values, a chunked ``RecvTensor`` stream for large ones and for parked references.
"""

from __future__ import annotations

from nbdist import errors
from nbdist.framework.device import DeviceSpec
from nbdist.runtime.cluster_spec import ClusterSpec
from nbdist.runtime.grpc.client import GrpcWorkerClient
from nbdist.runtime.interfaces import TensorParking
from nbdist.runtime.partition import task_of
from nbdist.runtime.tensor_store import PulledCollectives, SiblingTensors


class GrpcPeers:
    """Worker clients of the tasks of ``cluster`` other than ``own_task``.

    ``parking`` (an ``interfaces.TensorParking``: the task's
    ``tensor_store.ParkedTensors``) is where a client parks a large feed for
    the peer to pull; None: feeds go inline."""

    def __init__(self, cluster: ClusterSpec, own_task: str, *, token=None, tls=False,
                 parking: TensorParking | None = None):
        self._cluster = cluster
        self._own_task = own_task
        self._token = token
        self._tls = tls
        self._parking = parking

    def address(self, task: str) -> str:
        try:
            spec = DeviceSpec.from_string(task)
            return self._cluster.task_address(spec.job, spec.task or 0)
        except ValueError:
            raise errors.InvalidArgumentError(
                None, None, f"Task {task} is not in the cluster of {self._own_task}: "
                f"{self._cluster}") from None

    def client(self, task: str) -> GrpcWorkerClient:
        """A new client of ``task`` (the caller keeps and closes it)."""
        return GrpcWorkerClient(task, self.address(task), token=self._token,
                                tls=self._tls, parking=self._parking)


class AddressPeers(GrpcPeers):
    """Worker clients named by their addresses: the tasks of a session's
    propagated cluster (``ConfigProto.cluster_def``); a new one per call,
    cached by the router (``PeerRouter(connect_address=...)``)."""

    def address(self, task: str) -> str:
        return task


class GrpcTensorTransport(SiblingTensors, PulledCollectives):
    """``interfaces.TensorTransport`` over the peers' WorkerService:
    ``client_of(task)`` is the (cached) ``GrpcWorkerClient`` of a peer."""

    def __init__(self, client_of):
        # TF pulls each tensor with its own call; here the first pull of a step
        # from a task brings the others that are ready (RecvTensorRequest.
        # sibling_key): ``recv`` is ``SiblingTensors``'.
        self._client_of = client_of

    def exchange(self, step, src_task: str, key: str, siblings=()):
        """One RecvTensorUnary: ``(value of key, {sibling: value} that came
        along)``."""
        extras: dict = {}
        value = self._client_of(src_task).recv_tensor(
            step, key, siblings=siblings, extras=extras)
        return value, extras

    def recv_collective(self, step, src_task: str, exec_id: int, key: str):
        return self._client_of(src_task).recv_tensor(step, key, step_id=exec_id)

    def pull(self, ref, timeout_s: float, on_cancel=None):
        client = self._client_of(task_of(ref.src_device))
        return client.pull(ref.step_id, ref.key, timeout_s, on_cancel)

    def close(self):
        pass  # the clients are their cache's (the router's) to close


__all__ = ["AddressPeers", "GrpcPeers", "GrpcTensorTransport"]
