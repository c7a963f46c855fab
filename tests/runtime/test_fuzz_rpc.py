"""Robustness of the RPC surface against hostile and malformed requests.

One ``nbdist-server`` process (``python -m nbdist.server``, killed by PID at
teardown) gets, for every RPC method of MasterService and WorkerService (and
CoordinationService when the server runs it), ``PER_METHOD`` generated
requests from a seeded ``random.Random``: random bytes, mutated valid
messages, messages with random field values, and well-formed but wrong
messages (unknown ops, bad attrs, bad shapes, dangling inputs, unknown
session/graph handles, absurd declared tensor sizes such as a shape of
[2**40] with no content, huge step ids, malformed rendezvous keys, wrong
dtypes). Each request must be answered within ``BOUND_S`` seconds (times the
load per core) with an error status (never INTERNAL or UNKNOWN, which would
mean an unexpected exception in the server) or a correct answer; requests that
may rightly wait (a RecvTensor of a tensor nobody sends, a barrier) get a short
deadline and may end with DEADLINE_EXCEEDED. The server process must survive,
log no traceback, and run a correct step afterwards.

Hostile requests are mixed in (the server runs with small
``server_limits``): a few dozen bytes asking for huge constants (a string
``Const`` of shape [2**30] with one value), feeds that make ``Fill``,
``Tile``, ``Range``, ``OneHot``, ``BroadcastTo``, ``Pad`` and random ops
produce huge shapes, messages over ``max_request_bytes``, pushed tensors,
key-value entries and unpulled fetches past their caps. They must be refused
(RESOURCE_EXHAUSTED naming the limit) within the bound, and the server's
peak RSS and CPU time (``/proc/<pid>``) must stay within ``RSS_BOUND`` and
``CPU_PER_REQUEST_S`` per request, its CPU going idle once the requests are
answered.

``NBDIST_FUZZ_SEED`` and ``NBDIST_FUZZ_PER_METHOD`` override the seed and the
count (e.g. to explore with other seeds).

The file also checks the streaming of large feeds (PushTensors) and that a
RunStep whose client goes away has its step cancelled on the server.
"""

from __future__ import annotations

import math
import os
import random
import struct
import threading
import time
from concurrent import futures

import grpc
import numpy as np
import pytest
from helpers import (
    ServerProcess,
    cluster_string,
    cpu_seconds,
    load_factor,
    local_cluster,
    proc_status,
    rpc_methods,
)

import nbdist as nd
from nbdist import errors
from nbdist.proto import (
    attr_value_pb2,
    config_pb2,
    graph_pb2,
    master_pb2,
    master_service_pb2,
    node_def_pb2,
    tensor_pb2,
    worker_pb2,
    worker_service_pb2,
)
from nbdist.runtime.grpc import coding
from nbdist.runtime.grpc.client import GrpcMasterClient, GrpcWorkerClient

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("NBDIST_FUZZ_SEED", "20240917"))
PER_METHOD = int(os.environ.get("NBDIST_FUZZ_PER_METHOD", "2000"))
BOUND_S = 5.0  # every answer comes within this on a quiet machine


def bound_s() -> float:
    """``BOUND_S`` stretched as wall times are on a busy machine (CI beside
    other jobs, ``scripts/run_under_load.py``): still a bound, never a hang."""
    return BOUND_S * load_factor()
MiB = 1 << 20
# The fuzzed server's limits (nbdist-server flags), small so that hostile
# requests reach them.
LIMITS = {
    "max_request_bytes": 8 * MiB,
    "max_pushed_bytes_per_client": 32 * MiB,
    "max_pushed_bytes": 64 * MiB,
    "max_parked_bytes": 32 * MiB,
    "max_key_value_bytes": 16 * MiB,
}
RSS_BOUND = 400 * MiB  # peak RSS of the server above its RSS before the fuzz
CPU_PER_REQUEST_S = 0.001  # server CPU time per request, on average
IDLE_CPU_S = 0.3  # CPU time the server may spend in a second once idle
SHORT_S = 0.2  # deadline of requests that may rightly wait
CONCURRENCY = 12
WAIT_CONCURRENCY = 100  # requests that mostly wait cost the server nothing
# Status codes that mean the server failed rather than rejected the request.
BAD_CODES = {
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNIMPLEMENTED,
}
BAD_BODY_CODES = {errors.INTERNAL, errors.UNKNOWN, errors.UNAVAILABLE}

try:
    from nbdist.proto import coordination_pb2, coordination_service_pb2
except ImportError:  # pragma: no cover - the coordination service is optional
    coordination_pb2 = coordination_service_pb2 = None


# -- value pools -------------------------------------------------------------------
INTS = [
    0,
    1,
    -1,
    2,
    3,
    7,
    255,
    1 << 20,
    2**31 - 1,
    -(2**31),
    2**40,
    2**62,
    2**63 - 1,
    -(2**63),
]
FLOATS = [
    0.0,
    -0.0,
    1.0,
    -1.5,
    1e300,
    -1e300,
    float("inf"),
    float("-inf"),
    float("nan"),
    1e-310,
]
KNOWN_OPS = [
    "Const",
    "Placeholder",
    "Identity",
    "Add",
    "AddV2",
    "Sub",
    "Mul",
    "MatMul",
    "Reshape",
    "Fill",
    "Sum",
    "Cast",
    "NoOp",
    "VariableV2",
    "Assign",
    "AssignAdd",
    "StopGradient",
    "Shape",
    "Size",
    "Range",
    "ConcatV2",
    "Transpose",
    "_Send",
    "_Recv",
    "_Feed",
    "_Fetch",
    "StridedSlice",
    "Tile",
    "OneHot",
    "RandomUniform",
    "ZerosLike",
]
# Ops that may block a step (kept out of graphs a fuzzed RunStep may run).
BLOCKING_OPS = {
    "_Recv",
    "QueueDequeueV2",
    "QueueDequeue",
    "FIFOQueueV2",
    "QueueEnqueueV2",
}
DTYPES = list(range(25)) + [101, 120, 1000, -1, 2**31 - 1]


