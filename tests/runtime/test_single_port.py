"""A cluster whose tasks reach each other only through their gRPC port (issue
38): with the same-host and TCP peer paths off, a step's calls and tensors
between tasks travel as frames over long-lived gRPC streams
(``runtime/grpc/stream_path.py``), with the same results as unary gRPC, TLS
and the token included; a stream broken by a restarted peer is replaced, and a
step it cuts fails with ``UnavailableError`` naming the peer."""

from __future__ import annotations

import collections
import threading

import numpy as np
import pytest
from helpers import ServerProcess, cluster_string, local_cluster, wait_for
from test_samehost import _mlp, _train
from test_samehost_tls import _key_and_cert, _ps_worker_graph

import nbdist as nd
from nbdist import errors
from nbdist.runtime.grpc.auth import TlsConfig
from nbdist.runtime.grpc.client import GrpcWorkerClient
from nbdist.runtime.transports import ChannelBroken

PS, WORKER = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"


@pytest.fixture
def single_port(monkeypatch):
    monkeypatch.setenv("NBDIST_SAME_HOST", "0")
    monkeypatch.setenv("NBDIST_PEER_TCP", "0")


@pytest.fixture(scope="module")
def tls():
    pytest.importorskip("cryptography")
    _, ca, ca_key, ca_name = _key_and_cert("nbdist test CA", is_ca=True)
    key, cert, _, _ = _key_and_cert("localhost", (ca_key, ca_name))
    return TlsConfig(cert=cert, key=key, ca=ca)


def _open_streams(server, *peers):
    """Waits until ``server`` reaches each of ``peers`` by stream (the first
    stream opens in the background; calls go unary meanwhile)."""
    for peer in peers:
        path = server._router.worker(peer).paths[-1]
        wait_for(lambda path=path: path.channel() is not None, 30,
                 f"{server.task_name}'s stream to {peer}")


def _stream_calls(server) -> dict:
    """The server's calls to its peers over streams, by (peer, op)."""
    for peers in server._router.path_peers:
        if type(peers).__name__ == "StreamPeers":
            return dict(peers.calls)
    return {}


def test_training_over_streams_equals_unary_grpc(servers, single_port, monkeypatch):
    results = {}
    for setting in ("1", "0"):
        monkeypatch.setenv("NBDIST_PEER_STREAM", setting)
        cluster = local_cluster(ps=1, worker=1)
        servers(cluster, "ps", 0)
        worker = servers(cluster, "worker", 0)
        if setting == "1":
            _open_streams(worker, PS)
        results[setting] = _train(worker.target, cluster, 20)
        calls = _stream_calls(worker)
        if setting == "1":  # every step: its RunGraph and one pull, by stream
            assert calls[(PS, "run")] >= 20 and calls[(PS, "recv")] >= 20
        else:
            assert calls == {}
    for on, off in zip(results["1"], results["0"]):
        np.testing.assert_allclose(on, off, rtol=0, atol=1e-6)


def test_a_steps_tensors_show_on_the_tap_as_stream_calls(servers, single_port):
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    _open_streams(worker, PS)
    _open_streams(ps, WORKER)
    events = []
    worker.tap.subscribe(events.append)
    g, init, train, (x, y), batches, _ = _mlp(cluster, 0)
    with g.as_default(), nd.Session(worker.target) as s:
        s.run(init)
        before = _stream_calls(worker)
        events.clear()
        for i in range(5):
            s.run(train, {x: batches[i][0] if i < 4 else batches[0][0],
                          y: batches[i % 4][1]})
    after = _stream_calls(worker)
    kinds = {(e.kind, e.source, e.destination) for e in events}
    assert ("RunGraph", WORKER, PS) in kinds and ("RecvTensor", PS, WORKER) in kinds
    # The tap's RunGraphs and pulls of those steps are the stream's calls.
    runs = sum(1 for e in events if e.kind == "RunGraph" and e.destination == PS)
    assert after[(PS, "run")] - before.get((PS, "run"), 0) == runs >= 5
    # The ps pulls the gradients from the worker by stream too.
    assert _stream_calls(ps).get((WORKER, "recv"), 0) >= 5


def test_strings_and_odd_shapes_cross_a_stream_intact(servers, single_port, graph):
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    _open_streams(worker, PS)
    with nd.device("/job:ps/task:0"):
        words = nd.constant([b"single", b"port", b"\x00\xff"])
        empty = nd.zeros([0, 3], nd.float64)
        scalar = nd.constant(7, nd.int64)
        flags = nd.constant([True, False])
    with nd.device("/job:worker/task:0"):
        out = [nd.identity(t) for t in (words, empty, scalar, flags)]
    with nd.Session(worker.target) as s:
        got = s.run(out)
    assert got[0].tolist() == [b"single", b"port", b"\x00\xff"]
    assert got[1].shape == (0, 3) and got[1].dtype == np.float64
    assert got[2] == 7 and got[3].tolist() == [True, False]
    assert _stream_calls(worker).get((PS, "recv"), 0) >= 1


