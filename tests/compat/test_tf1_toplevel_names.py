"""TF1's remaining top-level names (issue 34).

* Each alias is the very object nbdist already has under a namespace
  (``nd.fft is nd.signal.fft``, ``nd.arg_max is nd.math.argmax`` ...).
* The small functions behave as TF 1.x graph mode does (values checked with
  TF 2.21's ``tf.compat.v1``): ``histogram_fixed_width``, ``clip_by_average_norm``,
  ``print``'s layout, ``make_template``'s sharing and naming, ``get_local_variable``,
  ``init_scope``, ``grad_pass_through``, ``get_static_value``, the enums and the
  graph-mode answers of the v2 switches.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import nbdist as nd

ALIASES = {
    "fft": "signal.fft", "ifft": "signal.ifft", "fft2d": "signal.fft2d",
    "ifft2d": "signal.ifft2d", "fft3d": "signal.fft3d", "ifft3d": "signal.ifft3d",
    "multinomial": "random.multinomial", "random_gamma": "random.gamma",
    "random_poisson": "random.poisson", "get_seed": "random.get_seed",
    "decode_compressed": "io.decode_compressed",
    "decode_json_example": "io.decode_json_example",
    "parse_tensor": "io.parse_tensor", "serialize_tensor": "io.serialize_tensor",
    "saturate_cast": "dtypes.saturate_cast",
    "string_to_hash_bucket": "strings.to_hash_bucket",
    "string_to_hash_bucket_strong": "strings.to_hash_bucket_strong",
    "string_strip": "strings.strip", "arg_max": "math.argmax",
    "arg_min": "math.argmin", "is_numeric_tensor": "debugging.is_numeric_tensor",
    "assert_same_float_dtype": "debugging.assert_same_float_dtype",
    "assert_proper_iterable": "debugging.assert_proper_iterable",
    "initialize_local_variables": "local_variables_initializer",
    "initialize_variables": "variables_initializer",
    "OpError": "errors.OpError", "NoGradient": "NotDifferentiable",
}


def _get(path):
    obj = nd
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_alias_is_the_namespaced_object(name):
    assert getattr(nd, name) is _get(ALIASES[name])


def test_compat_v1_sees_the_new_names():
    for name in ("make_template", "print", "histogram_fixed_width", "OpError"):
        assert getattr(nd.compat.v1, name) is getattr(nd, name)


def test_numeric_helpers_match_tf():
    with nd.Graph().as_default():
        vals = nd.constant([-1.0, 0.0, 1.5, 2.0, 5.0, 15.0])
        hist = nd.histogram_fixed_width(vals, [0.0, 5.0], nbins=5)
        bins = nd.histogram_fixed_width_bins(vals, [0.0, 5.0], nbins=5)
        t = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
        clipped = nd.clip_by_average_norm(nd.constant(t), 0.5)
        small = nd.clip_by_average_norm(nd.constant(t), 10.0)
        x = nd.constant(1.3)
        y = nd.grad_pass_through(nd.round)(x)
        grad = nd.gradients(y, x)[0]
        c = nd.to_complex128(nd.constant([1.0, 2.0]))
        with nd.Session() as sess:
            out = sess.run([hist, bins, clipped, small, y, grad, c])
    # TF 2.21 tf.compat.v1 gives these values for the same inputs.
    np.testing.assert_array_equal(out[0], [2, 1, 1, 0, 2])
    np.testing.assert_array_equal(out[1], [0, 0, 1, 2, 4, 4])
    avg = np.sqrt((t**2).sum()) / t.size
    np.testing.assert_allclose(out[2], t * 0.5 / avg, rtol=1e-6)
    np.testing.assert_allclose(out[3], t, rtol=1e-6)  # norm below 10: unchanged
    assert out[4] == 1.0 and out[5] == 1.0  # round forward, identity backward
    assert out[6].dtype == np.complex128


def test_print_is_an_op_with_tfs_layout():
    buf = io.StringIO()
    with nd.Graph().as_default():
        ops = [
            nd.print("x:", nd.constant([1, 2, 3]), "s", nd.constant("hi"),
                     output_stream=buf),
            nd.print(nd.range(10), output_stream=buf),
            nd.print(nd.reshape(nd.range(12), [3, 4]), nd.constant(1.5),
                     output_stream=buf),
        ]
        assert buf.getvalue() == ""  # building prints nothing
        with nd.Session() as sess:
            for op in ops:
                sess.run(op)
    # TF 2.21's PrintV2 output for the same three calls.
    assert buf.getvalue() == ('x: [1 2 3] s "hi"\n[0 1 2 ... 7 8 9]\n'
                              "[[0 1 2 3]\n [4 5 6 7]\n [8 9 10 11]] 1.5\n")


def test_make_template_shares_variables_and_names_as_tf():
    with nd.Graph().as_default():
        def scale(x):
            w = nd.get_variable("w", [], initializer=nd.constant_initializer(2.0))
            return x * w

        first = nd.make_template("layer", scale)
        y1, y2 = first(nd.constant(1.0)), first(nd.constant(3.0))
        nd.make_template("layer", scale)(nd.constant(1.0))
        names = [v.name for v in nd.global_variables()]
        with nd.Session() as sess:
            sess.run(nd.global_variables_initializer())
            assert sess.run([y1, y2]) == [2.0, 6.0]
    assert names == ["layer/w:0", "layer_1/w:0"]
    assert first.variable_scope_name == "layer"


def test_variable_helpers():
    with nd.Graph().as_default():
        loc = nd.get_local_variable("count", [2], initializer=nd.zeros_initializer())
        assert nd.local_variables() == [loc] and nd.trainable_variables() == []
        assert nd.moving_average_variables() == []
        v = nd.Variable(1.0)
        ema = nd.train.ExponentialMovingAverage(0.9)
        ema.apply([v])
        assert nd.moving_average_variables() == [v]
        check = nd.assert_variables_initialized([v])
        with nd.Session() as sess:
            with pytest.raises(nd.errors.FailedPreconditionError):
                sess.run(check)
            sess.run(v.initializer)
            sess.run(check)
        assert nd.no_regularizer(v) is None


def test_scopes_and_static_values():
    with nd.Graph().as_default():
        a = nd.constant(1.0)
        with nd.control_dependencies([a]):
            with nd.init_scope():
                free = nd.constant(2.0) + 1.0
            bound = nd.constant(2.0) + 1.0
        assert free.op.control_inputs == [] and bound.op.control_inputs == [a.op]
        with nd.op_scope([a], "outer"):
            assert nd.constant(0.0, name="c").name == "outer/c:0"
        with nd.variable_op_scope([a], None, default_name="vs"):
            assert nd.get_variable("v", []).name == "vs/v:0"
        np.testing.assert_array_equal(nd.get_static_value(nd.constant([1, 2])), [1, 2])
        assert nd.get_static_value(nd.placeholder(nd.float32)) is None
        assert nd.is_tensor(a) and not nd.is_tensor(1.0)
        ts = nd.timestamp()
        with nd.Session() as sess:
            assert abs(sess.run(ts) - __import__("time").time()) < 60


def test_enums_and_graph_mode_answers():
    assert nd.AggregationMethod.DEFAULT == nd.AggregationMethod.ADD_N == 0
    assert nd.VariableAggregation.ONLY_FIRST_TOWER is \
        nd.VariableAggregation.ONLY_FIRST_REPLICA
    assert nd.VariableSynchronization.ON_READ.value == 3
    assert nd.executing_eagerly_outside_functions() is False
    with nd.Graph().as_default():
        x = nd.constant(1.0)
        y = nd.constant(2.0)
        g = nd.gradients(y, x, unconnected_gradients=nd.UnconnectedGradients.ZERO)
        with nd.Session() as sess:
            assert sess.run(g) == [0.0]


def test_type_specs():
    with nd.Graph().as_default():
        spec = nd.TensorSpec([None, 3], nd.float32, name="x")
        # TF 2.21's repr and compatibility rules for the same specs.
        assert repr(spec) == "TensorSpec(shape=(None, 3), dtype=tf.float32, name='x')"
        assert spec.is_compatible_with(nd.zeros([2, 3]))
        assert not spec.is_compatible_with(nd.zeros([2, 4]))
        assert not spec.is_compatible_with(nd.zeros([2, 3], nd.int32))
        assert spec == nd.TensorSpec([None, 3], "float32", name="x")
        assert nd.TensorSpec.from_tensor(nd.zeros([2], name="z")) == \
            nd.TensorSpec([2], nd.float32, "z")
        sparse = nd.SparseTensor([[0, 0]], [1.0], [2, 3])
        assert nd.type_spec_from_value(sparse) == nd.SparseTensorSpec([2, 3])
        assert isinstance(nd.IndexedSlicesSpec([4, 2]), nd.TypeSpec)
        with pytest.raises(TypeError, match="Could not build a TypeSpec"):
            nd.type_spec_from_value(object())
        assert nd.is_symbolic_tensor(sparse) and not nd.is_symbolic_tensor(1)


def test_vectorized_map_and_conversion_registration():
    class Box:
        def __init__(self, value):
            self.value = value

    def box_to_tensor(box, dtype=None, name=None, as_ref=False):
        return nd.constant(box.value, dtype=dtype, name=name)

    nd.register_tensor_conversion_function(Box, box_to_tensor, priority=50)
    with nd.Graph().as_default():
        mapped = nd.vectorized_map(lambda row: row * 2.0,
                                   nd.constant([[1.0, 2.0], [3.0, 4.0]]))
        boxed = nd.add(Box(2.0), 1.0)
        with nd.Session() as sess:
            out = sess.run([mapped, boxed])
    np.testing.assert_array_equal(out[0], [[2.0, 4.0], [6.0, 8.0]])
    assert out[1] == 3.0


def test_create_partitioned_variables_names_and_shapes_as_tf():
    with nd.Graph().as_default():
        plain = nd.create_partitioned_variables([4, 2], [2, 1], nd.ones_initializer())
        emb = nd.create_partitioned_variables([5, 2], [2, 1], nd.ones_initializer(),
                                              name="emb")
        with pytest.raises(ValueError, match="must have the length"):
            nd.create_partitioned_variables([4], [2, 1], nd.ones_initializer())
        with nd.Session() as sess:
            sess.run(nd.global_variables_initializer())
            total = sum(sess.run(v).sum() for v in emb)
    # TF 2.21 gives these names and shapes (the first shard takes the extra row).
    assert [(v.name, v.shape.as_list()) for v in plain] == [
        ("PartitionedVariable/part_0:0", [2, 2]),
        ("PartitionedVariable/part_1:0", [2, 2]),
    ]
    assert [(v.name, v.shape.as_list()) for v in emb] == [
        ("emb/part_0:0", [3, 2]), ("emb/part_1:0", [2, 2])]
    assert total == 10.0


def test_add_check_numerics_ops_names_the_bad_tensor():
    with nd.Graph().as_default():
        x = nd.placeholder(nd.float32, [2], name="x")
        y = nd.log(x, name="lg")
        check = nd.add_check_numerics_ops()
        with nd.Session() as sess:
            np.testing.assert_allclose(sess.run([y, check], {x: [1.0, 2.0]})[0],
                                       np.log([1.0, 2.0]))
            with pytest.raises(nd.errors.InvalidArgumentError,
                               match="lg:0 : Tensor had Inf values"):
                sess.run(check, {x: [0.0, 2.0]})


def test_tensor_info_is_the_meta_graph_message():
    from nbdist.proto import meta_graph_pb2

    assert nd.TensorInfo is meta_graph_pb2.TensorInfo
