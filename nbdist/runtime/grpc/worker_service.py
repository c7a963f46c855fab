"""The WorkerService of a server over its ``Worker``: registered graph partitions,
steps, and tensors other tasks pull (RecvTensorUnary for small values and a
chunked RecvTensor stream for large ones). A RunGraph whose master goes away has
its step cancelled; RecvTensorUnary answers ``pending`` after ``wait_ms`` so that
no call blocks for longer than its caller can cancel. See ``servicer_base``.
"""

from __future__ import annotations

import collections
import threading
import time

import grpc
from nbdist import errors
from nbdist.proto import device_attributes_pb2, worker_pb2, worker_service_pb2_grpc
from nbdist.runtime.grpc import coding
from nbdist.runtime.grpc.recent_requests import RECENT_REQUESTS
from nbdist.runtime.timeouts import left_or_unbounded, seconds_from_ms
from nbdist.runtime.grpc.servicer_base import (
    MAX_MESSAGE_CHARS,
    Malformed,
    RecentRequests,
    ServicerBase,
    StepWatch,
    clamp_ms,
    encoded,
    invalid,
    lenient,
    since_arrival,
    to_status,
    unary,
)

__all__ = ["WorkerServicer"]

# A parked tensor is there before its reference is announced, or gone: wait briefly.
_PARKED_WAIT_S = 5.0


