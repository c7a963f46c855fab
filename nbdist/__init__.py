"""nbdist: TF1-style distributed dataflow on NumPy and gRPC, made for notebooks.

>>> import nbdist as nd
>>> with nd.Session() as sess:
...     sess.run(nd.constant("Hello, distributed!"))
b'Hello, distributed!'
"""

from __future__ import annotations

from nbdist import errors
from nbdist.framework import dtypes as _dtypes
from nbdist.framework.constant_op import (constant, identity, placeholder,
                                          placeholder_with_default, stop_gradient)
from nbdist.ops.control_flow_ops import group, no_op, tuple  # noqa: A004
from nbdist.ops.control_flow_v2 import cond, while_loop
from nbdist.ops.control_flow_ops import identity_n
from nbdist.ops.control_flow_case import case, switch_case
from nbdist.ops.custom_gradient import custom_gradient
from nbdist.ops.tensor_array_ops import TensorArray
from nbdist.ops.check_ops import (  # noqa: F401  (TF1's top level)
    Assert, assert_equal, assert_greater, assert_greater_equal, assert_integer,
    assert_less, assert_less_equal, assert_near, assert_negative,
    assert_non_negative, assert_non_positive, assert_none_equal, assert_positive,
    assert_rank, assert_rank_at_least, assert_rank_in, assert_scalar, assert_type)
from nbdist.ops.check_ops import verify_tensor_all_finite
from nbdist.framework.device import DeviceSpec
from nbdist.framework.dtypes import (DType, as_dtype, bool, double,  # noqa: A004
                                     float16, float32, float64, half, int8, int16,
                                     int32, int64, resource, string, uint8)
from nbdist.framework.importer import import_graph_def
from nbdist.framework.ops import (Graph, GraphKeys, Operation, Tensor,
                                  add_to_collection, add_to_collections,
                                  colocate_with, control_dependencies,
                                  convert_to_tensor, device, get_collection,
                                  get_collection_ref, get_default_graph, name_scope,
                                  reset_default_graph, set_random_seed)
from nbdist.ops.partitioned_variables import (PartitionedVariable,
                                              fixed_size_partitioner,
                                              min_max_variable_partitioner,
                                              variable_axis_size_partitioner)
from nbdist.framework.tensor_shape import TensorShape
from nbdist.framework.tensor_shape import (Dimension, dimension_at_index,
                                           dimension_value)
from nbdist.ops.state_ops import assign, assign_add, assign_sub
from nbdist.ops.state_ops import scatter_add, scatter_sub, scatter_update
from nbdist.ops.state_ops import count_up_to
from nbdist.ops.variables import (AUTO_REUSE, Variable, VariableScope,
                                  all_variables, constant_initializer,
                                  get_variable, get_variable_scope,
                                  global_variables, global_variables_initializer,
                                  glorot_uniform_initializer,
                                  initialize_all_variables, is_variable_initialized,
                                  local_variables, local_variables_initializer,
                                  model_variables, ones_initializer,
                                  random_normal_initializer,
                                  random_uniform_initializer,
                                  report_uninitialized_variables,
                                  trainable_variables, variable_creator_scope,
                                  variable_scope,
                                  variables_initializer, zeros_initializer)
from nbdist.proto.config_pb2 import ConfigProto, RunMetadata, RunOptions
from nbdist.proto.config_pb2 import GPUOptions
from nbdist.proto.config_pb2 import CallableOptions, GraphOptions, OptimizerOptions
from nbdist.framework.ops import container
from nbdist.framework.default_session import get_default_session
from nbdist.runtime.session import InteractiveSession, Session

from nbdist._api_ops import *  # noqa: F401,F403,E402  (math, array, nn, random ops)
from nbdist.ops.indexed_slices import (IndexedSlices,  # noqa: E402
                                       IndexedSlicesValue,
                                       convert_to_tensor_or_indexed_slices)
from nbdist.ops.sparse_ops import (sparse_concat, sparse_reduce_sum,  # noqa: E402
                                   sparse_tensor_dense_matmul,
                                   sparse_tensor_to_dense, sparse_to_dense,
                                   unique)
from nbdist.framework.sparse_tensor import (SparseTensor,  # noqa: E402
                                            SparseTensorValue, sparse_placeholder)
