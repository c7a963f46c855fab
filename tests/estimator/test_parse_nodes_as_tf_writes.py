"""The Example-parsing nodes as TensorFlow 2.x writes them, so that a SavedModel
exported with a parsing serving-input receiver
(``build_parsing_serving_input_receiver_fn``) loads in TensorFlow, and TF's
parsing graphs import into nbdist.

The expected nodes are facts read from TF 2.21 (``tf.compat.v1.io.parse_example``
and ``parse_sequence_example`` in a ``tf.Graph``, ``as_graph_def()``):

- ``parse_example`` and ``parse_single_example`` write one ``ParseExampleV2``
  node; its inputs are ``serialized``, then four string vectors ``names`` (empty),
  ``sparse_keys``, ``dense_keys`` and ``ragged_keys`` (empty), then one default
  per dense key; its attrs are exactly ``Tdense``, ``num_sparse``,
  ``sparse_types``, ``ragged_value_types``, ``ragged_split_types`` and
  ``dense_shapes``. Keys are sorted; a ``FixedLenSequenceFeature``'s dense shape
  has a leading -1 and its default is a scalar (0), a required feature's default
  is an empty vector, a default value has the feature's shape.
- ``parse_sequence_example`` writes ``ParseSequenceExampleV2`` with inputs
  ``serialized``, ``debug_name``, the context sparse/dense/ragged keys, the
  feature-list sparse/dense/ragged keys, the bool vector
  ``feature_list_dense_missing_assumed_empty`` and the context defaults.

- TF 1.x graphs hold the first versions: ``ParseExample`` (each key a scalar
  string input; attrs ``Nsparse``, ``Ndense``, ``sparse_types``, ``Tdense``,
  ``dense_shapes``), ``ParseSingleExample`` (keys in attrs) and
  ``ParseSingleSequenceExample``; nbdist imports and runs them.

The checker ``scripts/check_tf_serves_canned.py`` shows TF 2.21 serving such a
SavedModel with nbdist's predictions.
"""

from __future__ import annotations

import numpy as np

import nbdist as nd
from nbdist.framework.tensor_util import make_ndarray

DT_FLOAT, DT_STRING, DT_INT64, DT_BOOL = 1, 7, 9, 10


def _node(graph_def, op):
    (node,) = [n for n in graph_def.node if n.op == op]
    return node


def _const(graph_def, name):
    """The value of the Const node feeding input ``name``."""
    (node,) = [n for n in graph_def.node if n.name == name.split(":")[0]]
    assert node.op == "Const", name
    return make_ndarray(node.attr["value"].tensor)


def _dims(shape_proto):
    return [d.size for d in shape_proto.dim]


def _example(floats=(), ints=(), strings=()):
    """A serialized Example of float, int64 and bytes features, each a
    (key, values) pair."""
    kinds = [("float_list", nd.train.FloatList, floats),
             ("int64_list", nd.train.Int64List, ints),
             ("bytes_list", nd.train.BytesList, strings)]
    feature = {key: nd.train.Feature(**{kind: cls(value=values)})
               for kind, cls, pairs in kinds for key, values in pairs}
    return nd.train.Example(features=nd.train.Features(
        feature=feature)).SerializeToString()


FEATURES = {"a": nd.io.FixedLenFeature([2], nd.float32, default_value=[1.0, 2.0]),
            "b": nd.io.VarLenFeature(nd.int64),
            "c": nd.io.FixedLenFeature([], nd.string),
            "d": nd.io.FixedLenSequenceFeature([], nd.int64, allow_missing=True)}


def test_parsing_receiver_writes_parse_example_v2_as_tf_and_runs_reimported():
    receiver = nd.estimator.export.build_parsing_serving_input_receiver_fn(FEATURES)
    g = nd.Graph()
    with g.as_default():
        features = receiver().features
    gd = g.as_graph_def()
    node = _node(gd, "ParseExampleV2")
    assert not [n for n in gd.node if n.op in ("ParseExample", "ParseSingleExample")]
    assert node.input[0] == "input_example_tensor"
    assert len(node.input) == 5 + 3
    keys = [_const(gd, i) for i in node.input[1:5]]
    assert [k.shape for k in keys] == [(0,), (1,), (3,), (0,)]
    assert [k.tolist() for k in keys[1:3]] == [[b"b"], [b"a", b"c", b"d"]]
    defaults = [_const(gd, i) for i in node.input[5:]]
    assert defaults[0].tolist() == [1.0, 2.0] and defaults[0].dtype == np.float32
    assert defaults[1].shape == (0,)
    assert defaults[2].shape == () and defaults[2] == 0
    assert defaults[2].dtype == np.int64
    assert sorted(node.attr) == ["Tdense", "dense_shapes", "num_sparse",
                                 "ragged_split_types", "ragged_value_types",
                                 "sparse_types"]
    assert list(node.attr["Tdense"].list.type) == [DT_FLOAT, DT_STRING, DT_INT64]
    assert node.attr["num_sparse"].i == 1
    assert list(node.attr["sparse_types"].list.type) == [DT_INT64]
    for empty in ("ragged_value_types", "ragged_split_types"):
        assert node.attr[empty].HasField("list")
        assert not node.attr[empty].list.type
    assert [_dims(s) for s in node.attr["dense_shapes"].list.shape] == [
        [2], [], [-1]]
    assert features["d"].shape.as_list() == [None, None]

    # The GraphDef imports back (keys read from the Const inputs) and parses.
    g2 = nd.Graph()
    with g2.as_default():
        nd.import_graph_def(gd, name="")
        with nd.Session(graph=g2) as s:
            feed = {"input_example_tensor:0": [
                _example(ints=[("b", [5, 6]), ("d", [1, 2, 3])],
                         strings=[("c", [b"x"])]),
                _example(floats=[("a", [3.0, 4.0])], strings=[("c", [b"y"])])]}
            a, c, d, b_values = s.run(
                [features[k].name for k in "acd"] + [features["b"].values.name],
                feed)
    assert a.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert c.tolist() == [b"x", b"y"]
    assert d.tolist() == [[1, 2, 3], [0, 0, 0]]
    assert b_values.tolist() == [5, 6]


