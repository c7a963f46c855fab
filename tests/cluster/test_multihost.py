"""Tasks on several hosts (issue 14): each host a network namespace of its own
address on a private subnet (``tests/netns.py``), every task an
``nbdist-server --bind=<its host's address>`` process in its host, clients
in the worker hosts (or, for the coordinator, this process, in the root
namespace behind the bridge). All tasks share a token (servers bound beyond
loopback need one). Skipped where namespaces cannot be made (not root).

* The ``trainer.py`` program (softmax regression, Adagrad, variables on the ps
  by ``replica_device_setter``) as 1 ps + 2 workers on three hosts, the
  workers taking turns (worker ``k % 2`` runs global step ``k``): the weights
  equal, to 1e-6, the same program with every task on one host and a single
  process applying the same steps.
* The same-host path is off between hosts and on within one: after a step
  that moves a 4 MB tensor from the ps to a worker, the worker's host shows
  no Unix connection to ``@nbdist/<ps address>`` (connecting to it from there
  is refused: the name is in the ps's namespace) and the worker maps no
  ``memfd:nbdist-tensor``; with every task on one host it shows both.
  Between hosts the TCP peer path carries the steps: each worker's host has
  connections to the port the ps announced in the coordination service.
* ``ClusterCoordinator`` with a worker whose link is cut mid-run: every
  closure completes once (run elsewhere), and once the link is restored the
  worker runs closures again (the recovery time is printed).
* A Session to a cluster whose worker's host is cut off names that task and
  its address within ``operation_timeout_in_ms``.

Client processes run this file as a script (``python tests/cluster/test_multihost.py
train ...``).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: helpers

import helpers
import netns

helpers.put_test_dirs_on_path()  # run as a script: test modules by basename
from helpers import ROOT, counting_step, wait_for
from test_training_cluster import softmax_model

import nbdist as nd
from nbdist.runtime import samehost, transports

if __name__ != "__main__" and netns.unavailable():
    pytest.skip(f"no multi-host tests: {netns.unavailable()}", allow_module_level=True)

START_TIMEOUT_S = 90.0
PS_PORT, WORKER_PORT = 2222, 2223
STEPS = 20  # global steps of the turn-taking trainer
BIG = 1 << 20  # float32 elements of the tensor that crosses hosts (4 MB)
LR = 0.05
BATCH = 64


# -- the trainer (run in client processes and, as the oracle, in this one) --------
def make_batch(step: int):
    """Global step ``step``'s batch: the same whoever runs it."""
    centers = (0.5 * np.random.default_rng(42).standard_normal((10, 64))).astype(
        np.float32)
    rng = np.random.default_rng(1000 + step)
    labels = rng.integers(0, 10, BATCH)
    x = centers[labels] + rng.standard_normal((BATCH, 64))
    return x.astype(np.float32), labels.astype(np.int32)


def build(cluster=None, task_index=0):
    """``examples/trainer.py``'s model; with a cluster, its variables on the ps."""
    setter = None if cluster is None else nd.train.replica_device_setter(
        worker_device=f"/job:worker/task:{task_index}", cluster=cluster)
    with nd.device(setter):
        x, y, loss = softmax_model()
        w, b = nd.trainable_variables()
        global_step = nd.train.get_or_create_global_step()
        train_op = nd.train.AdagradOptimizer(LR).minimize(loss, global_step=global_step)
    return x, y, w, b, loss, global_step, train_op


def oracle(steps: int):
    """(w, b, held-out loss) of one process applying steps 0..steps-1 in order."""
    with nd.Graph().as_default():
        x, y, w, b, loss, _, train_op = build()
        with nd.Session("") as sess:
            sess.run(nd.global_variables_initializer())
            for k in range(steps):
                xs, ys = make_batch(k)
                sess.run(train_op, {x: xs, y: ys})
            xs, ys = make_batch(-1)
            return (*sess.run([w, b]), float(sess.run(loss, {x: xs, y: ys})))