def _rand_bytes(rng: random.Random, big=False) -> bytes:
    n = rng.choice([0, 1, 2, 5, 16, 64, 300, 2000] + ([70000] if big else []))
    return rng.randbytes(n)


class Ctx:
    """What the generators know about the server (handles, devices, keys)."""

    def __init__(self, address: str):
        self.address = address
        self.session_handle = ""
        self.node_names: list[str] = []
        self.worker_session = "fuzz-worker-session"
        self.graph_handle = ""
        self.feed_key = ""
        self.fetch_key = ""
        self.device = ""
        self.incarnation = 1
        self.protected: set[str] = set()
        self._strings: list[str] | None = None

    def strings(self) -> list[str]:
        """Interesting strings (built once, after the handles are known)."""
        if self._strings is None:
            self._strings = self._make_strings()
        return self._strings

    def _make_strings(self) -> list[str]:
        dev = self.device or "/job:ps/replica:0/task:0/device:CPU:0"
        inc = f"{self.incarnation:x}"
        return [
            "",
            "x",
            "Const:0",
            "nope:0",
            ":",
            "a:b",
            "x:99999999999",
            "^ctrl",
            "/job:ps/task:0",
            "/job:ps/replica:1/task:0",
            "/job:nope/task:99",
            "/device:GPU:7",
            "/job:ps/task:0/device:CPU:999",
            "garbage/spec",
            "é😀\u0000",
            "x" * 5000,
            "a;b",
            ";;;;",
            f"{dev};zz;dst;n;0:0",
            f"{dev};{inc};/job:w/replica:0/task:0/device:CPU:0;t;0:0",
            f"{dev};1;/job:w/replica:0/task:0/device:CPU:0;t;0:0",
            f"{dev};{inc};d;_park/123;0:0",
            "no-such-session",
            "a" * 200 + "-1",
            self.session_handle,
            self.worker_session,
            self.graph_handle,
            self.worker_session + "/g999999",
            *self.node_names,
        ]


