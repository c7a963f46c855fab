"""gRPC and same-host runtime costs (issues 3 and 11). Run on demand:
python benchmarks/bench_grpc.py

Prints ONE table, everything measured in the same run, side by side:

- ``run`` of a scalar constant on an in-process server (no RPC) and on a task
  in another process (a plain client: one RunStep);
- one cross-task hop: a session on an in-process worker task, a scalar made
  on a ps task in another process and consumed on the worker (RunGraph to
  the ps task + the ``_Recv``'s pull back);
- fetch and feed MB/s of 64 MiB and 256 MiB float32 tensors from/to a ps task
  in another process, by a plain client (RunStep plus the large feeds pushed
  and fetches pulled separately) and by an in-process worker task's master
  (RunGraph plus the pull of the fetched tensor);
- the floor: a raw grpcio unary round trip (8 bytes) and raw grpcio
  streaming transfers of 64 and 256 MiB in 4 MiB messages, both directions,
  against a bare grpcio server in another process;
- ratios against issue 3's targets (scalar in-process <= 80 us; one hop
  <= 1.5x a raw unary round trip; 256 MiB fetch/feed >= 0.7x the raw stream
  of the same size and direction and >= 500 MB/s).

The nbdist cases run twice. Rows marked ``[same-host]`` are the default: both
ends share this host, so RunGraph, ``_Recv`` pulls and a session's large
feeds/fetches take the same-host path (``nbdist/runtime/samehost.py``: an
abstract Unix socket, tensor bytes in memfd staging segments). Rows marked
``[gRPC only]`` are built with ``NBDIST_SAME_HOST=0`` in ``os.environ`` (so in
their ps process, their in-process worker server and their sessions' clients;
the variable is restored afterwards): everything over gRPC, as before the
same-host path. The "same-host vs gRPC" column gives the default's speed-up
over the gRPC-only row of the same case (the gRPC-only set has the remote
scalar, the hop and the 256 MiB tensors only). Below the table, issue 11's
targets: same-host 256 MiB fetch and feed >= 3,000 MB/s, and (with
TensorFlow) the remote scalar run and the hop in <= 0.7x TF's time.

All cases are set up first, then measured in interleaved rounds (every case
once per round, the floor and both nbdist sets included) and the best round
of each is shown, so that a change in the machine's load hits the floor and
nbdist alike.

If ``tensorflow`` is importable (``pip install nbdist[peers]``), the same
cases also run on TensorFlow (``tf.distribute.Server`` tasks, a ps task in
another process) and the table shows TF's figure and nbdist's ratio to it,
for both nbdist sets (TF's "in-process server" row is a
``Session(server.target)`` too: TF's ``LocalMaster`` skips gRPC there, so it
is TF's distributed master and worker without an RPC, as nbdist's figure
is). The TF path checks the values it fetches as the nbdist path does, and
runs in the same interleaved rounds: ``/tmp/nb/tfvenv/bin/python
benchmarks/bench_grpc.py``, say.

``--hosts netns`` (Linux, root) measures between hosts: the ps task, TF's
ps task and the bare grpcio server run in a network namespace host
(``tests/netns.py``) bound to its address, while this process (the client,
the in-process worker task bound to the bridge's address) reaches them
across a veth and a bridge, as between two machines; every nbdist task and
client of the run shares a token (required beyond loopback). There the
default set is the TCP peer path (what tasks on other hosts take; it waits
until the client and the worker have found it), beside the gRPC-only set
(``NBDIST_PEER_TCP=0``), and the table ends with issue 21's targets between
hosts (remote scalar and hop <= 0.8x TF's time, 256 MiB through a worker's
master >= 1.0x TF).

Every process the benchmark starts is stopped by PID. ``--quick`` uses fewer
repetitions (a smoke run, not a measurement).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _children import free_port, stop_by_pid

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 4 << 20
MIB = 1 << 20
START_TIMEOUT_S = 60.0

# -- the floor: a bare grpcio server ---------------------------------------------------
_RAW_SERVER = r"""
import sys, threading, signal
from concurrent import futures
import grpc
import numpy as np

