"""TF's module paths under ``nbdist.`` are the very modules nbdist uses.

* ``nbdist.core.<framework|example|protobuf|util|lib.core>.*_pb2`` is the
  ``nbdist.proto`` module itself (``import`` and ``from ... import`` alike), so
  its messages are the ones nbdist reads and writes (``Saver.as_saver_def()``
  is a ``saver_pb2.SaverDef``).
* ``nbdist.python.saved_model.<builder|loader|...|*_impl>`` are
  ``nbdist.saved_model``'s modules.
* ``nbdist.python.platform.tf_logging`` is the module nbdist's hooks log
  through: a program's ``mock.patch.object(tf_logging, "info")`` sees them.
"""

from __future__ import annotations

import importlib
from unittest import mock

import pytest

import nbdist as nd
from nbdist.proto import (config_pb2, queue_runner_pb2, rewriter_config_pb2,
                          saver_pb2, server_def_pb2, summary_pb2)


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()


@pytest.mark.parametrize("path,ours", [
    ("nbdist.core.protobuf.saver_pb2", "nbdist.proto.saver_pb2"),
    ("nbdist.core.protobuf.queue_runner_pb2", "nbdist.proto.queue_runner_pb2"),
    ("nbdist.core.protobuf.rewriter_config_pb2", "nbdist.proto.rewriter_config_pb2"),
    ("nbdist.core.protobuf.debug_pb2", "nbdist.proto.debug_pb2"),
    ("nbdist.core.protobuf.tensorflow_server_pb2", "nbdist.proto.server_def_pb2"),
    ("nbdist.core.framework.graph_pb2", "nbdist.proto.graph_pb2"),
    ("nbdist.core.example.example_pb2", "nbdist.proto.example_pb2"),
    ("nbdist.core.util.event_pb2", "nbdist.proto.summary_pb2"),
    ("nbdist.core.lib.core.error_codes_pb2", "nbdist.proto.error_codes_pb2"),
    ("nbdist.python.saved_model.builder_impl", "nbdist.saved_model.builder"),
    ("nbdist.python.saved_model.signature_constants",
     "nbdist.saved_model.signature_constants"),
    ("nbdist.python.platform.tf_logging", "nbdist.train.tf_logging"),
])
def test_path_is_the_module(path, ours):
    assert importlib.import_module(path) is importlib.import_module(ours)
    package, _, name = path.rpartition(".")
    assert getattr(importlib.import_module(package), name) is importlib.import_module(
        ours)


def test_messages_are_the_ones_nbdist_uses():
    from nbdist.core.protobuf import (config_pb2 as tf_config,
                                      queue_runner_pb2 as tf_qr,
                                      rewriter_config_pb2 as tf_rw, saver_pb2 as tf_saver,
                                      tensorflow_server_pb2)
    from nbdist.core.util import event_pb2

    v = nd.Variable(1.0, name="v")
    assert isinstance(nd.train.Saver([v]).as_saver_def(), tf_saver.SaverDef)
    assert tf_saver.SaverDef.V2 == saver_pb2.SaverDef.V2
    q = nd.FIFOQueue(2, [nd.float32])
    qr = nd.train.QueueRunner(q, [q.enqueue([1.0])])
    assert isinstance(qr.to_proto(), tf_qr.QueueRunnerDef)
    assert tf_qr is queue_runner_pb2 and tf_rw is rewriter_config_pb2
    cfg = tf_config.ConfigProto(allow_soft_placement=True)
    assert isinstance(cfg, config_pb2.ConfigProto) and isinstance(
        cfg.graph_options.rewrite_options, tf_rw.RewriterConfig)
    assert tensorflow_server_pb2.ServerDef is server_def_pb2.ServerDef
    assert event_pb2.Event is summary_pb2.Event


def test_patching_tf_logging_reaches_nbdist_hooks():
    from nbdist.python.platform import tf_logging

    x = nd.constant(7.0, name="x")
    hook = nd.train.LoggingTensorHook({"x": x}, every_n_iter=1)
    with mock.patch.object(tf_logging, "info") as info:
        with nd.train.MonitoredSession(hooks=[hook]) as sess:
            sess.run(x)
    logged = " ".join(str(a) for call in info.call_args_list for a in call.args)
    assert "x = 7.0" in logged
