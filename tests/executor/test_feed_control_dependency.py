"""A control dependency on a fed placeholder is satisfied by its feed (TF's
subgraph rewrite moves such edges onto the fed value): the placeholder itself,
which would demand a value, never runs."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd


def test_control_dependency_on_fed_placeholder(graph):
    x = nd.placeholder(nd.float32, [])
    with nd.control_dependencies([x]):
        y = nd.constant(1.0)
    with nd.Session() as sess:
        assert sess.run(y, {x: 2.0}) == 1.0
        # Unfed, the dependency still needs the placeholder's value.
        with pytest.raises(nd.errors.InvalidArgumentError, match="must feed"):
            sess.run(y)


def test_control_dependency_orders_after_the_feed_and_uses_it(graph):
    x = nd.placeholder(nd.float32, [3])
    v = nd.Variable(np.zeros(3, np.float32))
    with nd.control_dependencies([x]):
        bumped = nd.assign_add(v, np.ones(3, np.float32))
    total = bumped + x
    with nd.Session() as sess:
        sess.run(v.initializer)
        feed = np.array([1.0, 2.0, 3.0], np.float32)
        np.testing.assert_allclose(sess.run(total, {x: feed}), feed + 1.0)
        np.testing.assert_allclose(sess.run(bumped, {x: feed}), [2.0, 2.0, 2.0])


def test_control_dependency_on_fed_placeholder_over_a_server(graph):
    x = nd.placeholder(nd.float32, [])
    with nd.control_dependencies([x]):
        y = nd.constant(1.0) + 4.0
    with nd.Server.create_local_server() as server, \
            nd.Session(server.target) as sess:
        assert sess.run(y, {x: 2.0}) == 5.0


def test_control_dependency_on_fed_placeholder_across_tasks(servers, graph):
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        x = nd.placeholder(nd.float32, [2])
        w = nd.placeholder(nd.float32, [2])
    with nd.device("/job:worker/task:0"):
        with nd.control_dependencies([x, w]):
            y = nd.constant([10.0, 20.0]) * 2.0
        z = y + w  # w is also consumed: the feed serves both edges
    with nd.Session(ps.target) as sess:
        y_out, z_out = sess.run([y, z], {x: [1.0, 2.0], w: [0.5, 0.25]})
    np.testing.assert_allclose(y_out, [20.0, 40.0])
    np.testing.assert_allclose(z_out, [20.5, 40.25])
