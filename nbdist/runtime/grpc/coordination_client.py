"""``GrpcCoordinationClient``: the coordination service of a cluster over gRPC
(``interfaces.CoordinationClient``), and ``EventWatch``, its event stream.

>>> import nbdist as nd
>>> from nbdist.runtime import transports
>>> server = nd.Server.create_local_server()
>>> with transports.connect_coordination(server.coordination_target) as client:
...     [t.state for t in client.task_states()]
['CONNECTED']
>>> server.stop()
"""

from __future__ import annotations

import json
import queue
import threading
import time

import grpc
from nbdist import errors
from nbdist.proto import coordination_pb2 as pb
from nbdist.runtime.coordination import service as logic
from nbdist.runtime.grpc import auth
from nbdist.runtime.grpc.client import make_channel
from nbdist.runtime.grpc.coordination_service import (
    LEADER_METADATA_KEY,
    PB_TO_STATE,
    SERVICE,
    event_from_proto,
    event_to_proto,
)
from nbdist.runtime.grpc.rpc import RECONNECT_S, wait_connected
from nbdist.runtime.grpc.wire import connect_failed
from nbdist.runtime.timeouts import CONTROL_TIMEOUT_S, whole_ms

__all__ = ["EventWatch", "GrpcCoordinationClient"]

_BARRIER_GRACE_S = 5.0  # lets the service's own DEADLINE_EXCEEDED arrive first


def _address(target: str) -> str:
    return target.removeprefix("grpc://")


_METHODS = {
    "RegisterTask": (pb.RegisterTaskRequest, pb.RegisterTaskResponse),
    "Heartbeat": (pb.HeartbeatRequest, pb.HeartbeatResponse),
    "ReportErrorToService": (pb.ReportErrorRequest, pb.ReportErrorResponse),
    "GetTaskState": (pb.GetTaskStateRequest, pb.GetTaskStateResponse),
    "Barrier": (pb.BarrierRequest, pb.BarrierResponse),
    "CancelBarrier": (pb.CancelBarrierRequest, pb.CancelBarrierResponse),
    "InsertKeyValue": (pb.InsertKeyValueRequest, pb.InsertKeyValueResponse),
    "GetKeyValue": (pb.GetKeyValueRequest, pb.GetKeyValueResponse),
    "TryGetKeyValue": (pb.TryGetKeyValueRequest, pb.TryGetKeyValueResponse),
    "DeleteKeyValue": (pb.DeleteKeyValueRequest, pb.DeleteKeyValueResponse),
    "PublishEvents": (pb.PublishEventsRequest, pb.PublishEventsResponse),
}




def _redirect_target(e: grpc.RpcError) -> str | None:
    if not hasattr(e, "code") or e.code() != grpc.StatusCode.FAILED_PRECONDITION:
        return None
    try:
        md = e.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 - a future without metadata
        return None
    for key, value in md:
        if key == LEADER_METADATA_KEY:
            return value if isinstance(value, str) else value.decode()
    return None


