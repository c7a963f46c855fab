"""Clusters of separate OS processes: ``nbdist-server`` tasks and client
processes, large tensors, killed and restarted tasks, the command line."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from helpers import (
    ROOT,
    ServerProcess,
    blocked_threads,
    cluster_string,
    local_cluster,
    sleep_op,
)

import nbdist as nd
from nbdist import errors
from nbdist.executor.kernel import get_kernel_factory


def _target(cluster, job, index=0) -> str:
    return "grpc://" + cluster[job][index]


def _has_kernels(*ops) -> bool:
    return all(get_kernel_factory(op) is not None for op in ops)


def _placement(md) -> dict[str, str]:
    return {n.name: n.device for g in md.partition_graphs for n in g.node}


# -- the device-placement example ------------------------------------------------
@pytest.fixture
def ps2_worker1(spawn):
    cluster = local_cluster(ps=2, worker=1)
    for job, index in (("ps", 0), ("ps", 1), ("worker", 0)):
        spawn(job, index, cluster)
    return cluster


def test_device_placement_example(ps2_worker1, graph):
    cluster = ps2_worker1
    rng = np.random.default_rng(1)
    w1, b1 = rng.random((4, 8), np.float32), rng.random(8, dtype=np.float32)
    w2, b2 = rng.random((8, 3), np.float32), rng.random(3, dtype=np.float32)
    x = rng.random((5, 4), np.float32)
    with nd.device("/job:ps/task:0"):
        weights_1 = nd.Variable(w1, name="weights_1")
        biases_1 = nd.Variable(b1, name="biases_1")
    with nd.device("/job:ps/task:1"):
        weights_2 = nd.Variable(w2, name="weights_2")
        biases_2 = nd.Variable(b2, name="biases_2")
    with nd.device("/job:worker/task:0"):
        inp = nd.placeholder(nd.float32, [None, 4], name="input")
        w1_copy = nd.stop_gradient(weights_1, name="w1_copy")
        b2_copy = nd.stop_gradient(biases_2, name="b2_copy")
    train_op = biases_2.assign_add(b2_copy)  # runs where biases_2 lives
    with nd.Session(_target(cluster, "worker")) as sess:
        sess.run(nd.global_variables_initializer())
        md = nd.RunMetadata()
        got = sess.run(
            w1_copy,
            options=nd.RunOptions(output_partition_graphs=True),
            run_metadata=md,
        )
        np.testing.assert_array_equal(got, w1)
        sess.run(train_op)  # b2 read to the worker, added back on ps task 1
        np.testing.assert_allclose(sess.run(biases_2), 2 * b2)
        places = _placement(md)
        assert places["weights_1"] == "/job:ps/replica:0/task:0/device:CPU:0"
        assert places["w1_copy"] == "/job:worker/replica:0/task:0/device:CPU:0"
        if not _has_kernels("MatMul", "Add", "Relu"):
            pytest.skip("math kernels are not available yet")
        with nd.device("/job:worker/task:0"):
            layer_1 = nd.nn.relu(nd.matmul(inp, weights_1) + biases_1)
            logits = nd.nn.relu(nd.matmul(layer_1, weights_2) + biases_2)
        md = nd.RunMetadata()
        out = sess.run(
            logits,
            {inp: x},
            options=nd.RunOptions(output_partition_graphs=True),
            run_metadata=md,
        )
        b2_now = sess.run(biases_2)
    want = np.maximum(np.maximum(x @ w1 + b1, 0) @ w2 + b2_now, 0)
    np.testing.assert_allclose(out, want, rtol=1e-5)
    places = _placement(md)
    assert places["weights_2"] == "/job:ps/replica:0/task:1/device:CPU:0"
    assert places[logits.op.name] == "/job:worker/replica:0/task:0/device:CPU:0"
    assert places[layer_1.op.name] == "/job:worker/replica:0/task:0/device:CPU:0"


# -- between-graph replication: two client processes ---------------------------------
_CLIENT = r"""
import json, sys
import nbdist as nd
cluster = json.loads(sys.argv[1])
server = nd.Server(cluster, job_name="worker", task_index=1)
with nd.device("/job:ps/task:0"):
    v = nd.Variable(0.0, name="shared_v")
    inc = v.assign_add(10.0)
with nd.Session(server.target) as sess:
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "inc":
            print("value", float(sess.run(inc)), flush=True)
        elif cmd == "read":
            print("value", float(sess.run(v)), flush=True)
        else:
            break
