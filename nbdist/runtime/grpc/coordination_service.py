"""The CoordinationService served over gRPC: a codec over
``runtime.coordination.CoordinationService`` (which validates and decides);
this module decodes requests, encodes answers and redirects to the leader.

One task of a cluster hosts the service (``coordination.leader_task``: the
chief, else worker 0, else the first ps; a single-task server hosts its own).
Every other server serves a stub of it that answers each call with
``FAILED_PRECONDITION`` and the leader's address in the trailing metadata
(``nbdist-coordination-leader``); ``GrpcCoordinationClient`` follows it, so any
task's target reaches the service.

Errors: a failure of the service is the gRPC status of its canonical code with
its message (a barrier that times out is ``DEADLINE_EXCEEDED`` naming the
barrier and the tasks that never arrived); the client raises the nbdist error
of that code. The token and TLS of the server apply, as for the other services.
"""

from __future__ import annotations

import json
import logging
import threading

import grpc
from nbdist import errors
from nbdist.proto import coordination_pb2 as pb
from nbdist.runtime.coordination import service as logic
from nbdist.runtime.coordination.local import LocalEventWatch
from nbdist.runtime.grpc.wire import MAX_MESSAGE_CHARS, Malformed, lenient, status_code
from nbdist.runtime.timeouts import left_or_unbounded, seconds_from_ms

__all__ = ["LEADER_METADATA_KEY", "SERVICE", "CoordinationServicer",
           "event_from_proto", "event_to_proto"]

_log = logging.getLogger("nbdist.coordination")

SERVICE = "nbdist.CoordinationService"
LEADER_METADATA_KEY = "nbdist-coordination-leader"
# A WatchEvents stream wakes this often to notice that the server is stopping.
_WATCH_POLL_S = 0.5

STATE_TO_PB = {
    logic.UNKNOWN: pb.TASKSTATE_UNSPECIFIED,
    logic.DISCONNECTED: pb.TASKSTATE_DISCONNECTED,
    logic.CONNECTED: pb.TASKSTATE_CONNECTED,
    logic.ERROR: pb.TASKSTATE_ERROR,
}
PB_TO_STATE = {v: k for k, v in STATE_TO_PB.items()}


def event_from_proto(e: pb.Event) -> logic.Event:
    """A wire ``Event`` as a ``coordination.Event`` (payload decoded)."""
    try:
        payload = json.loads(e.json) if e.json else {}
    except ValueError:
        payload = {"json": e.json}
    if not isinstance(payload, dict):
        payload = {"value": payload}
    return logic.Event(e.seq, e.wall_time_us, e.kind, e.task, payload)


def event_to_proto(e: logic.Event) -> pb.Event:
    return pb.Event(seq=e.seq, wall_time_us=e.wall_time_us, kind=e.kind, task=e.task,
                    json=e.json)