class Gen:
    """Request generators, one seeded ``random.Random``."""

    def __init__(self, rng: random.Random, ctx: Ctx):
        self.rng = rng
        self.ctx = ctx

    # -- generic: any message, random field values ----------------------------
    def scalar(self, f):
        r, t = self.rng, f.type
        if t == f.TYPE_STRING:
            s = r.choice(self.ctx.strings())
            return s if s not in self.ctx.protected else "unknown-handle"
        if t == f.TYPE_BYTES:
            return _rand_bytes(r, big=r.random() < 0.01)
        if t == f.TYPE_BOOL:
            return r.random() < 0.5
        if t in (f.TYPE_FLOAT, f.TYPE_DOUBLE):
            v = r.choice(FLOATS + [r.uniform(-1e6, 1e6)])
            if t == f.TYPE_FLOAT and math.isfinite(v) and abs(v) > 3e38:
                return 1.0  # beyond float32
            return v
        v = r.choice(INTS + [r.getrandbits(64) - 2**63])
        if t in (f.TYPE_INT32, f.TYPE_SINT32, f.TYPE_SFIXED32, f.TYPE_ENUM):
            return max(-(2**31), min(2**31 - 1, v))
        if t in (f.TYPE_UINT32, f.TYPE_FIXED32):
            return abs(v) % 2**32
        if t in (f.TYPE_UINT64, f.TYPE_FIXED64):
            return abs(v) % 2**64
        return v

    def fill(self, msg, depth: int = 0):
        r = self.rng
        for f in msg.DESCRIPTOR.fields:
            if r.random() < 0.4:
                continue
            mt = f.message_type
            if mt is not None and mt.GetOptions().map_entry:
                kf, vf = mt.fields_by_name["key"], mt.fields_by_name["value"]
                m = getattr(msg, f.name)
                for _ in range(r.randint(0, 3)):
                    k = self.scalar(kf)
                    if vf.message_type is not None:
                        if depth < 4:
                            self.fill(m[k], depth + 1)
                    else:
                        m[k] = self.scalar(vf)
            elif f.is_repeated:
                field = getattr(msg, f.name)
                for _ in range(r.choice([0, 1, 2, 3, 50])):
                    if mt is not None:
                        if depth < 4:
                            self.fill(field.add(), depth + 1)
                    else:
                        field.append(self.scalar(f))
            elif mt is not None:
                if depth < 4:
                    sub = getattr(msg, f.name)
                    sub.SetInParent()
                    self.fill(sub, depth + 1)
            else:
                setattr(msg, f.name, self.scalar(f))
        return msg

    # -- tensors, graphs ---------------------------------------------------------------
    def shape(self):
        r = self.rng
        return r.choice(
            [
                [],
                [1],
                [3],
                [2, 2],
                [2**40],
                [-5],
                [2**31, 2**31],
                [0, 2**62],
                [-1],
                [1] * 40,
                [r.randint(0, 6) for _ in range(r.randint(0, 4))],
            ]
        )

    def tensor(self) -> tensor_pb2.TensorProto:
        r = self.rng
        t = tensor_pb2.TensorProto(
            dtype=r.choice([1, 1, 3, 9, 7, 10, 2, 19] + DTYPES[:5])
        )
        if r.random() < 0.1:
            t.dtype = r.choice(DTYPES)
        shape = self.shape()
        for d in shape:
            t.tensor_shape.dim.add(size=d)
        if r.random() < 0.05:
            t.tensor_shape.unknown_rank = True
        kind = r.random()
        if kind < 0.3:
            n = 1
            for d in shape:
                n *= max(d, 0)
            size = min(n * 4, 4096) if n < 10**6 else r.randint(0, 64)
            t.tensor_content = r.randbytes(
                size + r.choice([0, 0, 1, -1]) if size else 0
            )
        elif kind < 0.5:
            t.float_val.extend([r.choice(FLOATS) for _ in range(r.randint(0, 3))])
        elif kind < 0.6:
            t.int_val.extend([r.randint(-5, 5) for _ in range(r.randint(0, 3))])
        elif kind < 0.7:
            t.string_val.extend([_rand_bytes(r) for _ in range(r.randint(0, 3))])
        elif kind < 0.75:
            t.half_val.extend([r.randint(-(2**31), 2**31 - 1) for _ in range(2)])
        elif kind < 0.8:  # a reference to something that is not there
            t.version_number = coding.REF_MAGIC
            t.string_val.append(r.choice(self.ctx.strings()).encode()[:300])
            t.int64_val.append(r.choice(INTS))
        elif kind < 0.85:
            t.bool_val.extend([True, False][: r.randint(0, 2)])
        return t

    def attr(self) -> attr_value_pb2.AttrValue:
        r = self.rng
        a = attr_value_pb2.AttrValue()
        k = r.randint(0, 8)
        if k == 0:
            a.type = r.choice(DTYPES)
        elif k == 1:
            for d in self.shape():
                a.shape.dim.add(size=d)
        elif k == 2:
            a.tensor.CopyFrom(self.tensor())
        elif k == 3:
            a.i = r.choice(INTS)
        elif k == 4:
            a.f = r.choice(FLOATS)
        elif k == 5:
            a.s = _rand_bytes(r)
        elif k == 6:
            a.b = True
        elif k == 7:
            a.list.i.extend([r.choice(INTS) for _ in range(3)])
        else:
            self.fill(a)
        return a

    def node(self, i: int, names: list[str], run_safe: bool) -> node_def_pb2.NodeDef:
        r = self.rng
        ops = [o for o in KNOWN_OPS if not (run_safe and o in BLOCKING_OPS)]
        op = (
            r.choice(ops)
            if r.random() < 0.85
            else r.choice(["NoSuchOp", "", "x" * 300, "Const\u0000"])
        )
        n = node_def_pb2.NodeDef(name=f"f{i}_{r.getrandbits(20)}", op=op)
        if r.random() < 0.05:
            n.name = r.choice(["", "a:b", "^x", names[0] if names else "dup"])
        for _ in range(r.choice([0, 1, 2, 2, 3])):
            if names and r.random() < 0.7:
                n.input.append(r.choice(names) + r.choice(["", ":0", ":1", ":77"]))
            else:
                n.input.append(r.choice(["dangling", "^dangling", "x:-1", ""]))
        if r.random() < 0.3:
            n.device = r.choice(self.ctx.strings()[8:14])
        for key in r.sample(
            [
                "T",
                "dtype",
                "value",
                "shape",
                "N",
                "Tidx",
                "keep_dims",
                "transpose_a",
                "container",
                "shared_name",
                "validate_shape",
                "out_type",
                "tensor_name",
                "send_device",
                "recv_device",
                "send_device_incarnation",
                "client_terminated",
                "tensor_type",
                "key",
                "begin_mask",
                "axis",
                "seed",
                "bogus",
            ],
            r.randint(0, 4),
        ):
            n.attr[key].CopyFrom(self.attr())
        return n

    def graph(self, run_safe: bool = True) -> graph_pb2.GraphDef:
        r = self.rng
        g = graph_pb2.GraphDef()
        names = list(self.ctx.node_names)
        for i in range(r.choice([0, 1, 2, 3, 5, 8])):
            n = self.node(i, names, run_safe)
            g.node.append(n)
            names.append(n.name)
        if r.random() < 0.1 and g.node:  # a cycle
            g.node[0].input.append(g.node[-1].name)
        return g

    def hostile_graph(self) -> graph_pb2.GraphDef:
        """A few dozen bytes that would materialise gigabytes: a Const filled
        from one value, of a huge shape."""
        r = self.rng
        g = graph_pb2.GraphDef()
        n = g.node.add(name=f"h{r.getrandbits(20)}", op="Const")
        t = n.attr["value"].tensor
        t.dtype = r.choice([7, 7, 1, 2, 9])  # string, float, double, int64
        n.attr["dtype"].type = t.dtype
        for d in r.choice([[60_000_000], [2**30], [2**40], [2**16, 2**16], [2**28]]):
            t.tensor_shape.dim.add(size=d)
        if t.dtype == 7:
            t.string_val.append(b"x" * r.choice([0, 1, 100]))
        else:
            t.float_val.append(1.0) if t.dtype == 1 else t.int64_val.append(1)
        return g

    def named(self, name_pool):
        r = self.rng
        return master_pb2.RunStepRequest().feed.add(
            name=r.choice(name_pool), tensor=self.tensor()
        )

    # -- mutation ---------------------------------------------------------------------
    def mutate(self, data: bytes) -> bytes:
        r = self.rng
        b = bytearray(data)
        for _ in range(r.randint(1, 4)):
            op = r.randint(0, 3)
            if op == 0 and b:
                i = r.randrange(len(b))
                b[i] ^= 1 << r.randrange(8)
            elif op == 1 and b:
                del b[r.randrange(len(b)) :]
            elif op == 2:
                b[r.randrange(len(b) + 1) : 0] = r.randbytes(r.randint(1, 8))
            else:
                b += bytes([r.choice([0x0A, 0x12, 0x1A, 0x08, 0xFF])]) + struct.pack(
                    "<I", r.getrandbits(32)
                )
        return bytes(b)


