"""Behaviour of the smaller TF1 namespaces: ``tf.io``'s tensor serialization
(byte-for-byte TF's TensorProtos), ``decode_compressed``/``decode_json_example``;
``tf.graph_util`` (a frozen graph computes what the variables did);
``summary.audio`` (a WAV TensorBoard reads); ``saved_model``'s classify/regress
signatures; ``data.get_output_*``; ``errors.raise_exception_on_not_ok_status``;
``train.VocabInfo``/``checkpoints_iterator``."""

from __future__ import annotations

import gzip
import io
import wave
import zlib

import numpy as np
import pytest

import nbdist as nd

tf = nd.compat.v1


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def run(x, feed=None):
    with nd.Session() as s:
        return s.run(x, feed)


def test_serialize_tensor_is_tfs_tensorproto_and_parses_back():
    # TF 2.21's serialize_tensor of constant([1.5, 2.0]).
    assert run(tf.io.serialize_tensor(nd.constant([1.5, 2.0]))) == (
        b"\x08\x01\x12\x04\x12\x02\x08\x02\"\x08\x00\x00\xc0?\x00\x00\x00@")
    ints = run(tf.io.parse_tensor(tf.io.serialize_tensor([[1, 2]]), nd.int32))
    assert ints.tolist() == [[1, 2]] and ints.dtype == np.int32
    words = run(tf.io.parse_tensor(tf.io.serialize_tensor(["a", "bc"]), nd.string))
    assert words.tolist() == [b"a", b"bc"]
    with pytest.raises(nd.errors.InvalidArgumentError, match="Type mismatch"):
        run(tf.io.parse_tensor(tf.io.serialize_tensor([1]), nd.float32))


def test_sparse_serialization_round_trip():
    sp = nd.SparseTensor([[0, 0], [0, 2], [1, 1]], [1.5, 2.5, 3.5], [2, 3])
    rows = tf.io.serialize_many_sparse(sp)
    assert rows.shape.as_list() == [None, 3]
    back = run(tf.io.deserialize_many_sparse(rows, nd.float32))
    assert back.indices.tolist() == [[0, 0], [0, 2], [1, 1]]
    assert back.values.tolist() == [1.5, 2.5, 3.5]
    assert back.dense_shape.tolist() == [2, 3]
    # Stacked serialize_sparse rows: a new first dimension, others the largest.
    a = tf.io.serialize_sparse(nd.SparseTensor([[0]], [1.0], [3]))
    b = tf.io.serialize_sparse(nd.SparseTensor([[4]], [2.0], [5]))
    both = run(tf.io.deserialize_many_sparse(nd.stack([a, b]), nd.float32))
    assert both.indices.tolist() == [[0, 0], [1, 4]]
    assert both.dense_shape.tolist() == [2, 5]


def test_decode_compressed_and_json_example():
    got = run(tf.io.decode_compressed([zlib.compress(b"hello")], "ZLIB"))
    assert got.tolist() == [b"hello"]
    assert run(tf.io.decode_compressed([gzip.compress(b"hi")], "GZIP")).tolist() == [
        b"hi"]
    with pytest.raises(nd.errors.InvalidArgumentError, match="Invalid ZLIB"):
        run(tf.io.decode_compressed([b"nope"], "ZLIB"))
    js = '{"features": {"feature": {"x": {"floatList": {"value": [1.5]}}}}}'
    parsed = tf.io.parse_example(tf.io.decode_json_example([js]),
                                 {"x": tf.io.FixedLenFeature([], nd.float32)})
    assert run(parsed["x"]).tolist() == [1.5]


def test_frozen_graph_computes_what_the_variables_did():
    g = nd.get_default_graph()
    v = nd.Variable([1.0, 2.0], name="v")
    nd.identity(nd.multiply(v, 3.0), name="y")
    nd.constant(7.0, name="unused")
    with nd.Session() as s:
        s.run(v.initializer)
        s.run(v.assign([4.0, 5.0]))
        frozen = tf.graph_util.convert_variables_to_constants(
            s, g.as_graph_def(), ["y"])
    assert "unused" not in {n.name for n in frozen.node}
    assert not {n.op for n in frozen.node} & {"VariableV2", "Assign"}
    trimmed = tf.graph_util.remove_training_nodes(frozen, protected_nodes=["y"])
    with nd.Graph().as_default():
        nd.import_graph_def(trimmed, name="")
        assert run("y:0").tolist() == [12.0, 15.0]
    with pytest.raises(AssertionError, match="not in graph"):
        tf.graph_util.extract_sub_graph(g.as_graph_def(), ["nope"])
    assert tf.graph_util.must_run_on_cpu(nd.constant(1).op)
    assert not tf.graph_util.must_run_on_cpu(nd.constant(1.0).op)
    assert tf.graph_util.tensor_shape_from_node_def_name(g, "y").as_list() == [2]


def test_audio_summary_is_a_wav():
    clip = np.sin(np.linspace(0, 20, 200)).astype(np.float32).reshape(1, 100, 2)
    value = nd.Summary.FromString(run(tf.summary.audio("c", clip, 8000.0))).value[0]
    assert value.tag == "c/audio/0" and value.audio.content_type == "audio/wav"
    with wave.open(io.BytesIO(value.audio.encoded_audio_string)) as w:
        assert (w.getnchannels(), w.getframerate(), w.getnframes()) == (2, 8000, 100)
        pcm = np.frombuffer(w.readframes(100), "<i2").reshape(100, 2)
    np.testing.assert_array_equal(pcm, np.clip(np.round(clip[0] * 32768), -32768,
                                               32767))
    with pytest.raises(ValueError, match="3-D or 2-D"):
        tf.summary.audio("c", np.zeros([2], np.float32), 8000.0)


def test_saved_model_signatures_and_constants():
    ex = nd.placeholder(nd.string, [None])
    sig = tf.saved_model.classification_signature_def(ex, None, nd.constant([1.0]))
    assert sig.method_name == "tensorflow/serving/classify"
    assert list(sig.inputs) == ["inputs"] and list(sig.outputs) == ["scores"]
    sig = tf.saved_model.regression_signature_def(ex, nd.constant([1.0]))
    assert list(sig.outputs) == ["outputs"]
    with pytest.raises(ValueError, match="string Tensor"):
        tf.saved_model.regression_signature_def(nd.constant(1.0), nd.constant(1.0))
    assert tf.saved_model.SAVED_MODEL_FILENAME_PB == "saved_model.pb"
    assert tf.saved_model.MAIN_OP_KEY == "saved_model_main_op"


def test_data_output_helpers_errors_and_train_names(tmp_path):
    ds = nd.data.Dataset.from_tensor_slices(([1, 2], [[1.0], [2.0]]))
    it = tf.data.make_one_shot_iterator(ds)
    assert tf.data.get_output_types(it) == (nd.int32, nd.float32)
    assert [s.as_list() for s in tf.data.get_output_shapes(ds)] == [[], [1]]
    with pytest.raises(nd.errors.NotFoundError, match="gone"):
        with tf.errors.raise_exception_on_not_ok_status() as status:
            status.code, status.message = tf.errors.NOT_FOUND, "gone"
    assert list(tf.train.checkpoints_iterator(str(tmp_path), timeout=0)) == []
    with pytest.raises(ValueError, match="axis"):
        tf.train.VocabInfo("new", 3, 0, "old", axis=2)
    assert tf.debugging.assert_same_float_dtype([nd.constant(1.0)]) is nd.float32
    with pytest.raises(TypeError, match="proper"):
        tf.debugging.assert_proper_iterable(np.zeros(2))
