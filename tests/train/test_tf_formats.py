"""TensorFlow's model formats, both ways, without importing TensorFlow: V2
checkpoints (``.index`` table + ``.data`` file) and SavedModels.

The fixtures in tests/fixtures/tf/ were written by TensorFlow
(scripts/make_tf_fixtures.py, whose constants are repeated here as the
oracle); scripts/check_tf_reads_nbdist.py checks by hand that TensorFlow
reads what nbdist writes.
"""

from __future__ import annotations

import os
import shutil
import struct

import numpy as np
import pytest
from helpers import FIXTURES as TF_FIXTURES

import nbdist as nd
from nbdist.proto import saved_model_pb2, tensor_bundle_pb2, variable_pb2
from nbdist.train import table_format

FIXTURES = str(TF_FIXTURES)
TF_CKPT = os.path.join(FIXTURES, "ckpt", "model")
TF_SAVED_MODEL = os.path.join(FIXTURES, "saved_model")
DATA = ".data-00000-of-00001"

# The values scripts/make_tf_fixtures.py gave TensorFlow.
W = np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5
STEP = 42
NAMES = [b"alpha", b"\x00b\xffc"]
DENSE_W = np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]], dtype=np.float32)
DENSE_B = np.array([0.125, -4.0], dtype=np.float32)
EMB = np.arange(280, dtype=np.float32).reshape(140, 2) / 8
TF_PARTITIONED = os.path.join(FIXTURES, "partitioned", "model")
X = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]], dtype=np.float32)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _variables(g, zeros=False):
    with g.as_default():
        w = nd.Variable(np.zeros_like(W) if zeros else W, name="w")
        step = nd.Variable(np.int64(0 if zeros else STEP), name="step")
        names = nd.Variable(np.array([b"", b""] if zeros else NAMES, dtype=object),
                            name="names")
    return w, step, names


# -- TF's V2 checkpoint -> nbdist ----------------------------------------------
def test_restore_tf_v2_checkpoint():
    g = nd.Graph()
    w, step, names = _variables(g, zeros=True)
    with g.as_default():
        saver = nd.train.Saver()
    assert nd.train.latest_checkpoint(os.path.dirname(TF_CKPT)) == TF_CKPT
    with nd.Session(graph=g) as sess:
        saver.restore(sess, TF_CKPT)
        got_w, got_step, got_names = sess.run([w, step, names])
    np.testing.assert_array_equal(got_w, W)
    assert got_step == STEP and got_step.dtype == np.int64
    assert got_names.tolist() == NAMES


def test_reader_of_tf_checkpoint():
    reader = nd.train.NewCheckpointReader(TF_CKPT)
    assert reader.get_variable_to_shape_map() == {"w": [2, 3], "step": [],
                                                  "names": [2]}
    assert reader.get_variable_to_dtype_map() == {"w": nd.float32, "step": nd.int64,
                                                  "names": nd.string}
    np.testing.assert_array_equal(reader.get_tensor("w"), W)
    assert nd.train.list_variables(os.path.dirname(TF_CKPT)) == [
        ("names", [2]), ("step", []), ("w", [2, 3])]


def test_import_tf_meta_graph_and_restore():
    g = nd.Graph()
    with g.as_default():
        saver = nd.train.import_meta_graph(TF_CKPT + ".meta")
        assert [v.op.name for v in nd.global_variables()] == ["w", "step", "names"]
        # TF's SaveV2/RestoreV2 ops are left out; the saver keeps TF's format.
        assert not any(op.type in ("SaveV2", "RestoreV2")
                       for op in g.get_operations())
        assert saver.as_saver_def().version == nd.train.SaverDef.V2
    with nd.Session(graph=g) as sess:
        saver.restore(sess, TF_CKPT)
        got_w, got_step = sess.run(["w:0", "step:0"])
    np.testing.assert_array_equal(got_w, W)
    assert got_step == STEP


def test_restore_tf_partitioned_variable_saved_in_slices():
    from nbdist.train.tensor_bundle import slice_key

    # TF's key of rows 70..139 of emb: OrderedCode 0, "emb", rank 2, then
    # signed (start, length) per dimension.
    assert slice_key("emb", [(70, 70), (0, 2)]) == (
        b"\x00emb\x00\x01\x01\x02\xc0F\xc0F\x80\x82")
    np.testing.assert_array_equal(nd.train.load_variable(TF_PARTITIONED, "emb"), EMB)
    assert nd.train.list_variables(TF_PARTITIONED) == [("bias", [2]),
                                                      ("emb", [140, 2])]
    g = nd.Graph()
    with g.as_default():  # another partitioning than TF's two shards
        emb = nd.get_variable("emb", [140, 2], partitioner=nd.fixed_size_partitioner(3),
                              initializer=nd.zeros_initializer())
        bias = nd.Variable(np.zeros(2, np.float32), name="bias")
        saver = nd.train.Saver()
    with nd.Session(graph=g) as sess:
        saver.restore(sess, TF_PARTITIONED)
        shards = sess.run(list(emb))
        np.testing.assert_array_equal(sess.run(bias), DENSE_B)
    assert len(shards) == 3
    np.testing.assert_array_equal(np.concatenate(shards), EMB)