def test_parse_single_example_is_parse_example_v2_of_a_scalar():
    g = nd.Graph()
    with g.as_default():
        s = nd.placeholder(nd.string, [], name="s")
        out = nd.io.parse_single_example(s, {
            "a": nd.io.FixedLenFeature([2], nd.float32),
            "b": nd.io.VarLenFeature(nd.int64)})
        with nd.Session() as sess:
            a, b = sess.run([out["a"], out["b"]],
                            {s: _example(floats=[("a", [1.5, 2.5])],
                                         ints=[("b", [7])])})
    node = _node(g.as_graph_def(), "ParseExampleV2")
    assert node.input[0] == "s" and len(node.input) == 6
    assert _const(g.as_graph_def(), node.input[5]).shape == (0,)
    assert [_dims(x) for x in node.attr["dense_shapes"].list.shape] == [[2]]
    assert a.tolist() == [1.5, 2.5]
    assert b.indices.tolist() == [[0]] and b.dense_shape.tolist() == [1]


def test_parse_sequence_example_writes_parse_sequence_example_v2_as_tf():
    g = nd.Graph()
    with g.as_default():
        s = nd.placeholder(nd.string, [None], name="s")
        nd.io.parse_sequence_example(
            s, {"a": nd.io.FixedLenFeature([], nd.float32)},
            {"x": nd.io.FixedLenSequenceFeature([], nd.float32),
             "y": nd.io.VarLenFeature(nd.int64)})
    gd = g.as_graph_def()
    node = _node(gd, "ParseSequenceExampleV2")
    assert not [n for n in gd.node if n.op in ("ParseSequenceExample",
                                               "ParseSingleSequenceExample")]
    assert node.input[0] == "s" and len(node.input) == 9 + 1
    keys = [_const(gd, i).tolist() for i in node.input[1:8]]
    assert keys == [[], [], [b"a"], [], [b"y"], [b"x"], []]
    missing = _const(gd, node.input[8])
    assert missing.dtype == np.bool_ and missing.tolist() == [False]
    assert _const(gd, node.input[9]).shape == (0,)
    assert sorted(node.attr) == sorted([
        "Ncontext_sparse", "Tcontext_dense", "context_sparse_types",
        "context_ragged_value_types", "context_ragged_split_types",
        "context_dense_shapes", "Nfeature_list_sparse", "Nfeature_list_dense",
        "feature_list_dense_types", "feature_list_sparse_types",
        "feature_list_ragged_value_types", "feature_list_ragged_split_types",
        "feature_list_dense_shapes"])
    ints = {k: node.attr[k].i for k in ("Ncontext_sparse", "Nfeature_list_sparse",
                                        "Nfeature_list_dense")}
    assert ints == {"Ncontext_sparse": 0, "Nfeature_list_sparse": 1,
                    "Nfeature_list_dense": 1}
    assert list(node.attr["Tcontext_dense"].list.type) == [DT_FLOAT]
    assert list(node.attr["feature_list_sparse_types"].list.type) == [DT_INT64]
    assert list(node.attr["feature_list_dense_types"].list.type) == [DT_FLOAT]
    assert [_dims(x) for x in node.attr["feature_list_dense_shapes"].list.shape] == [
        []]
    assert [_dims(x) for x in node.attr["context_dense_shapes"].list.shape] == [[]]


def _graph_def(*nodes):
    """A GraphDef of (name, op, inputs, attrs) nodes, attrs as Python values."""
    from nbdist.framework.node_def import python_to_attr_value
    from nbdist.proto import graph_pb2

    gd = graph_pb2.GraphDef()
    for name, op, inputs, attrs in nodes:
        node = gd.node.add(name=name, op=op, input=inputs)
        for k, (v, kind) in attrs.items():
            node.attr[k].CopyFrom(python_to_attr_value(v, kind))
    return gd


def _const_node(name, value, dtype):
    value = np.asarray(value, dtype=object if dtype is nd.string else
                       dtype.as_numpy_dtype)
    return (name, "Const", [], {"value": (value, "tensor"), "dtype": (dtype, "type")})


