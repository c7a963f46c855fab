"""Clients of the master and worker services.

``GrpcMasterClient`` is what ``Session("grpc://host:port")`` talks to when the
server is in another process; ``GrpcWorkerClient`` is how a server's master
reaches the other tasks of its cluster, and how a ``_Recv`` pulls a tensor
from another task. Both implement the same interfaces as the in-process
``Master`` and ``Worker``.

Every call has a deadline. A gRPC failure becomes the nbdist error of the same
canonical code, naming the task and its address: a dead task is
``UnavailableError("Task /job:ps/replica:0/task:0 at 127.0.0.1:2222 is
unavailable: ...")``. Transient connection failures are retried with backoff
(``rpc``): a call that could not connect waits up to ``RECONNECT_S`` for the
channel to (re)connect, so a restarted task is found again; a call cut off
mid-way is retried only when it is idempotent or carries a ``request_id``
(the server drops duplicates). A ``_Recv`` whose producer restarted is
``AbortedError`` naming it.

Tensors: a client's feeds of ``coding.STREAM_MIN_BYTES`` or more go ahead of
the RunStep in one PushTensors stream and the RunStep names them by
reference; large fetches come back as references pulled with RecvTensor. A
task's ``_Recv`` asks the producer with RecvTensorUnary, which answers a
small value in one message (a stream costs about twice a unary call), a
large one by reference (pulled with the RecvTensor stream), or ``pending``
after ``recv_poll.RECV_POLL_MS`` so that a cancelled step stops waiting at once.
"""

from __future__ import annotations

import random
import time

import grpc
from nbdist import errors
from nbdist.proto import (
    config_pb2,
    master_pb2,
    master_service_pb2_grpc,
    worker_pb2,
    worker_service_pb2_grpc,
)
from nbdist.runtime.faults import owner_credential
from nbdist.runtime.grpc import auth, coding
from nbdist.runtime.grpc.rpc import (
    RETRIES,
    Retry,
    Rpc,
    channel_options,
    error_from_status,
    first_line,
    make_channel,
)
from nbdist.runtime.grpc.wire import connect_failed
from nbdist.runtime.interfaces import TensorParking
from nbdist.runtime.master import _DISCOVERY_TIMEOUT_S as DISCOVERY_TIMEOUT_S
from nbdist.runtime.recv_poll import (
    PENDING,
    poll_recv,
    tensor_name,
    timed_out,
)
from nbdist.runtime.router import OFF_PATH, MasterPath
from nbdist.runtime.timeouts import (
    CONTROL_TIMEOUT_S,
    STATUS_TIMEOUT_S,
    UNBOUNDED_S,
    ms_from_seconds,
    seconds_from_ms,
    step_time_left,
)

__all__ = ["GrpcMasterClient", "GrpcWorkerClient", "channel_options", "make_channel"]

DELETE_SESSION_TIMEOUT_S = 10.0  # as TF's master; also DeregisterGraph
_STEP_GRACE_S = 10.0  # lets a step's own DeadlineExceeded (naming its op) arrive
_INCARNATION_TIMEOUT_S = 2.0  # GetStatus asking whether a peer restarted


def _address(target: str) -> str:
    return target.removeprefix("grpc://")


def _request_id() -> int:
    return random.getrandbits(62) | 1


def _call_timeout(timeout_s: float | None) -> float:
    """The RPC deadline of a step of ``timeout_s``: a grace beyond it."""
    return timeout_s + _STEP_GRACE_S if timeout_s else UNBOUNDED_S


def _recv_tensor_method(channel):
    return channel.unary_stream(
        "/nbdist.WorkerService/RecvTensor",
        request_serializer=worker_pb2.RecvTensorRequest.SerializeToString,
        response_deserializer=coding.parse_chunk,
    )


