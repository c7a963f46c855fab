"""``RunMetadata.cost_graph`` (TF's ``CostGraphDef``) and ``partition_graphs``
as TF's sessions fill them.

Oracle: TF 2.21 (``tf.compat.v1.Session``) on ``y = reduce_sum(x * v)``:
``FULL_TRACE`` alone gives step stats and no partition or cost graph;
``output_partition_graphs`` gives the one partition graph; the session config's
``graph_options.build_cost_model=1`` gives a cost graph of every node the step
ran (each with its device, an ``id``, inputs naming other nodes' ids, a
compute cost in microseconds, one output info per output) and step stats too.
The cost graph's field numbers are TF's: TF parses nbdist's ``RunMetadata``.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd
from nbdist.runtime.cost_graph import cost_model_due


def _model():
    x = nd.placeholder(nd.float32, [2], name="x")
    v = nd.Variable([1.0, 2.0], name="v")
    return x, v, nd.reduce_sum(x * v, name="y")


def _check_cost_graph(md, names, devices):
    nodes = {n.name: n for n in md.cost_graph.node}
    assert names <= set(nodes), sorted(nodes)
    assert sorted(n.id for n in md.cost_graph.node) == list(
        range(len(md.cost_graph.node)))
    by_id = {n.id: n for n in md.cost_graph.node}
    mul = nodes["mul"]
    # mul's inputs are x and v's read, by id; its one output is 2 floats.
    assert len(mul.input_info) == 2
    assert all(i.preceding_node in by_id for i in mul.input_info)
    assert [o.size for o in mul.output_info] == [8]
    assert all(n.compute_cost >= 0 and n.compute_time == n.compute_cost
               for n in nodes.values())
    assert {n.device for n in nodes.values()} == devices
    assert md.step_stats.dev_stats  # a cost-model step is traced as in TF


def test_in_process_what_each_option_fills(graph):
    x, v, y = _model()
    feed = {x: [3.0, 4.0]}
    with nd.Session() as sess:
        sess.run(v.initializer)
        full, parts, none = nd.RunMetadata(), nd.RunMetadata(), nd.RunMetadata()
        sess.run(y, feed, options=nd.RunOptions(
            trace_level=nd.RunOptions.FULL_TRACE), run_metadata=full)
        sess.run(y, feed, options=nd.RunOptions(output_partition_graphs=True),
                 run_metadata=parts)
        sess.run(y, feed, run_metadata=none)
    assert full.step_stats.dev_stats and not full.partition_graphs
    assert not full.cost_graph.node
    assert len(parts.partition_graphs) == 1
    assert {"mul", "v", "y"} <= {n.name for n in parts.partition_graphs[0].node}
    assert not parts.cost_graph.node and not parts.step_stats.dev_stats
    assert none.ByteSize() == 0

    cfg = nd.ConfigProto(graph_options=nd.GraphOptions(build_cost_model=1))
    with nd.Session(config=cfg) as sess:
        sess.run(v.initializer)
        md = nd.RunMetadata()
        assert sess.run(y, feed, run_metadata=md) == pytest.approx(11.0)
    _check_cost_graph(md, {"v", "v/read", "mul", "y"},
                      {"/job:localhost/replica:0/task:0/device:CPU:0"})


def test_cost_model_steps_follow_build_cost_model_and_after():
    """TF's rule: skip ``build_cost_model_after`` runs, then every
    ``build_cost_model``-th run."""
    opts = nd.GraphOptions(build_cost_model=2, build_cost_model_after=3)
    assert [cost_model_due(opts, s) for s in range(8)] == [
        False, False, False, False, True, False, True, False]
    assert not any(cost_model_due(nd.GraphOptions(), s) for s in range(3))


def test_over_two_tasks_every_task_s_nodes_are_in_the_cost_graph(servers, graph):
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        x = nd.placeholder(nd.float32, [2], name="x")
        v = nd.Variable([1.0, 2.0], name="v")
    with nd.device("/job:worker/task:0"):
        y = nd.reduce_sum(nd.multiply(x, v, name="mul"), name="y2")
    cfg = nd.ConfigProto(graph_options=nd.GraphOptions(build_cost_model=1))
    with nd.Session(worker.target, config=cfg) as sess:
        sess.run(v.initializer)
        md = nd.RunMetadata()
        out = sess.run(y, {x: [3.0, 4.0]}, options=nd.RunOptions(
            output_partition_graphs=True), run_metadata=md)
    assert out == pytest.approx(11.0)
    ps_dev = "/job:ps/replica:0/task:0/device:CPU:0"
    worker_dev = "/job:worker/replica:0/task:0/device:CPU:0"
    assert {n.device for g in md.partition_graphs for n in g.node} == {
        ps_dev, worker_dev}
    _check_cost_graph(md, {"v", "mul", "y2"}, {ps_dev, worker_dev})
    nodes = {n.name: n for n in md.cost_graph.node}
    assert nodes["v"].device == ps_dev and nodes["y2"].device == worker_dev


def test_tf_reads_the_cost_graph_field_numbers():
    """The wire form TF's RunMetadata has: cost_graph is field 2, a node's
    name 1, id 3, compute_cost 9 (checked against TF 2.21's descriptor)."""
    md = nd.RunMetadata()
    md.cost_graph.node.add(name="a", id=1, compute_cost=5)
    field = nd.RunMetadata.DESCRIPTOR.fields_by_name["cost_graph"]
    node = field.message_type.fields_by_name["node"].message_type
    assert field.number == 2
    assert [node.fields_by_name[f].number for f in
            ("name", "device", "id", "input_info", "output_info", "compute_cost",
             "compute_time", "is_final", "control_input")] == [1, 2, 3, 4, 5, 9,
                                                               14, 7, 8]
    assert np.frombuffer(md.SerializeToString()[:1], np.uint8)[0] == (2 << 3) | 2