class GrpcCoordinationClient:
    """A client of a cluster's coordination service.

    ``target_or_address`` is ``grpc://host:port`` or ``host:port`` of the leader
    (``Server.coordination_target``), or of any task of the cluster (the call is
    redirected). ``token`` defaults to ``config.auth_token``, then
    ``NBDIST_TOKEN``; ``tls`` to ``NBDIST_TLS_*`` (False: plaintext). ``task``
    is the task this client speaks for at barriers, unless a call names one.
    """

    in_process = False  # the service is another process's

    def __init__(self, target_or_address: str, token: str | None = None, tls=None,
                 config=None, task: str | None = None):
        self.task = task
        self._metadata = auth.call_metadata(auth.resolve_token(token, config))
        self._tls = auth.resolve_tls(tls)
        self._lock = threading.Lock()
        self._closed = False
        self._watches: set = set()
        self._connect(_address(target_or_address))

    def _connect(self, address: str):
        channel = make_channel(address, self._tls)
        methods = {
            name: channel.unary_unary(f"/{SERVICE}/{name}",
                                      request_serializer=req.SerializeToString,
                                      response_deserializer=resp.FromString)
            for name, (req, resp) in _METHODS.items()}
        methods["WatchEvents"] = channel.unary_stream(
            f"/{SERVICE}/WatchEvents",
            request_serializer=pb.WatchEventsRequest.SerializeToString,
            response_deserializer=pb.Event.FromString)
        with self._lock:
            old = getattr(self, "_channel", None)
            self.address = address
            self._channel, self._methods = channel, methods
        if old is not None:
            old.close()

    @property
    def target(self) -> str:
        return "grpc://" + self.address

    def _follow(self, e: grpc.RpcError) -> bool:
        leader = _redirect_target(e)
        if leader and leader != self.address:
            self._connect(leader)
            return True
        return False

    def _error(self, method: str, e: grpc.RpcError, timeout_s: float | None,
               ) -> errors.OpError:
        code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
        details = (e.details() if hasattr(e, "details") else str(e)) or ""
        who = f"The coordination service at {self.address}"
        if code == grpc.StatusCode.UNAVAILABLE:
            first = details.strip().splitlines()[0] if details.strip() else ""
            return errors.UnavailableError(
                None, None, f"{who} is unavailable: {first} (calling {method})")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED and details in (
                "", "Deadline Exceeded"):
            within = f" within {timeout_s:.1f} s" if timeout_s else ""
            return errors.DeadlineExceededError(
                None, None, f"{who} did not answer {method}{within}")
        if code == grpc.StatusCode.CANCELLED and details in ("", "Cancelled",
                                                             "Locally cancelled by application!"):
            return errors.CancelledError(None, None, f"{method} was cancelled")
        cls = errors.exception_type_from_error_code(code.value[0])
        return cls(None, None, details)

    def _call(self, method: str, request, timeout_s: float, *,
              wait_for_ready: bool = False, retry_connect: bool = True,
              should_cancel=None):
        deadline = time.monotonic() + timeout_s
        redirects = reconnect = 0
        while True:
            if self._closed:
                raise errors.CancelledError(None, None, "CoordinationClient is closed")
            left = max(deadline - time.monotonic(), 0.001)
            if reconnect:
                left = min(left, RECONNECT_S)
            fn = self._methods[method]
            try:
                if should_cancel is None:
                    return fn(request, timeout=left, metadata=self._metadata,
                              wait_for_ready=wait_for_ready or bool(reconnect))
                fut = fn.future(request, timeout=left, metadata=self._metadata,
                                wait_for_ready=wait_for_ready or bool(reconnect))
                while True:  # should_cancel is a predicate nothing signals: poll it
                    try:
                        return fut.result(timeout=0.1)
                    except grpc.FutureTimeoutError:
                        if should_cancel():
                            fut.cancel()
                            raise errors.CancelledError(
                                None, None, f"{method} was cancelled") from None
            except grpc.RpcError as e:
                if redirects < 3 and self._follow(e):
                    redirects += 1
                    continue
                if retry_connect and not reconnect and not wait_for_ready and (
                        connect_failed(e)):
                    reconnect = 1
                    continue
                if (reconnect and e.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                        and deadline - time.monotonic() > 0):
                    raise errors.UnavailableError(
                        None, None, f"The coordination service at {self.address} is "
                        f"unavailable: could not connect within {RECONNECT_S:.0f} s "
                        f"(calling {method})") from None
                raise self._error(method, e, timeout_s) from None

    # -- tasks -------------------------------------------------------------------
    def register_task(self, task: str, incarnation: int, address: str = "",
                      pid: int = 0, timeout_s: float = CONTROL_TIMEOUT_S,
                      wait_for_ready: bool = False) -> tuple[int, int]:
        """Registers ``task``; returns (the leader's incarnation, the heartbeat
        interval in ms the leader asks for, 0 if none)."""
        resp = self._call("RegisterTask", pb.RegisterTaskRequest(
            task=task, incarnation=incarnation, address=address, pid=pid), timeout_s,
            wait_for_ready=wait_for_ready, retry_connect=not wait_for_ready)
        return resp.leader_incarnation, resp.config.heartbeat_interval_ms

    def heartbeat(self, task: str, incarnation: int, steps_served: int = 0,
                  timeout_s: float = CONTROL_TIMEOUT_S,
                  retry_connect: bool = True,
                  cpu_seconds: float | None = None) -> int:
        resp = self._call("Heartbeat", pb.HeartbeatRequest(
            task=task, incarnation=incarnation, steps_served=steps_served,
            cpu_seconds=cpu_seconds), timeout_s, retry_connect=retry_connect)
        return resp.leader_incarnation

    def report_error(self, task: str, code: int, message: str):
        self._call("ReportErrorToService", pb.ReportErrorRequest(
            task=task, error_code=code, error_message=message), CONTROL_TIMEOUT_S)

    def task_states(self, tasks=None, timeout_s: float | None = None
                    ) -> list[logic.TaskRecord]:
        """Every task's (or the given tasks') ``TaskRecord``: ``task``, ``state``
        ("CONNECTED", "DISCONNECTED", "ERROR", "UNSPECIFIED"), ``incarnation``,
        ``address``, ``pid``, ``error_message``, ``last_heartbeat_wall`` (seconds
        since the epoch), ``steps_served``, ``cpu_seconds`` (None: not told)."""
        resp = self._call("GetTaskState", pb.GetTaskStateRequest(task=list(tasks or [])),
                          timeout_s or CONTROL_TIMEOUT_S)
        return [logic.TaskRecord(
            t.task, PB_TO_STATE.get(t.state, logic.UNKNOWN), t.incarnation, t.address,
            t.pid, t.error_message, 0.0, t.last_heartbeat_us / 1e6, t.steps_served,
            t.cpu_seconds if t.HasField("cpu_seconds") else None)
            for t in resp.task_state]

    # -- barriers ----------------------------------------------------------------
    def barrier(self, barrier_id: str, timeout_s: float, tasks=None,
                source_task: str | None = None, should_cancel=None) -> int:
        """Blocks until every task of ``tasks`` (default: the whole cluster) has
        called it with ``barrier_id``; returns the round number. Raises
        ``DeadlineExceededError`` naming the barrier and who never arrived, or
        ``CancelledError`` when the barrier is cancelled (or ``should_cancel()``
        becomes true). Waits for the service to come up."""
        task = source_task or self.task
        if not task:
            raise ValueError("barrier() needs source_task (or CoordinationClient(task=))")
        resp = self._call("Barrier", pb.BarrierRequest(
            barrier_id=barrier_id, timeout_in_ms=whole_ms(timeout_s),
            tasks=list(tasks or []), source_task=task),
            timeout_s + _BARRIER_GRACE_S, wait_for_ready=True,
            should_cancel=should_cancel)
        return resp.round

    def cancel_barrier(self, barrier_id: str, source_task: str | None = None):
        """Fails the round in progress of ``barrier_id`` for every task waiting."""
        self._call("CancelBarrier", pb.CancelBarrierRequest(
            barrier_id=barrier_id, source_task=source_task or self.task or ""),
            CONTROL_TIMEOUT_S)

    # -- key-value ---------------------------------------------------------------
    def insert(self, key: str, value, allow_overwrite: bool = False):
        """Sets ``key`` (``value``: bytes or str); ``AlreadyExistsError`` if set
        and not ``allow_overwrite``."""
        if isinstance(value, str):
            value = value.encode()
        self._call("InsertKeyValue", pb.InsertKeyValueRequest(
            kv=pb.KeyValueEntry(key=key, value=bytes(value)),
            allow_overwrite=allow_overwrite), CONTROL_TIMEOUT_S)

    def get(self, key: str, timeout_s: float = CONTROL_TIMEOUT_S) -> bytes:
        """The value of ``key``, waiting up to ``timeout_s`` for it to be set."""
        resp = self._call("GetKeyValue", pb.GetKeyValueRequest(
            key=key, timeout_in_ms=whole_ms(timeout_s)),
            timeout_s + _BARRIER_GRACE_S, wait_for_ready=True)
        return resp.kv.value

    def try_get(self, key: str) -> bytes | None:
        """The value of ``key``, or None when it is not set."""
        resp = self._call("TryGetKeyValue", pb.TryGetKeyValueRequest(key=key),
                          CONTROL_TIMEOUT_S)
        return resp.kv.value if resp.found else None

    def delete(self, key: str):
        """Deletes ``key``, or every key under ``key`` when it ends with "/"."""
        self._call("DeleteKeyValue", pb.DeleteKeyValueRequest(key=key),
                   CONTROL_TIMEOUT_S)

    # -- events ------------------------------------------------------------------
    def publish_events(self, events, timeout_s: float = CONTROL_TIMEOUT_S,
                       retry_connect: bool = True):
        """Hands events to the service: ``coordination.Event``s, ``pb.Event``s or
        ``(kind, task, payload, wall_time_us)`` tuples."""
        req = pb.PublishEventsRequest()
        for e in events:
            if isinstance(e, tuple) and not isinstance(e, logic.Event):
                kind, task, payload, wall = e
                e = pb.Event(kind=kind, task=task, wall_time_us=wall,
                             json=json.dumps(payload, sort_keys=True, default=str))
            req.events.append(e if isinstance(e, pb.Event) else event_to_proto(e))
        self._call("PublishEvents", req, timeout_s, retry_connect=retry_connect)

    def watch(self, from_seq: int = 0, kinds=None,
              owns_client: bool = False) -> EventWatch:
        """Follows the event stream from sequence ``from_seq`` (0: the oldest
        kept), then live; ``kinds`` filters. Returns an ``EventWatch``: iterate
        it (or call ``next(timeout)`` / ``wait_for``), ``stop()`` ends it (and
        closes this client when ``owns_client``)."""
        w = EventWatch(self, from_seq, kinds, owns_client=owns_client)
        with self._lock:
            self._watches.add(w)
        return w

    def _open_stream(self, request):
        return self._methods["WatchEvents"](request, metadata=self._metadata,
                                            wait_for_ready=False)

    def close(self):
        with self._lock:
            if self._closed:
                return
            self._closed = True
            watches = list(self._watches)
        for w in watches:
            w.stop()
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"GrpcCoordinationClient({self.target!r})"