def _pull(rpc: Rpc, method, step_id: int, key: str, timeout_s: float, on_cancel=None):
    """Streams one tensor into a fresh array. ``on_cancel(fn)`` registers ``fn``
    to run when the caller is cancelled (``StepContext.add_cancel_callback``,
    grpc's ``context.add_callback``) and returns False if it already was; the
    stream is then cancelled at once. Raises grpc.RpcError (the caller maps it)
    or DataLossError. Pulling takes the tensor: only a connection that was
    never set up is retried."""
    deadline = time.monotonic() + timeout_s
    request = worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=key)
    failures = 0
    while True:
        call = method(request, timeout=_deadline_left(deadline), metadata=rpc.metadata)
        cancelled = False
        if on_cancel is not None and not on_cancel(call.cancel):
            call.cancel()
            cancelled = True
        receiver = coding.ChunkReceiver()
        try:
            for chunk in call:
                receiver.add(chunk)
            return receiver.result()
        except grpc.RpcError as e:
            if cancelled or failures >= RETRIES or not connect_failed(e):
                raise
            failures += 1
            rpc.reconnect("RecvTensor", deadline, failures, timeout_s, on_cancel)
        except ValueError as e:
            call.cancel()
            raise errors.DataLossError(
                None, None, f"Malformed RecvTensor stream from {rpc.who}: {e}"
            ) from None


def _deadline_left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.001)


