"""The MasterService: the gRPC codec over a task's ``MasterHandler`` (sessions of
this task's target). See ``servicer_base`` for errors and retries; large feeds
arrive ahead of their RunStep by PushTensors into the task's
``tensor_store.PushedTensors``.
"""

from __future__ import annotations

import grpc
from nbdist.proto import config_pb2, master_pb2, master_service_pb2_grpc
from nbdist.runtime.grpc import coding
from nbdist.runtime.grpc.servicer_base import (
    MAX_MESSAGE_CHARS,
    Malformed,
    ServicerBase,
    StatusError,
    encoded,
    invalid,
    lenient,
    to_status,
    unary,
)
from nbdist.runtime.service.master_handler import MasterHandler

__all__ = ["MasterServicer"]


class MasterServicer(ServicerBase, master_service_pb2_grpc.MasterServiceServicer):
    """MasterService over a ``MasterHandler`` (sessions of this server's target)."""

    def __init__(self, handler: MasterHandler):
        self.master_handler = handler
        self.master = handler.master
        self._serving = handler

    def CreateSession(self, request, context):
        return self._serve(
            "CreateSession", request, context,
            lambda req: self.master_handler.create_session(req.graph_def, req.config),
            lambda answer: master_pb2.CreateSessionResponse(
                session_handle=answer[0], graph_version=answer[1]))

    def ExtendSession(self, request, context):
        return self._serve(
            "ExtendSession", request, context,
            lambda req: self.master_handler.extend_session(
                req.session_handle, req.graph_def, req.current_graph_version),
            lambda version: master_pb2.ExtendSessionResponse(
                new_graph_version=version))

    def RunStep(self, request, context):
        # Filled when the options ask (trace, partition graphs) or the
        # session's config does (build_cost_model); sent only if filled. The
        # handler's answer (what a request id keeps) is the values: a retry
        # of a traced step gets them without the trace.
        metadata = config_pb2.RunMetadata()

        def call(req):
            msg, feeds = req
            options = msg.options if msg.HasField("options") else None
            return self.master_handler.run_step(
                msg.session_handle,
                feeds,
                list(msg.fetch),
                msg.target,
                options,
                metadata,
                on_hangup=context.add_callback,
                resolve=self._resolve,
            )

        def encode(req, values):
            resp = master_pb2.RunStepResponse()
            if metadata.ByteSize():
                resp.metadata.CopyFrom(metadata)
            return coding.encode_message(
                resp, 1, zip(req[0].fetch, values),
                park=self.master_handler.parked.park
            )

        return self._serve_in_body(
            "RunStep", request, context, call, encode, master_pb2.RunStepResponse
        )

    def _resolve(self, feeds):
        if not any(isinstance(v, coding.TensorRef) for _, v in feeds):
            return feeds
        return coding.resolve_refs(feeds, self.master_handler.take_pushed)

    def PushTensors(self, request_iterator, context):
        try:
            keys = []
            receiver = None
            push_id = 0
            client = context.peer()  # caps on pushed bytes count per client
            for chunk in request_iterator:
                if isinstance(chunk, Malformed):
                    raise invalid("PushTensors", chunk.error)
                if chunk[0] == "head":
                    if receiver is not None:
                        keys.append(self._pushed_put(push_id, receiver, client))
                    push_id = chunk[1].push_id
                    if not push_id:
                        raise invalid("PushTensors", "push_id must be nonzero")
                    receiver = coding.ChunkReceiver(
                        lambda n: self.master_handler.admit_push(n, client))
                elif receiver is None:
                    raise invalid("PushTensors", "data before a tensor header")
                receiver.add(chunk)
            if receiver is not None:
                keys.append(self._pushed_put(push_id, receiver, client))
            return master_pb2.PushTensorsResponse(key=keys)
        except MemoryError as e:
            st = StatusError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"PushTensors: cannot allocate the tensor: {e}",
            )
        except ValueError as e:
            st = to_status(invalid("PushTensors", e))
        except Exception as e:  # noqa: BLE001
            st = to_status(e)
        context.abort(st.code, st.message[:MAX_MESSAGE_CHARS])

    def _pushed_put(self, push_id: int, receiver, client: str) -> str:
        if not receiver.complete:
            raise invalid("PushTensors", "a tensor ended before all its bytes came")
        return self.master_handler.push(push_id, receiver.result(), client)

    def CloseSession(self, request, context):
        return self._serve(
            "CloseSession", request, context,
            lambda req: self.master_handler.close_session(req.session_handle),
            lambda _: master_pb2.CloseSessionResponse())

    def ListDevices(self, request, context):
        def fn(req):
            resp = master_pb2.ListDevicesResponse()
            own = self.master.task_name + "/"
            for name, kind, inc in self.master_handler.list_devices(
                    list(req.device_filters), req.session_handle):
                field = (
                    resp.local_device if name.startswith(own) else resp.remote_device
                )
                field.add(name=name, device_type=kind, incarnation=inc)
            return resp

        return self._serve("ListDevices", request, context, fn)

    def Reset(self, request, context):
        return self._serve(
            "Reset", request, context,
            lambda req: self.master_handler.reset(req.container, req.device_filters),
            lambda _: master_pb2.ResetResponse())

    def handler(self) -> grpc.GenericRpcHandler:
        m = master_pb2
        return grpc.method_handlers_generic_handler(
            "nbdist.MasterService",
            {
                "CreateSession": unary(
                    self.CreateSession, m.CreateSessionRequest.FromString
                ),
                "ExtendSession": unary(
                    self.ExtendSession, m.ExtendSessionRequest.FromString
                ),
                "RunStep": unary(
                    self.RunStep,
                    lambda d: coding.decode_message(d, m.RunStepRequest, 2),
                ),
                "PushTensors": grpc.stream_unary_rpc_method_handler(
                    self.PushTensors,
                    request_deserializer=lenient(coding.parse_push_chunk),
                    response_serializer=encoded,
                ),
                "CloseSession": unary(
                    self.CloseSession, m.CloseSessionRequest.FromString
                ),
                "ListDevices": unary(
                    self.ListDevices, m.ListDevicesRequest.FromString
                ),
                "Reset": unary(self.Reset, m.ResetRequest.FromString),
            },
        )
