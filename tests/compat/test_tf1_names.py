"""Small TF1 top-level names and TF1's ``tensorflow.python`` module paths.

* Version constants (``VERSION``, ``GIT_VERSION``/``__git_version__``,
  ``GRAPH_DEF_VERSION`` ...), proto classes (``nd.NodeDef``, ``nd.GraphDef``,
  ``nd.train.ServerDef`` ...), ``nd.logging``.
* TF1's initializers with TF's formulas and defaults, and ``nd.initializers``.
* TF2's ``nd.distribute.experimental.partitioners``.
* ``get_variable(initializer=0)`` is an int32 variable; a value initializer
  whose dtype differs from an explicit ``dtype`` is a ValueError.
* ``from nbdist.python.<pkg> import <module>`` for the paths TF1 programs use.
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()


def run(x):
    with nd.Session() as sess:
        return sess.run(x)


# -- versions, protos, logging ---------------------------------------------------------
def test_version_constants():
    assert nd.VERSION == nd.__version__
    assert nd.GIT_VERSION == nd.__git_version__ and nd.__version__ in nd.GIT_VERSION
    assert isinstance(nd.COMPILER_VERSION, str)
    assert nd.__compiler_version__ == nd.COMPILER_VERSION
    assert nd.CXX11_ABI_FLAG == 0 and nd.MONOLITHIC_BUILD == 0
    assert nd.GRAPH_DEF_VERSION_MIN_CONSUMER <= nd.GRAPH_DEF_VERSION
    assert nd.GRAPH_DEF_VERSION_MIN_PRODUCER <= nd.GRAPH_DEF_VERSION
    nd.constant(1.0)
    gd = nd.get_default_graph().as_graph_def()
    assert gd.versions.producer == nd.GRAPH_DEF_VERSION
    for name in ("VERSION", "GIT_VERSION", "COMPILER_VERSION", "GRAPH_DEF_VERSION",
                 "GRAPH_DEF_VERSION_MIN_CONSUMER", "GRAPH_DEF_VERSION_MIN_PRODUCER",
                 "CXX11_ABI_FLAG", "MONOLITHIC_BUILD"):
        assert getattr(nd.version, name) == getattr(nd, name), name


def test_proto_classes_at_top_level_and_in_train():
    gd = nd.GraphDef()
    node = gd.node.add()
    assert isinstance(node, nd.NodeDef)
    node.name, node.op = "c", "Const"
    assert nd.GraphDef.FromString(gd.SerializeToString()).node[0].name == "c"
    assert isinstance(nd.get_default_graph().as_graph_def(), nd.GraphDef)
    for name in ("AttrValue", "MetaGraphDef", "Summary", "SummaryMetadata",
                 "HistogramProto", "Event", "SessionLog", "LogMessage"):
        assert hasattr(getattr(nd, name), "SerializeToString"), name
    cluster = nd.train.ClusterSpec({"worker": ["localhost:2222"]}).as_cluster_def()
    assert isinstance(cluster, nd.train.ClusterDef)
    assert isinstance(cluster.job[0], nd.train.JobDef)
    sd = nd.train.ServerDef(cluster=cluster, job_name="worker", task_index=0,
                            protocol="grpc")
    assert nd.train.ServerDef.FromString(sd.SerializeToString()).job_name == "worker"
    assert hasattr(nd.train.SaverDef(), "filename_tensor_name")
    server = nd.Server.create_local_server()
    try:
        assert isinstance(server.server_def, nd.train.ServerDef)
    finally:
        server.stop()


def test_logging_at_top_level_is_compat_v1_logging():
    assert nd.logging is nd.compat.v1.logging
    assert nd.logging.INFO < nd.logging.WARN < nd.logging.ERROR
    for name in ("info", "warning", "error", "debug", "set_verbosity",
                 "get_verbosity", "log_every_n", "log_first_n"):
        assert callable(getattr(nd.logging, name)), name


# -- initializers ----------------------------------------------------------------------
def test_initializer_names_and_tf1_aliases():
    for name in ("truncated_normal_initializer", "random_uniform_initializer",
                 "uniform_unit_scaling_initializer", "variance_scaling_initializer",
                 "glorot_normal_initializer", "glorot_uniform_initializer",
                 "orthogonal_initializer", "zeros_initializer", "ones_initializer",
                 "constant_initializer", "random_normal_initializer"):
        assert isinstance(getattr(nd, name), type), name
    init = nd.initializers
    assert init.zeros is nd.zeros_initializer and init.ones is nd.ones_initializer
    assert init.constant is nd.constant_initializer
    assert init.truncated_normal is nd.truncated_normal_initializer
    assert init.variance_scaling is nd.variance_scaling_initializer
    assert init.glorot_uniform is nd.glorot_uniform_initializer
    assert init.glorot_normal is nd.glorot_normal_initializer
    assert init.orthogonal is nd.orthogonal_initializer
    assert init.uniform_unit_scaling is nd.uniform_unit_scaling_initializer
    assert init.random_normal is nd.random_normal_initializer
    assert init.random_uniform is nd.random_uniform_initializer
    assert init.global_variables is nd.global_variables_initializer
    assert init.local_variables is nd.local_variables_initializer
    assert init.variables is nd.variables_initializer
    assert nd.compat.v1.initializers is init
    with pytest.raises(AttributeError, match="tf.initializers.nonexistent"):
        init.nonexistent  # noqa: B018


def test_defaults_are_tfs():
    vs = nd.variance_scaling_initializer().get_config()
    assert vs == {"scale": 1.0, "mode": "fan_in", "distribution": "truncated_normal",
                  "seed": None, "dtype": "float32"}
    assert nd.truncated_normal_initializer().get_config() == {
        "mean": 0.0, "stddev": 1.0, "seed": None, "dtype": "float32"}
    assert nd.uniform_unit_scaling_initializer().get_config()["factor"] == 1.0
    assert nd.orthogonal_initializer().get_config()["gain"] == 1.0
    he = nd.initializers.he_normal().get_config()
    assert (he["scale"], he["mode"], he["distribution"]) == (
        2.0, "fan_in", "truncated_normal")
    lu = nd.initializers.lecun_uniform().get_config()
    assert (lu["scale"], lu["mode"], lu["distribution"]) == (1.0, "fan_in", "uniform")


def test_bad_variance_scaling_arguments_are_value_errors():
    with pytest.raises(ValueError, match="scale"):
        nd.variance_scaling_initializer(scale=0.0)
    with pytest.raises(ValueError, match="mode"):
        nd.variance_scaling_initializer(mode="fan_sideways")
    with pytest.raises(ValueError, match="distribution"):
        nd.variance_scaling_initializer(distribution="cauchy")
    with pytest.raises(ValueError, match="floating"):
        nd.truncated_normal_initializer(dtype=nd.int32)


def test_truncated_normal_initializer_stays_within_two_stddevs():
    x = run(nd.truncated_normal_initializer(mean=1.0, stddev=0.5, seed=3)([20000]))
    assert x.dtype == np.float32
    assert x.min() >= 0.0 and x.max() <= 2.0
    # N(0,1) truncated to [-2, 2] has std 0.8796 (scipy.stats.truncnorm.std(-2, 2))
    assert abs(x.mean() - 1.0) < 0.02 and abs(x.std() - 0.5 * 0.87962566) < 0.02


@pytest.mark.parametrize("mode,n", [("fan_in", 300), ("fan_out", 50),
                                    ("fan_avg", 175)])
def test_variance_scaling_uniform_has_tfs_limit(mode, n):
    init = nd.variance_scaling_initializer(scale=2.0, mode=mode,
                                           distribution="uniform", seed=1)
    x = run(init([300, 50]))
    limit = math.sqrt(3.0 * 2.0 / n)
    assert x.min() >= -limit and x.max() <= limit
    assert abs(x.std() - limit / math.sqrt(3.0)) < 0.03 * limit


def test_variance_scaling_normals_and_conv_fans():
    # conv kernel [3, 3, 16, 32]: fan_in = 3*3*16 = 144
    x = run(nd.variance_scaling_initializer(seed=2)([3, 3, 16, 32]))
    stddev = math.sqrt(1.0 / 144)
    assert np.abs(x).max() <= 2 * stddev / 0.87962566 + 1e-6
    assert abs(x.std() - stddev) < 0.05 * stddev
    y = run(nd.variance_scaling_initializer(
        distribution="untruncated_normal", seed=2)([144, 200]))
    assert abs(y.std() - stddev) < 0.05 * stddev
    g = run(nd.glorot_normal_initializer(seed=4)([100, 300]))
    assert abs(g.std() - math.sqrt(2.0 / 400)) < 0.05 * math.sqrt(2.0 / 400)


def test_uniform_unit_scaling_limit():
    x = run(nd.uniform_unit_scaling_initializer(factor=1.5, seed=5)([4, 5, 30]))
    limit = 1.5 * math.sqrt(3.0 / 20)  # input size: all dims but the last
    assert x.min() >= -limit and x.max() <= limit and x.max() > 0.9 * limit


@pytest.mark.parametrize("shape", [[6, 4], [4, 6], [2, 3, 5]])
def test_orthogonal_initializer_gives_orthonormal_rows_or_columns(shape):
    x = run(nd.orthogonal_initializer(gain=2.0, seed=7)(shape))
    assert list(x.shape) == shape
    flat = x.reshape(-1, shape[-1])
    small = flat.T @ flat if flat.shape[0] >= flat.shape[1] else flat @ flat.T
    np.testing.assert_allclose(small, 4.0 * np.eye(small.shape[0]), atol=1e-4)
    with pytest.raises(ValueError, match="two-dimensional"):
        nd.orthogonal_initializer()([3])


def test_seeded_initializers_repeat_and_identity_initializer():
    a = nd.get_variable("a", [3, 4], initializer=nd.orthogonal_initializer(seed=1))
    b = nd.get_variable("b", [3, 4], initializer=nd.orthogonal_initializer(seed=1))
    c = nd.get_variable("c", [2, 3], initializer=nd.initializers.identity(gain=2.0))
    with nd.Session() as sess:
        sess.run(nd.global_variables_initializer())
        av, bv, cv = sess.run([a, b, c])
    np.testing.assert_array_equal(av, bv)
    np.testing.assert_array_equal(cv, 2.0 * np.eye(2, 3))


# -- partitioners ----------------------------------------------------------------------
def test_tf2_partitioners():
    P = nd.distribute.experimental.partitioners
    shape = nd.TensorShape([10, 4])
    assert P.FixedShardsPartitioner(3)(shape, nd.float32) == [3, 1]
    assert P.FixedShardsPartitioner(30)(shape, nd.float32) == [10, 1]
    assert P.FixedShardsPartitioner(3)(shape, nd.float32, axis=1) == [1, 3]
    # float32 rows of 4 are 16 bytes
    assert P.MinSizePartitioner(min_shard_bytes=16, max_shards=4)(
        shape, nd.float32) == [4, 1]
    assert P.MinSizePartitioner(min_shard_bytes=16, max_shards=4)(
        shape, nd.float32, axis=1) == [1, 4]
    assert P.MinSizePartitioner()(nd.TensorShape([1000, 1000]), nd.float32) == [1, 1]
    assert P.MaxSizePartitioner(max_shard_bytes=16)(shape, nd.float32) == [10, 1]
    assert P.MaxSizePartitioner(max_shard_bytes=16, max_shards=3)(
        shape, nd.float32) == [3, 1]
    assert P.MaxSizePartitioner(max_shard_bytes=40)(shape, nd.string) == [10, 1]
    for bad in (lambda: P.MinSizePartitioner(min_shard_bytes=0),
                lambda: P.MinSizePartitioner(max_shards=0),
                lambda: P.MaxSizePartitioner(max_shard_bytes=0),
                lambda: P.MaxSizePartitioner(16, max_shards=0)):
        with pytest.raises(ValueError, match="must be positive"):
            bad()
    assert issubclass(P.MaxSizePartitioner, P.Partitioner)


def test_a_tf2_partitioner_shards_a_tf1_variable():
    P = nd.distribute.experimental.partitioners
    init = 2.0 * np.eye(10, 4, dtype=np.float32)
    v = nd.get_variable("pv", [10, 4], initializer=nd.initializers.identity(2.0),
                        partitioner=P.FixedShardsPartitioner(3))
    assert [s.shape.as_list() for s in v] == [[4, 4], [3, 4], [3, 4]]
    with nd.Session() as sess:
        sess.run(nd.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(nd.convert_to_tensor(v)), init)


# -- get_variable dtype inference ------------------------------------------------------
def test_get_variable_takes_the_dtype_of_a_value_initializer():
    assert nd.get_variable("i", initializer=0).dtype.base_dtype == nd.int32
    assert nd.get_variable("l", initializer=[1, 2]).dtype.base_dtype == nd.int32
    assert nd.get_variable("f", initializer=1.5).dtype.base_dtype == nd.float32
    assert nd.get_variable("d", initializer=np.zeros(3)).dtype.base_dtype == (
        nd.float64)
    t = nd.constant(2, dtype=nd.int64)
    assert nd.get_variable("t", initializer=t).dtype.base_dtype == nd.int64
    assert nd.get_variable("g", [2]).dtype.base_dtype == nd.float32
    with pytest.raises(ValueError, match="don't match"):
        nd.get_variable("bad", initializer=0, dtype=nd.float32)
    ok = nd.get_variable("ok", initializer=np.ones(2, np.float32), dtype=nd.float32)
    with nd.Session() as sess:
        sess.run(nd.global_variables_initializer())
        assert sess.run(nd.get_default_graph().get_tensor_by_name("i:0")) == 0
        np.testing.assert_array_equal(sess.run(ok), [1.0, 1.0])


# -- tensorflow.python module paths ----------------------------------------------------
PATHS = {
    "ops": {
        "control_flow_ops": {"cond": "cond", "while_loop": "while_loop",
                             "group": "group", "no_op": "no_op", "tuple": "tuple"},
        "variables": {"Variable": "Variable",
                      "global_variables_initializer": "global_variables_initializer"},
        "state_ops": {"assign": "assign", "assign_add": "assign_add"},
        "array_ops": {"placeholder": "placeholder", "reshape": "reshape",
                      "concat": "concat", "stack": "stack", "zeros": "zeros"},
        "math_ops": {"add": "add", "reduce_sum": "reduce_sum", "matmul": "matmul",
                     "cast": "cast"},
        "nn_ops": {"relu": "nn.relu", "softmax": "nn.softmax"},
        "init_ops": {"zeros_initializer": "zeros_initializer",
                     "glorot_uniform_initializer": "glorot_uniform_initializer",
                     "truncated_normal_initializer": "truncated_normal_initializer"},
        "string_ops": {},
        "lookup_ops": {},
        "data_flow_ops": {"FIFOQueue": "FIFOQueue"},
        "variable_scope": {"variable_scope": "variable_scope",
                           "get_variable": "get_variable", "AUTO_REUSE": "AUTO_REUSE"},
    },
    "framework": {
        "ops": {"Graph": "Graph", "Tensor": "Tensor", "GraphKeys": "GraphKeys",
                "get_default_graph": "get_default_graph", "device": "device",
                "control_dependencies": "control_dependencies",
                "convert_to_tensor": "convert_to_tensor", "name_scope": "name_scope"},
        "dtypes": {"float32": "float32", "int64": "int64", "as_dtype": "as_dtype",
                   "DType": "DType"},
        "tensor_shape": {"TensorShape": "TensorShape"},
        "constant_op": {"constant": "constant"},
        "errors": {"OutOfRangeError": "errors.OutOfRangeError",
                   "NotFoundError": "errors.NotFoundError"},
    },
    "platform": {
        "gfile": {"GFile": "gfile.GFile", "Exists": "gfile.Exists"},
        "tf_logging": {"info": "logging.info",
                       "set_verbosity": "logging.set_verbosity"},
    },
    "training": {
        "training_util": {"get_or_create_global_step":
                          "train.get_or_create_global_step",
                          "get_global_step": "train.get_global_step"},
        "saver": {"Saver": "train.Saver",
                  "latest_checkpoint": "train.latest_checkpoint"},
        "session_run_hook": {"SessionRunHook": "train.SessionRunHook",
                             "SessionRunArgs": "train.SessionRunArgs"},
        "basic_session_run_hooks": {"StopAtStepHook": "train.StopAtStepHook",
                                    "CheckpointSaverHook": "train.CheckpointSaverHook"},
        "monitored_session": {"MonitoredTrainingSession":
                              "train.MonitoredTrainingSession"},
        "server_lib": {"Server": "train.Server", "ClusterSpec": "train.ClusterSpec"},
        "device_setter": {"replica_device_setter": "train.replica_device_setter"},
        "queue_runner": {"QueueRunner": "train.QueueRunner"},
        "coordinator": {"Coordinator": "train.Coordinator"},
        "optimizer": {"Optimizer": "train.Optimizer"},
        "sync_replicas_optimizer": {"SyncReplicasOptimizer":
                                    "train.SyncReplicasOptimizer"},
    },
    "client": {"session": {"Session": "Session",
                           "InteractiveSession": "InteractiveSession"}},
    "util": {"nest": {}},
}


def nd_object(dotted):
    obj = nd
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("package,module", [
    (p, m) for p, mods in PATHS.items() for m in mods])
def test_tensorflow_python_paths_import_nbdist_objects(package, module):
    mod = importlib.import_module(f"nbdist.python.{package}")
    alias = getattr(importlib.import_module(f"nbdist.python.{package}.{module}"),
                    "__name__")
    assert getattr(mod, module).__name__ == alias  # `from ... import module` works
    names = PATHS[package][module]
    for name, target in names.items():
        assert getattr(getattr(mod, module), name) is nd_object(target), (module, name)


def test_nest_and_missing_names():
    from nbdist.python.ops import control_flow_ops
    from nbdist.python.util import nest

    assert nest.flatten({"a": [1, (2, 3)]}) == [1, 2, 3]
    assert nest.map_structure(lambda x: 2 * x, (1, [2])) == (2, [4])
    with pytest.raises(AttributeError,
                       match=r"tensorflow\.python\.ops\.control_flow_ops\.no_such"):
        control_flow_ops.no_such  # noqa: B018
    assert "cond" in dir(control_flow_ops)


def test_a_tf1_program_written_against_module_paths_runs():
    from nbdist.python.client import session
    from nbdist.python.framework import constant_op, dtypes, ops
    from nbdist.python.ops import array_ops, math_ops, variables
    from nbdist.python.training import training_util

    with ops.Graph().as_default():
        x = array_ops.placeholder(dtypes.float32, [2])
        w = variables.Variable(constant_op.constant([2.0, 3.0]))
        step = training_util.get_or_create_global_step()
        y = math_ops.reduce_sum(x * w)
        with session.Session() as sess:
            sess.run(variables.global_variables_initializer())
            assert sess.run(y, {x: [1.0, 1.0]}) == 5.0
            assert sess.run(step) == 0