# -- per-method semantic generators ---------------------------------------------
def _semantic(gen: Gen, method: str, cls):
    """A well-formed but (mostly) wrong request for ``method``; None: generic."""
    r, ctx = gen.rng, gen.ctx
    names = ctx.node_names + ["nope", "x"]
    tensor_names = [f"{n}:0" for n in names] + ["nope:0", "a:b", ":"]
    handle = ctx.session_handle if r.random() < 0.6 else r.choice(ctx.strings())
    if method in ("CreateSession", "ExtendSession", "RegisterGraph") and (
        r.random() < 0.1
    ):
        req = cls(graph_def=gen.hostile_graph())
        if method != "CreateSession":
            req.session_handle = ctx.worker_session
        return req
    if method == "RunStep" and r.random() < 0.3:
        return _hostile_run_step(gen, cls)
    if method == "InsertKeyValue" and r.random() < 0.2:
        req = cls()
        req.kv.key, req.kv.value = f"fuzz/{r.getrandbits(30)}", r.randbytes(MiB)
        return req
    if method == "CreateSession":
        req = cls(graph_def=gen.graph(), target=r.choice(ctx.strings()))
        if r.random() < 0.5:
            req.config.device_filters.extend(r.sample(ctx.strings()[8:14], 2))
        if r.random() < 0.3:
            req.config.operation_timeout_in_ms = r.choice([-1, 1, 50, 2**62])
        if r.random() < 0.2:
            req.config.device_count["CPU"] = r.choice([0, -3, 2**31 - 1])
        return req
    if method == "ExtendSession":
        return cls(
            session_handle=handle,
            graph_def=gen.graph(),
            current_graph_version=r.choice([0, 1, 2, -1, 2**62, len(ctx.node_names)]),
        )
    if method == "RunStep":
        req = cls(
            session_handle=handle,
            fetch=r.sample(tensor_names, r.randint(0, 3)),
            target=r.sample(names, r.randint(0, 2)),
            request_id=r.choice([0, r.getrandbits(62)]),
        )
        for _ in range(r.randint(0, 3)):
            req.feed.add(name=r.choice(tensor_names), tensor=gen.tensor())
        if r.random() < 0.3:
            req.options.timeout_in_ms = r.choice([-1, 1, 100, 2**62])
            req.options.trace_level = r.choice([0, 3, 99, -5])
            req.options.output_partition_graphs = r.random() < 0.5
        return req
    if method in ("CloseSession", "DeleteWorkerSession"):
        return cls(
            session_handle=r.choice(["nope", "", "x" * 1000, "a/b/c"]),
            request_id=r.getrandbits(62),
        )
    if method == "ListDevices":
        return cls(device_filters=r.sample(ctx.strings()[8:16], r.randint(0, 3)))
    if method == "Reset":
        return cls(
            container=r.sample(["", "c", "x" * 300, "/"], r.randint(0, 2)),
            device_filters=r.sample(ctx.strings()[8:16], r.randint(0, 2)),
        )
    if method == "CreateWorkerSession":
        return cls(
            session_handle=r.choice(["", "fz-" + str(r.getrandbits(30)), "x" * 3000]),
            isolate_session_state=r.random() < 0.5,
        )
    if method == "RegisterGraph":
        req = cls(
            session_handle=ctx.worker_session
            if r.random() < 0.7
            else r.choice(ctx.strings()),
            graph_def=gen.graph(run_safe=False),
        )
        if r.random() < 0.3:
            req.config_proto.operation_timeout_in_ms = r.choice([-1, 10, 2**62])
        return req
    if method == "DeregisterGraph":
        return cls(
            session_handle=r.choice([ctx.worker_session, "nope"]),
            graph_handle=r.choice(["nope", "", ctx.worker_session + "/g0"]),
        )
    if method == "RunGraph":
        req = cls(
            session_handle=ctx.worker_session if r.random() < 0.7 else "nope",
            graph_handle=ctx.graph_handle
            if r.random() < 0.7
            else r.choice(ctx.strings()),
            step_id=r.choice(INTS + [r.getrandbits(63)]),
            request_id=r.choice([0, r.getrandbits(62)]),
        )
        keys = [ctx.feed_key, ctx.fetch_key] + ctx.strings()[14:22]
        for _ in range(r.randint(0, 3)):
            req.send.add(name=r.choice(keys), tensor=gen.tensor())
        req.recv_key.extend(r.sample(keys, r.randint(0, 2)))
        if r.random() < 0.3:
            req.exec_opts.timeout_in_ms = r.choice([-1, 1, 100, 2**62])
            req.exec_opts.record_timeline = r.random() < 0.5
        return req
    if method == "CleanupGraph":
        return cls(step_id=r.choice(INTS + [r.getrandbits(63)]))
    if method == "CleanupAll":
        return cls(container=r.sample(["", "c", "x" * 300], r.randint(0, 2)))
    if method in ("RecvTensor", "RecvTensorUnary"):
        return cls(
            step_id=r.choice(INTS + [r.getrandbits(63)]),
            rendezvous_key=r.choice(ctx.strings()[14:22] + ["x" * 100000]),
            wait_ms=r.choice([0, -1, 1, 50, 2**62]),
        )
    if (
        coordination_pb2 is not None
        and cls.DESCRIPTOR.file is coordination_pb2.DESCRIPTOR
    ):
        req = gen.fill(cls())
        for f in ("timeout_in_ms",):
            if f in cls.DESCRIPTOR.fields_by_name:
                setattr(req, f, r.choice([-1, 0, 1, 100, 2**62]))
        return req
    return None