class GrpcWorkerClient:
    """The worker interface of a task in another process (or this one, via RPC).

    ``token`` defaults to ``NBDIST_TOKEN``; ``tls`` to ``NBDIST_TLS_*`` (False:
    plaintext).

    >>> w = GrpcWorkerClient("/job:ps/replica:0/task:0", "127.0.0.1:1")
    >>> w.close()
    """

    def __init__(
        self,
        task_name: str,
        address: str,
        token: str | None = None,
        tls=None,
        parking: TensorParking | None = None,
    ):
        self.task_name = task_name
        self.address = address
        self._rpc = Rpc(
            f"Task {task_name} at {address}",
            address,
            auth.resolve_token(token),
            auth.resolve_tls(tls),
        )
        # A server's: where a large feed waits for this task to pull it (coding).
        self._park = parking.park if parking is not None else None
        ch = self._rpc.channel
        self._stub = worker_service_pb2_grpc.WorkerServiceStub(ch)
        self._run_graph = ch.unary_unary(
            "/nbdist.WorkerService/RunGraph",
            request_serializer=_identity,
            response_deserializer=_decode_run_graph_response,
        )
        self._recv_tensor = _recv_tensor_method(ch)
        self._recv_unary = ch.unary_unary(
            "/nbdist.WorkerService/RecvTensorUnary",
            request_serializer=worker_pb2.RecvTensorRequest.SerializeToString,
            response_deserializer=_identity,
        )
        self.incarnation: int | None = None
        self._session_incarnation: dict[str, int | None] = {}

    @property
    def rpc(self) -> Rpc:
        """The client's channel, metadata and error mapping (``grpc.stream_path``
        opens its streams on them)."""
        return self._rpc

    # -- worker interface ---------------------------------------------------------
    def get_status(self, timeout_s: float | None = None) -> list[tuple[str, int]]:
        resp = self._rpc.call(
            "GetStatus",
            self._stub.GetStatus,
            worker_pb2.GetStatusRequest(),
            timeout_s or STATUS_TIMEOUT_S,
            wait_for_ready=True,
            retry=Retry.SAFE,
        )
        # A client named by its address (ClusterSpec propagation) takes any task.
        if resp.task and self.task_name.startswith("/") and resp.task != self.task_name:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"The server at {self.address} is {resp.task}, not "
                f"{self.task_name}: the cluster specs of the tasks disagree",
            )
        self.incarnation = resp.incarnation
        return [(d.name, d.incarnation) for d in resp.device_attributes]

    def create_worker_session(self, session_handle: str, server_def=None,
                              master_task: str = "", master_incarnation: int = 0,
                              isolate_session_state: bool = False):
        self._session_incarnation[session_handle] = self.incarnation
        self._rpc.call(
            "CreateWorkerSession",
            self._stub.CreateWorkerSession,
            worker_pb2.CreateWorkerSessionRequest(
                session_handle=session_handle, server_def=server_def,
                master_task=master_task, master_incarnation=master_incarnation,
                isolate_session_state=isolate_session_state, request_id=_request_id()
            ),
            CONTROL_TIMEOUT_S,
            retry=Retry.SAFE,
        )

    def delete_worker_session(self, session_handle: str):
        self._session_incarnation.pop(session_handle, None)
        self._rpc.call(
            "DeleteWorkerSession",
            self._stub.DeleteWorkerSession,
            worker_pb2.DeleteWorkerSessionRequest(
                session_handle=session_handle, request_id=_request_id()
            ),
            DELETE_SESSION_TIMEOUT_S,
            retry=Retry.NEVER,
        )

    def register_graph(self, session_handle: str, graph_def, config=None) -> str:
        req = worker_pb2.RegisterGraphRequest(
            session_handle=session_handle, graph_def=graph_def, request_id=_request_id()
        )
        if config is not None:
            req.config_proto.CopyFrom(config)
            req.config_proto.auth_token = ""
        try:
            resp = self._rpc.call(
                "RegisterGraph",
                self._stub.RegisterGraph,
                req,
                CONTROL_TIMEOUT_S,
                retry=Retry.SAFE,
            )
        except errors.AbortedError as e:
            raise self._aborted(session_handle, e) from None
        return resp.graph_handle

    def deregister_graph(self, session_handle: str, graph_handle: str):
        self._rpc.call(
            "DeregisterGraph",
            self._stub.DeregisterGraph,
            worker_pb2.DeregisterGraphRequest(
                session_handle=session_handle,
                graph_handle=graph_handle,
                request_id=_request_id(),
            ),
            DELETE_SESSION_TIMEOUT_S,
            retry=Retry.NEVER,
        )

    def run_graph(
        self,
        session_handle: str,
        graph_handle: str,
        step_id: int,
        feeds: dict,
        fetch_keys,
        trace: bool = False,
        timeout_s: float | None = None,
        op_timeout_s: float | None = None,
    ):
        req = worker_pb2.RunGraphRequest(
            session_handle=session_handle,
            graph_handle=graph_handle,
            step_id=step_id,
            recv_key=list(fetch_keys),
            request_id=_request_id(),
        )
        req.exec_opts.record_timeline = bool(trace)
        req.exec_opts.timeout_in_ms = ms_from_seconds(timeout_s)
        data = coding.encode_message(req, 5, feeds.items(), park=self._park)
        deadline = time.monotonic() + _call_timeout(timeout_s)
        lost: list[str] = []
        resp, tensors = self._rpc.call(
            "RunGraph",
            self._run_graph,
            data,
            _call_timeout(timeout_s),
            retry=Retry.SAFE,
            lost=lost,
        )
        if resp.status_code:
            err = error_from_status(resp.status_code, resp.status_error_message)
            if lost and isinstance(err, errors.CancelledError):
                err = self._rpc.lost_error("RunGraph", lost)
            if isinstance(err, errors.AbortedError):
                err = self._aborted(session_handle, err)
            raise err
        tensors = coding.resolve_refs(
            tensors,
            lambda ref: self.pull(ref.step_id, ref.key, _deadline_left(deadline)),
        )
        stats = coding.stats_from_proto(resp.step_stats) if trace else None
        return dict(tensors), stats

    def start_run_graph(self, *args):
        """None: a gRPC RunGraph waits on a pool thread of the master."""
        return

    def abort_step(self, step_id: int, error: errors.OpError | None = None):
        """Cancels ``step_id`` on the task (CleanupGraph), without waiting."""
        self.cleanup_graph(step_id)

    def cleanup_graph(self, step_id: int):
        fut = self._stub.CleanupGraph.future(
            worker_pb2.CleanupGraphRequest(step_id=step_id),
            timeout=CONTROL_TIMEOUT_S,
            metadata=self._rpc.metadata,
        )
        fut.add_done_callback(lambda f: f.exception())

    def cleanup_all(self, containers=None):
        self._rpc.call(
            "CleanupAll",
            self._stub.CleanupAll,
            worker_pb2.CleanupAllRequest(container=list(containers or [])),
            CONTROL_TIMEOUT_S,
            retry=Retry.SAFE,
        )

    def set_faults(self, rules, removed: list | None = None) -> list:
        """Sets the task's injected faults (``runtime.faults``) as the cluster's
        owner (this process's ``owner_credential()``); returns them, and adds
        the rules they replaced to ``removed``."""
        request = worker_pb2.SetFaultsRequest(owner=owner_credential())
        for kind, peer, delay_s in rules:
            request.rule.add(kind=kind, peer=peer, delay_s=delay_s)
        resp = self._rpc.call("SetFaults", self._stub.SetFaults, request,
                              CONTROL_TIMEOUT_S, retry=Retry.SAFE)
        if removed is not None:
            removed.extend((r.kind, r.peer, r.delay_s) for r in resp.removed)
        return [(r.kind, r.peer, r.delay_s) for r in resp.rule]

    def recv_tensor(self, step, key: str, step_id: int | None = None,
                    siblings=(), extras: dict | None = None):
        """Pulls the tensor ``key`` of ``step`` from this task into a fresh
        writable array: small ones in one RecvTensorUnary, large ones streamed
        chunk by chunk. Stops when ``step`` is cancelled. ``step_id`` (default
        ``step.step_id``) names the tensor's step on this task (a collective's
        execution id). Those of ``siblings`` (more keys of the step) that came
        along go into ``extras``."""
        timeout = step_time_left(step)
        start = time.monotonic()
        deadline = start + timeout
        request = worker_pb2.RecvTensorRequest(
            step_id=step.step_id if step_id is None else step_id,
            rendezvous_key=key,
            sibling_key=list(siblings),
        )
        metadata = self._rpc.metadata
        failures = 0

        def ask(wait_ms: int, left_s: float):
            nonlocal failures
            request.wait_ms = wait_ms
            try:
                data = self._recv_unary(request, timeout=left_s + _STEP_GRACE_S,
                                        metadata=metadata)
            except grpc.RpcError as e:
                # Receiving takes the tensor: only a connection that was
                # never set up is retried.
                if step.cancelled or failures >= RETRIES or not connect_failed(e):
                    raise
                failures += 1
                what = f"RecvTensor for {tensor_name(key)}"
                self._rpc.reconnect(
                    what, deadline, failures, timeout, step.add_cancel_callback
                )
                self._check_not_restarted(what)
                return PENDING
            extra: list = []
            try:
                got = coding.decode_recv_response(data, extra)
            except ValueError as e:
                raise errors.DataLossError(
                    None,
                    None,
                    f"Malformed RecvTensor answer from {self._rpc.who}: {e}",
                ) from None
            if got is coding.PENDING:
                return PENDING
            if extra and extras is not None:
                extras.update(self._resolve(extra, step, deadline))
            if isinstance(got, coding.TensorRef):
                return self._resolve([(key, got)], step, deadline)[0][1]
            return got

        try:
            return poll_recv(step, ask, key, self._rpc.who, timeout)
        except grpc.RpcError as e:
            if step.cancelled:
                step.check()
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise timed_out(key, self._rpc.who, start) from None
            if e.code() == grpc.StatusCode.ABORTED:
                raise errors.AbortedError(None, None, e.details() or "") from None
            what = f"RecvTensor for {tensor_name(key)}"
            raise self._rpc.error(what, e, time.monotonic() - start) from None

    def _resolve(self, tensors, step, deadline):
        """Values of [(key, array or TensorRef)], parked ones pulled."""
        return coding.resolve_refs(tensors, lambda ref: _pull(
            self._rpc, self._recv_tensor, ref.step_id, ref.key,
            _deadline_left(deadline), step.add_cancel_callback))

    def _check_not_restarted(self, what: str):
        """After a reconnection: a task that restarted lost the tensors of the
        steps it was running, so waiting for one is pointless."""
        old = self.incarnation
        if old is None:
            return
        try:
            new = self._stub.GetStatus(
                worker_pb2.GetStatusRequest(),
                timeout=_INCARNATION_TIMEOUT_S,
                metadata=self._rpc.metadata,
            ).incarnation
        except grpc.RpcError:
            return
        if new != old:
            raise errors.AbortedError(
                None,
                None,
                f"{self._rpc.who} restarted (incarnation {old:x}, now {new:x}) "
                f"during {what}: the tensor is lost; create a new session.",
            )

    def pull(self, step_id: int, key: str, timeout_s: float, on_cancel=None):
        """Streams the tensor parked under ``key`` for ``step_id`` on this task."""
        if not key.startswith(self.task_name + "/"):
            raise errors.InvalidArgumentError(
                None, None, f"Tensor {key[:200]!r} is not on {self.task_name}"
            )
        try:
            return _pull(
                self._rpc, self._recv_tensor, step_id, key, timeout_s, on_cancel
            )
        except grpc.RpcError as e:
            raise self._rpc.error("RecvTensor", e, timeout_s) from None

    # -- helpers ---------------------------------------------------------------------
    def _aborted(self, session_handle: str, err: errors.OpError) -> errors.OpError:
        """Says so plainly when the task restarted since the session began."""
        old = self._session_incarnation.get(session_handle)
        try:
            resp = self._stub.GetStatus(
                worker_pb2.GetStatusRequest(),
                timeout=_INCARNATION_TIMEOUT_S,
                metadata=self._rpc.metadata,
            )
            new = resp.incarnation
        except grpc.RpcError:
            new = None
        if old is not None and new is not None and new != old:
            return errors.AbortedError(
                None,
                None,
                f"{self._rpc.who} restarted (incarnation "
                f"{old:x}, now {new:x}) and lost this session's state; create a new "
                f"session. ({first_line(err.message)})",
            )
        return err

    def close(self):
        self._rpc.close()

    def __repr__(self) -> str:
        return f"GrpcWorkerClient({self.task_name!r}, {self.address!r})"


