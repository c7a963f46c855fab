"""The WorkerService: the gRPC codec over a task's ``WorkerHandler`` (registered
graph partitions, steps, and tensors other tasks pull: RecvTensorUnary for small
values and a chunked RecvTensor stream for large ones). What serving means
(validation, timeouts, cancelled steps, cancel-on-hang-up) is the handler's;
here requests are decoded, answers encoded. See ``servicer_base``.
"""

from __future__ import annotations

import time

import grpc
from nbdist.proto import device_attributes_pb2, worker_pb2, worker_service_pb2_grpc
from nbdist.runtime.device_attributes import device_type_of
from nbdist.runtime.grpc import coding
from nbdist.runtime.grpc.servicer_base import (
    MAX_MESSAGE_CHARS,
    Malformed,
    ServicerBase,
    encoded,
    invalid,
    lenient,
    to_status,
    unary,
)
from nbdist.runtime.service.worker_handler import WorkerHandler
from nbdist.runtime.timeouts import left_or_unbounded, ms_as_seconds

__all__ = ["WorkerServicer"]


class WorkerServicer(ServicerBase, worker_service_pb2_grpc.WorkerServiceServicer):
    """WorkerService over a ``WorkerHandler`` (this task's devices and resources)."""

    def __init__(self, handler: WorkerHandler):
        self.worker_handler = handler
        self.worker = handler.worker
        self._serving = handler

    def GetStatus(self, request, context):
        def fn(req):
            w = self.worker
            resp = worker_pb2.GetStatusResponse(
                task=w.task_name, incarnation=w.incarnation
            )
            for name, inc in self.worker_handler.get_status():
                resp.device_attributes.append(
                    device_attributes_pb2.DeviceAttributes(
                        name=name, device_type=device_type_of(name), incarnation=inc
                    )
                )
            return resp

        return self._serve("GetStatus", request, context, fn)

    def CreateWorkerSession(self, request, context):
        def call(req):
            self.worker_handler.create_worker_session(
                req.session_handle,
                req.server_def if req.HasField("server_def") else None,
                req.master_task, req.master_incarnation, req.isolate_session_state)

        return self._serve("CreateWorkerSession", request, context, call,
                           lambda _: worker_pb2.CreateWorkerSessionResponse())

    def DeleteWorkerSession(self, request, context):
        return self._serve(
            "DeleteWorkerSession", request, context,
            lambda req: self.worker_handler.delete_worker_session(req.session_handle),
            lambda _: worker_pb2.DeleteWorkerSessionResponse())

    def RegisterGraph(self, request, context):
        return self._serve(
            "RegisterGraph", request, context,
            lambda req: self.worker_handler.register_graph(
                req.session_handle, req.graph_def, req.config_proto),
            lambda handle: worker_pb2.RegisterGraphResponse(graph_handle=handle))

    def DeregisterGraph(self, request, context):
        return self._serve(
            "DeregisterGraph", request, context,
            lambda req: self.worker_handler.deregister_graph(req.session_handle,
                                                             req.graph_handle),
            lambda _: worker_pb2.DeregisterGraphResponse())

    def RunGraph(self, request, context):
        def call(req):
            msg, feeds = req
            return self.worker_handler.run_graph(
                msg.session_handle,
                msg.graph_handle,
                msg.step_id,
                feeds,
                msg.recv_key,
                msg.exec_opts.record_timeline,
                msg.exec_opts.timeout_in_ms,
                on_hangup=context.add_callback,
                resolve=lambda f: self._resolve(f, context),
            )

        def encode(req, answer):
            out, stats = answer
            resp = worker_pb2.RunGraphResponse()
            if stats:
                resp.step_stats.CopyFrom(
                    coding.stats_to_proto(stats, self.worker.task_name)
                )
            return coding.encode_message(
                resp, 1, [(k, out[k]) for k in req[0].recv_key],
                park=self.worker_handler.park,
            )

        return self._serve_in_body(
            "RunGraph", request, context, call, encode, worker_pb2.RunGraphResponse
        )

    def _resolve(self, feeds, context):
        if not any(isinstance(v, coding.TensorRef) for _, v in feeds):
            return feeds
        deadline = time.monotonic() + left_or_unbounded(context.time_remaining())
        return coding.resolve_refs(
            feeds,
            lambda ref: self.worker_handler.pull(
                ref,
                max(deadline - time.monotonic(), 0.001),
                context.add_callback,
            ),
        )

    def CleanupGraph(self, request, context):
        def fn(req):
            self.worker_handler.cleanup_graph(req.step_id)
            return worker_pb2.CleanupGraphResponse()

        return self._serve("CleanupGraph", request, context, fn)

    def CleanupAll(self, request, context):
        def fn(req):
            self.worker_handler.cleanup_all(req.container)
            return worker_pb2.CleanupAllResponse()

        return self._serve("CleanupAll", request, context, fn)

    def SetFaults(self, request, context):
        def fn(req):
            now, removed = self.worker_handler.set_faults(
                [(r.kind, r.peer, r.delay_s) for r in req.rule], req.owner)
            resp = worker_pb2.SetFaultsResponse()
            for kind, peer, delay_s in now:
                resp.rule.add(kind=kind, peer=peer, delay_s=delay_s)
            for kind, peer, delay_s in removed:
                resp.removed.add(kind=kind, peer=peer, delay_s=delay_s)
            return resp

        return self._serve("SetFaults", request, context, fn)

    def _recv(self, request, context, wait_s: float | None, siblings=()):
        """The value of a RecvTensor request, or None after ``wait_s``;
        ``siblings``: what the reply brings along (awaited with it)."""
        if isinstance(request, Malformed):
            raise invalid("RecvTensor", request.error)
        return self.worker_handler.recv_tensor(
            request.step_id,
            request.rendezvous_key,
            left_or_unbounded(context.time_remaining()),
            wait_s,
            lambda: not context.is_active(),
            siblings,
        )

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
                wait = ms_as_seconds(request.wait_ms)
            value = self._recv(request, context, wait, () if isinstance(
                request, Malformed) else request.sibling_key)
            if value is None:
                return coding.PENDING
            extras = ()
            if request.sibling_key:
                extras = self.worker_handler.take_siblings(
                    request.step_id, request.rendezvous_key,
                    request.sibling_key).items()
            park = self.worker_handler.park
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
                "SetFaults": unary(self.SetFaults, w.SetFaultsRequest.FromString),
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