# Feeds that make the shape-making ops of the fuzz session produce huge or
# moderate outputs: (fetch, feed, values).
HOSTILE_SHAPES = [
    ("h_fill:0", "dims:0", [[2**20, 2**20], [2**31 - 1], [2**16, 2**16], [512, 512]]),
    ("h_rand:0", "dims:0", [[2**20, 2**20], [2**16, 2**16], [512, 512], [3]]),
    ("h_bcast:0", "dims:0", [[2**31 - 1, 8], [2**16, 2**16], [1024, 1024]]),
    ("h_tile:0", "mult:0", [[2**30, 2**30], [2**16, 2**16], [256, 256], [2, 2]]),
    ("h_range:0", "lim:0", [2**31 - 1, 2**29, 10**6, 10]),
    ("h_onehot:0", "depth:0", [2**31 - 1, 2**28, 1 << 19, 5]),
    ("h_pad:0", "pads:0", [[[0, 2**30], [0, 2**30]], [[0, 2**16], [0, 2**16]],
                           [[1, 1], [1, 1]]]),
]


def _hostile_run_step(gen: Gen, cls):
    r, ctx = gen.rng, gen.ctx
    fetch, feed, values = r.choice(HOSTILE_SHAPES)
    req = cls(session_handle=ctx.session_handle, fetch=[fetch])
    req.feed.add(name=feed, tensor=coding.encode_tensor(
        np.asarray(r.choice(values), np.int32)))
    req.options.timeout_in_ms = int(BOUND_S * 500)
    return req


