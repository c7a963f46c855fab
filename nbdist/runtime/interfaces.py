"""The runtime's seams: what a master, a worker, the coordination service and a
tensor transport offer, whoever implements them.

Each has an in-process implementation and a gRPC one (TF's ``rpc/`` seam):

======================  ==============================  =================================
interface               in process                      over gRPC (``runtime/grpc``)
======================  ==============================  =================================
``MasterInterface``     ``runtime.master.Master``       ``client.GrpcMasterClient``
``WorkerInterface``     ``runtime.worker.Worker``       ``client.GrpcWorkerClient``
``CoordinationClient``  ``coordination.``               ``coordination_client.``
                        ``LocalCoordinationClient``     ``GrpcCoordinationClient``
``TensorTransport``     (a task's own rendezvous)       ``transport.GrpcTensorTransport``
======================  ==============================  =================================

Callers above the runtime never name an implementation: they ask
``runtime.transports`` for one by target (``grpc://host:port``).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Protocol, runtime_checkable

from nbdist.executor.executor import StepContext


@runtime_checkable
class MasterInterface(Protocol):
    """Sessions: graphs in, steps run across the cluster, values out."""

    def create_session(self, graph_def, config=None) -> tuple[str, int]: ...

    def extend_session(self, handle: str, graph_def, current_version: int) -> int: ...

    def run_step(self, handle: str, feeds: dict, fetches: list, targets: list,
                 options=None, metadata=None, on_step=None) -> list:
        """The fetched values. ``on_step(step_id)``, called before the step
        starts, lets a caller cancel it (``cancel_step``): a master of this
        process supports it, a remote one raises ``UnimplementedError`` (its
        step ids never leave the server: a client cancels by going away)."""
        ...

    def cancel_step(self, handle: str, step_id: int, error=None) -> None:
        """Cancels a running step (see ``run_step``'s ``on_step``)."""
        ...

    def close_session(self, handle: str) -> None: ...

    def list_devices(self, config=None) -> list: ...

    def reset(self, containers=None, device_filters=None,
              timeout_s=None) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class WorkerInterface(Protocol):
    """One task: registered graph partitions and the steps that run them."""

    task_name: str

    def get_status(self, timeout_s: float | None = None
                   ) -> list[tuple[str, int]]:
        """(device, incarnation) of the task's devices; waits up to
        ``timeout_s`` (a default of the transport's when None) for a peer."""
        ...

    def create_worker_session(self, session_handle: str) -> None: ...

    def delete_worker_session(self, session_handle: str) -> None: ...

    def register_graph(self, session_handle: str, graph_def, config=None) -> str: ...

    def deregister_graph(self, session_handle: str, graph_handle: str) -> None: ...

    def run_graph(self, session_handle: str, graph_handle: str, step_id: int,
                  feeds: dict, fetch_keys, trace: bool = False,
                  timeout_s: float | None = None,
                  op_timeout_s: float | None = None) -> tuple[dict, list]: ...

    def start_run_graph(self, session_handle: str, graph_handle: str,
                        step_id: int, feeds: dict, fetch_keys, trace: bool = False,
                        timeout_s: float | None = None,
                        op_timeout_s: float | None = None):
        """Optional: sends ``run_graph`` without waiting and returns
        ``finish()`` (which waits for its outcome), so that a master starts
        every partition from its own thread; None when this worker cannot (the
        master then calls ``run_graph`` from a pool thread)."""
        ...

    def abort_step(self, step_id: int, error=None) -> None: ...

    def cleanup_graph(self, step_id: int) -> None: ...

    def cleanup_all(self, containers=None) -> None: ...


@runtime_checkable
class TensorTransport(Protocol):
    """Moves tensor bytes between the tasks of one cluster.

    ``recv`` takes the value another task sends under a rendezvous key (a
    ``_Recv`` whose producer is remote); ``pull`` fetches a value another task
    parked for this one by reference (a large feed that went ahead of its step);
    ``on_cancel(fn)`` registers what stops the transfer when its caller is
    cancelled, returning False if it already is.
    A transport serves the other direction by reading the task's rendezvous and
    its ``tensor_store.ParkedTensors``; both live in the runtime, not in it.
    """

    def recv(self, step: StepContext, src_task: str, key: str,
             siblings: tuple[str, ...] = ()) -> Any:
        """The value ``src_task`` sends as ``key`` in ``step``. ``siblings``:
        every key this step's partition receives from ``src_task`` (``key``
        among them), which a transport may bring in the same exchange."""
        ...

    def exchange(self, step: StepContext, src_task: str, key: str,
                 siblings: tuple[str, ...] = ()) -> tuple[Any, dict]:
        """One exchange with ``src_task``: ``(value of key, {sibling key:
        value})`` for the siblings that came along (``recv`` is this plus
        keeping those for the step's later ``_Recv``s)."""
        ...

    def recv_collective(self, step: StepContext, src_task: str, exec_id: int,
                        key: str) -> Any:
        """A collective's chunk ``key`` that ``src_task`` left under the
        execution id ``exec_id`` (not a step id: the tasks of a collective run
        steps of their own); cancelled with ``step``."""
        ...

    def pull(self, ref, timeout_s: float,
             on_cancel: Callable[[Callable[[], None]], bool] | None = None
             ) -> Any: ...

    def pushes_collectives(self, task: str) -> bool:
        """Whether collective chunks to and from ``task`` are pushed by the
        sender (``push_collective``) rather than left for ``task`` to pull
        (``recv_collective``). Both ends must answer alike; a transport that
        never pushes answers False."""
        ...

    def push_collective(self, step: StepContext, dst_task: str, exec_id: int,
                        key: str, value, t0: float, into=None
                        ) -> Callable[[], None] | None:
        """Pushes a collective's chunk to ``dst_task``; returns ``finish()``,
        which waits until the peer consumed it, or None when ``dst_task`` is
        not reachable this way (the chunk is then left for it to pull).
        ``into``: where the peer writes its answer. Only called for a task
        ``pushes_collectives`` said True of."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class TensorParking(Protocol):
    """Where a task parks values for another task to pull by reference
    (``tensor_store.ParkedTensors``): a client that sends a large feed to a
    peer parks it here and sends the reference."""

    def park(self, value) -> tuple[str, int]:
        """Parks ``value``; returns the (rendezvous key, step id) to pull it."""
        ...


@runtime_checkable
class CoordinationClient(Protocol):
    """A client of the cluster's coordination service (liveness, barriers,
    key-value, events), wherever the service runs."""

    # The service is in this process (the leader's own client): its task
    # registers before it serves (its events are batched like every task's).
    in_process: bool

    def register_task(self, task: str, incarnation: int, address: str = "",
                      pid: int = 0, timeout_s: float | None = None,
                      wait_for_ready: bool = False) -> tuple[int, int]: ...

    def heartbeat(self, task: str, incarnation: int, steps_served: int = 0,
                  timeout_s: float | None = None, retry_connect: bool = True,
                  cpu_seconds: float | None = None) -> int: ...

    def report_error(self, task: str, code: int, message: str) -> None: ...

    def task_states(self, tasks=None, timeout_s: float | None = None) -> list: ...

    def barrier(self, barrier_id: str, timeout_s: float, tasks=None,
                source_task: str | None = None) -> None: ...

    def cancel_barrier(self, barrier_id: str,
                       source_task: str | None = None) -> None: ...

    def insert(self, key: str, value, allow_overwrite: bool = False) -> None: ...

    def get(self, key: str, timeout_s: float = ...) -> bytes: ...

    def try_get(self, key: str) -> bytes | None: ...

    def delete(self, key: str) -> None: ...

    def publish_events(self, events, timeout_s: float = ...,
                       retry_connect: bool = True) -> int: ...

    def watch(self, from_seq: int = 0, kinds=None) -> Iterator: ...

    def close(self) -> None: ...


__all__ = ["CoordinationClient", "MasterInterface", "TensorTransport",
           "WorkerInterface"]