server.stop()
"""


class _Client:
    def __init__(self, cluster):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CLIENT, json.dumps(cluster)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        self.out: queue.Queue = queue.Queue()
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self):
        for line in self.proc.stdout:
            self.out.put(line.strip())
        self.out.put(None)

    def expect(self, timeout=60.0) -> str:
        try:
            line = self.out.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("client process did not answer") from None
        if line is None:
            raise AssertionError("client process died")
        return line

    def ask(self, cmd: str) -> float:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        line = self.expect()
        assert line.startswith("value "), line
        return float(line.split()[1])

    def kill(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._pump_thread.join(5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except Exception:  # noqa: BLE001, S110 - already closed
                pass


def test_between_graph_clients_share_ps_variable(spawn, servers, graph):
    cluster = local_cluster(ps=1, worker=2)
    spawn("ps", 0, cluster)
    worker0 = servers(cluster, "worker", 0)
    client = _Client(cluster)
    try:
        assert client.expect() == "ready"
        with nd.device("/job:ps/task:0"):
            v = nd.Variable(0.0, name="shared_v")
            inc = v.assign_add(1.0)
        with nd.Session(worker0.target) as sess:
            sess.run(v.initializer)
            assert sess.run(inc) == 1.0
            assert client.ask("inc") == 11.0
            assert sess.run(v) == 11.0
            assert sess.run(inc) == 12.0
            assert client.ask("read") == 12.0
        client.proc.stdin.write("quit\n")
        client.proc.stdin.flush()
        assert client.proc.wait(30) == 0
    finally:
        client.kill()


# -- large tensors -------------------------------------------------------------------
def _large_tensor_roundtrip(spawn, servers, nbytes: int):
    cluster = local_cluster(ps=1, worker=1)
    spawn("ps", 0, cluster)
    worker = servers(cluster, "worker", 0)
    n = nbytes // 4
    value = (np.arange(n, dtype=np.int32) % 1021 - 510).astype(np.float32)
    with nd.device("/job:ps/task:0"):
        ph = nd.placeholder(nd.float32, [n], name="ph")
        v = nd.Variable(ph, name="big")
        total = nd.reduce_sum(ph) if _has_kernels("Sum") else None
    with nd.device("/job:worker/task:0"):
        on_worker = nd.stop_gradient(v)
    with nd.Session(worker.target) as sess:
        t0 = time.monotonic()
        sess.run(v.initializer, {ph: value})  # feed into an op on the ps task
        feed_s = time.monotonic() - t0
        t0 = time.monotonic()
        fetched = sess.run(v)  # fetched from the ps task's process
        fetch_s = time.monotonic() - t0
        assert fetched.flags.writeable and fetched.dtype == np.float32
        assert np.array_equal(fetched, value)
        del fetched
        t0 = time.monotonic()
        streamed = sess.run(on_worker)  # ps -> worker by chunked RecvTensor
        recv_s = time.monotonic() - t0
        assert np.array_equal(streamed, value)
        del streamed
        if total is not None:
            s = sess.run(total, {ph: value})
            np.testing.assert_allclose(s, value.sum(dtype=np.float64), rtol=1e-5)
    mb = nbytes / 1e6
    print(
        f"\n{mb:.0f} MB: feed {mb / feed_s:.0f} MB/s, fetch {mb / fetch_s:.0f} "
        f"MB/s, RecvTensor {mb / recv_s:.0f} MB/s"
    )


def _large_feed_fetch_via_remote_master(spawn, nbytes: int):
    cluster = local_cluster(ps=1)
    spawn("ps", 0, cluster)
    n = nbytes // 4
    value = (np.arange(n, dtype=np.int32) % 509).astype(np.float32)
    ph = nd.placeholder(nd.float32, [n])
    with nd.device("/job:ps/task:0"):
        y = nd.reduce_sum(ph) if _has_kernels("Sum") else nd.stop_gradient(ph)
        back = nd.stop_gradient(ph)
    with nd.Session(_target(cluster, "ps")) as sess:
        out, echoed = sess.run([y, back], {ph: value})
    assert echoed.flags.writeable and np.array_equal(echoed, value)
    if _has_kernels("Sum"):
        np.testing.assert_allclose(out, value.sum(dtype=np.float64), rtol=1e-5)


def test_256mib_tensor_to_and_from_ps_process(spawn, servers, graph):
    _large_tensor_roundtrip(spawn, servers, 256 << 20)


def test_256mib_feed_and_fetch_through_remote_master(spawn, graph):
    _large_feed_fetch_via_remote_master(spawn, 256 << 20)


@pytest.mark.slow
def test_1gib_tensor_to_and_from_ps_process(spawn, servers, graph):
    _large_tensor_roundtrip(spawn, servers, 1 << 30)


@pytest.mark.slow
def test_1gib_feed_and_fetch_through_remote_master(spawn, graph):
    _large_feed_fetch_via_remote_master(spawn, 1 << 30)


# -- killing and restarting a task ---------------------------------------------------
def _run_in_thread(fn):
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def test_killed_task_mid_step_then_restart(spawn, servers, graph):
    cluster = local_cluster(ps=1, worker=1)
    ps = spawn("ps", 0, cluster, test_ops=True)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(5.0, name="v")
    with nd.device("/job:worker/task:0"):
        x = nd.placeholder(nd.float32, [], name="x")
    with nd.device("/job:ps/task:0"):
        slow = sleep_op(x, 120.0)
    with nd.device("/job:worker/task:0"):
        y = nd.stop_gradient(slow)
        read = nd.stop_gradient(v)
    old = nd.Session(worker.target)
    old.run(v.initializer)
    assert old.run(read) == 5.0
    t, box = _run_in_thread(lambda: old.run(y, {x: 1.0}))
    time.sleep(1.0)
    assert t.is_alive()  # blocked: the worker's _Recv waits for the ps task
    killed_at = time.monotonic()
    ps.kill()
    t.join(15)
    assert not t.is_alive()
    assert time.monotonic() - killed_at < 15
    err = box.get("error")
    assert isinstance(err, (errors.UnavailableError, errors.AbortedError)), err
    assert "/job:ps/replica:0/task:0" in str(err)
    deadline = time.monotonic() + 5
    while blocked_threads() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert blocked_threads() == []

    spawn("ps", 0, cluster, test_ops=True)  # restarted at the same address
    with pytest.raises(errors.AbortedError, match="restarted"):
        old.run(read)
    old.close()
    with nd.Session(worker.target) as new:
        new.run(v.initializer)
        assert new.run(read) == 5.0


def test_killed_master_task_mid_step(spawn, graph):
    cluster = local_cluster(ps=1)
    ps = spawn("ps", 0, cluster, test_ops=True)
    with nd.device("/job:ps/task:0"):
        slow = sleep_op(nd.constant(1.0), 120.0)
    sess = nd.Session(_target(cluster, "ps"))
    t, box = _run_in_thread(lambda: sess.run(slow))
    time.sleep(1.0)
    assert t.is_alive()
    ps.kill()
    t.join(15)
    assert not t.is_alive()
    err = box.get("error")
    assert isinstance(err, errors.UnavailableError), err
    assert cluster["ps"][0] in str(err)
    sess.close()


def test_session_on_dead_task_fails_fast(graph):
    cluster = local_cluster(ps=1)
    t0 = time.monotonic()
    with (
        nd.Session(_target(cluster, "ps")) as sess,
        pytest.raises(errors.UnavailableError, match=cluster["ps"][0]),
    ):
        sess.run(nd.constant(1.0))
    assert time.monotonic() - t0 < 10


# -- the nbdist-server command ---------------------------------------------------------
def test_server_process_banner_and_sigterm(spawn):
    cluster = local_cluster(worker=2)
    p = spawn("worker", 1, cluster)
    port = cluster["worker"][1].rsplit(":", 1)[1]
    assert p.banner == (
        f"nbdist-server /job:worker/replica:0/task:1 listening on "
        f"127.0.0.1:{port} (pid {p.pid})"
    )
    cfg = nd.ConfigProto(device_filters=["/job:worker/task:1"])
    with nd.Session("grpc://" + cluster["worker"][1], config=cfg) as sess:
        assert sess.run(nd.constant(3)) == 3
    assert p.terminate() == 0


def test_server_process_sigint_exits_zero(spawn):
    cluster = local_cluster(ps=1)
    p = spawn("ps", 0, cluster)
    os.kill(p.pid, signal.SIGINT)
    assert p.proc.wait(15) == 0


def test_server_process_port_in_use(spawn):
    cluster = local_cluster(ps=1)
    spawn("ps", 0, cluster)
    second = spawn("ps", 0, cluster, wait=False)
    assert second.wait_exit(60) == 1
    lines = [ln for ln in second.stderr if ln.strip()]
    port = cluster["ps"][0].rsplit(":", 1)[1]
    assert len(lines) == 1, lines
    assert f"127.0.0.1:{port}" in lines[0] and "Traceback" not in lines[0]


def test_server_process_from_tf_config(graph):
    cluster = local_cluster(ps=1, worker=1)
    tf_config = {"cluster": cluster, "task": {"type": "worker", "index": 0}}
    p = ServerProcess([], env={"TF_CONFIG": json.dumps(tf_config)})
    try:
        assert "/job:worker/replica:0/task:0" in p.banner
        with nd.Session(
            _target(cluster, "worker"),
            config=nd.ConfigProto(device_filters=["/job:worker"]),
        ) as s:
            assert s.run(nd.constant(2.0)) == 2.0
        assert p.terminate() == 0
    finally:
        p.kill()


def test_server_process_bad_flags_exit_2():
    p = ServerProcess(["--cluster_spec=ps|localhost:1", "--job_name=nope"], wait=False)
    try:
        assert p.proc.wait(60) == 2
    finally:
        p.kill()


def test_cluster_spec_string_for_processes():
    cluster = local_cluster(ps=2, worker=1)
    assert nd.ClusterSpec.from_string(cluster_string(cluster)).as_dict() == cluster
