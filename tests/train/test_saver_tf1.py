"""TF1's Saver and meta-graph surface as TF's own tests use it: SaverDef and
its format versions, checkpoint readers, write_graph, SaveSliceInfo, meta
graph export/import (scopes, savers collection, extraneous savers),
checkpoint_exists, file:// paths and restore errors."""

from __future__ import annotations

import os

import numpy as np
import pytest
from google.protobuf import text_format

import nbdist as nd
from nbdist.proto import graph_pb2, meta_graph_pb2


def _read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


W0 = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)


def _model(g, saver_kwargs=None):
    with g.as_default():
        w = nd.Variable(W0, name="layer/w")
        step = nd.Variable(np.int64(5), name="step")
        words = nd.Variable(np.array([b"a", b"bc\x00"], dtype=object), name="words")
        saver = nd.train.Saver(**(saver_kwargs or {}))
    return w, step, words, saver


def _saved(tmp_path, saver_kwargs=None, global_step=None):
    g = nd.Graph()
    w, step, words, saver = _model(g, saver_kwargs)
    sess = nd.Session(graph=g)
    sess.run([v.initializer for v in (w, step, words)])
    path = saver.save(sess, str(tmp_path / "model"), global_step=global_step)
    return g, (w, step, words), saver, sess, path


# -- SaverDef ------------------------------------------------------------------
def test_saver_def_enum_and_field_numbers_are_tfs():
    sd = nd.train.SaverDef
    assert (sd.LEGACY, sd.V1, sd.V2) == (0, 1, 2)
    assert sd.CheckpointFormatVersion.Name(2) == "V2"
    # TF's numbers: sharded = 5 (varint), keep hours = 6 (float), version = 7.
    assert sd(sharded=True).SerializeToString() == b"\x28\x01"
    assert sd(version=sd.V2).SerializeToString() == b"\x38\x02"
    assert sd(keep_checkpoint_every_n_hours=1.5).SerializeToString() == (
        b"\x35" + np.float32(1.5).tobytes())


def test_as_saver_def_names_the_graphs_ops(tmp_path):
    g = nd.Graph()
    _, _, _, saver = _model(g, {"max_to_keep": 3, "sharded": True,
                                "keep_checkpoint_every_n_hours": 2.0})
    sd = saver.as_saver_def()
    assert isinstance(sd, nd.train.SaverDef)
    assert sd.max_to_keep == 3 and sd.sharded
    assert sd.keep_checkpoint_every_n_hours == 2.0
    assert sd.version == nd.train.SaverDef.V1  # nbdist's .npz format
    g.get_operation_by_name(sd.restore_op_name)
    assert g.get_tensor_by_name(sd.filename_tensor_name).dtype == nd.string
    g2 = nd.Graph()
    _, _, _, v2_saver = _model(g2, {"write_version": nd.train.SaverDef.V2})
    assert v2_saver.as_saver_def().version == nd.train.SaverDef.V2


def test_saver_from_saver_def_restores(tmp_path):
    g, (w, _, _), saver, sess, path = _saved(tmp_path)
    with g.as_default():
        again = nd.train.Saver(saver_def=saver.as_saver_def())
    with g.as_default():
        sess.run(w.assign(np.zeros_like(W0)))
    again.restore(sess, path)
    np.testing.assert_array_equal(sess.run(w), W0)
    sess.close()


def test_saver_def_version_v2_selects_the_tf_format(tmp_path):
    g = nd.Graph()
    w, step, words, saver = _model(g, {"write_version": nd.train.SaverDef.V2})
    with g.as_default():
        from_def = nd.train.Saver(saver_def=saver.as_saver_def())
    with nd.Session(graph=g) as sess:
        sess.run([v.initializer for v in (w, step, words)])
        path = from_def.save(sess, str(tmp_path / "m"), write_meta_graph=False)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "m.data-00000-of-00001",
                                            "m.index"]
    assert nd.train.load_variable(path, "step") == 5


# -- write_graph ---------------------------------------------------------------
def test_write_graph_text_and_binary(tmp_path):
    g = nd.Graph()
    with g.as_default():
        a = nd.constant([1.0, 2.0], name="a")
        nd.identity(a * 2.0, name="out")
    path = nd.train.write_graph(g, str(tmp_path / "new_dir"), "g.pbtxt")
    assert path == str(tmp_path / "new_dir" / "g.pbtxt")
    gd = text_format.Parse(_read_bytes(path).decode(), graph_pb2.GraphDef())
    assert [n.name for n in gd.node] == [n.name for n in g.as_graph_def().node]
    path = nd.train.write_graph(g.as_graph_def(), str(tmp_path), "g.pb",
                                as_text=False)
    gd = graph_pb2.GraphDef.FromString(_read_bytes(path))
    assert gd == g.as_graph_def()
    g2 = nd.Graph()
    with g2.as_default():
        nd.import_graph_def(gd, name="")
    with nd.Session(graph=g2) as sess:
        np.testing.assert_array_equal(sess.run("out:0"), [2.0, 4.0])