class CoordinationServicer:
    """The CoordinationService over a ``coordination.CoordinationService``; with
    ``service=None``, a stub that points callers at the leader."""

    def __init__(self, service: logic.CoordinationService | None = None,
                 leader_task: str = "", leader_address: str = ""):
        self.service = service
        self._leader_task = leader_task
        self._leader_address = leader_address
        self._stopped = threading.Event()

    def stop(self):
        """Ends every WatchEvents stream."""
        self._stopped.set()

    # -- plumbing ---------------------------------------------------------------
    def _serve(self, name, request, context, fn):
        if isinstance(request, Malformed):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"Malformed {name} request: {request.error}"[:MAX_MESSAGE_CHARS])
        if self.service is None:
            self._redirect(context)
        try:
            return fn(request, context)
        except errors.OpError as e:
            code, message = status_code(e.error_code), e.message
        except Exception as e:  # noqa: BLE001 - every error gets a status
            _log.exception("Unexpected error serving %s", name)
            code, message = grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}"
        context.abort(code, message[:MAX_MESSAGE_CHARS])

    def _redirect(self, context):
        context.set_trailing_metadata(((LEADER_METADATA_KEY, self._leader_address),))
        context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                      f"This task does not host the coordination service; "
                      f"{self._leader_task} at {self._leader_address} does")

    @staticmethod
    def _timeout(ms: int, context) -> float:
        limit = left_or_unbounded(context.time_remaining())
        wanted = seconds_from_ms(ms)
        return min(wanted, limit) if wanted is not None else limit

    # -- methods ----------------------------------------------------------------
    def RegisterTask(self, request, context):
        def fn(req, ctx):
            s = self.service
            inc = s.register_task(req.task, req.incarnation, req.address, req.pid)
            return pb.RegisterTaskResponse(
                leader_incarnation=inc,
                config=pb.CoordinationConfig(
                    heartbeat_interval_ms=s.heartbeat_interval_ms,
                    heartbeat_timeout_ms=s.heartbeat_timeout_ms,
                    max_events=s.max_events))

        return self._serve("RegisterTask", request, context, fn)

    def Heartbeat(self, request, context):
        def fn(req, ctx):
            cpu = req.cpu_seconds if req.HasField("cpu_seconds") else None
            inc = self.service.heartbeat(req.task, req.incarnation, req.steps_served,
                                         cpu)
            return pb.HeartbeatResponse(leader_incarnation=inc)

        return self._serve("Heartbeat", request, context, fn)

    def ReportErrorToService(self, request, context):
        def fn(req, ctx):
            self.service.report_error(req.task, req.error_code, req.error_message)
            return pb.ReportErrorResponse()

        return self._serve("ReportErrorToService", request, context, fn)

    def GetTaskState(self, request, context):
        def fn(req, ctx):
            resp = pb.GetTaskStateResponse()
            for r in self.service.task_states(list(req.task) or None):
                resp.task_state.add(
                    task=r.task, state=STATE_TO_PB.get(r.state, 0),
                    incarnation=r.incarnation, address=r.address, pid=r.pid,
                    error_message=r.error_message,
                    last_heartbeat_us=int(r.last_heartbeat_wall * 1e6),
                    steps_served=r.steps_served, cpu_seconds=r.cpu_seconds)
            return resp

        return self._serve("GetTaskState", request, context, fn)

    def Barrier(self, request, context):
        def fn(req, ctx):
            rnd = self.service.barrier(
                req.barrier_id, self._timeout(req.timeout_in_ms, ctx),
                list(req.tasks), req.source_task,
                is_cancelled=lambda: not ctx.is_active() or self._stopped.is_set())
            return pb.BarrierResponse(round=rnd)

        return self._serve("Barrier", request, context, fn)

    def CancelBarrier(self, request, context):
        def fn(req, ctx):
            self.service.cancel_barrier(req.barrier_id, req.source_task)
            return pb.CancelBarrierResponse()

        return self._serve("CancelBarrier", request, context, fn)

    def InsertKeyValue(self, request, context):
        def fn(req, ctx):
            self.service.insert(req.kv.key, req.kv.value, req.allow_overwrite)
            return pb.InsertKeyValueResponse()

        return self._serve("InsertKeyValue", request, context, fn)

    def GetKeyValue(self, request, context):
        def fn(req, ctx):
            value = self.service.get(
                req.key, self._timeout(req.timeout_in_ms, ctx),
                is_cancelled=lambda: not ctx.is_active() or self._stopped.is_set())
            return pb.GetKeyValueResponse(kv=pb.KeyValueEntry(key=req.key, value=value))

        return self._serve("GetKeyValue", request, context, fn)

    def TryGetKeyValue(self, request, context):
        def fn(req, ctx):
            value = self.service.try_get(req.key)
            if value is None:
                return pb.TryGetKeyValueResponse(found=False)
            return pb.TryGetKeyValueResponse(
                kv=pb.KeyValueEntry(key=req.key, value=value), found=True)

        return self._serve("TryGetKeyValue", request, context, fn)

    def DeleteKeyValue(self, request, context):
        def fn(req, ctx):
            self.service.delete(req.key)
            return pb.DeleteKeyValueResponse()

        return self._serve("DeleteKeyValue", request, context, fn)

    def PublishEvents(self, request, context):
        def fn(req, ctx):
            batch = []
            for e in req.events:
                if not e.kind:
                    raise errors.InvalidArgumentError(None, None, "An event without a kind")
                try:
                    payload = json.loads(e.json) if e.json else {}
                except ValueError as err:
                    raise errors.InvalidArgumentError(
                        None, None, f"Event {e.kind!r}: payload is not JSON ({err})"
                    ) from None
                if not isinstance(payload, dict):
                    raise errors.InvalidArgumentError(
                        None, None, f"Event {e.kind!r}: payload is not a JSON object")
                batch.append((e.kind, e.task, payload, e.wall_time_us or None))
            if batch:
                self.service.publish_many(batch)
            return pb.PublishEventsResponse()

        return self._serve("PublishEvents", request, context, fn)

    def WatchEvents(self, request, context):
        if isinstance(request, Malformed):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"Malformed WatchEvents request: {request.error}")
        if self.service is None:
            self._redirect(context)
        service = self.service
        watch = LocalEventWatch(service, request.from_seq, request.kinds)
        while (context.is_active() and not self._stopped.is_set()
               and not service.stopped):
            event = watch.next(_WATCH_POLL_S)
            if event is not None:
                yield event_to_proto(event)

    def handler(self) -> grpc.GenericRpcHandler:
        def unary(fn, req_cls):
            return grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=lenient(req_cls.FromString),
                response_serializer=lambda m: m.SerializeToString())

        return grpc.method_handlers_generic_handler(SERVICE, {
            "RegisterTask": unary(self.RegisterTask, pb.RegisterTaskRequest),
            "Heartbeat": unary(self.Heartbeat, pb.HeartbeatRequest),
            "ReportErrorToService": unary(self.ReportErrorToService,
                                          pb.ReportErrorRequest),
            "GetTaskState": unary(self.GetTaskState, pb.GetTaskStateRequest),
            "Barrier": unary(self.Barrier, pb.BarrierRequest),
            "CancelBarrier": unary(self.CancelBarrier, pb.CancelBarrierRequest),
            "InsertKeyValue": unary(self.InsertKeyValue, pb.InsertKeyValueRequest),
            "GetKeyValue": unary(self.GetKeyValue, pb.GetKeyValueRequest),
            "TryGetKeyValue": unary(self.TryGetKeyValue, pb.TryGetKeyValueRequest),
            "DeleteKeyValue": unary(self.DeleteKeyValue, pb.DeleteKeyValueRequest),
            "PublishEvents": unary(self.PublishEvents, pb.PublishEventsRequest),
            "WatchEvents": grpc.unary_stream_rpc_method_handler(
                self.WatchEvents,
                request_deserializer=lenient(pb.WatchEventsRequest.FromString),
                response_serializer=lambda m: m.SerializeToString()),
        })