def test_tf1_parse_example_and_parse_single_example_nodes_import_and_run():
    # As TF 1.x writes them: ParseExample takes each key as a scalar string
    # input (attrs Nsparse, Ndense, sparse_types, Tdense, dense_shapes);
    # ParseSingleExample has the keys in attrs. TF 2.21 runs this graph to
    # the values asserted below.
    string = (nd.string, "type")
    gd = _graph_def(
        ("s", "Placeholder", [], {"dtype": string}),
        ("s1", "Placeholder", [], {"dtype": string}),
        _const_node("names", [], nd.string), _const_node("kb", b"b", nd.string),
        _const_node("ka", b"a", nd.string), _const_node("kd", b"d", nd.string),
        _const_node("da", [1.0, 2.0], nd.float32), _const_node("dd", 0, nd.int64),
        _const_node("none", np.zeros([0], np.float32), nd.float32),
        ("v1", "ParseExample", ["s", "names", "kb", "ka", "kd", "da", "dd"], {
            "Nsparse": (1, "int"), "Ndense": (2, "int"),
            "sparse_types": ([nd.int64], "list(type)"),
            "Tdense": ([nd.float32, nd.int64], "list(type)"),
            "dense_shapes": ([nd.TensorShape([2]), nd.TensorShape([None])],
                             "list(shape)")}),
        ("single", "ParseSingleExample", ["s1", "none"], {
            "num_sparse": (1, "int"), "sparse_keys": (["b"], "list(string)"),
            "dense_keys": (["a"], "list(string)"),
            "sparse_types": ([nd.int64], "list(type)"),
            "Tdense": ([nd.float32], "list(type)"),
            "dense_shapes": ([nd.TensorShape([2])], "list(shape)")}))
    g = nd.Graph()
    with g.as_default():
        nd.import_graph_def(gd, name="")
        with nd.Session(graph=g) as sess:
            got = sess.run(["v1:0", "v1:1", "v1:2", "v1:3", "v1:4"], {"s:0": [
                _example(ints=[("b", [5, 6]), ("d", [1, 2, 3])]),
                _example(floats=[("a", [3.0, 4.0])])]})
            one = sess.run(["single:0", "single:1", "single:3"], {
                "s1:0": _example(floats=[("a", [1.5, 2.5])], ints=[("b", [7])])})
    assert [v.tolist() for v in got] == [[[0, 0], [0, 1]], [5, 6], [2, 2],
                                         [[1.0, 2.0], [3.0, 4.0]],
                                         [[1, 2, 3], [0, 0, 0]]]
    assert [v.tolist() for v in one] == [[[0]], [7], [1.5, 2.5]]


def test_tf1_parse_single_sequence_example_node_imports_and_runs():
    # TF 1.x's ParseSingleSequenceExample: inputs serialized, the keys of the
    # feature lists that may be missing, each key a scalar string, the context
    # defaults, debug_name; outputs without lengths. TF 2.21 runs this graph to
    # the values asserted below.
    fl = {"x": nd.train.FeatureList(feature=[nd.train.Feature(
              float_list=nd.train.FloatList(value=[v])) for v in (1.0, 2.0)]),
          "y": nd.train.FeatureList(feature=[nd.train.Feature(
              int64_list=nd.train.Int64List(value=v)) for v in ([4, 5], [6])])}
    serialized = nd.train.SequenceExample(feature_lists=nd.train.FeatureLists(
        feature_list=fl)).SerializeToString()
    types = ("list(type)", "list(shape)")
    gd = _graph_def(
        ("s1", "Placeholder", [], {"dtype": (nd.string, "type")}),
        _const_node("may_miss", np.zeros([0], object), nd.string),
        _const_node("kc", b"c", nd.string), _const_node("ky", b"y", nd.string),
        _const_node("kx", b"x", nd.string), _const_node("dc", 9.0, nd.float32),
        _const_node("debug", b"", nd.string),
        ("seq", "ParseSingleSequenceExample",
         ["s1", "may_miss", "kc", "ky", "kx", "dc", "debug"], {
             "Ncontext_sparse": (0, "int"), "Ncontext_dense": (1, "int"),
             "Nfeature_list_sparse": (1, "int"), "Nfeature_list_dense": (1, "int"),
             "context_sparse_types": ([], types[0]),
             "Tcontext_dense": ([nd.float32], types[0]),
             "feature_list_dense_types": ([nd.float32], types[0]),
             "context_dense_shapes": ([nd.TensorShape([])], types[1]),
             "feature_list_sparse_types": ([nd.int64], types[0]),
             "feature_list_dense_shapes": ([nd.TensorShape([])], types[1])}))
    g = nd.Graph()
    with g.as_default():
        nd.import_graph_def(gd, name="")
        with nd.Session(graph=g) as sess:
            got = sess.run([f"seq:{i}" for i in range(5)], {"s1:0": serialized})
    # context c (its default), then y's indices, values, shape, then x.
    assert [np.asarray(v).tolist() for v in got] == [
        9.0, [[0, 0], [0, 1], [1, 0]], [4, 5, 6], [2, 2], [1.0, 2.0]]