# -- checkpoint readers --------------------------------------------------------
def test_new_checkpoint_reader(tmp_path):
    *_, sess, path = _saved(tmp_path)
    sess.close()
    reader = nd.train.NewCheckpointReader(path)
    assert reader.has_tensor("layer/w") and not reader.has_tensor("nope")
    np.testing.assert_array_equal(reader.get_tensor("layer/w"), W0)
    assert reader.get_tensor("words").tolist() == [b"a", b"bc\x00"]
    assert reader.get_variable_to_shape_map() == {
        "layer/w": [2, 3], "step": [], "words": [2]}
    assert reader.get_variable_to_dtype_map() == {
        "layer/w": nd.float32, "step": nd.int64, "words": nd.string}
    assert reader.debug_string() == (b"layer/w (DT_FLOAT) [2,3]\nstep (DT_INT64) []\n"
                                     b"words (DT_STRING) [2]\n")
    with pytest.raises(nd.errors.NotFoundError, match="nope"):
        reader.get_tensor("nope")


def test_missing_checkpoint_is_not_found(tmp_path):
    with pytest.raises(nd.errors.NotFoundError):
        nd.train.NewCheckpointReader(str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="Couldn't find 'checkpoint' file"):
        nd.train.load_checkpoint(str(tmp_path))
    with pytest.raises(nd.errors.NotFoundError):
        nd.train.load_variable(str(tmp_path / "nothing"), "v")


def test_load_and_list_variables_from_a_directory(tmp_path):
    *_, sess, _ = _saved(tmp_path, global_step=3)
    sess.close()
    d = str(tmp_path)
    assert nd.train.list_variables(d) == [("layer/w", [2, 3]), ("step", []),
                                          ("words", [2])]
    np.testing.assert_array_equal(nd.train.load_variable(d, "layer/w:0"), W0)
    assert nd.train.load_checkpoint(d).get_tensor("step") == 5


def test_init_from_checkpoint(tmp_path):
    *_, sess, _ = _saved(tmp_path)
    sess.close()
    g = nd.Graph()
    with g.as_default():
        with nd.variable_scope("new"):
            w = nd.get_variable("w", [2, 3], initializer=nd.zeros_initializer())
        step = nd.Variable(np.int64(0), name="step")
        nd.train.init_from_checkpoint(str(tmp_path), {"layer/": "new/",
                                                      "step": step})
        init = nd.global_variables_initializer()
    with nd.Session(graph=g) as s:
        s.run(init)
        np.testing.assert_array_equal(s.run(w), W0)
        assert s.run(step) == 5
    with g.as_default(), pytest.raises(ValueError, match="missing"):
        nd.train.init_from_checkpoint(str(tmp_path), {"missing": step})


# -- SaveSliceInfo -------------------------------------------------------------
def test_partitioned_shards_have_save_slice_info():
    g = nd.Graph()
    with g.as_default():
        pv = nd.get_variable("emb", [10, 4], partitioner=nd.fixed_size_partitioner(2),
                             initializer=nd.zeros_initializer())
    infos = [shard._get_save_slice_info() for shard in pv]
    assert all(isinstance(i, nd.Variable.SaveSliceInfo) for i in infos)
    assert [i.full_name for i in infos] == ["emb", "emb"]
    assert [i.full_shape for i in infos] == [[10, 4], [10, 4]]
    assert [i.var_offset for i in infos] == [[0, 0], [5, 0]]
    assert [i.var_shape for i in infos] == [[5, 4], [5, 4]]
    assert [i.spec for i in infos] == ["10 4 0,5:0,4", "10 4 5,5:0,4"]
    info = nd.Variable.SaveSliceInfo("x", [4], [2], [2])
    assert info.spec == "4 2,2"


# -- meta graphs ---------------------------------------------------------------
def test_export_meta_graph_clears_extraneous_savers(tmp_path):
    g = nd.Graph()
    with g.as_default():
        v0 = nd.Variable(1.0, name="v0")
        nd.Variable(2.0, name="v1")
        saver0 = nd.train.Saver({"v0": v0}, name="saver0")
        saver1 = nd.train.Saver(name="saver1")
        nd.add_to_collection(nd.GraphKeys.SAVERS, saver0)
        nd.add_to_collection(nd.GraphKeys.SAVERS, saver1)
    full = saver1.export_meta_graph()
    assert any(n.name.startswith("saver0/") for n in full.graph_def.node)
    assert len(full.collection_def["savers"].bytes_list.value) == 2
    filename = str(tmp_path / "m.meta")
    mg = saver1.export_meta_graph(filename, clear_extraneous_savers=True)
    names = [n.name for n in mg.graph_def.node]
    assert not any(n.startswith("saver0/") for n in names)
    assert any(n.startswith("saver1/") for n in names)
    assert "savers" not in mg.collection_def
    assert mg.saver_def.restore_op_name == "saver1/restore_all"
    assert meta_graph_pb2.MetaGraphDef.FromString(_read_bytes(filename)) == mg