class WorkerServicer(ServicerBase, worker_service_pb2_grpc.WorkerServiceServicer):
    """WorkerService over a ``Worker`` (this task's devices and resources)."""

    def __init__(
        self,
        worker,
        recent: RecentRequests | None = None,
    ):
        self.worker = worker
        self._recent = recent or RecentRequests()
        self._lock = threading.Lock()
        self._op_timeouts: dict[str, float | None] = {}
        # Steps cancelled by their master; a RunGraph arriving late fails at once.
        self._cancelled: collections.OrderedDict = collections.OrderedDict()

    def GetStatus(self, request, context):
        def fn(req):
            w = self.worker
            resp = worker_pb2.GetStatusResponse(
                task=w.task_name, incarnation=w.incarnation
            )
            for name, inc in w.get_status():
                resp.device_attributes.append(
                    device_attributes_pb2.DeviceAttributes(
                        name=name, device_type="CPU", incarnation=inc
                    )
                )
            return resp

        return self._serve("GetStatus", request, context, fn)

    def CreateWorkerSession(self, request, context):
        def fn(req):
            if not req.session_handle:
                raise invalid("CreateWorkerSession", "empty session_handle")
            self.worker.create_worker_session(req.session_handle)
            return worker_pb2.CreateWorkerSessionResponse()

        return self._serve("CreateWorkerSession", request, context, fn)

    def DeleteWorkerSession(self, request, context):
        def fn(req):
            self.worker.delete_worker_session(req.session_handle)
            prefix = req.session_handle + "/"
            with self._lock:
                for h in [h for h in self._op_timeouts if h.startswith(prefix)]:
                    del self._op_timeouts[h]
            return worker_pb2.DeleteWorkerSessionResponse()

        return self._serve("DeleteWorkerSession", request, context, fn)

    def RegisterGraph(self, request, context):
        def fn(req):
            clamp_ms(req.config_proto, "operation_timeout_in_ms")
            handle = self.worker.register_graph(
                req.session_handle, req.graph_def, req.config_proto
            )
            ms = req.config_proto.operation_timeout_in_ms
            with self._lock:
                self._op_timeouts[handle] = seconds_from_ms(ms)
            return worker_pb2.RegisterGraphResponse(graph_handle=handle)

        return self._serve("RegisterGraph", request, context, fn)

    def DeregisterGraph(self, request, context):
        def fn(req):
            self.worker.deregister_graph(req.session_handle, req.graph_handle)
            with self._lock:
                self._op_timeouts.pop(req.graph_handle, None)
            return worker_pb2.DeregisterGraphResponse()

        return self._serve("DeregisterGraph", request, context, fn)

    def RunGraph(self, request, context):
        def fn(req):
            msg, feeds = req
            step_id = msg.step_id
            with self._lock:
                cancelled = self._cancelled.get(step_id)
            if cancelled is not None:
                raise cancelled
            feeds = self._resolve(feeds, context)
            feed_dict = dict(feeds)
            if len(feed_dict) != len(feeds):
                raise invalid("RunGraph", "a tensor is sent twice")
            opts = since_arrival(clamp_ms(msg.exec_opts))
            timeout_s = seconds_from_ms(opts.timeout_in_ms)
            # The master went away mid-step (its RunGraph call ended): cancel.
            watch = StepWatch(context, self.worker.abort_step, "master")
            watch.started(step_id)
            try:
                out, stats = self.worker.run_graph(
                    msg.session_handle,
                    msg.graph_handle,
                    step_id,
                    feed_dict,
                    list(msg.recv_key),
                    opts.record_timeline,
                    timeout_s,
                    self._op_timeouts.get(msg.graph_handle),
                )
            finally:
                watch.finished()
            resp = worker_pb2.RunGraphResponse()
            if stats:
                resp.step_stats.CopyFrom(
                    coding.stats_to_proto(stats, self.worker.task_name)
                )
            return coding.encode_message(
                resp, 1, [(k, out[k]) for k in msg.recv_key], park=self.worker.parked.park
            )

        return self._serve_in_body(
            "RunGraph", request, context, fn, worker_pb2.RunGraphResponse
        )

    def _resolve(self, feeds, context):
        if not any(isinstance(v, coding.TensorRef) for _, v in feeds):
            return feeds
        deadline = time.monotonic() + left_or_unbounded(context.time_remaining())
        return coding.resolve_refs(
            feeds,
            lambda ref: self.worker.pull(
                ref,
                max(deadline - time.monotonic(), 0.001),
                context.add_callback,
            ),
        )

    def CleanupGraph(self, request, context):
        def fn(req):
            err = errors.CancelledError(
                None,
                None,
                f"Step {req.step_id:x} was cancelled on "
                f"{self.worker.task_name} by its master",
            )
            with self._lock:
                self._cancelled[req.step_id] = err
                while len(self._cancelled) > RECENT_REQUESTS:
                    self._cancelled.popitem(last=False)
            self.worker.abort_step(req.step_id, err)
            return worker_pb2.CleanupGraphResponse()

        return self._serve("CleanupGraph", request, context, fn)

    def CleanupAll(self, request, context):
        def fn(req):
            self.worker.cleanup_all(list(req.container))
            return worker_pb2.CleanupAllResponse()

        return self._serve("CleanupAll", request, context, fn)

    def _recv(self, request, context, wait_s: float | None):
        """The value of a RecvTensor request, or None after ``wait_s``."""
        if isinstance(request, Malformed):
            raise invalid("RecvTensor", request.error)
        timeout = left_or_unbounded(context.time_remaining())
        polling = wait_s is not None and wait_s < timeout
        if polling:
            timeout = wait_s
        parts = request.rendezvous_key.split(";")
        parked = len(parts) == 5 and parts[3].startswith("_park/")
        if parked:  # parked before it was announced: there, or gone
            timeout = min(timeout, _PARKED_WAIT_S)
        try:
            return self.worker.recv_tensor(
                request.step_id,
                request.rendezvous_key,
                timeout,
                lambda: not context.is_active(),
            )
        except errors.DeadlineExceededError:
            if parked:
                raise errors.NotFoundError(
                    None,
                    None,
                    f"Tensor {request.rendezvous_key[:200]} is not "
                    f"parked on {self.worker.task_name} (already pulled, or "
                    "expired)",
                ) from None
            if polling:
                return None
            raise

    def RecvTensor(self, request, context):
        try:
            value = self._recv(request, context, None)
            chunks = coding.recv_tensor_chunks(value)
        except Exception as e:  # noqa: BLE001
            st = to_status(e)
            context.abort(st.code, st.message[:MAX_MESSAGE_CHARS])
        yield from chunks

    def RecvTensorUnary(self, request, context):
        try:
            wait = None
            if not isinstance(request, Malformed) and request.wait_ms > 0:
                wait = request.wait_ms / 1000.0
            value = self._recv(request, context, wait)
            if value is None:
                return coding.PENDING
            extras = ()
            if request.sibling_key:
                extras = self.worker.take_siblings(
                    request.step_id, request.rendezvous_key,
                    list(request.sibling_key)).items()
            park = self.worker.parked.park
            ref = park(value) if coding.parkable(value) else None
            return coding.encode_recv_response(value, ref, extras, park)
        except Exception as e:  # noqa: BLE001
            st = to_status(e)
        context.abort(st.code, st.message[:MAX_MESSAGE_CHARS])

    def handler(self) -> grpc.GenericRpcHandler:
        w = worker_pb2
        return grpc.method_handlers_generic_handler(
            "nbdist.WorkerService",
            {
                "GetStatus": unary(self.GetStatus, w.GetStatusRequest.FromString),
                "CreateWorkerSession": unary(
                    self.CreateWorkerSession, w.CreateWorkerSessionRequest.FromString
                ),
                "DeleteWorkerSession": unary(
                    self.DeleteWorkerSession, w.DeleteWorkerSessionRequest.FromString
                ),
                "RegisterGraph": unary(
                    self.RegisterGraph, w.RegisterGraphRequest.FromString
                ),
                "DeregisterGraph": unary(
                    self.DeregisterGraph, w.DeregisterGraphRequest.FromString
                ),
                "RunGraph": unary(
                    self.RunGraph,
                    lambda d: coding.decode_message(d, w.RunGraphRequest, 5),
                ),
                "CleanupGraph": unary(
                    self.CleanupGraph, w.CleanupGraphRequest.FromString
                ),
                "CleanupAll": unary(self.CleanupAll, w.CleanupAllRequest.FromString),
                "RecvTensor": grpc.unary_stream_rpc_method_handler(
                    self.RecvTensor,
                    request_deserializer=lenient(w.RecvTensorRequest.FromString),
                    response_serializer=encoded,
                ),
                "RecvTensorUnary": unary(
                    self.RecvTensorUnary, w.RecvTensorRequest.FromString
                ),
            },
        )