def test_tf_index_is_the_documented_table():
    entries = table_format.read_table(_read(TF_CKPT + ".index"))
    assert [k for k, _ in entries] == [b"", b"names", b"step", b"w"]
    header = tensor_bundle_pb2.BundleHeaderProto.FromString(entries[0][1])
    assert header.num_shards == 1 and header.version.producer == 1
    w = tensor_bundle_pb2.BundleEntryProto.FromString(entries[3][1])
    data = _read(TF_CKPT + DATA)
    raw = data[w.offset:w.offset + w.size]
    assert raw == W.astype("<f4").tobytes()
    assert table_format.unmask_crc32c(w.crc32c) == table_format.crc32c(raw)
    assert table_format.mask_crc32c(table_format.unmask_crc32c(w.crc32c)) == w.crc32c


# -- nbdist -> TF's V2 checkpoint ----------------------------------------------
def test_v2_checkpoint_is_byte_for_byte_tfs(tmp_path):
    g = nd.Graph()
    variables = _variables(g)
    with g.as_default():
        saver = nd.train.Saver(write_version=nd.train.SaverDef.V2)
    with nd.Session(graph=g) as sess:
        sess.run([v.initializer for v in variables])
        path = saver.save(sess, str(tmp_path / "model"), write_meta_graph=False)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model" + DATA,
                                            "model.index"]
    assert _read(path + ".index") == _read(TF_CKPT + ".index")
    assert _read(path + DATA) == _read(TF_CKPT + DATA)


def test_v2_round_trip_and_max_to_keep(tmp_path):
    g = nd.Graph()
    w, step, names = _variables(g)
    with g.as_default():
        saver = nd.train.Saver(write_version=nd.train.SaverDef.V2, max_to_keep=2)
        inc = step.assign_add(1)
    with nd.Session(graph=g) as sess:
        sess.run([v.initializer for v in (w, step, names)])
        paths = []
        for i in range(3):
            paths.append(saver.save(sess, str(tmp_path / "m"), global_step=i))
            sess.run(inc)
        assert nd.train.latest_checkpoint(str(tmp_path)) == paths[-1]
        saver.restore(sess, paths[-1])
        assert sess.run(step) == STEP + 2
    files = sorted(os.listdir(tmp_path))
    assert not any(f.startswith("m-0.") for f in files)
    assert {"m-1.index", "m-1" + DATA, "m-2.index", "m-2" + DATA} <= set(files)


def test_corrupt_v2_checkpoint_is_data_loss(tmp_path):
    prefix = str(tmp_path / "model")
    for suffix in (".index", DATA):
        shutil.copy(TF_CKPT + suffix, prefix + suffix)
    data = bytearray(_read(prefix + DATA))
    data[-1] ^= 0x01  # a bit of w
    with open(prefix + DATA, "wb") as f:
        f.write(bytes(data))
    reader = nd.train.NewCheckpointReader(prefix)
    assert reader.get_tensor("step") == STEP
    with pytest.raises(nd.errors.DataLossError, match="w: checksum mismatch"):
        reader.get_tensor("w")
    index = bytearray(_read(prefix + ".index"))
    index[10] ^= 0xFF
    with open(prefix + ".index", "wb") as f:
        f.write(bytes(index))
    with pytest.raises(nd.errors.DataLossError, match="checksum mismatch"):
        nd.train.NewCheckpointReader(prefix)


def test_table_spans_blocks_and_round_trips():
    # Enough bytes for several 256 KiB data blocks, keys sharing prefixes.
    entries = [(f"layer{i:04d}/kernel".encode(), bytes([i % 251]) * 1500)
               for i in range(600)]
    table = table_format.write_table(entries)
    assert table_format.read_table(table) == entries
    assert struct.unpack("<Q", table[-8:])[0] == table_format.MAGIC
    with pytest.raises(ValueError, match="increase"):
        table_format.write_table([(b"b", b""), (b"a", b"")])
    with pytest.raises(table_format.TableError, match="magic"):
        table_format.read_table(b"\x00" * 48)