def train_role(target: str, cluster_json: str, task_index: int, workers: int):
    """A worker's client: runs the global steps that are its turn, then pulls
    a 4 MB ps variable to its worker, and prints its results."""
    cluster = nd.train.ClusterSpec(json.loads(cluster_json))
    x, y, w, b, loss, global_step, train_op = build(cluster, task_index)
    with nd.device(nd.train.replica_device_setter(
            worker_device=f"/job:worker/task:{task_index}", cluster=cluster)):
        big = nd.get_variable("big", [BIG], initializer=nd.ones_initializer())
    with nd.device(f"/job:worker/task:{task_index}"):
        big_sum = nd.reduce_sum(big)  # the 4 MB travel ps -> this worker
    config = nd.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task_index}"],
                            operation_timeout_in_ms=60_000)
    with nd.Session(target, config=config) as sess:
        if task_index == 0:
            sess.run(nd.global_variables_initializer())
        else:
            not_ready = nd.report_uninitialized_variables()
            wait_for(lambda: not len(sess.run(not_ready)), START_TIMEOUT_S,
                     "the chief to initialise the variables", interval=0.005)
        for k in range(task_index, STEPS, workers):
            wait_for(lambda k=k: sess.run(global_step) == k, 60, f"global step {k}",
                     interval=0.005)
            xs, ys = make_batch(k)
            sess.run(train_op, {x: xs, y: ys})
        wait_for(lambda: sess.run(global_step) == STEPS, 60, "the last step",
                 interval=0.005)
        xs, ys = make_batch(-1)
        w_, b_, loss_ = sess.run([w, b, loss], {x: xs, y: ys})
        print("result " + json.dumps({"w": w_.tolist(), "b": b_.tolist(),
                                      "loss": float(loss_)}), flush=True)
        print(f"big {float(sess.run(big_sum))}", flush=True)


# -- processes -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def token():
    return secrets.token_hex(16)


def child_env(token: str, **extra) -> dict:
    env = dict(os.environ, NBDIST_TOKEN=token, **extra)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env


def start_servers(placement, token, **env):
    return netns.start_servers(placement, child_env(token, **env), ROOT,
                               PS_PORT, START_TIMEOUT_S)


# Connects to a same-host socket from inside a host: "refused" when not there.
PROBE = """import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect({name!r})
    print("connected")
except ConnectionRefusedError:
    print("refused")
"""


def unix_peers(host) -> str:
    """The Unix stream connections of ``host``'s namespace (``ss -x``)."""
    return host.run(["ss", "-xn"])


def nbdist_memfds(pid: int) -> int:
    with open(f"/proc/{pid}/maps") as f:
        return sum("memfd:nbdist-tensor" in line for line in f)


def tcp_endpoint(cluster, task: str, token) -> str:
    """Where ``task`` announced its TCP peer path (``host:port``)."""
    client = transports.connect_coordination(f"grpc://{cluster['ps'][0]}", token=token)
    try:
        value = wait_for(lambda: client.try_get(transports.endpoint_key("tcp", task)),
                         30, f"{task}'s TCP endpoint")
    finally:
        client.close()
    return value.decode()


def run_trainer(placement, token):
    """The trainer on ``placement`` (ps host, worker hosts); returns (results of
    each worker, cluster, server processes), the servers still running."""
    cluster, servers = start_servers(placement, token)
    clients = [
        host.popen([sys.executable, __file__, "train", f"grpc://{addr}",
                    json.dumps(cluster), i, len(cluster["worker"])],
                   env=child_env(token), cwd=ROOT)
        for i, (host, addr) in enumerate(zip(placement[1:], cluster["worker"]))]
    results = []
    for c in clients:
        assert c.wait(START_TIMEOUT_S + 60) == 0, c.output
        results.append(json.loads(c.wait_for(r"^result (.*)", 1).group(1)))
        assert float(c.wait_for(r"^big (\S+)", 1).group(1)) == BIG
    return results, cluster, servers


