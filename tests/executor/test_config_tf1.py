"""ConfigProto, GraphOptions and RunOptions as TF1 programs write them: every
field TF 1.15 has for sessions is accepted (with TF's field numbers, so
serialized configs interoperate); place_pruned_graph takes effect, the
optimizer, thread-pool, rewriter and debugger options are ignored."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors
from nbdist.proto import config_pb2


def _proto_module(name: str):
    # Imported when a test runs, so that each test reports what it misses.
    return importlib.import_module(f"nbdist.proto.{name}")


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()
    yield
    nd.reset_default_graph()


def _tf1_config() -> nd.ConfigProto:
    """A config using the options TF1 programs set (all of them ignored)."""
    rewriter_config_pb2 = _proto_module("rewriter_config_pb2")
    config = nd.ConfigProto(
        inter_op_parallelism_threads=2, intra_op_parallelism_threads=3,
        use_per_session_threads=True, allow_soft_placement=True,
        graph_options=nd.GraphOptions(
            optimizer_options=nd.OptimizerOptions(
                opt_level=nd.OptimizerOptions.L0, do_function_inlining=True,
                global_jit_level=nd.OptimizerOptions.ON_1),
            build_cost_model=1, infer_shapes=True, enable_bfloat16_sendrecv=True))
    config.session_inter_op_thread_pool.add(num_threads=2, global_name="pool")
    rw = config.graph_options.rewrite_options
    rw.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
    rw.arithmetic_optimization = rewriter_config_pb2.RewriterConfig.AGGRESSIVE
    rw.memory_optimization = rewriter_config_pb2.RewriterConfig.NO_MEM_OPT
    rw.optimizers.append("constfold")
    rw.custom_optimizers.add(name="mine")
    config.experimental.collective_group_leader = "/job:localhost/replica:0/task:0"
    config.experimental.share_cluster_devices_in_session = True
    config.rpc_options.compression_algorithm = "gzip"
    return config


def _debug_run_options() -> nd.RunOptions:
    opts = nd.RunOptions(report_tensor_allocations_upon_oom=True,
                         inter_op_thread_pool=0)
    watch = opts.debug_options.debug_tensor_watch_opts.add()
    watch.node_name = "y"
    watch.debug_ops.append("DebugIdentity")
    watch.debug_urls.append("file:///tmp/nowhere")
    opts.debug_options.global_step = 7
    opts.experimental.collective_graph_key = 1
    return opts


@pytest.mark.parametrize("remote", [False, True])
def test_tf1_config_and_run_options_are_accepted(remote):
    server = nd.Server.create_local_server() if remote else None
    try:
        x = nd.placeholder(nd.float32, [2])
        y = nd.multiply(x, 3.0, name="y")
        target = server.target if remote else ""
        with nd.Session(target, config=_tf1_config()) as sess:
            out = sess.run(y, {x: [1.0, 2.0]}, options=_debug_run_options())
        np.testing.assert_allclose(out, [3.0, 6.0])
    finally:
        if server is not None:
            server.stop()


@pytest.mark.parametrize("remote", [False, True])
def test_place_pruned_graph_places_only_what_a_run_needs(remote):
    server = nd.Server.create_local_server() if remote else None
    try:
        with nd.device("/job:nowhere/task:3"):
            bad = nd.constant(1.0)
        good = nd.constant(2.0) * 2.0
        config = nd.ConfigProto(
            graph_options=nd.GraphOptions(place_pruned_graph=True))
        with nd.Session(server.target if remote else "", config=config) as sess:
            assert sess.run(good) == 4.0
            with pytest.raises(errors.InvalidArgumentError, match="Cannot assign"):
                sess.run(bad)
            assert sess.run(good + 1.0) == 5.0
    finally:
        if server is not None:
            server.stop()


def test_tf_names_and_enums():
    rewriter_config_pb2 = _proto_module("rewriter_config_pb2")
    debug_pb2 = _proto_module("debug_pb2")
    assert nd.RunOptions.FULL_TRACE == 3 and nd.RunOptions.NO_TRACE == 0
    assert nd.RunOptions.SOFTWARE_TRACE == 1 and nd.RunOptions.HARDWARE_TRACE == 2
    assert nd.OptimizerOptions.L0 == -1 and nd.OptimizerOptions.L1 == 0
    assert nd.OptimizerOptions.OFF == -1 and nd.OptimizerOptions.ON_2 == 2
    assert rewriter_config_pb2.RewriterConfig.AGGRESSIVE == 3
    assert rewriter_config_pb2.RewriterConfig.HEURISTICS == 3
    assert isinstance(nd.GraphOptions().rewrite_options,
                      rewriter_config_pb2.RewriterConfig)
    assert isinstance(nd.RunOptions().debug_options, debug_pb2.DebugOptions)


def _numbers(message) -> dict:
    return {f.name: f.number for f in message.DESCRIPTOR.fields}


def test_field_numbers_are_tensorflows():
    """Numbers from TF's config.proto, so serialized configs interoperate."""
    rewriter_config_pb2 = _proto_module("rewriter_config_pb2")
    debug_pb2 = _proto_module("debug_pb2")
    config = _numbers(config_pb2.ConfigProto)
    expected = {"device_count": 1, "intra_op_parallelism_threads": 2,
                "placement_period": 3, "device_filters": 4,
                "inter_op_parallelism_threads": 5, "gpu_options": 6,
                "allow_soft_placement": 7, "log_device_placement": 8,
                "use_per_session_threads": 9, "graph_options": 10,
                "operation_timeout_in_ms": 11, "session_inter_op_thread_pool": 12,
                "rpc_options": 13, "cluster_def": 14, "isolate_session_state": 15,
                "experimental": 16, "share_cluster_devices_in_session": 17}
    assert {k: config[k] for k in expected} == expected
    assert _numbers(config_pb2.GraphOptions) == {
        "enable_recv_scheduling": 2, "optimizer_options": 3, "build_cost_model": 4,
        "infer_shapes": 5, "place_pruned_graph": 6, "enable_bfloat16_sendrecv": 7,
        "timeline_step": 8, "build_cost_model_after": 9, "rewrite_options": 10}
    assert _numbers(config_pb2.OptimizerOptions) == {
        "do_common_subexpression_elimination": 1, "do_constant_folding": 2,
        "opt_level": 3, "do_function_inlining": 4, "global_jit_level": 5,
        "max_folded_constant_in_bytes": 6}
    experimental = _numbers(config_pb2.ConfigProto.Experimental)
    assert experimental["collective_group_leader"] == 1
    assert experimental["executor_type"] == 3
    assert experimental["session_metadata"] == 11
    assert _numbers(config_pb2.ThreadPoolOptionProto) == {"num_threads": 1,
                                                          "global_name": 2}
    run = _numbers(config_pb2.RunOptions)
    assert run == {"trace_level": 1, "timeout_in_ms": 2, "inter_op_thread_pool": 3,
                   "output_partition_graphs": 5, "debug_options": 6,
                   "report_tensor_allocations_upon_oom": 7, "experimental": 8}
    meta = _numbers(config_pb2.RunMetadata)
    assert meta == {"step_stats": 1, "cost_graph": 2, "partition_graphs": 3,
                    "function_graphs": 4, "session_metadata": 5}
    assert _numbers(debug_pb2.DebugOptions) == {
        "debug_tensor_watch_opts": 4, "global_step": 10, "reset_disk_byte_usage": 11}
    rw = _numbers(rewriter_config_pb2.RewriterConfig)
    assert (rw["layout_optimizer"], rw["constant_folding"], rw["memory_optimization"],
            rw["disable_meta_optimizer"], rw["optimizers"],
            rw["custom_optimizers"]) == (1, 3, 4, 19, 100, 200)


def test_interactive_session_with_a_config_places_pruned_graphs():
    config = nd.ConfigProto(allow_soft_placement=False)
    with nd.device("/job:nowhere/task:3"):
        nd.constant(1.0)
    sess = nd.InteractiveSession(config=config)
    try:
        assert nd.constant(2.0).eval() == 2.0
    finally:
        sess.close()
