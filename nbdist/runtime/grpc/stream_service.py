"""``StreamService``: a task's ``WorkerHandler`` served over long-lived gRPC
streams of frames (``grpc.stream_frames``), on the task's gRPC port.

Each stream is one connection of the stream path (``grpc.stream_path``): its
client sends one request frame at a time and reads the answer; the stream's
thread (from the service's own pool, not a call class's: a stream lives as long
as its client) answers each in turn. Every frame is admitted in its call class,
as the other transports' calls (``runtime.service.admission``); the handlers
own validation, timeouts and cancellation. A stream that ends (its client
died, or gave up) cancels the step it was running, as a unary call's end does.
"""

from __future__ import annotations

import logging
import threading
from concurrent import futures

from google.protobuf import message

import grpc
from nbdist import errors
from nbdist.runtime.grpc.stream_frames import (
    STREAM_CALL,
    STREAM_SERVICE,
    decode_frame,
    encode_frame,
    error_header,
)
from nbdist.runtime.timeouts import UNBOUNDED_S, ms_as_seconds

__all__ = ["MAX_STREAMS", "RECV_POLL_MS", "StreamService"]

_log = logging.getLogger("nbdist")
MAX_STREAMS = 512  # open streams per server: each holds a thread while it waits
RECV_POLL_MS = 100  # a blocked pull answers "pending" this often
# Frames by the method whose admission class they count in.
_METHODS = {"run": "RunGraph", "recv": "RecvTensorUnary", "abort": "CleanupGraph",
            "hello": "GetStatus"}
_OTHER = "PeerStream"  # what an unknown op counts as


def _identity(data: bytes) -> bytes:
    return data


class StreamService:
    """Serves ``worker_handler`` on the stream method of a gRPC server
    (``handler()``); ``limits`` bound each tensor of a request (gRPC's
    ``max_receive_message_length`` bounds a whole frame)."""

    def __init__(self, worker_handler, limits):
        self._handler = worker_handler
        self._task = worker_handler.task_name
        self._incarnation = worker_handler.worker.incarnation
        admission = worker_handler.admission
        self._refusal = admission.refusal
        self._classes = {op: (method, admission.class_of(method)) for op, method in
                         (*_METHODS.items(), (None, _OTHER))}
        self._serving = worker_handler
        self._max_tensor = limits.max_tensor_bytes
        self._pool = futures.ThreadPoolExecutor(
            MAX_STREAMS, thread_name_prefix=f"nbdist-stream{self._task}")
        self._open = 0
        self._lock = threading.Lock()

    def handler(self) -> grpc.GenericRpcHandler:
        def serve(requests, context):
            return self._serve(requests, context)

        serve.experimental_thread_pool = self._pool  # its own threads
        return grpc.method_handlers_generic_handler(STREAM_SERVICE, {
            STREAM_CALL: grpc.stream_stream_rpc_method_handler(
                serve, request_deserializer=_identity,
                response_serializer=_identity)})

    def shutdown(self) -> None:
        """After the gRPC server stopped (its streams ended)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _serve(self, requests, context):
        with self._lock:
            full = self._open >= MAX_STREAMS
            self._open += not full
        if full:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"{self._task} has {MAX_STREAMS} streams open")
        # The running step's cancellation when the stream ends: one callback
        # per stream, the step's function in a slot (no call per frame).
        slot: list = [None]

        def hung_up():
            fn = slot[0]
            if fn is not None:
                fn()

        def on_hangup(fn) -> bool:  # False: it ended already
            slot[0] = fn
            return context.is_active()

        context.add_callback(hung_up)
        try:
            for frame in requests:
                yield self._answer(frame, on_hangup)
        finally:
            with self._lock:
                self._open -= 1

    def _answer(self, frame: bytes, on_hangup) -> bytes:
        """One request frame's answer, admitted in its class."""
        op = None
        try:
            header, tensors = decode_frame(frame, self._max_tensor)
            op = header.get("op")
            method, count = self._classes.get(op) or self._classes[None]
            if count.full:
                return encode_frame(error_header(errors.ResourceExhaustedError(
                    None, None, self._refusal(method, count))))
            count.enter()
            try:
                return self._dispatch(op, header, tensors, on_hangup)
            finally:
                count.leave()
        except errors.OpError as e:
            return encode_frame(error_header(e))
        except (KeyError, TypeError, ValueError, message.DecodeError) as e:
            return encode_frame(error_header(errors.InvalidArgumentError(
                None, None, f"Malformed stream {str(op)[:100]} request to "
                f"{self._task}: {e}")))
        except Exception as e:  # noqa: BLE001 - answered, as gRPC answers UNKNOWN
            _log.exception("%s: stream %s failed", self._task, op)
            return encode_frame(error_header(errors.InternalError(
                None, None, f"{str(op)[:100]} on {self._task} failed: "
                f"{type(e).__name__}: {e}")))

    def _dispatch(self, op, header, tensors, on_hangup) -> bytes:
        handler = self._handler
        if op == "run":
            out, stats = self._once("RunGraph", header, lambda: handler.run_graph(
                str(header["session"]), str(header["graph"]), int(header["step"]),
                tensors, [str(k) for k in header["fetch"]], bool(header.get("trace")),
                int(header.get("timeout_ms", 0)), on_hangup=on_hangup))
            reply = {"stats": [list(s) for s in stats]} if stats else {}
            return encode_frame(reply, out.items(), handler.park)
        if op == "recv":
            step_id, key = int(header["step"]), str(header["key"])
            siblings = header.get("siblings") or []
            if not isinstance(siblings, list):
                raise TypeError("siblings must be a list")
            wait_s = ms_as_seconds(max(1, min(int(header.get("wait_ms", 0)) or
                                              RECV_POLL_MS, RECV_POLL_MS)))
            value = handler.recv_tensor(step_id, key, UNBOUNDED_S, wait_s,
                                        siblings=[str(s) for s in siblings])
            if value is None:
                return encode_frame({"pending": True})
            extras = handler.take_siblings(step_id, key, siblings) if siblings else {}
            return encode_frame({}, [(key, value), *extras.items()], handler.park)
        if op == "abort":
            self._once("CleanupGraph", header, lambda: handler.cleanup_graph(
                int(header["step"]), errors.make_error(
                    int(header.get("code", errors.CANCELLED)),
                    str(header.get("message", "")))) or ())
            return encode_frame({})
        if op == "hello":
            return encode_frame({"task": self._task, "incarnation": self._incarnation})
        raise errors.InvalidArgumentError(
            None, None, f"Unknown stream call {str(op)[:100]!r} to {self._task}")

    def _once(self, method: str, header: dict, fn):
        """``fn()`` (a handler's answer), once per request id ``rid``: a retry
        gets the first answer, whichever codec brought the first try
        (``Serving.once``: ``(method, rid)`` with gRPC's method names)."""
        return self._serving.once(method, int(header.get("rid") or 0), fn)