CHUNK = 4 << 20
block = bytes(CHUNK)

def echo(request, context):
    return request

def down(request, context):
    total = int.from_bytes(request, "little")
    sent = 0
    while sent < total:
        n = min(CHUNK, total - sent)
        yield block if n == CHUNK else block[:n]
        sent += n

def up(request_iterator, context):
    total = 0
    for chunk in request_iterator:
        total += len(chunk)
    return total.to_bytes(8, "little")

def up_array(request_iterator, context):
    # The same, landing in a fresh NumPy array (first message: the size).
    it = iter(request_iterator)
    dest = np.empty(int.from_bytes(next(it), "little"), np.uint8)
    off = 0
    for chunk in it:
        dest[off : off + len(chunk)] = np.frombuffer(chunk, np.uint8)
        off += len(chunk)
    return off.to_bytes(8, "little")

ident = lambda b: b
handler = grpc.method_handlers_generic_handler("raw.Raw", {
    "Echo": grpc.unary_unary_rpc_method_handler(echo, ident, ident),
    "Down": grpc.unary_stream_rpc_method_handler(down, ident, ident),
    "Up": grpc.stream_unary_rpc_method_handler(up, ident, ident),
    "UpArray": grpc.stream_unary_rpc_method_handler(up_array, ident, ident),
})
opts = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
server = grpc.server(futures.ThreadPoolExecutor(16), handlers=[handler], options=opts)
port = server.add_insecure_port(f"{sys.argv[1]}:0")
server.start()
print("raw listening on", port, flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
stop.wait()
server.stop(0)
"""

# -- a TensorFlow ps task, for the peer comparison ----------------------------------
_TF_SERVER = r"""
import json, sys, signal, threading
import tensorflow as tf
cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
server = tf.distribute.Server(cluster, job_name="ps", task_index=0)
print("tf listening on", server.target, flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
stop.wait()
"""


class Place:
    """Where the far end of every case runs. Locally (the default) the ps task,
    TF's ps task and the bare grpcio server are processes of this host on
    127.0.0.1; with ``--hosts netns`` they run in a network namespace host
    (``tests/netns.py``) bound to its address, and this process (the client,
    the in-process worker task) reaches them over the bridge, whose address
    the worker task binds: every hop crosses a veth, as between two machines."""

    def __init__(self, far: str = "127.0.0.1", here: str = "localhost",
                 prefix: tuple = ()):
        self.far, self.here, self.prefix = far, here, list(prefix)

    @property
    def netns(self) -> bool:
        return bool(self.prefix)

    def cluster(self) -> dict:
        """A ps task over there and a worker task here, on free ports."""
        far = self.far if self.netns else "localhost"
        return {"ps": [f"{far}:{free_port()}"],
                "worker": [f"{self.here}:{free_port()}"]}


PLACE = Place()


class Proc:
    """A child process, stopped by PID (SIGTERM, then SIGKILL)."""

    def __init__(self, cmd: list[str], ready: str):
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        self.pid = self.proc.pid
        deadline = time.monotonic() + START_TIMEOUT_S
        self.banner = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                self.stop()
                raise RuntimeError(f"{cmd[:3]} exited before it was ready")
            if ready in line:
                self.banner = line.strip()
                return
        self.stop()
        raise RuntimeError(f"{cmd[:3]} did not start")

    def stop(self):
        stop_by_pid(self.proc)
        with contextlib.suppress(Exception):
            self.proc.stdout.close()


class Case:
    """One measured thing: ``fn`` is a latency (seconds per call, over
    ``number`` calls) or, with ``nbytes``, a transfer rate (MB/s)."""

    def __init__(self, key: str, fn, number: int = 1, nbytes: int = 0):
        self.key, self.fn, self.number, self.nbytes = key, fn, number, nbytes


def measure(cases: list[Case], rounds: int) -> dict:
    """Best figure of each case over ``rounds`` rounds; every round runs every
    case once, so that all cases (the floor included) see the same load."""
    best: dict = {}
    for c in cases:
        c.fn()  # warm up
    for _ in range(rounds):
        for c in cases:
            # Latencies: several short bursts per round (a burst is easily hit
            # by another process; the best burst is the figure).
            for _ in range(1 if c.nbytes else LATENCY_BURSTS):
                t = time.perf_counter()
                for _ in range(c.number):
                    c.fn()
                dt = (time.perf_counter() - t) / c.number
                if c.nbytes:
                    best[c.key] = max(best.get(c.key, 0.0), c.nbytes / 1e6 / dt)
                else:
                    best[c.key] = min(best.get(c.key, float("inf")), dt)
    return best


LATENCY_BURSTS = 4


SIZES = (64 * MIB, 256 * MIB)


# -- raw grpcio --------------------------------------------------------------------
def raw_cases(stack: contextlib.ExitStack, q: bool) -> list[Case]:
    import grpc

    p = Proc([*PLACE.prefix, sys.executable, "-c", _RAW_SERVER, PLACE.far],
             "raw listening on")
    stack.callback(p.stop)
    port = int(p.banner.rsplit(" ", 1)[1])
    opts = [
        ("grpc.max_send_message_length", -1),
        ("grpc.max_receive_message_length", -1),
    ]
    ch = grpc.insecure_channel(f"{PLACE.far}:{port}", options=opts)
    stack.callback(ch.close)

    def ident(b):
        return b

    echo = ch.unary_unary("/raw.Raw/Echo", ident, ident)
    down = ch.unary_stream("/raw.Raw/Down", ident, ident)
    up = ch.stream_unary("/raw.Raw/Up", ident, ident)
    block = bytes(CHUNK)
    cases = [Case("unary", lambda: echo(b"12345678", timeout=10), 100 if q else 200)]
    for size in SIZES:

        def pull(size=size):
            got = 0
            for chunk in down(size.to_bytes(8, "little"), timeout=60):
                got += len(chunk)
            assert got == size

        def push(size=size):
            r = up(iter([block] * (size // CHUNK)), timeout=60)
            assert int.from_bytes(r, "little") == size

        cases += [
            Case(f"down{size}", pull, nbytes=size),
            Case(f"up{size}", push, nbytes=size),
        ]
    # The same 256 MiB landing in a fresh NumPy array (what any receiver of a
    # tensor must do): the first-touch page faults and one copy.
    size = SIZES[-1]
    up_array = ch.stream_unary("/raw.Raw/UpArray", ident, ident)

    def pull_array():
        dest = np.empty(size, np.uint8)
        off = 0
        for chunk in down(size.to_bytes(8, "little"), timeout=60):
            dest[off : off + len(chunk)] = np.frombuffer(chunk, np.uint8)
            off += len(chunk)
        assert off == size

    def push_array():
        msgs = [size.to_bytes(8, "little")] + [block] * (size // CHUNK)
        assert int.from_bytes(up_array(iter(msgs), timeout=60), "little") == size

    cases += [
        Case(f"down_array{size}", pull_array, nbytes=size),
        Case(f"up_array{size}", push_array, nbytes=size),
    ]
    return cases


def _ps_process(stack, cluster, cmd) -> Proc:
    p = Proc(cmd, "listening")
    stack.callback(p.stop)
    return p


# -- nbdist -----------------------------------------------------------------------------
SAME_HOST_VAR = "NBDIST_SAME_HOST"
GRPC = "grpc:"  # key prefix of the gRPC-only set
TCP = "tcp:"  # key prefix of the TCP peer-path set
PREFIXES = ("", TCP, GRPC)
PATH_LABEL = {"": " [same-host]", TCP: " [TCP path]", GRPC: " [gRPC only]"}

_ONES: dict = {}


def _ones(size: int) -> np.ndarray:
    # One fed array per size, shared by both nbdist sets and TF (memory).
    if size not in _ONES:
        _ONES[size] = np.ones(size // 4, np.float32)
    return _ONES[size]


@contextlib.contextmanager
def _environment(**values):
    """``values`` in ``os.environ`` while a set is built: its ps process
    inherits them, its worker server and its sessions' clients read them."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def _same_host_off():
    """The gRPC-only set: ``NBDIST_SAME_HOST=0 NBDIST_PEER_TCP=0``."""
    return _environment(**{SAME_HOST_VAR: "0", "NBDIST_PEER_TCP": "0"})


def _tcp_path_on():
    """The TCP set: the same-host path off and ``NBDIST_PEER_TCP=always``: the
    path tasks on other hosts take, here over loopback."""
    return _environment(**{SAME_HOST_VAR: "0", "NBDIST_PEER_TCP": "always"})


def nbdist_cases(
    stack: contextlib.ExitStack,
    q: bool,
    prefix: str = "",
    sizes: tuple = SIZES,
    inproc: bool = True,
) -> list[Case]:
    import nbdist as nd

    cases = []
    if inproc:
        # In-process server: no RPC.
        g = nd.Graph()
        with g.as_default():
            c = nd.constant(1.0)
        server = nd.Server.create_local_server()
        stack.callback(server.stop)
        sess = stack.enter_context(nd.Session(server.target, graph=g))
        cases.append(
            Case("scalar_inproc", lambda s=sess, c=c: s.run(c), 500 if q else 1000)
        )

    cluster = PLACE.cluster()
    spec = ",".join(f"{j}|{';'.join(a)}" for j, a in cluster.items())
    _ps_process(
        stack,
        cluster,
        [
            *PLACE.prefix,
            sys.executable,
            "-m",
            "nbdist.server",
            f"--cluster_spec={spec}",
            "--job_name=ps",
            "--task_index=0",
            *([f"--bind={PLACE.far}"] if PLACE.netns else []),
        ],
    )
    ps_target = "grpc://" + cluster["ps"][0]
    worker = _nbdist_worker(nd, cluster)
    stack.callback(worker.stop)
    ps_only = nd.ConfigProto(device_filters=["/job:ps"])
    # A plain client of the ps task's master: one RunStep per run.
    g = nd.Graph()
    with g.as_default(), nd.device("/job:ps/task:0"):
        c = nd.constant(1.0)
    sess = stack.enter_context(nd.Session(ps_target, graph=g, config=ps_only))
    assert sess.run(c) == 1.0
    _until_peer_path(sess)
    cases.append(
        Case(f"{prefix}scalar_remote", lambda s=sess, c=c: s.run(c), 100 if q else 200)
    )
    # One hop: made on the ps task, consumed on the in-process worker task.
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            x = nd.constant(2.0)
        with nd.device("/job:worker/task:0"):
            y = nd.stop_gradient(x)
    sess = stack.enter_context(nd.Session(worker.target, graph=g))
    assert sess.run(y) == 2.0
    _until_step_path(worker, "/job:ps/replica:0/task:0")
    cases.append(Case(f"{prefix}hop", lambda s=sess, y=y: s.run(y), 100 if q else 200))
    for size in sizes:
        value = _ones(size)
        for how, target, cfg in (
            ("client", ps_target, ps_only),
            ("worker", worker.target, None),
        ):
            g = nd.Graph()
            with g.as_default(), nd.device("/job:ps/task:0"):
                ph = nd.placeholder(nd.float32, value.shape)
                # Shared by name by both sessions on the ps (memory).
                v = nd.Variable(ph, name=f"big_{size}")
                n = ph[0]  # needs the fed value, costs nothing
            sess = stack.enter_context(nd.Session(target, graph=g, config=cfg))
            # A large feed and fetch now: a client looks for the same-host
            # path on its first one, so while this set's setting holds.
            sess.run(v.initializer, {ph: value})
            got = sess.run(v)
            assert got.shape == value.shape and got[-1] == 1.0
            del got
            assert sess.run(n, {ph: value}) == 1.0
            cases += [
                Case(
                    f"{prefix}fetch_{how}{size}",
                    lambda s=sess, v=v: s.run(v),
                    nbytes=size,
                ),
                Case(
                    f"{prefix}feed_{how}{size}",
                    lambda s=sess, n=n, f={ph: value}: s.run(n, f),
                    nbytes=size,
                ),
            ]
    return cases


def _nbdist_worker(nd, cluster: dict):
    """The in-process worker task; between netns hosts bound to the bridge's
    address (the ps task there reaches it: coordination, the TCP path)."""
    if not PLACE.netns:
        return nd.Server(cluster, job_name="worker", task_index=0)
    from nbdist.proto import server_def_pb2

    return nd.Server(server_def_pb2.ServerDef(
        cluster=nd.train.ClusterSpec(cluster).as_cluster_def(), job_name="worker",
        task_index=0, protocol="grpc", bind_address=PLACE.here))


def grpc_only_cases(stack: contextlib.ExitStack, q: bool) -> list[Case]:
    """The remote scalar, the hop and the 256 MiB tensors again, with the
    same-host path off at both ends (keys prefixed ``grpc:``)."""
    with _same_host_off():
        return nbdist_cases(stack, q, prefix=GRPC, sizes=SIZES[-1:], inproc=False)


def _until_peer_path(sess, bound_s: float = 10.0) -> None:
    """Where a peer path is wanted (the TCP set, or every set but gRPC-only
    between netns hosts), until ``sess``'s client has its master's channel
    over it (the master announces its TCP endpoint once registered; the
    client looks while this set's setting holds, before the measurement
    restores the environment)."""
    mode = os.environ.get("NBDIST_PEER_TCP")
    if mode != "always" and not (PLACE.netns and mode != "0"):
        return
    master = sess._master
    deadline = time.monotonic() + bound_s
    while master._same_host() is None and time.monotonic() < deadline:
        master._path_look_at = 0.0  # look again now
        time.sleep(0.05)


def _until_step_path(worker, task: str, bound_s: float = 10.0) -> None:
    """Between netns hosts (unless gRPC-only), until ``worker``'s router has a
    TCP channel to ``task``'s steps: the lookup of its endpoint runs in the
    background, and until it is done steps go over gRPC."""
    if not PLACE.netns or os.environ.get("NBDIST_PEER_TCP") == "0":
        return
    routed = worker._router.worker(task)
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if any(path.channel(now=True) is not None for path in routed.paths):
            return
        time.sleep(0.05)
    raise RuntimeError(f"no TCP path to {task} within {bound_s:.0f} s")


def tcp_cases(stack: contextlib.ExitStack, q: bool) -> list[Case]:
    """The same over the TCP peer path (keys prefixed ``tcp:``): what tasks on
    other hosts get, minus the network."""
    with _tcp_path_on():
        return nbdist_cases(stack, q, prefix=TCP, sizes=SIZES[-1:], inproc=False)


# -- TensorFlow (optional peer) ------------------------------------------------------
def tf_cases(stack: contextlib.ExitStack, q: bool) -> list[Case] | None:
    try:
        import tensorflow as tf
    except ImportError:
        return None
    import json

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    cases = []
    server = tf.distribute.Server.create_local_server()
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(1.0)
    sess = stack.enter_context(v1.Session(server.target, graph=g))
    cases.append(
        Case("tf:scalar_inproc", lambda s=sess, c=c: s.run(c), 500 if q else 1000)
    )
    cluster = PLACE.cluster()
    _ps_process(stack, cluster, [*PLACE.prefix, sys.executable, "-c", _TF_SERVER,
                                 json.dumps(cluster)])
    worker = tf.distribute.Server(
        tf.train.ClusterSpec(cluster), job_name="worker", task_index=0
    )
    ps_target = "grpc://" + cluster["ps"][0]
    ps_only = v1.ConfigProto(device_filters=["/job:ps"])
    g = tf.Graph()
    with g.as_default(), tf.device("/job:ps/task:0"):
        c = tf.constant(1.0)
    sess = stack.enter_context(v1.Session(ps_target, graph=g, config=ps_only))
    assert sess.run(c) == 1.0
    cases.append(
        Case("tf:scalar_remote", lambda s=sess, c=c: s.run(c), 100 if q else 200)
    )
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            x = tf.constant(2.0)
        with tf.device("/job:worker/task:0"):
            y = tf.stop_gradient(x)
    sess = stack.enter_context(v1.Session(worker.target, graph=g))
    assert sess.run(y) == 2.0
    cases.append(Case("tf:hop", lambda s=sess, y=y: s.run(y), 100 if q else 200))
    for size in SIZES:
        value = _ones(size)
        for how, target, cfg in (
            ("client", ps_target, ps_only),
            ("worker", worker.target, None),
        ):
            g = tf.Graph()
            with g.as_default(), tf.device("/job:ps/task:0"):
                ph = v1.placeholder(tf.float32, value.shape)
                # Shared by name by both sessions on the ps (memory).
                v = v1.Variable(ph, name=f"big_{size}")
                n = ph[0]
            sess = stack.enter_context(v1.Session(target, graph=g, config=cfg))
            sess.run(v.initializer, {ph: value})
            got = sess.run(v)
            assert got.shape == value.shape and got[-1] == 1.0
            del got
            assert sess.run(n, {ph: value}) == 1.0
            cases += [
                Case(
                    f"tf:fetch_{how}{size}", lambda s=sess, v=v: s.run(v), nbytes=size
                ),
                Case(
                    f"tf:feed_{how}{size}",
                    lambda s=sess, n=n, f={ph: value}: s.run(n, f),
                    nbytes=size,
                ),
            ]
    return cases


# -- the table -----------------------------------------------------------------------
SAME_HOST_GOAL_MBS = 3000.0  # issue 11: same-host 256 MiB fetch and feed
TF_TIME_GOAL = 0.7  # issue 11: remote scalar run and hop, x TF's time


def _us(s):
    return f"{s * 1e6:,.0f} µs"


def _mbs(r):
    return f"{r:,.0f} MB/s"


def _speedup(a, b, lower_is_better):
    """How many times faster ``a`` is than ``b`` (> 1: ``a`` is faster)."""
    return (b / a) if lower_is_better else (a / b)


def _render(head, rows) -> list[str]:
    # Rows shorter than the head (the floor's) are padded.
    rows = [(*r, *[""] * len(head))[: len(head)] for r in rows]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(head, widths))]
    lines.append("-+-".join("-" * w for w in widths))
    for r in rows:
        lines.append(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    return lines


def table(res: dict, with_tf: bool) -> str:
    raw = res
    tf = {k[3:]: v for k, v in res.items() if k.startswith("tf:")} if with_tf else None
    unary = raw["unary"]
    rows = []

    def row(label, key, fmt, lower_is_better, vs, ok, target):
        """An nbdist row; ``key`` is the default set's, or TCP/GRPC + it."""
        prefix = next((p for p in (TCP, GRPC) if key.startswith(p)), "")
        base = key.removeprefix(prefix)
        path = PATH_LABEL[prefix]
        if base == "scalar_inproc":
            path = ""  # no transport
        r = res[key]
        vs_grpc = ""
        if prefix != GRPC and GRPC + base in res:
            vs_grpc = f"{_speedup(r, res[GRPC + base], lower_is_better):.2f}x"
        peer = ("", "")
        if tf is not None and base in tf:
            peer = (fmt(tf[base]), f"{_speedup(r, tf[base], lower_is_better):.2f}x")
        rows.append((label + path, fmt(r), vs, ok, target, vs_grpc, *peer))

    rows.append(("raw grpcio unary round trip (8 B)", _us(unary), "", "", "floor"))
    big = SIZES[-1]
    directions = (("down", "server->client"), ("up", "client->server"))
    ref = "(for reference)"
    floor_rows = [
        (f"raw grpcio stream {size // MIB} MiB {label}", f"{d}{size}", "floor")
        for size in SIZES
        for d, label in directions
    ] + [
        (f"  same {big // MIB} MiB {label}, into a new array", f"{d}_array{big}", ref)
        for d, label in directions
    ]
    for label, key, note in floor_rows:
        rows.append((label, _mbs(raw[key]), "", "", note))
    s = res["scalar_inproc"]
    row(
        "run scalar, in-process server",
        "scalar_inproc",
        _us,
        True,
        f"{s / 80e-6:.2f} of 80 µs",
        "ok" if s <= 80e-6 else "MISSED",
        "<= 80 µs",
    )
    for prefix in PREFIXES:
        if prefix + "scalar_remote" not in res:
            continue
        s = res[prefix + "scalar_remote"]
        row(
            "run scalar, task in another process",
            prefix + "scalar_remote",
            _us,
            True,
            f"{s / unary:.2f}x unary",
            "",
            "",
        )
    for prefix in PREFIXES:
        if prefix + "hop" not in res:
            continue
        s = res[prefix + "hop"]
        row(
            "one cross-task hop (ps proc -> worker)",
            prefix + "hop",
            _us,
            True,
            f"{s / unary:.2f}x unary",
            "ok" if s <= 1.5 * unary else "MISSED",
            "<= 1.5x unary",
        )
    for kind, direction in (("fetch", "down"), ("feed", "up")):
        for how, label in (("client", "plain client"), ("worker", "worker's master")):
            for size in SIZES:
                for prefix in PREFIXES:
                    key = f"{prefix}{kind}_{how}{size}"
                    if key not in res:
                        continue
                    r = res[key]
                    floor = raw[f"{direction}{size}"]
                    ok = ""
                    target = ""
                    vs = f"{r / floor:.2f}x raw {direction}"
                    if size == big:
                        ok = "ok" if r >= 0.7 * floor and r >= 500 else "MISSED"
                        target = ">= 0.7x raw, >= 500"
                        into = raw[f"{direction}_array{size}"]
                        vs += f" ({r / into:.2f}x into array)"
                    row(
                        f"{kind} {size // MIB} MiB, ps proc, {label}",
                        key,
                        _mbs,
                        False,
                        vs,
                        ok,
                        target,
                    )
    head = (
        "case",
        "nbdist",
        "vs floor/target",
        "",
        "target",
        "vs gRPC only",
        "TF",
        "nbdist vs TF",
    )
    if tf is None:
        head = head[:6]
    lines = _render(head, rows)
    if PLACE.netns:
        lines.append(
            f"(the ps task, TF's ps task and the bare grpcio server in a network "
            f"namespace host at {PLACE.far}, the client and the worker task here "
            f"at {PLACE.here}, across a veth and a bridge. [TCP path]: the "
            "default between hosts; [gRPC only]: NBDIST_PEER_TCP=0 in the client "
            "and the servers. vs gRPC only > 1: that path is faster than gRPC)"
        )
    else:
        lines.append(
            "([same-host]: the default, both ends on this host (Unix socket + "
            "memfd); [TCP path]: NBDIST_SAME_HOST=0 NBDIST_PEER_TCP=always, what "
            "tasks on other hosts take by default; [gRPC only]: NBDIST_SAME_HOST=0 "
            "NBDIST_PEER_TCP=0 in the client and the servers. vs gRPC only > 1: "
            "that path is faster than gRPC)"
        )
    if tf is None:
        lines.append(
            "(tensorflow is not importable: no peer columns; "
            "pip install 'nbdist[peers]')"
        )
    else:
        lines.append("(nbdist vs TF > 1: nbdist is faster)")
    if PLACE.netns:
        lines += ["", "issue 21 targets (between hosts):",
                  *_render(*issue21_targets(res, tf))]
    else:
        lines += ["", "issue 11 targets:", *_render(*issue11_targets(res, tf))]
    return "\n".join(lines)


def issue11_targets(res: dict, tf: dict | None) -> tuple:
    """Head and rows of issue 11's targets (the TF ones only with TF)."""
    rows = []
    big = SIZES[-1]
    for kind in ("fetch", "feed"):
        for how, label in (("client", "plain client"), ("worker", "worker's master")):
            r = res[f"{kind}_{how}{big}"]
            rows.append(
                (
                    f"same-host {kind} {big // MIB} MiB, {label}",
                    _mbs(r),
                    f">= {SAME_HOST_GOAL_MBS:,.0f} MB/s",
                    "ok" if r >= SAME_HOST_GOAL_MBS else "MISSED",
                )
            )
    for key, label in (
        ("scalar_remote", "run scalar, task in another process"),
        ("hop", "one cross-task hop"),
    ):
        if tf is None:
            rows.append((label, _us(res[key]), f"<= {TF_TIME_GOAL}x TF", "(no TF)"))
            continue
        x = res[key] / tf[key]
        rows.append(
            (
                label,
                f"{_us(res[key])} = {x:.2f}x TF's {_us(tf[key])}",
                f"<= {TF_TIME_GOAL}x TF",
                "ok" if x <= TF_TIME_GOAL else "MISSED",
            )
        )
    return ("target", "nbdist (default)", "goal", ""), rows


def issue21_targets(res: dict, tf: dict | None) -> tuple:
    """Head and rows of issue 21's targets between hosts: the remote scalar
    run and the hop in <= 0.8x TF's time, 256 MiB through a worker's master
    >= 1.0x TF (the default path, which is the TCP path there)."""
    rows = []
    for key, label in (
        ("scalar_remote", "run scalar, task on another host"),
        ("hop", "one cross-host hop"),
    ):
        x = res[key] / tf[key] if tf else None
        rows.append((label, _us(res[key]) + (f" = {x:.2f}x TF's {_us(tf[key])}"
                                             if tf else ""),
                     "<= 0.8x TF", "(no TF)" if not tf else
                     "ok" if x <= 0.8 else "MISSED"))
    big = SIZES[-1]
    for kind in ("fetch", "feed"):
        key = f"{kind}_worker{big}"
        x = res[key] / tf[key] if tf else None
        rows.append((f"{kind} {big // MIB} MiB, worker's master",
                     _mbs(res[key]) + (f" = {x:.2f}x TF's {_mbs(tf[key])}"
                                       if tf else ""),
                     ">= 1.0x TF", "(no TF)" if not tf else
                     "ok" if x >= 1.0 else "MISSED"))
    return ("target", "nbdist (default)", "goal", ""), rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    p.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="rounds of every case (default 5; 2 with --quick)",
    )
    p.add_argument(
        "--hosts",
        default="local",
        choices=("local", "netns"),
        help="netns (Linux, root): the far ends in a network namespace host",
    )
    args = p.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 5)
    load0 = os.getloadavg()[0]
    global PLACE
    with contextlib.ExitStack() as stack:
        if args.hosts == "netns":
            sys.path.insert(0, str(ROOT / "tests"))
            import netns

            if reason := netns.unavailable():
                print(f"--hosts netns: {reason}")
                return 2
            hosts = stack.enter_context(netns.Hosts(1))
            # Beyond loopback a task needs the cluster's secret (every task
            # and client of this run inherits or reads it).
            stack.enter_context(_environment(NBDIST_TOKEN=secrets.token_hex(16)))
            PLACE = Place(far=hosts[0].address, here=f"{hosts.subnet}.1",
                          prefix=("ip", "netns", "exec", hosts[0].name))
            PATH_LABEL[""] = " [TCP path]"  # the default between hosts
            # The default set is the TCP path there; no same-host set.
            cases = (
                raw_cases(stack, args.quick)
                + nbdist_cases(stack, args.quick)
                + grpc_only_cases(stack, args.quick)
            )
        else:
            cases = (
                raw_cases(stack, args.quick)
                + nbdist_cases(stack, args.quick)
                + grpc_only_cases(stack, args.quick)
                + tcp_cases(stack, args.quick)
            )
        try:
            peer = tf_cases(stack, args.quick)
        except Exception as e:  # noqa: BLE001 - the peer is optional
            print(f"(TensorFlow is importable but could not be set up: {e!r:.200})")
            peer = None
        res = measure(cases + (peer or []), rounds)
    print(table(res, peer is not None))
    print(
        f"(best of {rounds} interleaved rounds; load average {load0:.1f} at the "
        f"start, {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs: "
        "figures from a busy machine are noisy)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
