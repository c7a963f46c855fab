"""Imports every op-definition module, so a graph received over the wire finds
its ops even when the process never built one of that kind."""

from __future__ import annotations

import importlib

OP_MODULES = (
    "nbdist.framework.constant_op",
    "nbdist.ops.state_ops",
    "nbdist.ops.control_flow_ops",
    "nbdist.ops.variables",
    "nbdist.ops.math_ops",
    "nbdist.ops.array_ops",
    "nbdist.ops.clip_ops",
    "nbdist.ops.nn_ops",
    "nbdist.ops.random_ops",
    "nbdist.ops.data_flow_ops",
    "nbdist.ops.accumulator_ops",
    "nbdist.ops.training_ops",
    "nbdist.ops.gradients",
    "nbdist.ops.control_flow_v2",
    "nbdist.ops.summary_ops",
    "nbdist.ops.collective_ops",
    "nbdist.ops.linalg_ops",
    "nbdist.ops.complex_ops",
    "nbdist.ops.sparse_ops",
    "nbdist.ops.sparse_training_ops",
    "nbdist.ops.parsing_ops",
    "nbdist.ops.io_ops",
    "nbdist.ops.string_ops",
    "nbdist.ops.nn_conv_ops",
    "nbdist.ops.nn_pool_ops",
    "nbdist.ops.nn_norm_ops",
    "nbdist.ops.image_ops",
    "nbdist.ops.lookup_ops",
    "nbdist.ops.bucketize_ops",
    "nbdist.ops.array_ops_scatter",
    "nbdist.ops.array_ops_partition",
    "nbdist.ops.array_ops_sequence",
    "nbdist.ops.array_ops_space",
    "nbdist.ops.einsum_ops",
    "nbdist.ops.linalg_ops_diag",
    "nbdist.ops.linalg_grad",
    "nbdist.ops.sparse_ops_transform",
    "nbdist.ops.sparse_ops_derived",
    "nbdist.ops.array_ops_shape_utils",
    "nbdist.ops.sparse_ops_cross",
    "nbdist.ops.sets_ops",
    "nbdist.ops.sparse_ops_serialize",
    "nbdist.ops.elementary_math_ops",
    "nbdist.ops.special_math_ops",
    "nbdist.ops.segment_ops",
    "nbdist.ops.cumulative_ops",
    "nbdist.ops.statistics_ops",
    "nbdist.ops.sobol_ops",
    "nbdist.ops.candidate_sampling_ops",
    "nbdist.ops.script_ops",
    "nbdist.ops.logging_ops",
    "nbdist.ops.bitwise_ops",
    "nbdist.ops.spectral_ops",
    "nbdist.ops.unicode_string_ops",
    "nbdist.ops.random_distribution_ops",
    "nbdist.ops.tensor_serialization_ops",
    "nbdist.ops.audio_summary_ops",
    "nbdist.ops.image_color_ops",
    "nbdist.ops.image_codec_ops",
    "nbdist.ops.image_box_ops",
    "nbdist.ops.image_resize_ops",
    "nbdist.ops.image_nms_ops",
    "nbdist.ops.nn_conv3d_ops",
    "nbdist.ops.ctc_ops",
    "nbdist.ops.nn_morphology_ops",
    "nbdist.ops.nn_fractional_pool_ops",
    "nbdist.ops.stateful_random_ops",
    "nbdist.ops.proto_ops",
    "nbdist.ops.spectral_nd_ops",
    "nbdist.ops.fingerprint_ops",
    "nbdist.ops.host_memory_ops",
    "nbdist.ops.session_ops",
    "nbdist.ops.random_index_shuffle",
    "nbdist.ops.critical_section_ops",
)


def load_all():
    for m in OP_MODULES:
        try:
            importlib.import_module(m)
        except ModuleNotFoundError as e:
            if e.name != m:
                raise
    # Ops defined outside nbdist.ops (datasets, functions) register here.
    for m in ("nbdist.distribute.data.data_ops",
              "nbdist.distribute.tracing.function_ops"):
        try:
            importlib.import_module(m)
        except ModuleNotFoundError as e:
            if e.name != m:
                raise