from nbdist.ops import variables as _variables  # noqa: E402
from nbdist.ops import autopacking as _autopacking  # noqa: E402,F401 (registers)
from nbdist.ops.init_ops import (  # noqa: E402
    glorot_normal_initializer, orthogonal_initializer,
    truncated_normal_initializer, uniform_unit_scaling_initializer,
    variance_scaling_initializer)
from nbdist.ops.linalg_ops import qr  # noqa: E402
from nbdist.ops.complex_ops import (  # noqa: E402
    abs, angle, complex, conj, imag, real)  # noqa: A004 - TF's names
from nbdist.framework.dtypes import (  # noqa: E402
    complex64,
    complex128,
    uint16,
    uint32,
    uint64,
)

_variables._install_variable_operators()  # now that Tensor has its operators

__version__ = "0.1.0"
VERSION = __version__
__git_version__ = GIT_VERSION = "v" + __version__
from nbdist.framework.versions import *  # noqa: F401,F403,E402 (GRAPH_DEF_VERSION ...)
from nbdist.framework.versions import (  # noqa: E402
    COMPILER_VERSION as __compiler_version__,
)
from nbdist.framework.versions import CXX11_ABI_FLAG as __cxx11_abi_flag__  # noqa: E402
from nbdist.framework.versions import MONOLITHIC_BUILD as __monolithic_build__  # noqa


def load_ipython_extension(ipython):
    """``%load_ext nbdist``: the ``%cluster`` magics (see ``nbdist.notebook``)."""
    from nbdist.notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):
    from nbdist.notebook import unload_ipython_extension as unload

    unload(ipython)