@pytest.mark.slow
def test_trainer_on_three_hosts_equals_one_host_and_the_path_is_off_between_them(
        token):
    w0, b0, loss0 = oracle(STEPS)
    assert loss0 < np.log(10) - 0.3  # it learned
    with netns.Hosts(4) as hosts:
        three, one = list(hosts)[:3], [hosts[3]] * 3
        runs = {}
        for name, placement in (("three hosts", three), ("one host", one)):
            results, cluster, servers = run_trainer(placement, token)
            runs[name] = (results, cluster, servers)
            for r in results:  # every worker reads the same final variables
                np.testing.assert_allclose(r["w"], w0, rtol=0, atol=1e-6)
                np.testing.assert_allclose(r["b"], b0, rtol=0, atol=1e-6)
                assert abs(r["loss"] - loss0) < 1e-5
            print(f"{name}: held-out loss {results[0]['loss']:.6f} "
                  f"(one process: {loss0:.6f})")

        # Between hosts: no same-host connection to the ps, no segment mapped.
        results, cluster, servers = runs["three hosts"]
        ps_socket = "@nbdist/" + cluster["ps"][0]
        for host, worker in zip(three[1:], servers[1:]):
            assert ps_socket not in unix_peers(host)
            assert nbdist_memfds(worker.pid) == 0
            assert "refused" in host.run([sys.executable, "-c", PROBE.format(
                name=samehost.socket_name(cluster["ps"][0]))])
        # ... but the TCP peer path: each worker holds connections to the port
        # the ps announced in the coordination service, not just to its gRPC port.
        endpoint = tcp_endpoint(cluster, "/job:ps/replica:0/task:0", token)
        assert endpoint.rpartition(":")[0] == cluster["ps"][0].rpartition(":")[0]
        for host in three[1:]:
            connections = host.run(["ss", "-tnH", "state", "established"])
            assert endpoint in connections, (endpoint, connections)
        # Within one host: the worker's pull of the 4 MB came through one.
        results, cluster, servers = runs["one host"]
        ps_socket = "@nbdist/" + cluster["ps"][0]
        connections = unix_peers(one[0])
        assert ps_socket in connections, connections
        assert any(nbdist_memfds(w.pid) for w in servers[1:])


# -- ClusterCoordinator and a cut link --------------------------------------------------
@pytest.mark.slow
def test_coordinator_survives_a_cut_link_and_the_worker_comes_back(token, monkeypatch):
    from nbdist.distribute.coordinator.cluster_coordinator import ClusterCoordinator
    from nbdist.distribute.strategies.parameter_server_strategy import (
        ParameterServerStrategy,
    )

    monkeypatch.setenv("NBDIST_TOKEN", token)  # this process is the client
    with netns.Hosts(3) as hosts, nd.Graph().as_default():
        cluster, _ = start_servers(list(hosts), token,
                                   NBDIST_HEARTBEAT_INTERVAL_MS="100",
                                   NBDIST_HEARTBEAT_TIMEOUT_MS="1000")
        strategy = ParameterServerStrategy(nd.train.ClusterSpec(cluster))
        coordinator = ClusterCoordinator(strategy)
        try:
            counter, step = counting_step(strategy)

            def done_on(worker):
                return coordinator.stats.get(f"completed/worker:{worker}", 0)

            def schedule(first, count):
                return [coordinator.schedule(step, args=(np.int32(i),))
                        for i in range(first, first + count)]

            # Keep closures queued until worker 1 has run 10 (bounded): on a busy
            # machine worker 0 may run a first 300 alone while worker 1 makes its
            # first session across hosts.
            results = schedule(0, 300)
            deadline = time.monotonic() + 60
            while done_on(1) < 10:
                assert time.monotonic() < deadline, (
                    f"worker 1 ran no 10 closures in 60 s: {coordinator.stats}")
                if coordinator.stats.get("completed", 0) >= len(results) - 20:
                    results += schedule(len(results), 50)
                time.sleep(0.01)
            n, completed_first = len(results), coordinator.stats.get("completed", 0)
            hosts[2].cut()  # worker 1's host
            cut_at = time.monotonic()
            wait_for(lambda: not coordinator._state.is_alive(1), 30,
                     "worker 1 to be declared failed", interval=0.005)
            failed_s = time.monotonic() - cut_at
            hosts[2].restore()
            restored_at = time.monotonic()
            before = done_on(1)
            more = []
            # Keep closures queued until worker 1 runs one again (bounded).
            deadline = restored_at + 60
            while done_on(1) == before:
                assert time.monotonic() < deadline, "worker 1 never came back"
                if coordinator.stats.get("completed", 0) >= n + len(more) - 20:
                    more += schedule(len(more), 50)
                time.sleep(0.01)
            recovery_s = time.monotonic() - restored_at
            coordinator.join()
            assert [int(r.fetch()) for r in results] == [2 * i for i in range(n)]
            assert [int(r.fetch()) for r in more] == [2 * i for i in range(len(more))]
            total = n + len(more)
            # Each closure taken back from the cut worker ran at most once more.
            config = nd.ConfigProto(device_filters=["/job:ps"])
            with nd.Session(f"grpc://{cluster['ps'][0]}", config=config) as sess:
                ran = int(sess.run(counter))
            assert total <= ran <= total + coordinator.stats.get("put_back", 0)
            print(f"cut link: worker 1 ran 10 closures when {completed_first} were "
                  f"complete; declared "
                  f"failed after {failed_s:.2f} s; "
                  f"running closures again {recovery_s:.2f} s after the restore "
                  f"({coordinator.stats.get('put_back', 0)} closure(s) put back)")
        finally:
            coordinator.close()


