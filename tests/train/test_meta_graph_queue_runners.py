"""The ``queue_runners`` collection travels through a meta graph as TF's
``QueueRunnerDef`` protos (``bytes_list``) and comes back as runnable
``QueueRunner`` objects, also under an import scope."""

from __future__ import annotations

import numpy as np

import nbdist as nd
from nbdist.proto.meta_graph_pb2 import MetaGraphDef
from nbdist.proto.queue_runner_pb2 import QueueRunnerDef


def _graph_with_a_runner():
    g = nd.Graph()
    with g.as_default():
        q = nd.FIFOQueue(10, nd.float32, shapes=[], name="q")
        enq = q.enqueue(nd.constant(3.0))
        nd.train.add_queue_runner(nd.train.QueueRunner(q, [enq]))
        q.dequeue(name="out")
    return g, enq.name


def test_queue_runners_are_exported_as_queue_runner_defs(tmp_path):
    g, enqueue_name = _graph_with_a_runner()
    path = str(tmp_path / "m.meta")
    with g.as_default():
        nd.train.export_meta_graph(path)
    mg = MetaGraphDef()
    with open(path, "rb") as f:
        mg.ParseFromString(f.read())
    values = mg.collection_def["queue_runners"].bytes_list.value
    assert len(values) == 1
    qr = QueueRunnerDef.FromString(values[0])
    assert qr.queue_name == "q"
    assert list(qr.enqueue_op_name) == [enqueue_name]


def test_imported_queue_runners_run_under_an_import_scope(tmp_path):
    path = str(tmp_path / "m.meta")
    with _graph_with_a_runner()[0].as_default():
        nd.train.export_meta_graph(path)
    g = nd.Graph()
    with g.as_default():
        nd.train.import_meta_graph(path, import_scope="imported")
        runners = g.get_collection(nd.GraphKeys.QUEUE_RUNNERS)
        assert len(runners) == 1
        assert runners[0].queue.name.startswith("imported/")
        out = g.get_tensor_by_name("imported/out:0")
        with nd.Session() as sess:
            coord = nd.train.Coordinator()
            threads = nd.train.start_queue_runners(sess, coord=coord)
            got = [sess.run(out) for _ in range(3)]
            coord.request_stop()
            sess.run(runners[0].cancel_op)
            coord.join(threads, stop_grace_period_secs=30)
    np.testing.assert_allclose(got, [3.0, 3.0, 3.0])
