"""A trainer's step in a TLS cluster keeps the TCP peer path in both
directions (issue 38), on connections kept from step to step: the worker fetches the ps's variable and the ps
receives the worker's gradient over TLS connections of the TCP path, not
gRPC, and the step's results are NumPy's, as in plaintext.

In-process servers on one host: ``NBDIST_SAME_HOST=0`` and
``NBDIST_PEER_TCP=always`` make them use the TCP path with each other.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import local_cluster, tcp_calls, wait_for
from test_tls_tcp_path import _tcp_service, pki  # noqa: F401 - the fixture

import nbdist as nd
from nbdist.runtime.tcp.tls import TlsStream

PS = "/job:ps/replica:0/task:0"
WORKER = "/job:worker/replica:0/task:0"
LR, STEPS = 0.1, 3
W0 = np.linspace(-1.0, 1.0, 40000, dtype=np.float32)  # 160 kB: many TLS records


@pytest.mark.parametrize("secure", [True, False], ids=["tls", "plaintext"])
def test_a_trainers_variable_and_gradient_cross_the_tcp_path_both_ways(
        servers, tcp, pki, secure):  # noqa: F811
    tls = pki["cluster"] if secure else None
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0, tls=tls)
    worker = servers(cluster, "worker", 0, tls=tls)
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            w = nd.Variable(W0, name="w")
        with nd.device("/job:worker/task:0"):
            x = nd.placeholder(nd.float32, [W0.size])
            grad = w * 2.0 + x  # the worker's gradient of sum(w**2 + x*w)
        with nd.device("/job:ps/task:0"):
            train = w.assign_sub(LR * grad)
        init = nd.global_variables_initializer()
    xs = [np.full(W0.size, k + 1.0, np.float32) for k in range(STEPS)]
    with g.as_default(), nd.Session(worker.target) as sess:
        sess.run(init)
        # Each task looks its peer's endpoint up when it first needs it.
        wait_for(lambda: (sess.run(grad, {x: xs[0]}),
                          tcp_calls(worker).get((PS, "run")))[1],
                 30, "the worker to reach the ps over TCP", interval=0.05)
        sess.run(init)
        wait_for(lambda: (sess.run(train, {x: xs[0]}),
                          tcp_calls(ps).get((WORKER, "recv")))[1],
                 30, "the ps to reach the worker over TCP", interval=0.05)
        sess.run(init)
        before_w, before_ps = tcp_calls(worker), tcp_calls(ps)
        held = _connections(ps, worker)
        got = [sess.run(train, {x: v}) for v in xs]
        # Connections kept: no new one (no TLS handshake) in the steps.
        assert _connections(ps, worker) <= held
        worker_calls = {k: n - before_w.get(k, 0) for k, n in tcp_calls(worker).items()}
        ps_calls = {k: n - before_ps.get(k, 0) for k, n in tcp_calls(ps).items()}
    expected = W0.copy()
    for v, value in zip(xs, got):
        expected = expected - np.float32(LR) * (expected * 2.0 + v)
        np.testing.assert_allclose(value, expected, rtol=1e-6)
    assert worker_calls.get((PS, "run")) == STEPS  # its RunGraph over TCP
    assert ps_calls.get((WORKER, "recv")) == STEPS  # the gradient over TCP
    assert held
    assert all(isinstance(c, TlsStream) is secure for c in held)


def _connections(*servers) -> set:
    """The connections the servers' TCP peer paths hold now."""
    return {c for s in servers for c in _tcp_service(s)._conns}
