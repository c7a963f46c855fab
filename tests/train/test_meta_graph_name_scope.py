"""``import_meta_graph`` inside ``with name_scope("x"):`` imports under ``x/``
(ops, variables, the saver), as TF does; an explicit ``import_scope`` lands
under the current scope too. Oracle: TF 2.21 gives ``x/c`` and ``x/v:0`` for
the first, ``x/s/c`` for the second."""

from __future__ import annotations

import numpy as np

import nbdist as nd

tf = nd.compat.v1


def _meta(tmp_path):
    with nd.Graph().as_default():
        v = tf.Variable(1.0, name="v")
        tf.add(v, 1.0, name="c")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(v.initializer)
            saver.save(sess, str(tmp_path / "ckpt"))
    return str(tmp_path / "ckpt.meta"), str(tmp_path / "ckpt")


def test_import_meta_graph_under_the_current_name_scope(tmp_path):
    meta, ckpt = _meta(tmp_path)
    with nd.Graph().as_default() as g:
        with tf.name_scope("x"):
            saver = tf.train.import_meta_graph(meta)
        assert [v.name for v in tf.global_variables()] == ["x/v:0"]
        c = g.get_tensor_by_name("x/c:0")
        with tf.Session() as sess:
            saver.restore(sess, ckpt)
            np.testing.assert_allclose(sess.run(c), 2.0)


def test_explicit_import_scope_nests_under_the_current_one(tmp_path):
    meta, _ = _meta(tmp_path)
    with nd.Graph().as_default() as g:
        with tf.name_scope("x"):
            tf.train.import_meta_graph(meta, import_scope="s")
        assert g.get_operation_by_name("x/s/c").name == "x/s/c"
        assert [v.name for v in tf.global_variables()] == ["x/s/v:0"]