def _plain(options) -> bool:
    """Whether a step's RunOptions ask for nothing beyond a timeout (such a step
    may take the same-host channel)."""
    if options is None:
        return True
    bare = config_pb2.RunOptions(timeout_in_ms=options.timeout_in_ms)
    return options == bare


def _identity(data: bytes) -> bytes:
    return data


def _decode_run_graph_response(data: bytes):
    return coding.decode_message(data, worker_pb2.RunGraphResponse, 1)


def _decode_run_step_response(data: bytes):
    return coding.decode_message(data, master_pb2.RunStepResponse, 1)


def _no_step_ids(what: str) -> errors.UnimplementedError:
    return errors.UnimplementedError(
        None, None, f"{what} needs the master's step ids, which a remote master "
        "keeps to itself; cancel a step by ending its call (the server cancels "
        "the step of a client that went away)")


class GrpcMasterClient:
    """The master interface of a server in another process.

    ``Session("grpc://host:port")`` creates one when no server of this process
    serves that target. ``config.auth_token`` (else ``NBDIST_TOKEN``) is sent
    with every call; TLS comes from ``tls`` or the ``NBDIST_TLS_*`` variables.
    Plain steps, large feeds and fetches go over a peer path when
    ``router.MasterPath`` finds one to the master; this client encodes the
    rest for gRPC.
    """

    def __init__(self, target: str, config=None, tls=None, token: str | None = None):
        self.target = target
        address = _address(target)
        self._rpc = Rpc(
            f"The master at {address}",
            address,
            auth.resolve_token(token, config),
            auth.resolve_tls(tls),
        )
        ch = self._rpc.channel
        self._stub = master_service_pb2_grpc.MasterServiceStub(ch)
        self._run_step = ch.unary_unary(
            "/nbdist.MasterService/RunStep",
            request_serializer=_identity,
            response_deserializer=_decode_run_step_response,
        )
        self._recv_tensor = _recv_tensor_method(ch)
        self._push_tensors = ch.stream_unary(
            "/nbdist.MasterService/PushTensors",
            request_serializer=_identity,
            response_deserializer=master_pb2.PushTensorsResponse.FromString,
        )
        self._token = auth.resolve_token(token, config)
        # Peer paths (the same-host channel) prove the cluster's secret; with
        # TLS a client without the key has none and trusts only certificates.
        tls_config = auth.resolve_tls(tls)
        self._path = MasterPath(address, auth.peer_path_secret(self._token, tls_config),
                                tls_config, self._rpc.who)

    def _same_host(self):
        """The master's channel over a peer path, if one reaches it."""
        return self._path.channel()

    @property
    def _same_host_channel(self):
        return self._path.channel_now

    @property
    def _path_look_at(self) -> float:
        return self._path.look_at

    @_path_look_at.setter
    def _path_look_at(self, when: float) -> None:
        self._path.look_at = when  # benchmarks look again at once

    @staticmethod
    def _clean(config):
        cfg = config_pb2.ConfigProto()
        if config is not None:
            cfg.CopyFrom(config)
        cfg.auth_token = ""
        return cfg

    def create_session(self, graph_def, config=None) -> tuple[str, int]:
        cfg = self._clean(config)
        # The master waits this long for every task to answer: a CreateSession
        # during a task's outage must not give up before the master does.
        discovery = (
            seconds_from_ms(cfg.operation_timeout_in_ms) or DISCOVERY_TIMEOUT_S
        )
        resp = self._rpc.call(
            "CreateSession",
            self._stub.CreateSession,
            master_pb2.CreateSessionRequest(
                graph_def=graph_def,
                config=cfg,
                target=self.target,
                request_id=_request_id(),
            ),
            CONTROL_TIMEOUT_S + 2 * discovery,
            retry=Retry.SAFE,
        )
        return resp.session_handle, resp.graph_version

    def extend_session(self, handle: str, graph_def, current_version: int) -> int:
        resp = self._rpc.call(
            "ExtendSession",
            self._stub.ExtendSession,
            master_pb2.ExtendSessionRequest(
                session_handle=handle,
                graph_def=graph_def,
                current_graph_version=current_version,
                request_id=_request_id(),
            ),
            CONTROL_TIMEOUT_S,
            retry=Retry.SAFE,
        )
        return resp.new_graph_version

    def run_step(
        self,
        handle: str,
        feeds: dict,
        fetches: list,
        targets: list,
        options=None,
        metadata=None,
        on_step=None,
    ):
        if on_step is not None:
            raise _no_step_ids("run_step(on_step=...)")
        req = master_pb2.RunStepRequest(
            session_handle=handle,
            fetch=list(fetches),
            target=list(targets),
            request_id=_request_id(),
        )
        timeout_ms = 0
        if options is not None:
            req.options.CopyFrom(options)
            timeout_ms = options.timeout_in_ms
        timeout_s = seconds_from_ms(timeout_ms)
        if metadata is None and _plain(options):
            got = self._path.call("RunStep", lambda ch: ch.run_step(
                handle, feeds, fetches, targets, timeout_s))
            if got is not OFF_PATH:
                return got
        deadline = time.monotonic() + _call_timeout(timeout_s)
        big, seen = [], set()
        for name, v in list(feeds.items()):
            if coding.parkable(v):
                if id(v) in seen:  # one array fed twice: two pushed tensors
                    feeds = dict(feeds)
                    v = feeds[name] = v.view()
                seen.add(id(v))
                big.append(v)
        park = self._push(big, _call_timeout(timeout_s)) if big else None
        data = coding.encode_message(req, 2, feeds.items(), park=park)
        lost: list[str] = []
        resp, tensors = self._rpc.call(
            "RunStep",
            self._run_step,
            data,
            _deadline_left(deadline),
            retry=Retry.SAFE,
            lost=lost,
        )
        if resp.status_code:
            err = error_from_status(resp.status_code, resp.status_error_message)
            if lost and isinstance(err, errors.CancelledError):
                err = self._rpc.lost_error("RunStep", lost)
            raise err
        tensors = coding.resolve_refs(
            tensors, lambda ref: self._pull(ref, _deadline_left(deadline))
        )
        if metadata is not None and resp.HasField("metadata"):
            metadata.MergeFrom(resp.metadata)
        by_name = dict(tensors)
        return [by_name[f] for f in fetches]

    def cancel_step(self, handle: str, step_id: int, error=None) -> None:
        """Unsupported: a remote master's step ids never reach its clients (a
        client cancels its step by going away: the server cancels it)."""
        raise _no_step_ids("cancel_step")

    def _push(self, values: list, timeout_s: float):
        """Streams ``values`` to the master (PushTensors); returns the ``park``
        function that gives each one's reference for the RunStep. On this
        host they go through shared memory."""
        pushed = self._path.call("PushTensors", lambda ch: ch.push(values, timeout_s),
                                 resend_ok=True)  # a push id again replaces it
        if pushed is not OFF_PATH:
            refs = {id(v): ref for v, ref in zip(values, pushed)}
            return lambda value: refs[id(value)]
        ids = [_request_id() for _ in values]

        def push(_, **kw):  # pushing a push id again replaces it: safe to retry
            return self._push_tensors(coding.push_chunks(zip(ids, values)), **kw)

        resp = self._rpc.call("PushTensors", push, None, timeout_s, retry=Retry.SAFE)
        if len(resp.key) != len(values):
            raise errors.DataLossError(
                None,
                None,
                f"PushTensors to {self._rpc.who} returned "
                f"{len(resp.key)} keys for {len(values)} tensors",
            )
        refs = {id(v): (k, i) for v, k, i in zip(values, resp.key, ids)}
        return lambda value: refs[id(value)]

    def _pull(self, ref: coding.TensorRef, timeout_s: float):
        got = self._path.call("RecvTensor", lambda ch: ch.pull(
            ref.step_id, ref.key, timeout_s), resend_ok=True)
        if got is not OFF_PATH:
            return got
        try:
            return _pull(self._rpc, self._recv_tensor, ref.step_id, ref.key, timeout_s)
        except grpc.RpcError as e:
            raise self._rpc.error("RecvTensor", e, timeout_s) from None

    def close_session(self, handle: str):
        self._rpc.call(
            "CloseSession",
            self._stub.CloseSession,
            master_pb2.CloseSessionRequest(
                session_handle=handle, request_id=_request_id()
            ),
            CONTROL_TIMEOUT_S,
            retry=Retry.NEVER,
        )

    def list_devices(self, config=None, session_handle: str = ""):
        filters = list(config.device_filters) if config is not None else []
        resp = self._rpc.call(
            "ListDevices",
            self._stub.ListDevices,
            master_pb2.ListDevicesRequest(device_filters=filters,
                                          session_handle=session_handle),
            CONTROL_TIMEOUT_S + STATUS_TIMEOUT_S,
            retry=Retry.SAFE,
        )
        return [
            (d.name, d.device_type, d.incarnation)
            for d in list(resp.local_device) + list(resp.remote_device)
        ]

    def reset(self, containers=None, device_filters=None, timeout_s=None):
        self._rpc.call(
            "Reset",
            self._stub.Reset,
            master_pb2.ResetRequest(
                container=list(containers or []),
                device_filters=list(device_filters or []),
                request_id=_request_id(),
            ),
            timeout_s or CONTROL_TIMEOUT_S + STATUS_TIMEOUT_S,
            retry=Retry.SAFE,
        )

    def close(self):
        self._path.drop()
        self._rpc.close()