# -- TF's SavedModel -> nbdist -------------------------------------------------
def _run_signature(export_dir):
    g = nd.Graph()
    with nd.Session(graph=g) as sess:
        mg = nd.saved_model.loader.load(
            sess, [nd.saved_model.tag_constants.SERVING], export_dir)
        sig = mg.signature_def[
            nd.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY]
        assert sig.method_name == nd.saved_model.signature_constants.PREDICT_METHOD_NAME
        x = nd.saved_model.utils.get_tensor_from_tensor_info(sig.inputs["x"], g)
        y = nd.saved_model.utils.get_tensor_from_tensor_info(sig.outputs["y"], g)
        return sess.run(y, {x: X})


def test_load_tf_saved_model_and_run_its_signature():
    np.testing.assert_allclose(_run_signature(TF_SAVED_MODEL), X @ DENSE_W + DENSE_B,
                               rtol=1e-6)


def test_load_with_unknown_tags_fails():
    with nd.Session(graph=nd.Graph()) as sess, pytest.raises(
            RuntimeError, match="could not be found in SavedModel"):
        nd.saved_model.loader.load(sess, ["train"], TF_SAVED_MODEL)
    assert nd.saved_model.loader.maybe_saved_model_directory(TF_SAVED_MODEL)
    assert not nd.saved_model.loader.maybe_saved_model_directory(FIXTURES)


# -- nbdist -> SavedModel ------------------------------------------------------
def _dense_graph():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float32, [None, 3], name="x")
        w = nd.Variable(DENSE_W, name="W")
        b = nd.Variable(DENSE_B, name="b")
        y = nd.nn.bias_add(nd.matmul(x, w), b, name="y")
    return g, x, y


def test_simple_save_writes_tfs_layout_and_loads_back(tmp_path):
    g, x, y = _dense_graph()
    export_dir = str(tmp_path / "export")
    with nd.Session(graph=g) as sess:
        sess.run(nd.variables_initializer(g.get_collection("variables")))
        nd.saved_model.simple_save(sess, export_dir, {"x": x}, {"y": y})
    files = sorted(os.path.relpath(os.path.join(d, f), export_dir)
                   for d, _, fs in os.walk(export_dir) for f in fs)
    assert files == ["saved_model.pb", "variables/variables" + DATA,
                     "variables/variables.index"]
    # The variables are TF's bundle of the same bytes TF writes for them.
    assert _read(os.path.join(export_dir, "variables", "variables.index")) == _read(
        os.path.join(TF_SAVED_MODEL, "variables", "variables.index"))
    sm = saved_model_pb2.SavedModel.FromString(
        _read(os.path.join(export_dir, "saved_model.pb")))
    assert sm.saved_model_schema_version == 1
    (mg,) = sm.meta_graphs
    assert list(mg.meta_info_def.tags) == ["serve"]
    assert not mg.HasField("saver_def")
    sig = mg.signature_def["serving_default"]
    assert (sig.inputs["x"].name, sig.outputs["y"].name) == ("x:0", "y:0")
    assert [d.size for d in sig.inputs["x"].tensor_shape.dim] == [-1, 3]
    names = [variable_pb2.VariableDef.FromString(v).variable_name
             for v in mg.collection_def["variables"].bytes_list.value]
    assert names == ["W:0", "b:0"]
    np.testing.assert_allclose(_run_signature(export_dir), X @ DENSE_W + DENSE_B,
                               rtol=1e-6)


def test_builder_text_format_main_op_and_second_meta_graph(tmp_path):
    g, x, y = _dense_graph()
    export_dir = str(tmp_path / "export")
    with g.as_default():
        counter = nd.Variable(0, name="counter")
        main_op = nd.group(nd.assign(counter, 7), name="main")
    with nd.Session(graph=g) as sess:
        sess.run(nd.variables_initializer(g.get_collection("variables")))
        builder = nd.saved_model.builder.SavedModelBuilder(export_dir)
        sig = nd.saved_model.signature_def_utils.build_signature_def(
            {"x": nd.saved_model.utils.build_tensor_info(x)},
            {"y": nd.saved_model.utils.build_tensor_info(y)},
            nd.saved_model.signature_constants.PREDICT_METHOD_NAME)
        assert nd.saved_model.signature_def_utils.is_valid_signature(sig)
        builder.add_meta_graph_and_variables(
            sess, ["serve"], signature_def_map={"serving_default": sig},
            main_op=main_op)
        with g.as_default():
            builder.add_meta_graph(["serve", "gpu"])
        path = builder.save(as_text=True)
    assert os.path.basename(path) == "saved_model.pbtxt"
    g2 = nd.Graph()
    with nd.Session(graph=g2) as sess:
        nd.saved_model.loader.load(sess, ["serve"], export_dir)
        assert sess.run("counter:0") == 7  # the main op ran after restoring
    with nd.Session(graph=nd.Graph()) as sess:
        mg = nd.saved_model.loader.load(sess, ["gpu", "serve"], export_dir)
        assert not mg.signature_def
    with pytest.raises(AssertionError, match="already exists"):
        nd.saved_model.builder.SavedModelBuilder(export_dir)


