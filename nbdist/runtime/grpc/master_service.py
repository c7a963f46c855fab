"""The MasterService of a server over its ``Master`` (sessions of this task's
target). See ``servicer_base`` for errors and retries; large feeds arrive ahead of
their RunStep by PushTensors into the task's ``tensor_store.PushedTensors``.
"""

from __future__ import annotations

import grpc
from nbdist.proto import config_pb2, master_pb2, master_service_pb2_grpc
from nbdist.runtime.grpc import coding
from nbdist.runtime.grpc.servicer_base import (
    MAX_MESSAGE_CHARS,
    Malformed,
    RecentRequests,
    ServicerBase,
    StatusError,
    StepWatch,
    clamp_ms,
    encoded,
    invalid,
    lenient,
    since_arrival,
    to_status,
    unary,
)

__all__ = ["MasterServicer"]


class MasterServicer(ServicerBase, master_service_pb2_grpc.MasterServiceServicer):
    """MasterService over a ``Master`` (sessions of this server's target)."""

    def __init__(
        self,
        master,
        recent: RecentRequests | None = None,
    ):
        self.master = master
        self._recent = recent or RecentRequests()
        # Large fetches are parked on, and large feeds pushed to, the master's task.
        self._parked = master.local_worker.parked
        self._pushed = master.local_worker.pushed

    def CreateSession(self, request, context):
        def fn(req):
            cfg = config_pb2.ConfigProto()
            cfg.CopyFrom(req.config)
            cfg.auth_token = ""
            clamp_ms(cfg, "operation_timeout_in_ms")
            handle, version = self.master.create_session(req.graph_def, cfg)
            return master_pb2.CreateSessionResponse(
                session_handle=handle, graph_version=version
            )

        return self._serve("CreateSession", request, context, fn)

    def ExtendSession(self, request, context):
        def fn(req):
            version = self.master.extend_session(
                req.session_handle, req.graph_def, req.current_graph_version
            )
            return master_pb2.ExtendSessionResponse(new_graph_version=version)

        return self._serve("ExtendSession", request, context, fn)

    def RunStep(self, request, context):
        def fn(req):
            msg, feeds = req
            if len({name for name, _ in feeds}) != len(feeds):
                raise invalid("RunStep", "a tensor is fed twice")
            if any(isinstance(v, coding.TensorRef) for _, v in feeds):
                feeds = coding.resolve_refs(
                    feeds, lambda ref: self._pushed.take(ref.key, ref.step_id))
            feed_dict = dict(feeds)
            options = msg.options if msg.HasField("options") else None
            if options is not None:
                since_arrival(clamp_ms(options))
            metadata = None
            if options is not None and (
                options.trace_level == config_pb2.RunOptions.FULL_TRACE
                or options.output_partition_graphs
            ):
                metadata = config_pb2.RunMetadata()
            fetches = list(msg.fetch)
            handle = msg.session_handle
            watch = StepWatch(
                context, lambda sid, err: self.master.cancel_step(handle, sid, err)
            )
            try:
                values = self.master.run_step(
                    handle,
                    feed_dict,
                    fetches,
                    list(msg.target),
                    options,
                    metadata,
                    on_step=watch.started,
                )
            finally:
                watch.finished()
            resp = master_pb2.RunStepResponse()
            if metadata is not None:
                resp.metadata.CopyFrom(metadata)
            return coding.encode_message(
                resp, 1, zip(fetches, values), park=self._parked.park
            )

        return self._serve_in_body(
            "RunStep", request, context, fn, master_pb2.RunStepResponse
        )

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
                        lambda n: self._pushed.admit(n, client))
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
        return self._pushed.put(push_id, receiver.result(), client)

    def CloseSession(self, request, context):
        def fn(req):
            self.master.close_session(req.session_handle)
            return master_pb2.CloseSessionResponse()

        return self._serve("CloseSession", request, context, fn)

    def ListDevices(self, request, context):
        def fn(req):
            resp = master_pb2.ListDevicesResponse()
            own = self.master.task_name + "/"
            cfg = None
            if req.device_filters:
                cfg = config_pb2.ConfigProto()
                cfg.CopyFrom(self.master.default_config)
                del cfg.device_filters[:]
                cfg.device_filters.extend(req.device_filters)
            for name, kind, inc in self.master.list_devices(cfg):
                field = (
                    resp.local_device if name.startswith(own) else resp.remote_device
                )
                field.add(name=name, device_type=kind, incarnation=inc)
            return resp

        return self._serve("ListDevices", request, context, fn)

    def Reset(self, request, context):
        def fn(req):
            self.master.reset(list(req.container), list(req.device_filters))
            return master_pb2.ResetResponse()

        return self._serve("Reset", request, context, fn)

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