# -- an unreachable host at start ----------------------------------------------------------
@pytest.mark.slow
def test_unreachable_host_is_named_within_the_timeout(token, monkeypatch):
    monkeypatch.setenv("NBDIST_TOKEN", token)
    with netns.Hosts(2) as hosts:
        ps_host, worker_host = hosts
        worker_host.cut()
        worker = f"{worker_host.address}:{WORKER_PORT}"
        spec = f"ps|{ps_host.address}:{PS_PORT},worker|{worker}"
        ps = ps_host.popen(
            [sys.executable, "-m", "nbdist.server", f"--cluster_spec={spec}",
             "--job_name=ps", "--task_index=0", f"--bind={ps_host.address}"],
            env=child_env(token), cwd=ROOT)
        ps.wait_for("listening on", START_TIMEOUT_S)
        config = nd.ConfigProto(operation_timeout_in_ms=3000)
        with nd.Graph().as_default():
            with nd.device("/job:worker/task:0"):
                c = nd.constant(1.0) + 1.0
            t0 = time.monotonic()
            with pytest.raises(nd.errors.UnavailableError) as e, \
                    nd.Session(f"grpc://{ps_host.address}:{PS_PORT}",
                               config=config) as sess:
                sess.run(c)
            took = time.monotonic() - t0
    message = str(e.value)
    assert "/job:worker/replica:0/task:0" in message, message
    assert worker in message, message
    assert took < 3.0 + 10.0, took  # the timeout, plus slack for a busy machine
    print(f"unreachable worker named after {took:.2f} s: {message.splitlines()[0]}")



@pytest.mark.slow
def test_binding_beyond_loopback_needs_a_token():
    """``nbdist-server --bind=<host address>`` without NBDIST_TOKEN refuses to
    start (exit 2, naming the fix); with ``--allow_insecure_bind`` it serves,
    after a loud warning."""
    env = {k: v for k, v in os.environ.items() if k != "NBDIST_TOKEN"}
    with netns.Hosts(1) as hosts:
        (host,) = hosts
        args = [sys.executable, "-m", "nbdist.server",
                f"--cluster_spec=worker|{host.address}:{WORKER_PORT}",
                "--job_name=worker", "--task_index=0", f"--bind={host.address}"]
        refused = host.popen(args, env=env, cwd=ROOT)
        assert refused.wait(START_TIMEOUT_S) == 2, refused.output
        assert "refusing to start" in refused.output, refused.output
        assert "NBDIST_TOKEN" in refused.output and "--allow_insecure_bind" in \
            refused.output, refused.output
        allowed = host.popen([*args, "--allow_insecure_bind"], env=env, cwd=ROOT)
        allowed.wait_for("listening on", START_TIMEOUT_S)
        assert "WARNING" in allowed.output and "without a token" in allowed.output


if __name__ == "__main__":
    if sys.argv[1] == "train":
        with nd.Graph().as_default():
            train_role(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