def _push_stream(gen: Gen) -> list[bytes]:
    """A PushTensors request stream, mostly wrong."""
    r = gen.rng
    k = r.randint(0, 9)
    msgs = []
    if k == 0:  # a well-formed small push
        arr = np.arange(r.randint(0, 300), dtype=np.float32)
        return list(coding.push_chunks([(r.getrandbits(62) | 1, arr)], 128))
    if k == 1:  # an absurd declared size, no content
        head = master_pb2.PushTensorsRequest(push_id=5, total_bytes=2**42)
        head.tensor.dtype = 1
        head.tensor.tensor_shape.dim.add(size=2**40)
        return [head.SerializeToString()]
    if k == 2:  # data before any header
        return [b"".join((coding._len_field(10, 4), b"abcd", b"\x58\x00\x60\x04"))]
    if k == 3:  # chunks out of order / past the end
        arr = np.ones(64, np.float32)
        msgs = list(coding.push_chunks([(9, arr)], 64))
        r.shuffle(msgs)
        return msgs
    if k == 4:  # push_id 0, or a string tensor
        return list(
            coding.push_chunks([(r.choice([0, 3]), np.array([b"a", b"bc"], object))])
        )
    if k == 5:  # a header that lies about its size
        head = master_pb2.PushTensorsRequest(
            push_id=7, total_bytes=r.choice([-1, 3, 2**63 - 1]), tensor=gen.tensor()
        )
        return [
            head.SerializeToString(),
            b"".join((coding._len_field(10, 3), b"abc", b"\x58\x00\x60\x03")),
        ]
    if k == 6:  # truncated stream
        arr = np.ones(1000, np.int32)
        return list(coding.push_chunks([(11, arr)], 1000))[:-1]
    if k == 8 and r.random() < 0.3:  # a well-formed push that no step will use
        arr = np.ones(r.choice([MiB // 4, MiB]), np.float32)
        return list(coding.push_chunks([(r.getrandbits(62) | 1, arr)]))
    if k == 7:
        return [
            gen.fill(master_pb2.PushTensorsRequest()).SerializeToString()
            for _ in range(r.randint(1, 4))
        ]
    return [_rand_bytes(r) for _ in range(r.randint(0, 4))]


# -- running requests --------------------------------------------------------------
class Outcome:
    __slots__ = ("code", "detail", "elapsed", "may_wait", "method")

    def __init__(self, method, code, detail, elapsed, may_wait):
        self.method, self.code, self.detail = method, code, detail
        self.elapsed, self.may_wait = elapsed, may_wait

    def problem(self) -> str | None:
        if self.elapsed > bound_s():
            return f"answered after {self.elapsed:.2f} s"
        if self.code in BAD_CODES or self.code in BAD_BODY_CODES:
            return f"{self.code}: {self.detail[:300]}"
        if self.code == grpc.StatusCode.DEADLINE_EXCEEDED and not self.may_wait:
            return "no answer before the deadline"
        return None


def _body_code(method: str, data: bytes):
    cls = {
        "RunStep": master_pb2.RunStepResponse,
        "RunGraph": worker_pb2.RunGraphResponse,
    }.get(method)
    if cls is None:
        return grpc.StatusCode.OK, ""
    try:
        msg, _ = coding.decode_message(data, cls, 1)
    except ValueError:  # a real answer with tensors we could not decode
        return "UNDECODABLE", ""
    return (msg.status_code or grpc.StatusCode.OK), msg.status_error_message


def _call(channel, service, method, kind, payload, timeout, may_wait) -> Outcome:
    path = f"/nbdist.{service}/{method}"
    t0 = time.monotonic()
    code, detail = grpc.StatusCode.OK, ""
    try:
        if kind == "uu":
            data = channel.unary_unary(path)(payload, timeout=timeout)
            code, detail = _body_code(method, data)
        elif kind == "us":
            call = channel.unary_stream(path)(payload, timeout=timeout)
            for i, _ in enumerate(call):
                if i > 100:
                    call.cancel()
                    break
        else:
            channel.stream_unary(path)(iter(payload), timeout=timeout)
    except grpc.RpcError as e:
        code, detail = e.code(), e.details() or ""
        if code == grpc.StatusCode.CANCELLED:  # we stopped reading a stream
            code = grpc.StatusCode.OK
    return Outcome(method, code, detail, time.monotonic() - t0, may_wait)


_methods = rpc_methods


# Methods that may rightly wait for something that never comes.
_MAY_WAIT = {"RecvTensor", "RecvTensorUnary", "Barrier", "GetKeyValue", "WatchEvents"}


def _requests(gen: Gen, service, method, kind, desc, n):
    from google.protobuf import message_factory

    cls = message_factory.GetMessageClass(desc)
    r = gen.rng
    for _ in range(n):
        may_wait = method in _MAY_WAIT
        timeout = SHORT_S if may_wait else bound_s()
        if kind == "su":
            yield _push_stream(gen), timeout, may_wait
            continue
        k = r.random()
        if k < 0.002:  # over max_request_bytes: refused unread
            payload = bytes(LIMITS["max_request_bytes"] + 1)
        elif k < 0.15:
            payload = _rand_bytes(r, big=r.random() < 0.02)
        elif k < 0.25:
            sem = _semantic(gen, method, cls) or gen.fill(cls())
            payload = gen.mutate(sem.SerializeToString())
        elif k < 0.45:
            payload = gen.fill(cls()).SerializeToString()
        else:
            sem = _semantic(gen, method, cls) or gen.fill(cls())
            payload = sem.SerializeToString()
        yield payload, timeout, may_wait


# -- fixtures ----------------------------------------------------------------------
def _limited_server():
    cluster = local_cluster(ps=1)
    proc = ServerProcess(
        [f"--cluster_spec={cluster_string(cluster)}", "--job_name=ps", "--task_index=0"]
        + [f"--{name}={value}" for name, value in LIMITS.items()]
    )
    return proc, cluster["ps"][0]


@pytest.fixture(scope="module")
def fuzz_server():
    proc, address = _limited_server()
    try:
        yield proc, address
    finally:
        proc.kill()


@pytest.fixture
def fresh_limited_server():
    """A server of its own: hostile requests before it may have filled the
    shared one's small parking budget with results nobody pulls."""
    proc, address = _limited_server()
    try:
        yield proc, address
    finally:
        proc.kill()


def _setup_context(address: str) -> Ctx:
    """A live master session and a registered worker graph, for requests that
    get past the handle checks."""
    ctx = Ctx(address)
    g = nd.Graph()
    with g.as_default():
        a = nd.placeholder(nd.float32, [None], name="a")
        b = nd.constant([1.0, 2.0], name="b")
        nd.add(a, b, name="sum")
        v = nd.Variable(np.zeros(2, np.float32), name="v")
        nd.identity(v, name="read")
        # Shape-making ops whose output size a RunStep's feed decides.
        dims = nd.placeholder(nd.int32, [None], name="dims")
        nd.fill(dims, 1.0, name="h_fill")
        nd.random_uniform(dims, name="h_rand")
        nd.broadcast_to([1.0], dims, name="h_bcast")
        nd.tile(nd.ones([2, 2]), nd.placeholder(nd.int32, [2], name="mult"),
                name="h_tile")
        nd.range(0, nd.placeholder(nd.int32, [], name="lim"), name="h_range")
        nd.one_hot([0, 1], nd.placeholder(nd.int32, [], name="depth"),
                   name="h_onehot")
        nd.pad([[1.0]], nd.placeholder(nd.int32, [2, 2], name="pads"),
               name="h_pad")
        gd = g.as_graph_def()
    master = GrpcMasterClient("grpc://" + address)
    ctx.session_handle, _ = master.create_session(gd, config_pb2.ConfigProto())
    ctx.node_names = [n.name for n in gd.node]
    ctx.protected = {ctx.session_handle, ctx.worker_session}
    worker = GrpcWorkerClient("/job:ps/replica:0/task:0", address)
    devs = worker.get_status()
    ctx.device, ctx.incarnation = devs[0]
    worker.create_worker_session(ctx.worker_session)
    from nbdist.executor.rendezvous import make_key

    ctx.feed_key = make_key(
        ctx.device,
        ctx.incarnation,
        "/job:client/replica:0/task:0/device:CPU:0",
        "feed_x",
    )
    ctx.fetch_key = make_key(
        ctx.device,
        ctx.incarnation,
        "/job:client/replica:0/task:0/device:CPU:0",
        "fetch_y",
    )
    pg = graph_pb2.GraphDef()
    feed = pg.node.add(name="x", op="_Feed", device=ctx.device)
    feed.attr["key"].s = ctx.feed_key.encode()
    feed.attr["dtype"].type = 1
    feed.attr["shape"].shape.unknown_rank = True
    ident = pg.node.add(name="y", op="Identity", input=["x"], device=ctx.device)
    ident.attr["T"].type = 1
    fetch = pg.node.add(name="f", op="_Fetch", input=["y"], device=ctx.device)
    fetch.attr["key"].s = ctx.fetch_key.encode()
    ctx.graph_handle = worker.register_graph(ctx.worker_session, pg)
    out, _ = worker.run_graph(
        ctx.worker_session,
        ctx.graph_handle,
        99,
        {ctx.feed_key: np.ones(3, np.float32)},
        [ctx.fetch_key],
    )
    assert np.array_equal(out[ctx.fetch_key], np.ones(3, np.float32))
    master.close()
    worker.close()
    return ctx


def _has_coordination(channel) -> bool:
    if coordination_service_pb2 is None:
        return False
    try:
        channel.unary_unary("/nbdist.CoordinationService/GetTaskState")(b"", timeout=5)
    except grpc.RpcError as e:
        return e.code() != grpc.StatusCode.UNIMPLEMENTED
    return True


def _server_errors(lines: list[str]) -> list[str]:
    """Distinct (innermost frame, exception) pairs of the tracebacks logged."""
    out: dict[str, None] = {}
    frame = ""
    for ln in lines:
        if ln.startswith("  File "):
            frame = ln.strip()
        elif (
            ln
            and not ln.startswith(" ")
            and frame
            and ("Error" in ln or "Exception" in ln)
        ):
            out[f"{frame} -> {ln.strip()[:200]}"] = None
            frame = ""
    return list(out)


def _idle_cpu(pid: int, within_s: float = 10.0) -> float:
    """The least CPU time the server spent in one second, over ``within_s``
    (work a call's deadline did not stop would keep it busy)."""
    least = float("inf")
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and least >= IDLE_CPU_S:
        c0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(1.0)  # sampling CPU time needs an interval
        least = min(least, (cpu_seconds(pid) - c0) / (time.monotonic() - t0))
    return least


def _correct_step(address: str):
    g = nd.Graph()
    with g.as_default():
        big = np.arange(3 << 18, dtype=np.float32)  # 3 MiB: pushed, not inline
        ph = nd.placeholder(nd.float32, [None], name="ph")
        total = nd.reduce_sum(ph)
        v = nd.Variable(1.5, name="after_fuzz")
        with nd.Session("grpc://" + address) as sess:
            sess.run(v.initializer)
            assert sess.run(v) == 1.5
            got = sess.run(total, {ph: big})
            np.testing.assert_allclose(got, big.sum(dtype=np.float64), rtol=1e-6)
            assert sess.run(total, {ph: [1.0, 2.0]}) == 3.0


# -- the tests ----------------------------------------------------------------------
def test_fuzz_every_rpc_method(fuzz_server):
    proc, address = fuzz_server
    ctx = _setup_context(address)
    opts = [
        ("grpc.max_send_message_length", -1),
        ("grpc.max_receive_message_length", -1),
        ("grpc.use_local_subchannel_pool", 1),  # a connection (client) of its own
    ]
    channel = grpc.insecure_channel(address, options=opts)
    with_coord = _has_coordination(channel)
    methods = _methods(with_coord)
    gen = Gen(random.Random(SEED), ctx)
    problems: dict[str, int] = {}  # distinct problem -> how many times
    counts: dict[str, int] = {}
    timing = []
    rss0, cpu0 = proc_status(proc.pid)["VmRSS"], cpu_seconds(proc.pid)
    t0 = time.monotonic()
    with (
        futures.ThreadPoolExecutor(CONCURRENCY) as pool,
        futures.ThreadPoolExecutor(WAIT_CONCURRENCY) as wait_pool,
    ):
        running = None

        def collect(service, method, outs, t1):
            for out in outs:
                counts[method] = counts.get(method, 0) + 1
                p = out.problem()
                if p is not None:
                    p = f"{service}/{method}: {p[:160]}"
                    problems[p] = problems.get(p, 0) + 1
            assert proc.proc.poll() is None, (
                f"the server died during {method}: " + "\n".join(proc.stderr[-30:])
            )
            timing.append(f"{method} {time.monotonic() - t1:.1f}s")

        for service, method, kind, desc in methods:
            # Generated while the previous method's requests are answered.
            reqs = list(_requests(gen, service, method, kind, desc, PER_METHOD))
            if running is not None:
                collect(*running)
            use = wait_pool if method in _MAY_WAIT else pool
            outs = use.map(
                lambda q, s=service, m=method, k=kind: _call(channel, s, m, k, *q), reqs
            )
            running = (service, method, outs, time.monotonic())
        collect(*running)
    elapsed = time.monotonic() - t0
    channel.close()
    idle = _idle_cpu(proc.pid)
    peak, cpu = proc_status(proc.pid)["VmHWM"] - rss0, cpu_seconds(proc.pid) - cpu0
    n = sum(counts.values())
    print(
        f"\n{n} requests to {len(methods)} methods "
        f"(coordination: {with_coord}) in {elapsed:.1f} s, server peak RSS "
        f"{peak / MiB:+.0f} MiB, CPU {cpu:.1f} s: " + ", ".join(timing)
    )
    assert not problems, "\n".join(
        [f"{n} x {p}" for p, n in problems.items()][:40]
        + ["server errors:"]
        + _server_errors(proc.stderr)
    )
    assert all(counts[m[1]] >= PER_METHOD for m in methods)
    assert proc.proc.poll() is None
    assert peak < RSS_BOUND, f"server peak RSS {peak / MiB:+.0f} MiB"
    assert cpu < CPU_PER_REQUEST_S * n, f"server CPU {cpu:.1f} s for {n} requests"
    assert idle < IDLE_CPU_S, f"the server still works: {idle:.2f} s CPU in 1 s"
    _correct_step(address)
    time.sleep(0.2)
    tracebacks = [ln for ln in proc.stderr if "Traceback" in ln]
    assert not tracebacks, "\n".join(_server_errors(proc.stderr))


def test_large_feed_is_pushed_and_references_are_checked(fresh_limited_server,
                                                         monkeypatch):
    monkeypatch.setenv("NBDIST_SAME_HOST", "0")  # gRPC's PushTensors, not the Unix socket
    _proc, address = fresh_limited_server
    target = "grpc://" + address
    value = np.random.default_rng(3).random(1 << 19).astype(np.float32)  # 2 MiB
    g = nd.Graph()
    with g.as_default():
        ph = nd.placeholder(nd.float32, [None])
        back = nd.identity(ph)
        with nd.Session(target) as sess:
            pushes = []
            real = sess._master._push
            sess._master._push = lambda vals, t: (
                pushes.append(len(vals)) or real(vals, t)
            )
            out = sess.run(back, {ph: value})
            np.testing.assert_array_equal(out, value)
            assert pushes == [1]
            # The same array fed to two placeholders: two pushed tensors.
            ph2 = nd.placeholder(nd.float32, [None])
            both = sess.run([nd.identity(ph2), back], {ph: value, ph2: value})
            assert all(np.array_equal(x, value) for x in both)
            # A small feed stays inline.
            assert list(sess.run(back, {ph: [1.0]})) == [1.0]
            assert pushes == [1, 2]
    # A reference is good for one RunStep only.
    client = GrpcMasterClient(target)
    try:
        g = nd.Graph()
        with g.as_default():
            ph = nd.placeholder(nd.float32, [None], name="p")
            nd.identity(ph, name="out")
        handle, _ = client.create_session(g.as_graph_def())
        park = client._push([value], 30.0)
        for attempt in range(2):
            req = master_pb2.RunStepRequest(
                session_handle=handle,
                fetch=["out:0"],
                request_id=random.getrandbits(62) | 1,
            )
            data = coding.encode_message(req, 2, [("p:0", value)], park=park)
            resp, _ = client._run_step(data, timeout=30)
            if attempt == 0:
                assert resp.status_code == 0
            else:
                assert resp.status_code == errors.INVALID_ARGUMENT
                assert "PushTensors" in resp.status_error_message
        client.close_session(handle)
    finally:
        client.close()


def test_disconnected_client_cancels_its_step(fuzz_server):
    """A RunStep blocked in a dequeue: cancelling the call cancels the step
    on the server, which then no longer takes what is enqueued later."""
    _proc, address = fuzz_server
    target = "grpc://" + address
    g = nd.Graph()
    with g.as_default():
        q = nd.FIFOQueue(
            10, nd.float32, shapes=[[]], shared_name="disconnect_q", name="disconnect_q"
        )
        deq = q.dequeue()
        enq = q.enqueue(7.0)
        size = q.size()
        with nd.Session(target) as sess:
            client = sess._master
            sess.run(size)  # creates the session
            req = master_pb2.RunStepRequest(
                session_handle=sess._handle,
                fetch=[deq.name],
                request_id=random.getrandbits(62) | 1,
            )
            call = client._run_step.future(
                coding.encode_message(req, 2, []), timeout=60
            )
            time.sleep(1.0)
            assert not call.done()  # blocked in the dequeue
            call.cancel()
            time.sleep(0.5)
            sess.run(enq)
            # Had the step outlived its client, it would have taken the value.
            deadline = time.monotonic() + 2
            n = sess.run(size)
            while n != 1 and time.monotonic() < deadline:
                time.sleep(0.1)
                n = sess.run(size)
            assert n == 1
            assert sess.run(deq) == 7.0


def test_dropped_connection_cancels_its_step(fuzz_server):
    """The same when the client's connection goes away (its channel closes)."""
    _proc, address = fuzz_server
    target = "grpc://" + address
    g = nd.Graph()
    with g.as_default():
        q = nd.FIFOQueue(
            10, nd.float32, shapes=[[]], shared_name="dropped_q", name="dropped_q"
        )
        deq = q.dequeue()
        enq = q.enqueue(3.0)
        size = q.size()
        with nd.Session(target) as sess:
            sess.run(size)
            other = GrpcMasterClient(target)
            req = master_pb2.RunStepRequest(
                session_handle=sess._handle, fetch=[deq.name]
            )
            box = {}

            def run():
                try:
                    box["r"] = other._run_step(
                        coding.encode_message(req, 2, []), timeout=60
                    )
                except grpc.RpcError as e:
                    box["e"] = e

            t = threading.Thread(target=run, daemon=True)
            t.start()
            time.sleep(1.0)
            other.close()  # the connection goes away mid-step
            t.join(10)
            assert not t.is_alive()
            time.sleep(0.5)
            sess.run(enq)
            time.sleep(0.3)
            assert sess.run(size) == 1
            assert sess.run(deq) == 3.0


def test_list_devices_honours_device_filters(spawn):
    cluster = local_cluster(ps=1, worker=1)
    spawn("ps", 0, cluster)
    spawn("worker", 0, cluster)
    target = "grpc://" + cluster["worker"][0]
    cfg = nd.ConfigProto(device_filters=["/job:worker"])
    with nd.Session(target, config=cfg) as sess:
        names = [d.name for d in sess.list_devices()]
    assert names == ["/job:worker/replica:0/task:0/device:CPU:0"]
    with nd.Session(target) as sess:
        names = sorted(d.name for d in sess.list_devices())
    assert names == [
        "/job:ps/replica:0/task:0/device:CPU:0",
        "/job:worker/replica:0/task:0/device:CPU:0",
    ]


def test_new_methods_need_the_token_and_work_with_it(graph):
    """PushTensors (client stream) and RecvTensorUnary check the token too."""
    token = "fuzz-token"
    with nd.Server.create_local_server(token=token) as server:
        address = server.target[len("grpc://") :]
        channel = grpc.insecure_channel(address)
        push = channel.stream_unary("/nbdist.MasterService/PushTensors")
        recv = channel.unary_unary("/nbdist.WorkerService/RecvTensorUnary")
        chunks = list(coding.push_chunks([(5, np.ones(4, np.float32))]))
        for md in ((), (("authorization", "Bearer wrong"),)):
            with pytest.raises(grpc.RpcError) as info:
                push(iter(chunks), timeout=5, metadata=md)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as info:
                recv(b"", timeout=5, metadata=md)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        good = (("authorization", f"Bearer {token}"),)
        resp = master_pb2.PushTensorsResponse.FromString(
            push(iter(chunks), timeout=5, metadata=good)
        )
        assert len(resp.key) == 1
        channel.close()
        ph = nd.placeholder(nd.float32, [None])
        y = nd.identity(ph)
        big = np.arange(1 << 19, dtype=np.float32)
        cfg = nd.ConfigProto(auth_token=token)
        sess = nd.Session("", config=cfg)
        sess._master.close()
        sess._master = GrpcMasterClient(server.target, cfg)
        sess._target = server.target
        with sess:
            np.testing.assert_array_equal(sess.run(y, {ph: big}), big)