def test_savers_collection_round_trip(tmp_path):
    g, _, saver, sess, path = _saved(tmp_path)
    sess.close()
    with g.as_default():
        nd.add_to_collection(nd.GraphKeys.SAVERS, saver)
    mg = nd.train.export_meta_graph(graph=g)
    values = mg.collection_def["savers"].bytes_list.value
    assert [nd.train.SaverDef.FromString(v) for v in values] == [saver.as_saver_def()]
    g2 = nd.Graph()
    with g2.as_default():
        nd.train.import_meta_graph(mg, import_scope="imported")
        (restored,) = nd.get_collection(nd.GraphKeys.SAVERS)
    assert restored.as_saver_def().restore_op_name == "imported/save/restore_all"
    with nd.Session(graph=g2) as s:
        restored.restore(s, path)
        np.testing.assert_array_equal(s.run("imported/layer/w:0"), W0)


def test_import_meta_graph_into_a_scope(tmp_path):
    *_, sess, path = _saved(tmp_path)
    sess.close()
    g2 = nd.Graph()
    with g2.as_default():
        new_saver = nd.train.import_meta_graph(path + ".meta", import_scope="s1")
        assert g2.get_operation_by_name("s1/layer/w").type == "VariableV2"
        assert [v.op.name for v in nd.global_variables()] == [
            "s1/layer/w", "s1/step", "s1/words"]
        assert new_saver.as_saver_def().restore_op_name == "s1/save/restore_all"
    with nd.Session(graph=g2) as s:
        new_saver.restore(s, path)
        np.testing.assert_array_equal(s.run("s1/layer/w:0"), W0)


def test_import_meta_graph_without_variables_returns_none():
    g = nd.Graph()
    with g.as_default():
        nd.constant(1.0, name="c")
    mg = nd.train.export_meta_graph(graph=g)
    with nd.Graph().as_default():
        assert nd.train.import_meta_graph(mg) is None
    with nd.Graph().as_default():
        assert nd.train.import_meta_graph(mg, import_scope="x") is None


def test_variables_collection_is_tfs_variable_def(tmp_path):
    from nbdist.proto import variable_pb2

    g = nd.Graph()
    with g.as_default():
        nd.Variable(1.0, name="v", trainable=False)
    mg = nd.train.export_meta_graph(graph=g)
    (raw,) = mg.collection_def["variables"].bytes_list.value
    vd = variable_pb2.VariableDef.FromString(raw)
    assert (vd.variable_name, vd.snapshot_name, vd.initializer_name) == (
        "v:0", "v/read:0", "v/Assign")
    assert not vd.trainable


# -- checkpoint files, paths, errors -------------------------------------------
def test_checkpoint_exists_for_every_file_a_checkpoint_writes(tmp_path):
    *_, sess, path = _saved(tmp_path)
    g2 = nd.Graph()
    w, step, words, v2 = _model(g2, {"write_version": nd.train.SaverDef.V2})
    with nd.Session(graph=g2) as s2:
        s2.run([v.initializer for v in (w, step, words)])
        v2_path = v2.save(s2, str(tmp_path / "v2model"))
    sess.close()
    for p in (path, path + ".npz", path + ".meta", v2_path, v2_path + ".index",
              v2_path + ".data-00000-of-00001", v2_path + ".meta"):
        assert nd.train.checkpoint_exists(p), p
    assert not nd.train.checkpoint_exists(str(tmp_path / "other"))


def test_file_urls_are_accepted(tmp_path):
    g, (w, *_), saver, sess, _ = _saved(tmp_path)
    url = "file://" + str(tmp_path)
    path = saver.save(sess, url + "/model", global_step=9)
    assert path == str(tmp_path / "model-9")
    assert nd.train.latest_checkpoint(url) == path
    assert nd.train.checkpoint_exists("file://" + path)
    with g.as_default():
        sess.run(w.assign(np.zeros_like(W0)))
    saver.restore(sess, "file://" + path)
    np.testing.assert_array_equal(sess.run(w), W0)
    sess.close()


def test_restore_with_mismatched_shape_names_variable_and_shapes(tmp_path):
    *_, sess, path = _saved(tmp_path)
    sess.close()
    g = nd.Graph()
    with g.as_default():
        nd.Variable(np.zeros((3, 2), np.float32), name="layer/w")
        saver = nd.train.Saver()
    with nd.Session(graph=g) as s, pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"layer/w.*\[3,2\].*\[2,3\]"):
        saver.restore(s, path)