def __getattr__(name):
    # Heavier layers load on first use, so `import nbdist` stays quick.
    import importlib

    lazy = {
        "train": "nbdist.train",
        "distribute": "nbdist.distribute",
        "data": "nbdist.data",
        "nn": "nbdist.nn",
        "sparse": "nbdist.sparse",
        "image": "nbdist.image",
        "notebook": "nbdist.notebook",
        "random": "nbdist.random",
        "summary": "nbdist.summary",
        "saved_model": "nbdist.saved_model",
        "compat": "nbdist.compat",
        "app": "nbdist.app",
        "flags": "nbdist.flags",
        "gfile": "nbdist.gfile",
        "NodeDef": ("nbdist.proto.node_def_pb2", "NodeDef"),
        "GraphDef": ("nbdist.proto.graph_pb2", "GraphDef"),
        "AttrValue": ("nbdist.proto.attr_value_pb2", "AttrValue"),
        "MetaGraphDef": ("nbdist.proto.meta_graph_pb2", "MetaGraphDef"),
        "Summary": ("nbdist.proto.summary_pb2", "Summary"),
        "SummaryMetadata": ("nbdist.proto.summary_pb2", "SummaryMetadata"),
        "HistogramProto": ("nbdist.proto.summary_pb2", "HistogramProto"),
        "Event": ("nbdist.proto.summary_pb2", "Event"),
        "SessionLog": ("nbdist.proto.summary_pb2", "SessionLog"),
        "LogMessage": ("nbdist.proto.summary_pb2", "LogMessage"),
        "io": "nbdist.io",
        "initializers": "nbdist.initializers",
        "version": "nbdist.version",
        "logging": "nbdist.compat.tf_logging",
        "contrib": "nbdist.contrib",
        "debugging": "nbdist.debugging",
        "client": "nbdist.client",
        "Server": ("nbdist.runtime.server_lib", "Server"),
        "ClusterSpec": ("nbdist.runtime.cluster_spec", "ClusterSpec"),
        "LocalCluster": ("nbdist.cluster.local_cluster", "LocalCluster"),
        "SlurmCluster": ("nbdist.cluster.slurm_cluster", "SlurmCluster"),
        "gradients": ("nbdist.ops.gradients", "gradients"),
        "function": ("nbdist.distribute.tracing.function", "function"),
        "FIFOQueue": ("nbdist.ops.data_flow_ops", "FIFOQueue"),
        "RandomShuffleQueue": ("nbdist.ops.data_flow_ops", "RandomShuffleQueue"),
        "PaddingFIFOQueue": ("nbdist.ops.data_flow_ops", "PaddingFIFOQueue"),
        "QueueBase": ("nbdist.ops.data_flow_ops", "QueueBase"),
        "PriorityQueue": ("nbdist.ops.data_flow_ops", "PriorityQueue"),
        "SparseFeature": ("nbdist.ops.parsing_ops", "SparseFeature"),
        "matching_files": ("nbdist.ops.data_flow_ops", "matching_files"),
        "ConditionalAccumulator": ("nbdist.ops.accumulator_ops",
                                   "ConditionalAccumulator"),
        "hessians": ("nbdist.ops.gradients", "hessians"),
        "RegisterGradient": ("nbdist.ops.gradients", "RegisterGradient"),
        "NotDifferentiable": ("nbdist.ops.gradients", "NotDifferentiable"),
        "no_gradient": ("nbdist.ops.gradients", "no_gradient"),
        "unsorted_segment_sum": ("nbdist.ops.nn_ops", "unsorted_segment_sum"),
        "parse_example": ("nbdist.ops.parsing_ops", "parse_example"),
        "parse_single_example": ("nbdist.ops.parsing_ops", "parse_single_example"),
        "parse_single_sequence_example": ("nbdist.ops.parsing_ops",
                                          "parse_single_sequence_example"),
        "FixedLenFeature": ("nbdist.ops.parsing_ops", "FixedLenFeature"),
        "VarLenFeature": ("nbdist.ops.parsing_ops", "VarLenFeature"),
        "FixedLenSequenceFeature": ("nbdist.ops.parsing_ops",
                                    "FixedLenSequenceFeature"),
        "decode_raw": ("nbdist.ops.parsing_ops", "decode_raw"),
        "decode_csv": ("nbdist.ops.parsing_ops", "decode_csv"),
        "ReaderBase": ("nbdist.ops.io_ops", "ReaderBase"),
        "TFRecordReader": ("nbdist.ops.io_ops", "TFRecordReader"),
        "TextLineReader": ("nbdist.ops.io_ops", "TextLineReader"),
        "WholeFileReader": ("nbdist.ops.io_ops", "WholeFileReader"),
        "FixedLengthRecordReader": ("nbdist.ops.io_ops",
                                    "FixedLengthRecordReader"),
        "IdentityReader": ("nbdist.ops.io_ops", "IdentityReader"),
        "read_file": ("nbdist.ops.io_ops", "read_file"),
        "write_file": ("nbdist.ops.io_ops", "write_file"),
        "string_split": ("nbdist.ops.string_ops", "string_split"),
        "substr": ("nbdist.ops.string_ops", "substr"),
        "as_string": ("nbdist.ops.string_ops", "as_string"),
        "string_to_number": ("nbdist.ops.string_ops", "string_to_number"),
        "string_join": ("nbdist.ops.string_ops", "string_join"),
        "reduce_join": ("nbdist.ops.string_ops", "reduce_join"),
        "regex_replace": ("nbdist.ops.string_ops", "regex_replace"),
        "string_length": ("nbdist.ops.string_ops", "string_length"),
        "encode_base64": ("nbdist.ops.string_ops", "encode_base64"),
        "decode_base64": ("nbdist.ops.string_ops", "decode_base64"),
        "tables_initializer": ("nbdist.lookup", "tables_initializer"),
        "initialize_all_tables": ("nbdist.lookup", "tables_initializer"),
        "string_to_hash_bucket_fast": ("nbdist.lookup", "string_to_hash_bucket_fast"),
        "SparseConditionalAccumulator": ("nbdist.ops.accumulator_ops",
                                         "SparseConditionalAccumulator"),
        "convert_to_tensor_or_sparse_tensor": ("nbdist.framework.sparse_tensor",
                                               "convert_to_tensor_or_sparse_tensor"),
        "map_fn": ("nbdist.ops.map_fn", "map_fn"),
        "scan": ("nbdist.ops.map_fn", "scan"),
        "foldl": ("nbdist.ops.map_fn", "foldl"),
        "foldr": ("nbdist.ops.map_fn", "foldr"),
        "py_func": ("nbdist.ops.script_ops", "py_func"),
        "numpy_function": ("nbdist.ops.script_ops", "numpy_function"),
        "Print": ("nbdist.ops.logging_ops", "Print"),
        # TF1's remaining top-level names (issue 34)
        "fft": ("nbdist.signal", "fft"),
        "ifft": ("nbdist.signal", "ifft"),
        "fft2d": ("nbdist.signal", "fft2d"),
        "ifft2d": ("nbdist.signal", "ifft2d"),
        "fft3d": ("nbdist.signal", "fft3d"),
        "ifft3d": ("nbdist.signal", "ifft3d"),
        "multinomial": ("nbdist.random", "multinomial"),
        "random_gamma": ("nbdist.random", "gamma"),
        "random_poisson": ("nbdist.random", "poisson"),
        "get_seed": ("nbdist.random", "get_seed"),
        "decode_compressed": ("nbdist.io", "decode_compressed"),
        "decode_json_example": ("nbdist.io", "decode_json_example"),
        "parse_tensor": ("nbdist.io", "parse_tensor"),
        "serialize_tensor": ("nbdist.io", "serialize_tensor"),
        "saturate_cast": ("nbdist.dtypes", "saturate_cast"),
        "string_to_hash_bucket": ("nbdist.strings", "to_hash_bucket"),
        "string_to_hash_bucket_strong": ("nbdist.strings", "to_hash_bucket_strong"),
        "string_strip": ("nbdist.strings", "strip"),
        "arg_max": ("nbdist.math", "argmax"),
        "arg_min": ("nbdist.math", "argmin"),
        "is_numeric_tensor": ("nbdist.debugging", "is_numeric_tensor"),
        "assert_same_float_dtype": ("nbdist.debugging", "assert_same_float_dtype"),
        "assert_proper_iterable": ("nbdist.debugging", "assert_proper_iterable"),
        "initialize_local_variables": ("nbdist.ops.variable_collections",
                                       "local_variables_initializer"),
        "initialize_variables": ("nbdist.ops.variable_collections",
                                 "variables_initializer"),
        "OpError": ("nbdist.errors", "OpError"),
        "NoGradient": ("nbdist.ops.gradients", "NotDifferentiable"),
        "make_ndarray": ("nbdist.framework.tensor_util", "make_ndarray"),
        "make_tensor_proto": ("nbdist.framework.tensor_util", "make_tensor_proto"),
        "get_logger": ("nbdist.train.tf_logging", "get_logger"),
        "print": ("nbdist.ops.tf1_compat_ops", "print_v2"),
        "to_complex64": ("nbdist.ops.tf1_compat_ops", "to_complex64"),
        "to_complex128": ("nbdist.ops.tf1_compat_ops", "to_complex128"),
        "is_tensor": ("nbdist.ops.tf1_compat_ops", "is_tensor"),
        "get_static_value": ("nbdist.ops.tf1_compat_ops", "get_static_value"),
        "no_regularizer": ("nbdist.ops.tf1_compat_ops", "no_regularizer"),
        "moving_average_variables": ("nbdist.ops.tf1_compat_ops",
                                     "moving_average_variables"),
        "get_local_variable": ("nbdist.ops.tf1_compat_ops", "get_local_variable"),
        "init_scope": ("nbdist.ops.tf1_compat_ops", "init_scope"),
        "op_scope": ("nbdist.ops.tf1_compat_ops", "op_scope"),
        "variable_op_scope": ("nbdist.ops.tf1_compat_ops", "variable_op_scope"),
        "clip_by_average_norm": ("nbdist.ops.tf1_compat_ops", "clip_by_average_norm"),
        "histogram_fixed_width": ("nbdist.ops.tf1_compat_ops", "histogram_fixed_width"),
        "histogram_fixed_width_bins": ("nbdist.ops.tf1_compat_ops",
                                       "histogram_fixed_width_bins"),
        "timestamp": ("nbdist.ops.tf1_compat_ops", "timestamp"),
        "py_function": ("nbdist.ops.tf1_compat_ops", "py_function"),
        "grad_pass_through": ("nbdist.ops.tf1_compat_ops", "grad_pass_through"),
        "recompute_grad": ("nbdist.ops.tf1_compat_ops", "recompute_grad"),
        "assert_variables_initialized": ("nbdist.ops.tf1_compat_ops",
                                         "assert_variables_initialized"),
        "make_template": ("nbdist.ops.tf1_compat_ops", "make_template"),
        "AggregationMethod": ("nbdist.ops.tf1_compat_ops", "AggregationMethod"),
        "UnconnectedGradients": ("nbdist.ops.tf1_compat_ops", "UnconnectedGradients"),
        "VariableAggregation": ("nbdist.ops.tf1_compat_ops", "VariableAggregation"),
        "VariableSynchronization": ("nbdist.ops.tf1_compat_ops",
                                    "VariableSynchronization"),
        "control_flow_v2_enabled": ("nbdist.ops.tf1_compat_ops",
                                    "control_flow_v2_enabled"),
        "enable_control_flow_v2": ("nbdist.ops.tf1_compat_ops",
                                   "enable_control_flow_v2"),
        "resource_variables_enabled": ("nbdist.ops.tf1_compat_ops",
                                       "resource_variables_enabled"),
        "enable_resource_variables": ("nbdist.ops.tf1_compat_ops",
                                      "enable_resource_variables"),
        "executing_eagerly_outside_functions": ("nbdist.ops.tf1_compat_ops",
                                                "executing_eagerly_outside_functions"),
        "is_symbolic_tensor": ("nbdist.ops.tf1_compat_ops", "is_symbolic_tensor"),
        "vectorized_map": ("nbdist.ops.tf1_compat_ops", "vectorized_map"),
        "create_partitioned_variables": ("nbdist.ops.tf1_compat_ops",
                                         "create_partitioned_variables"),
        "add_check_numerics_ops": ("nbdist.ops.tf1_compat_ops",
                                   "add_check_numerics_ops"),
        "TensorInfo": ("nbdist.proto.meta_graph_pb2", "TensorInfo"),
        "register_tensor_conversion_function": (
            "nbdist.ops.tf1_compat_ops", "register_tensor_conversion_function"),
        "TypeSpec": ("nbdist.framework.type_spec", "TypeSpec"),
        "TensorSpec": ("nbdist.framework.type_spec", "TensorSpec"),
        "SparseTensorSpec": ("nbdist.framework.type_spec", "SparseTensorSpec"),
        "IndexedSlicesSpec": ("nbdist.framework.type_spec", "IndexedSlicesSpec"),
        "type_spec_from_value": ("nbdist.framework.type_spec", "type_spec_from_value"),
        # issue 34, the rest of the top level (names-b)
        "TensorArraySpec": ("nbdist.framework.type_spec", "TensorArraySpec"),
        "OptionalSpec": ("nbdist.framework.type_spec", "OptionalSpec"),
        "NoneTensorSpec": ("nbdist.framework.type_spec", "NoneTensorSpec"),
        "NameAttrList": ("nbdist.proto.attr_value_pb2", "NameAttrList"),
        "variant": ("nbdist.framework.dtypes", "variant"),
        "ConditionalAccumulatorBase": ("nbdist.ops.accumulator_ops",
                                       "ConditionalAccumulatorBase"),
        "GradientTape": ("nbdist.ops.gradient_tape", "GradientTape"),
        "Module": ("nbdist.ops.module", "Module"),
        "fftnd": ("nbdist.ops.spectral_nd_ops", "fftnd"),
        "ifftnd": ("nbdist.ops.spectral_nd_ops", "ifftnd"),
        "rfftnd": ("nbdist.ops.spectral_nd_ops", "rfftnd"),
        "irfftnd": ("nbdist.ops.spectral_nd_ops", "irfftnd"),
        "fingerprint": ("nbdist.ops.fingerprint_ops", "fingerprint"),
        "check_pinned": ("nbdist.ops.host_memory_ops", "check_pinned"),
        "conv": ("nbdist.ops.nn_conv_generic", "conv"),
        "conv2d_backprop_filter_v2": ("nbdist.ops.nn_conv_generic",
                                      "conv2d_backprop_filter_v2"),
        "conv2d_backprop_input_v2": ("nbdist.ops.nn_conv_generic",
                                     "conv2d_backprop_input_v2"),
        "approx_top_k": ("nbdist.ops.approx_top_k", "approx_top_k"),
        "get_session_handle": ("nbdist.ops.session_ops", "get_session_handle"),
        "get_session_tensor": ("nbdist.ops.session_ops", "get_session_tensor"),
        "delete_session_tensor": ("nbdist.ops.session_ops", "delete_session_tensor"),
        "wrap_function": ("nbdist.distribute.tracing.wrap_function", "wrap_function"),
        "nondifferentiable_batch_function": ("nbdist.ops.batch_ops",
                                             "nondifferentiable_batch_function"),
        "random_index_shuffle": ("nbdist.ops.random_index_shuffle",
                                 "random_index_shuffle"),
        "CriticalSection": ("nbdist.ops.critical_section_ops", "CriticalSection"),
    }
    if name in lazy:
        target = lazy[name]
        if isinstance(target, str):
            return importlib.import_module(target)
        mod = importlib.import_module(target[0])
        return getattr(mod, target[1])
    if not name.startswith("_"):
        # Any subpackage (`nd.cluster`, `nd.server` ...) on first access, as TF's
        # lazy loader gives `tf.<module>`.
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'nbdist' has no attribute '{name}'")