def test_a_large_answer_is_parked_and_pulled_in_chunks(servers, single_port, graph):
    """A tensor of 1 MiB or more is not one huge stream message (gRPC moves
    those at a fraction of the rate of RecvTensor's chunks): the answer names
    it, the client pulls it; byte for byte."""
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    _open_streams(worker, PS)
    n = 1 << 20  # 4 MiB of int32
    with nd.device("/job:ps/task:0"):
        big = nd.range(0, n, dtype=nd.int32) * 40503 + 17
    with nd.device("/job:worker/task:0"):
        total = nd.identity(big)
    with nd.Session(worker.target) as s:
        got = s.run(total)
    expected = np.arange(n, dtype=np.int32) * np.int32(40503) + np.int32(17)
    np.testing.assert_array_equal(got, expected)
    assert _stream_calls(worker).get((PS, "recv"), 0) >= 1


def test_a_malformed_frame_is_refused_not_decoded():
    from nbdist.runtime.grpc.stream_frames import decode_frame, encode_frame

    frame = encode_frame({"op": "recv"}, [("x", np.arange(4, dtype=np.float32))])
    with pytest.raises(ValueError, match="does not fit"):
        decode_frame(frame[:-1], 1 << 20)
    with pytest.raises(ValueError, match="does not fit"):
        decode_frame(frame, 8)  # over the tensor limit
    bad = frame.replace(b"<f4", b"O  ")
    with pytest.raises(ValueError, match="not a"):
        decode_frame(bad, 1 << 20)


def test_a_restarted_peer_gets_new_streams(servers, single_port, graph):
    """The ps restarts between two sessions: the worker's idle stream ended
    with the old ps; the next step does not fail on it, and steps take a new
    stream again."""
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    _open_streams(worker, PS)
    with nd.device("/job:ps/task:0"):
        v = nd.constant(2.0) * 3.0
    with nd.device("/job:worker/task:0"):
        out = v + 1.0
    with nd.Session(worker.target) as s:
        assert s.run(out) == 7.0
    opened = _stream_calls(worker)[(PS, "recv")]
    ps.stop()
    servers(cluster, "ps", 0)
    with nd.Session(worker.target) as s:
        assert s.run(out) == 7.0
        _open_streams(worker, PS)
        assert s.run(out) == 7.0
    assert _stream_calls(worker)[(PS, "recv")] > opened


def test_a_peer_killed_mid_step_is_unavailable_naming_it(servers, single_port,
                                                         graph):
    """The ps (a process of its own) dies while the worker's step waits on it
    (a queue nobody fills): the step fails with UnavailableError naming the
    ps, not a hang or an unknown error."""
    cluster = local_cluster(ps=1, worker=1)
    ps = ServerProcess([f"--cluster_spec={cluster_string(cluster)}",
                        "--job_name=ps", "--task_index=0"])
    try:
        worker = servers(cluster, "worker", 0)
        with nd.device("/job:ps/task:0"):
            q = nd.FIFOQueue(1, nd.float32, shapes=[[]])
            ready = nd.constant(1.0)
            value = q.dequeue()
        with nd.device("/job:worker/task:0"):
            out = value + 1.0
        _open_streams(worker, PS)
        with nd.Session(worker.target) as s:
            assert s.run(ready + 1.0) == 2.0
            sent = _stream_calls(worker)[(PS, "run")]
            outcome = []
            step = threading.Thread(target=lambda: outcome.append(
                _error_of(lambda: s.run(out))))
            step.start()
            wait_for(lambda: _stream_calls(worker)[(PS, "run")] > sent, 30,
                     "the step's RunGraph to go out")
            ps.kill()
            step.join(60)
        assert not step.is_alive()
        (error,) = outcome
        assert isinstance(error, errors.UnavailableError), repr(error)
        assert PS in str(error) and cluster["ps"][0] in str(error)
    finally:
        ps.kill()


def _error_of(fn):
    try:
        fn()
    except errors.OpError as e:
        return e
    return None


def test_under_tls_and_a_token_steps_take_the_stream(servers, single_port, tls):
    """The streams ride the tasks' TLS channels (no peer path of its own port
    with TLS) and carry the token; a caller without it opens no stream."""
    from nbdist.runtime.grpc import stream_path

    cluster = local_cluster(worker=1, ps=1)
    worker = servers(cluster, "worker", 0, tls=tls, token="s3cret")
    servers(cluster, "ps", 0, tls=tls, token="s3cret")
    _open_streams(worker, PS)
    values = np.arange(1000, dtype=np.float32)
    g, init, doubled = _ps_worker_graph(values)
    with g.as_default(), nd.Session(worker.target) as sess:
        sess.run(init)
        got = [sess.run(doubled) for _ in range(3)]
    for i, v in enumerate(got):  # the oracle: the counter after i + 1 bumps
        np.testing.assert_array_equal(v, (values + i + 1) * 2.0)
    calls = _stream_calls(worker)
    assert calls[(PS, "run")] >= 3 and calls[(PS, "recv")] >= 3
    for token in (None, "wrong"):
        client = GrpcWorkerClient(PS, worker.cluster_spec.task_address("ps", 0),
                                  token=token, tls=tls)
        try:
            with pytest.raises(ChannelBroken, match="UNAUTHENTICATED|PERMISSION"):
                stream_path.StreamChannel(PS, client, collections.Counter()).open()
        finally:
            client.close()
