"""The decoders under fuzzing, each with valid seed inputs and the errors it
documents (``tests/fuzz/test_decoders.py`` mutates the seeds with
hypothesis; ``scripts/fuzz.py`` runs them under atheris).

``Target.feed(data)`` decodes ``data`` as the real reader would: it returns
(decoded, or refused with a documented error) or raises something else — a
finding. Every decoder runs with small limits, so that what it may allocate
is bounded by the limits, not by what the input claims.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
from google.protobuf.message import DecodeError

from nbdist import errors

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LIMIT_BYTES = 1 << 20  # every decoder's bound on one tensor and one request
READ_TIMEOUT_S = 2.0  # a socket decoder waiting past this on a closed input hangs
# File decoders read from memory-backed files where there are (a write to disk
# costs more than the decode).
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None


class Target(NamedTuple):
    name: str
    seeds: Callable[[], list[bytes]]
    decode: Callable[[bytes], object]
    documented: tuple[type[BaseException], ...]
    # The protobuf message the decoder reads, for structure-aware fuzzing
    # (``proto_mutator``); None where the input is not one message.
    message: Callable[[], type] | None = None

    def feed(self, data: bytes) -> None:
        """Decodes ``data``; raises only what is not documented."""
        try:
            self.decode(data)
        except self.documented:
            pass


class _Fed:
    """A connection whose peer sent ``data`` and then only listens: the
    decoder reads ``sock`` to its end; what it answers goes nowhere."""

    def __init__(self, data: bytes):
        self.sock, self._peer = socket.socketpair()
        self._peer.sendall(data)
        self._peer.shutdown(socket.SHUT_WR)
        self.sock.settimeout(READ_TIMEOUT_S)

    def __enter__(self) -> socket.socket:
        return self.sock

    def __exit__(self, *exc) -> None:
        self.sock.close()
        self._peer.close()


_SOCKET_ERRORS = (OSError, ValueError, errors.OpError)  # ChannelClosed is an OSError


def _frames(*frames) -> bytes:
    """The bytes ``send_frame`` puts on the wire for ``(header, out)`` pairs."""
    from nbdist.runtime.framed.wire import send_frame

    a, b = socket.socketpair()
    try:
        for header, out in frames:
            send_frame(a, header, out)
        a.close()
        chunks = []
        while chunk := b.recv(1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        b.close()


# -- the framed wire (same-host and TCP peer paths) ---------------------------------
def _wire_seeds() -> list[bytes]:
    from nbdist.runtime.framed.wire import Outgoing

    seeds = []
    for values in ({"x:0": np.arange(6, dtype=np.float32).reshape(2, 3)},
                   {"s": np.array([b"ab", b"c"], dtype=object), "i": np.int64(7)},
                   {}):
        out = Outgoing()
        for k, v in values.items():
            out.add(k, v)
        seeds.append(_frames(({"op": "step", "session": "h", "fetch": ["y:0"],
                               "t": out.entries}, out)))
    return seeds


def _wire_decode(data: bytes):
    from nbdist.runtime.framed.wire import check_sizes, decode_tensors, recv_frame

    with _Fed(data[:1 << 16]) as sock:
        header, payload, fds = recv_frame(sock, LIMIT_BYTES)
        entries = header.get("t", ())
        if not isinstance(entries, list):
            raise ValueError("a frame's tensors are a list")
        check_sizes(entries, LIMIT_BYTES, LIMIT_BYTES)
        return decode_tensors(entries, payload, fds)


# -- the peer paths' handshake, both sides ------------------------------------------
_KEY = b"k" * 32
_ADDRESS = "localhost:1"


def _server_seeds() -> list[bytes]:
    return [_frames(({"op": "hello", "nonce": "0" * 64}, None),
                    ({"op": "prove", "proof": "f" * 64}, None))]


def _server_decode(data: bytes):
    from nbdist.runtime.framed.handshake import server_handshake

    with _Fed(data[:1 << 14]) as sock:
        return server_handshake(sock, _ADDRESS, "/job:w/replica:0/task:0", 1, _KEY,
                                "fuzz")


def _client_seeds() -> list[bytes]:
    return [_frames(({"challenge": "1" * 64}, None),
                    ({"task": "/job:w/replica:0/task:0", "address": _ADDRESS,
                      "incarnation": 1, "proof": "e" * 64}, None))]


def _client_decode(data: bytes):
    from nbdist.runtime.framed.handshake import client_handshake

    with _Fed(data[:1 << 14]) as sock:
        return client_handshake(sock, _ADDRESS, _KEY)


# -- gRPC request messages (the servicers' decoder) --------------------------------
def _request_seeds() -> list[bytes]:
    from nbdist.framework.tensor_util import make_tensor_proto
    from nbdist.proto import master_pb2

    request = master_pb2.RunStepRequest(session_handle="h", fetch=["y:0"])
    request.feed.add(name="x:0", tensor=make_tensor_proto(
        np.arange(6, dtype=np.float32).reshape(2, 3)))
    request.feed.add(name="s:0", tensor=make_tensor_proto(np.array([b"a"], object)))
    return [request.SerializeToString()]


def _request_decode(data: bytes):
    from nbdist.proto import master_pb2
    from nbdist.runtime.grpc.coding import decode_message

    return decode_message(data, master_pb2.RunStepRequest, 2)


# -- GraphDef, as a session's master imports it -------------------------------------
def _graph_seeds() -> list[bytes]:
    import nbdist as nd

    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float32, [None, 3], name="x")
        w = nd.Variable(np.ones((3, 2), np.float32), name="w")
        y = nd.matmul(x, w)
        nd.reduce_sum(nd.nn.relu(y) + nd.constant([1.0, 2.0]), name="loss")
    return [g.as_graph_def().SerializeToString()]


_master = None


def _graph_decode(data: bytes):
    from nbdist.executor.limits import Limits
    from nbdist.proto import graph_pb2
    from nbdist.runtime.master import Master
    from nbdist.runtime.worker import Worker

    global _master
    if _master is None:
        task = "/job:localhost/replica:0/task:0"
        limit = Limits(max_request_bytes=LIMIT_BYTES, max_tensor_bytes=LIMIT_BYTES,
                       max_graph_constant_bytes=LIMIT_BYTES)
        _master = Master(task, Worker(task, limits=limit))
    graph_def = graph_pb2.GraphDef.FromString(data)
    handle, _ = _master.create_session(graph_def, None)
    _master.close_session(handle)


# -- Example protos, as parse_single_example reads them -----------------------------
_example_run = None


def _example_seeds() -> list[bytes]:
    from nbdist.proto import example_pb2, feature_pb2

    ex = example_pb2.Example()
    f = ex.features.feature
    f["x"].CopyFrom(feature_pb2.Feature(
        float_list=feature_pb2.FloatList(value=[1.0, 2.0, 3.0])))
    f["ids"].CopyFrom(feature_pb2.Feature(
        int64_list=feature_pb2.Int64List(value=[4, 5])))
    f["name"].CopyFrom(feature_pb2.Feature(
        bytes_list=feature_pb2.BytesList(value=[b"nbdist"])))
    return [ex.SerializeToString()]


def _example_decode(data: bytes):
    import nbdist as nd

    global _example_run
    if _example_run is None:
        g = nd.Graph()
        with g.as_default():
            s = nd.placeholder(nd.string, [], name="s")
            parsed = nd.parse_single_example(s, {
                "x": nd.FixedLenFeature([3], nd.float32),
                "ids": nd.VarLenFeature(nd.int64),
                "name": nd.FixedLenFeature([], nd.string, default_value=b""),
            })
        sess = nd.Session(graph=g)
        _example_run = lambda d: sess.run(parsed, {s: d})  # noqa: E731
    return _example_run(data)


# -- TFRecord files ------------------------------------------------------------------
def _tfrecord_seeds() -> list[bytes]:
    from nbdist.executor.tf_record import tfrecord

    return [tfrecord(b"first record") + tfrecord(b"") + tfrecord(bytes(range(40)))]


def _tfrecord_decode(data: bytes):
    from nbdist.executor.tf_record import read_records

    fd, path = tempfile.mkstemp(suffix=".tfrecord", dir=SCRATCH)
    try:
        os.write(fd, data)
        os.close(fd)
        return list(read_records(path))
    finally:
        os.unlink(path)


# -- TF checkpoints (the .index of a bundle; its data file as TF wrote it) ----------
_CKPT = FIXTURES / "tf" / "ckpt" / "model"


def _checkpoint_seeds() -> list[bytes]:
    return [Path(str(_CKPT) + ".index").read_bytes()]


_ckpt_dir = None


def _checkpoint_decode(data: bytes):
    from nbdist.train.checkpoint_utils import load_checkpoint

    global _ckpt_dir
    if _ckpt_dir is None:  # one directory: the fixture's data file, our index
        _ckpt_dir = tempfile.TemporaryDirectory(dir=SCRATCH)
        os.symlink(str(_CKPT) + ".data-00000-of-00001",
                   os.path.join(_ckpt_dir.name, "model.data-00000-of-00001"))
    prefix = os.path.join(_ckpt_dir.name, "model")
    Path(prefix + ".index").write_bytes(data)
    reader = load_checkpoint(prefix)
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def _message(module: str, name: str) -> Callable[[], type]:
    """The message class ``nbdist.proto.<module>.<name>``, imported when asked."""
    def get() -> type:
        import importlib

        return getattr(importlib.import_module(f"nbdist.proto.{module}"), name)
    return get


TARGETS = {t.name: t for t in (
    Target("wire", _wire_seeds, _wire_decode, _SOCKET_ERRORS),
    Target("handshake_server", _server_seeds, _server_decode, _SOCKET_ERRORS),
    Target("handshake_client", _client_seeds, _client_decode, _SOCKET_ERRORS),
    Target("request", _request_seeds, _request_decode,
           (ValueError, DecodeError, errors.OpError),
           _message("master_pb2", "RunStepRequest")),
    Target("graphdef", _graph_seeds, _graph_decode, (DecodeError, errors.OpError),
           _message("graph_pb2", "GraphDef")),
    Target("example", _example_seeds, _example_decode, (errors.OpError,),
           _message("example_pb2", "Example")),
    Target("tfrecord", _tfrecord_seeds, _tfrecord_decode, (errors.OpError,)),
    Target("checkpoint", _checkpoint_seeds, _checkpoint_decode, (errors.OpError,)),
)}