_END = object()


class EventWatch:
    """The events of a cluster as they happen (``GrpcCoordinationClient.watch``).

    An iterator of ``coordination.Event`` (``seq``, ``wall_time_us``, ``kind``,
    ``task``, ``payload``). Iteration ends when ``stop()`` is called or the
    service stops; a lost connection raises ``UnavailableError``. A background
    thread reads the stream, so ``next(timeout)`` and ``wait_for`` can poll.
    """

    def __init__(self, client: GrpcCoordinationClient, from_seq: int = 0, kinds=None,
                 owns_client: bool = False):
        self._client = client
        self._owns_client = owns_client
        self._request = pb.WatchEventsRequest(from_seq=max(int(from_seq), 0),
                                              kinds=list(kinds or []))
        self._queue: queue.Queue = queue.Queue()
        self._stopped = threading.Event()
        self._call = None
        self._done = False
        self.last_seq = 0
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="nbdist-watch-events")
        self._thread.start()

    def _run(self):
        redirects = reconnect = 0
        try:
            while not self._stopped.is_set():
                call = self._client._open_stream(self._request)
                self._call = call
                if self._stopped.is_set():
                    call.cancel()
                    return
                try:
                    for e in call:
                        ev = event_from_proto(e)
                        self.last_seq = ev.seq
                        self._request.from_seq = ev.seq + 1
                        self._queue.put(ev)
                    return
                except grpc.RpcError as e:
                    if self._stopped.is_set() or e.code() == grpc.StatusCode.CANCELLED:
                        return
                    if redirects < 3 and self._client._follow(e):
                        redirects += 1
                        continue
                    if not reconnect and connect_failed(e):
                        reconnect = 1
                        if self._wait_for_channel():
                            continue
                    self._queue.put(self._client._error("WatchEvents", e, None))
                    return
        except Exception as e:  # noqa: BLE001 - reported to the reader
            self._queue.put(e)
        finally:
            self._queue.put(_END)

    def _wait_for_channel(self) -> bool:
        return wait_connected(self._client._channel, RECONNECT_S) == "ready"

    def _take(self, item):
        if item is _END:
            self._done = True
            raise StopIteration
        if isinstance(item, BaseException):
            self._done = True
            self._queue.put(_END)
            raise item
        return item

    def __iter__(self):
        return self

    def __next__(self) -> logic.Event:
        if self._done:
            raise StopIteration
        return self._take(self._queue.get())

    def next(self, timeout: float | None = None) -> logic.Event | None:
        """The next event, or None when none arrives within ``timeout`` (or the
        stream has ended)."""
        if self._done:
            return None
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        try:
            return self._take(item)
        except StopIteration:
            return None

    def wait_for(self, predicate, timeout: float) -> logic.Event:
        """The first next event with ``predicate(event)`` true; events before it
        are consumed. Raises ``DeadlineExceededError`` after ``timeout`` s."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            e = self.next(left)
            if e is None:
                if self._done:
                    raise errors.CancelledError(
                        None, None, "The event stream ended before the event came")
                continue
            if predicate(e):
                return e
        raise errors.DeadlineExceededError(
            None, None, f"No matching event within {timeout:.1f} s "
            f"(last sequence number {self.last_seq})")

    def stop(self):
        """Ends the stream (idempotent)."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        call = self._call
        if call is not None:
            call.cancel()
        self._thread.join(5.0)
        with self._client._lock:
            self._client._watches.discard(self)
        if self._owns_client:
            self._client.close()

    close = stop

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __del__(self):
        try:
            if not self._stopped.is_set() and self._call is not None:
                self._call.cancel()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass
