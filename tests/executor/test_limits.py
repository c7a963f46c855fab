"""Bounded work and memory per request (``ConfigProto.server_limits``).

A tiny request must not make a server do unbounded work: constants of a
GraphDef are sized from shape and dtype before they are materialised, and
shape-making kernels check their output size before allocating. Calls without
the token, or over ``max_request_bytes``, are refused before their bytes are
buffered. What clients park on a server (pushed feeds, key-value entries,
unpulled fetches) is capped. Each case is RESOURCE_EXHAUSTED naming the limit,
and the server keeps serving. RSS and CPU time come from ``/proc/<pid>`` of a
spawned ``nbdist-server``.
"""

from __future__ import annotations

import random
import time

import grpc
import numpy as np
import pytest
from helpers import (
    ServerProcess,
    cluster_string,
    cpu_seconds,
    local_cluster,
    proc_status,
)

import nbdist as nd
from nbdist import errors
from nbdist.executor.limits import Limits, check_graph_def
from nbdist.framework import tensor_util
from nbdist.proto import config_pb2, graph_pb2, master_pb2, types_pb2
from nbdist.runtime.coordination import CoordinationService
from nbdist.runtime.grpc import coding
from nbdist.runtime.grpc.client import GrpcMasterClient, GrpcWorkerClient
from nbdist.runtime.grpc.coordination_client import GrpcCoordinationClient
from nbdist.runtime.worker import Worker

TOKEN = "limits-token"
MiB = 1 << 20
FAST_S = 5.0  # a refused request is answered within this


def string_const_graph(n: int, name: str = "c") -> graph_pb2.GraphDef:
    """One Const of dtype string and shape [n] holding a single value."""
    gd = graph_pb2.GraphDef()
    node = gd.node.add(name=name, op="Const")
    node.attr["dtype"].type = types_pb2.DT_STRING
    value = node.attr["value"].tensor
    value.dtype = types_pb2.DT_STRING
    value.tensor_shape.dim.add(size=n)
    value.string_val.append(b"x")
    return gd


@pytest.fixture(scope="module")
def token_server():
    """An nbdist-server process with a token and the default limits."""
    cluster = local_cluster(ps=1)
    proc = ServerProcess(
        [
            f"--cluster_spec={cluster_string(cluster)}",
            "--job_name=ps",
            "--task_index=0",
        ],
        env={"NBDIST_TOKEN": TOKEN},
    )
    try:
        yield proc, cluster["ps"][0]
    finally:
        proc.kill()


def _healthy(address: str):
    """A correct step on the server (a fed value, a fetch)."""
    g = nd.Graph()
    with g.as_default():
        ph = nd.placeholder(nd.float32, [None])
        total = nd.reduce_sum(ph * 2.0)
        cfg = nd.ConfigProto(auth_token=TOKEN)
        with nd.Session("grpc://" + address, config=cfg) as sess:
            assert sess.run(total, {ph: [1.0, 2.0, 3.5]}) == 13.0


# -- 3: a 54-byte request ----------------------------------------------------------------
def test_materialized_nbytes_is_computed_from_shape_and_dtype():
    t = string_const_graph(2**30).node[0].attr["value"].tensor
    assert t.ByteSize() < 20
    nbytes = tensor_util.materialized_nbytes(t)
    assert nbytes >= 2**30 * (tensor_util.STRING_ELEMENT_BYTES + 1)
    num = tensor_util.make_tensor_proto(1.0, nd.float64.as_datatype_enum, [7, 3])
    assert tensor_util.materialized_nbytes(num) == 7 * 3 * 8
    full = tensor_util.make_tensor_proto(np.arange(12, dtype=np.int16).reshape(3, 4))
    assert tensor_util.materialized_nbytes(full) == 24
    unknown = tensor_util.make_tensor_proto(1.0)
    unknown.tensor_shape.unknown_rank = True
    assert tensor_util.materialized_nbytes(unknown) == 0


def test_graph_constants_are_checked_before_materialising():
    limits = Limits(max_tensor_bytes=MiB, max_graph_constant_bytes=3 * MiB)
    check_graph_def(string_const_graph(1000), limits)
    with pytest.raises(errors.ResourceExhaustedError) as info:
        check_graph_def(string_const_graph(2**40), limits, "CreateSession")
    msg = str(info.value)
    assert "Const 'c'" in msg and "DT_STRING" in msg and "[1099511627776]" in msg
    assert "max_tensor_bytes" in msg
    # Each under the per-tensor limit, together over the graph's.
    gd = graph_pb2.GraphDef()
    for i in range(5):  # 0.75 MiB each
        n = gd.node.add(name=f"k{i}", op="Const")
        n.attr["value"].tensor.CopyFrom(
            tensor_util.make_tensor_proto(
                0.0, nd.float32.as_datatype_enum, [MiB // 16 * 3]
            )
        )
    with pytest.raises(errors.ResourceExhaustedError, match="max_graph_constant_bytes"):
        check_graph_def(gd, limits)
    # Functions of the library are graphs too.
    lib = graph_pb2.GraphDef()
    lib.library.function.add().node_def.add().CopyFrom(
        string_const_graph(2**40, "inner").node[0]
    )
    with pytest.raises(errors.ResourceExhaustedError, match="Const 'inner'"):
        check_graph_def(lib, limits)
    check_graph_def(string_const_graph(2**40), None)  # in process: unchecked


@pytest.mark.slow
@pytest.mark.parametrize("n", [60_000_000, 2**30])
def test_tiny_request_with_a_huge_string_constant_fails_fast(token_server, n):
    """The issue's request: a Const of dtype string, shape [n], one value."""
    proc, address = token_server
    gd = string_const_graph(n)
    req = master_pb2.CreateSessionRequest(graph_def=gd)
    assert len(req.SerializeToString()) < 64  # the issue measured 54 bytes
    before, cpu0 = proc_status(proc.pid), cpu_seconds(proc.pid)
    master = GrpcMasterClient("grpc://" + address, token=TOKEN)
    worker = GrpcWorkerClient("/job:ps/replica:0/task:0", address, token=TOKEN)
    try:
        t0 = time.monotonic()
        with pytest.raises(errors.ResourceExhaustedError) as info:
            master.create_session(gd)
        assert time.monotonic() - t0 < FAST_S
        msg = str(info.value)
        assert "CreateSession" in msg and "Const 'c'" in msg
        assert f"[{n}]" in msg and "max_tensor_bytes = 1 GiB" in msg
        # ExtendSession and the worker's RegisterGraph check the same way.
        handle, version = master.create_session(graph_pb2.GraphDef())
        with pytest.raises(errors.ResourceExhaustedError, match="ExtendSession"):
            master.extend_session(handle, gd, version)
        worker.create_worker_session("limits-session")
        with pytest.raises(errors.ResourceExhaustedError, match="RegisterGraph"):
            worker.register_graph("limits-session", gd)
        worker.delete_worker_session("limits-session")
        master.close_session(handle)
    finally:
        master.close()
        worker.close()
    after, cpu = proc_status(proc.pid), cpu_seconds(proc.pid) - cpu0
    print(
        f"\nConst [{n}]: server RSS {before['VmRSS'] / MiB:.0f} MiB, peak "
        f"{(after['VmHWM'] - before['VmRSS']) / MiB:+.0f} MiB, CPU {cpu:.2f} s"
    )
    assert after["VmHWM"] - before["VmRSS"] < 100 * MiB, (before, after)
    assert cpu < 3.0
    _healthy(address)


# -- 3: shape-making ops check their output before allocating ---------------------------
def _limited_server(**limits):
    cfg = nd.ConfigProto(server_limits=config_pb2.ServerLimits(**limits))
    return nd.Server.create_local_server(config=cfg)


SHAPE_OPS = {  # op -> (over the 1 MiB limit, under it, NumPy oracle of "under")
    "Fill": (
        lambda: nd.fill([1024, 1024], 1.5),
        lambda: nd.fill([3, 2], 1.5),
        lambda: np.full((3, 2), 1.5),
    ),
    "Tile": (
        lambda: nd.tile(nd.ones([1024]), [1024]),
        lambda: nd.tile([1, 2], [3]),
        lambda: np.tile([1, 2], 3),
    ),
    "Range": (
        lambda: nd.range(0, 1 << 19),
        lambda: nd.range(0, 10, 3),
        lambda: np.arange(0, 10, 3),
    ),
    "BroadcastTo": (
        lambda: nd.broadcast_to([1.0], [1 << 19]),
        lambda: nd.broadcast_to([1.0, 2.0], [2, 2]),
        lambda: np.broadcast_to([1.0, 2.0], (2, 2)),
    ),
    "OneHot": (
        lambda: nd.one_hot([0] * 1024, 1024),
        lambda: nd.one_hot([0, 2], 3),
        lambda: np.eye(3)[[0, 2]],
    ),
    "Pad": (
        lambda: nd.pad([[1.0]], [[0, 1023], [0, 1023]]),
        lambda: nd.pad([[1.0]], [[1, 0], [0, 1]]),
        lambda: np.pad([[1.0]], [[1, 0], [0, 1]]),
    ),
    "RandomUniform": (
        lambda: nd.random_uniform([1024, 1024]),
        lambda: nd.shape(nd.random_uniform([2, 3])),
        lambda: np.array([2, 3]),
    ),
}


def test_shape_making_ops_check_their_output_size(graph):
    with (
        _limited_server(max_tensor_bytes=MiB) as server,
        nd.Session(server.target) as sess,
    ):
        for op, (over, under, oracle) in SHAPE_OPS.items():
            np.testing.assert_allclose(sess.run(under()), oracle())
            big = over()
            t0 = time.monotonic()
            with pytest.raises(errors.ResourceExhaustedError) as info:
                sess.run(big)
            assert time.monotonic() - t0 < FAST_S
            msg = str(info.value)
            assert f"{op} '" in msg and big.op.name.split("/")[0] in msg, msg
            assert "max_tensor_bytes = 1 MiB" in msg, msg
        # The server is still serving.
        assert sess.run(nd.add(1, 2)) == 3


def test_a_fed_value_over_the_limit_is_refused(graph):
    with _limited_server(max_tensor_bytes=MiB) as server:
        ph = nd.placeholder(nd.float32, [None], name="feed_me")
        total = nd.reduce_sum(ph)
        with nd.Session(server.target) as sess:
            with pytest.raises(
                errors.ResourceExhaustedError,
                match="fed to feed_me:0.*max_tensor_bytes",
            ):
                sess.run(total, {ph: np.ones(MiB, np.float32)})
            assert sess.run(total, {ph: np.ones(1000, np.float32)}) == 1000.0


def test_in_process_sessions_have_no_limits(graph):
    with nd.Session() as sess:
        assert sess.run(nd.fill([3 * MiB], 1, name="big")).nbytes == 12 * MiB


# -- 4: auth before bytes ------------------------------------------------------------------
@pytest.mark.slow
def test_unauthenticated_and_oversized_messages_are_not_buffered(token_server):
    proc, address = token_server
    opts = [("grpc.max_send_message_length", -1)]
    channel = grpc.insecure_channel(address, options=opts)
    run_step = channel.unary_unary("/nbdist.MasterService/RunStep")
    huge = bytes(400 * MiB)
    start = proc_status(proc.pid)
    peak = start["VmHWM"]
    try:
        for metadata in [(), (), (("authorization", "Bearer wrong"),)]:
            with pytest.raises(grpc.RpcError) as info:
                run_step(huge, timeout=60, metadata=metadata)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        peak = proc_status(proc.pid)["VmHWM"]
        # With the token, the message is over max_request_bytes (256 MiB).
        with pytest.raises(grpc.RpcError) as info:
            run_step(huge, timeout=60, metadata=(("authorization", f"Bearer {TOKEN}"),))
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert str(256 * MiB) in info.value.details()
    finally:
        channel.close()
    after = proc_status(proc.pid)
    print(
        f"\nserver RSS start {start['VmRSS'] / MiB:.0f} MiB, peak after "
        f"unauthenticated {(peak - start['VmRSS']) / MiB:+.0f} MiB, after "
        f"oversized {(after['VmHWM'] - start['VmRSS']) / MiB:+.0f} MiB"
    )
    assert peak - start["VmRSS"] < 100 * MiB, (start, peak)
    assert after["VmHWM"] - start["VmRSS"] < 100 * MiB, (start, after)
    _healthy(address)


def test_max_request_bytes_is_configurable(graph):
    with _limited_server(max_request_bytes=MiB) as server:
        ph = nd.placeholder(nd.string, [None], name="s")
        nd.size(ph, name="n")
        client = GrpcMasterClient(server.target)  # over gRPC, not in process
        try:
            handle, _ = client.create_session(graph.as_graph_def())
            run = lambda v: client.run_step(handle, {"s:0": v}, ["n:0"], [])[0]
            assert run(np.array([b"x" * 1000] * 100, dtype=object)) == 100
            with pytest.raises(errors.ResourceExhaustedError, match=str(MiB)):
                run(np.array([b"x" * 1000] * 2000, dtype=object))  # 2 MB inline
            assert run(np.array([b"y"], dtype=object)) == 1
        finally:
            client.close()


# -- 5: caps on what clients park -------------------------------------------------------
def _push_raw(address: str, nbytes: int):
    """Pushes one float32 tensor over a connection of its own; the keys."""
    channel = grpc.insecure_channel(
        address, options=[("grpc.use_local_subchannel_pool", 1)]
    )  # a client of its own
    try:
        push = channel.stream_unary("/nbdist.MasterService/PushTensors")
        value = np.ones(nbytes // 4, np.float32)
        data = push(
            coding.push_chunks([(random.getrandbits(62) | 1, value)]), timeout=30
        )
        return list(master_pb2.PushTensorsResponse.FromString(data).key)
    finally:
        channel.close()


def test_pushed_tensors_are_capped_per_client_and_in_total(graph):
    with _limited_server(
        max_pushed_bytes_per_client=8 * MiB, max_pushed_bytes=10 * MiB
    ) as server:
        target = server.target
        address = target[len("grpc://") :]
        a = GrpcMasterClient(target)
        value = np.arange(3 * MiB // 4, dtype=np.float32)
        parks = [a._push([value], 30.0), a._push([value], 30.0)]
        with pytest.raises(errors.ResourceExhaustedError) as info:
            a._push([value], 30.0)  # 9 MiB from one client
        assert "max_pushed_bytes_per_client = 8 MiB" in str(info.value)
        assert len(_push_raw(address, 3 * MiB)) == 1  # another client: 9 MiB in all
        with pytest.raises(grpc.RpcError) as info:
            _push_raw(address, 3 * MiB)  # 12 MiB in all
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max_pushed_bytes = 10 MiB" in info.value.details()
        # A step takes a pushed tensor: its room is free again.
        ph = nd.placeholder(nd.float32, [None], name="p")
        nd.reduce_sum(ph, name="out")
        handle, _ = a.create_session(graph.as_graph_def())
        req = master_pb2.RunStepRequest(session_handle=handle, fetch=["out:0"])
        resp, out = a._run_step(
            coding.encode_message(req, 2, [("p:0", value)], park=parks[0]), timeout=30
        )
        assert resp.status_code == 0
        assert dict(out)["out:0"] == value.sum()
        parks.append(a._push([value], 30.0))
        a.close_session(handle)
        a.close()


def test_parked_results_are_capped():
    limits = Limits(max_parked_bytes=8 * MiB)
    worker = Worker("/job:w/replica:0/task:0", limits=limits)
    value = np.ones(3 * MiB // 4, np.float32)
    parked = [worker.parked.park(value), worker.parked.park(value)]
    with pytest.raises(errors.ResourceExhaustedError, match="max_parked_bytes"):
        worker.parked.park(value)
    key, step_id = parked[0]  # pulled: its room is free again
    got = worker.rendezvous.recv_blocking(step_id, key, 1.0, lambda: False)
    assert got is value
    worker.parked.park(value)
    # Values nobody pulled for evict_after_s make room when the cap is reached.
    worker.parked._evict_after_s = 0.0
    worker.parked.park(value)
    assert not worker.rendezvous.holds(parked[1][1], parked[1][0])


def _fill_key_value_store(store):
    """``store`` (the service, or a client of it) capped at 12 MiB."""
    five = b"v" * (5 * MiB)
    store.insert("k/0", five)
    store.insert("k/1", five)
    with pytest.raises(
        errors.ResourceExhaustedError, match="max_key_value_bytes = 12 MiB"
    ):
        store.insert("k/2", five)
    store.insert("k/0", b"small", allow_overwrite=True)  # replaces, frees
    store.insert("k/2", five)
    store.delete("k/")
    store.insert("k/3", five)
    store.insert("k/4", five)
    assert store.try_get("k/1") is None and store.try_get("k/4") == five


def test_key_value_bytes_are_capped():
    service = CoordinationService(
        ["/job:w/replica:0/task:0"], max_key_value_bytes=12 * MiB
    )
    try:
        _fill_key_value_store(service)
    finally:
        service.stop()


def test_key_value_cap_over_grpc(graph):
    with _limited_server(max_key_value_bytes=12 * MiB) as server:
        client = GrpcCoordinationClient(server.coordination_target)
        try:
            _fill_key_value_store(client)
        finally:
            client.close()
        with nd.Session(server.target) as sess:
            assert sess.run(nd.add(2, 3)) == 5


def test_limits_from_config_and_flags():
    cfg = config_pb2.ConfigProto()
    cfg.server_limits.max_tensor_bytes = 123
    limits = Limits.from_config(cfg)
    assert limits.max_tensor_bytes == 123
    assert limits.max_request_bytes == Limits().max_request_bytes
    with pytest.raises(ValueError, match="unknown server limit"):
        Limits.from_config({"max_tensors": 1})
    with pytest.raises(ValueError, match="positive"):
        Limits(max_key_value_bytes=-1)
    from nbdist.server import _LIMITS, _parser

    assert set(_LIMITS) == {f.name for f in config_pb2.ServerLimits.DESCRIPTOR.fields}
    args = _parser().parse_args(["--max_tensor_bytes=4096"])
    assert args.max_tensor_bytes == 4096 and args.max_request_bytes == 0