def test_tf1_program_with_compat_v1_names(tmp_path):
    tf = nd.compat.v1
    export_dir = str(tmp_path / "m")
    g, x, y = _dense_graph()
    with tf.Session(graph=g) as sess:
        sess.run(tf.global_variables_initializer())
        builder = tf.saved_model.Builder(export_dir)
        builder.add_meta_graph_and_variables(sess, [tf.saved_model.SERVING], {
            tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY:
                tf.saved_model.predict_signature_def({"x": x}, {"y": y})})
        builder.save()
    assert tf.saved_model.contains_saved_model(export_dir)
    with tf.Session(graph=tf.Graph()) as sess:
        mg = tf.saved_model.load(sess, [tf.saved_model.SERVING], export_dir)
        sig = mg.signature_def[tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY]
        got = sess.run(sig.outputs["y"].name, {sig.inputs["x"].name: X})
    np.testing.assert_allclose(got, X @ DENSE_W + DENSE_B, rtol=1e-6)


def test_saving_one_format_replaces_the_other(tmp_path):
    g = nd.Graph()
    w, step, names = _variables(g)
    with g.as_default():
        npz_saver = nd.train.Saver()
        v2_saver = nd.train.Saver(write_version=nd.train.SaverDef.V2)
        inc = step.assign_add(1)
    prefix = str(tmp_path / "m")
    with nd.Session(graph=g) as sess:
        sess.run([v.initializer for v in (w, step, names)])
        npz_saver.save(sess, prefix, write_meta_graph=False)
        sess.run(inc)
        v2_saver.save(sess, prefix, write_meta_graph=False)
        assert sorted(os.listdir(tmp_path)) == ["checkpoint", "m" + DATA, "m.index"]
        assert nd.train.load_variable(prefix, "step") == STEP + 1
        sess.run(inc)
        npz_saver.save(sess, prefix, write_meta_graph=False)
        assert sorted(os.listdir(tmp_path)) == ["checkpoint", "m.npz"]
        assert nd.train.load_variable(prefix, "step") == STEP + 2


@pytest.mark.parametrize("export_dir", ["tf", "nbdist"])
def test_load_saved_model_into_a_scope(tmp_path, export_dir):
    if export_dir == "tf":
        export_dir = TF_SAVED_MODEL
    else:
        g, x, y = _dense_graph()
        export_dir = str(tmp_path / "export")
        with nd.Session(graph=g) as sess:
            sess.run(nd.variables_initializer(g.get_collection("variables")))
            nd.saved_model.simple_save(sess, export_dir, {"x": x}, {"y": y})
    g = nd.Graph()
    with g.as_default():
        nd.Variable(1.0, name="unrelated")  # not in the SavedModel's checkpoint
    with nd.Session(graph=g) as sess:
        mg = nd.saved_model.loader.load(sess, ["serve"], export_dir,
                                        import_scope="m")
        sig = mg.signature_def["serving_default"]
        x = nd.saved_model.utils.get_tensor_from_tensor_info(sig.inputs["x"], g, "m")
        assert x.name == "m/x:0"
        y = nd.saved_model.utils.get_tensor_from_tensor_info(sig.outputs["y"], g, "m")
        np.testing.assert_allclose(sess.run(y, {x: X}), X @ DENSE_W + DENSE_B,
                                   rtol=1e-6)


def test_v2_directory_taken_over_by_a_new_saver(tmp_path):
    g = nd.Graph()
    variables = _variables(g)
    with g.as_default():
        first = nd.train.Saver(write_version=nd.train.SaverDef.V2, max_to_keep=2)
        second = nd.train.Saver(write_version=nd.train.SaverDef.V2, max_to_keep=2)
    prefix = str(tmp_path / "m")
    with nd.Session(graph=g) as sess:
        sess.run([v.initializer for v in variables])
        for step in (1, 2):
            first.save(sess, prefix, global_step=step, write_meta_graph=False)
        (tmp_path / "checkpoint").unlink()  # as if killed before the state file
        stale_temp = tmp_path / "m-3.index.abc123.tmp"
        stale_temp.write_bytes(b"half")
        os.utime(stale_temp, (0, 0))
        second.save(sess, prefix, global_step=3, write_meta_graph=False)
    assert sorted(os.listdir(tmp_path)) == [
        "checkpoint", "m-2" + DATA, "m-2.index", "m-3" + DATA, "m-3.index"]
    assert second.last_checkpoints == [prefix + "-2", prefix + "-3"]
