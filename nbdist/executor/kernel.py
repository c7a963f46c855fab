"""Kernel registry: op type -> factory building a compute function for a node.

A factory gets a ``KernelNode`` once, when a graph is registered, and returns
``compute(step, *inputs)`` which returns one output, or a tuple for several.
Work that depends only on attrs (dtype lookups, seeds) belongs in the factory.

The kernels live in ``nbdist.executor.kernels``, one module per op family, each
registering its kernels when imported. They are found by name
(``KERNEL_MODULES``) and imported on the first lookup, so this registry imports
none of them.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

_KERNELS: dict[str, Callable] = {}


def register_kernel(*op_types: str):
    def deco(factory):
        for t in op_types:
            _KERNELS[t] = factory
        return factory

    return deco


def get_kernel_factory(op_type: str):
    _load_all()
    return _KERNELS.get(op_type)


KERNEL_MODULES = (
    "array_kernels", "control_kernels", "state_kernels", "math_kernels",
    "array_manipulation_kernels", "nn_kernels", "random_kernels",
    "data_flow_kernels", "training_kernels", "function_kernels",
    "accumulator_kernels", "dataset_kernels", "summary_kernels",
    "collective_kernels",
    "linalg_kernels", "complex_kernels",
    "sparse_kernels", "sparse_training_kernels",
    "parsing_kernels", "reader_kernels", "string_kernels",
    "conv_kernels", "norm_kernels", "image_kernels",
    "lookup_kernels",
    "bucketize_kernels",
    "scatter_nd_kernels", "partition_kernels", "sequence_kernels", "space_kernels",
    "matrix_diag_kernels", "einsum_kernels", "sparse_transform_kernels",
    "shape_utils_kernels", "sparse_cross_kernels", "set_kernels",
    "sparse_serialize_kernels",
    "elementary_math_kernels", "special_math_kernels", "segment_kernels",
    "cumulative_kernels", "statistics_kernels",
    "candidate_sampling_kernels",
    "script_kernels",
    "bitwise_kernels", "spectral_kernels", "unicode_string_kernels",
    "random_distribution_kernels", "tensor_serialization_kernels",
    "audio_summary_kernels",
    "image_color_kernels", "image_codec_kernels", "image_box_kernels",
    "image_nms_kernels", "conv3d_kernels", "ctc_kernels",
    "morphology_kernels", "fractional_pool_kernels",
    "stateful_random_kernels", "proto_kernels", "dataset_transform_kernels",
    "spectral_nd_kernels", "fingerprint_kernels", "host_memory_kernels",
    "session_tensor_kernels", "random_index_shuffle_kernels",
    "critical_section_kernels",
)

_loaded = False
_load_lock = threading.Lock()


def _load_all():
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if not _loaded:
            for m in KERNEL_MODULES:
                name = f"nbdist.executor.kernels.{m}"
                try:
                    importlib.import_module(name)
                except ModuleNotFoundError as e:
                    if e.name != name:
                        raise
            _loaded = True


class KernelNode:
    """What a kernel factory sees of its node: name, attrs, device, resources."""

    __slots__ = (
        "attrs",
        "device",
        "env",
        "input_dtypes",
        "name",
        "op",
        "resources",
    )

    def __init__(self, name, op, attrs, device, resources, env, input_dtypes=()):
        self.name = name
        self.op = op
        self.attrs = attrs
        self.device = device
        self.resources = resources
        self.env = env
        self.input_dtypes = input_dtypes
